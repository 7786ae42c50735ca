//! The GID check through the binary (docs/design.md, "The GID table" and "Behaviour"): the configured index
//! (3) must hold the RoCE v2 GID of the pod's address. The test plays the
//! kernel: the GID is there at once, later, elsewhere, of the wrong type, or
//! never. A failed check (101) leaves the node as ADD found it.

use crate::common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// A pod with `addr`, a VF whose class starts unset and whose table has no
/// GID of the address yet, and a config with trafficClass 41 and gidCheck
/// enforce.
fn enforcing(addr: &str) -> Rail {
    let mut rail = Rail::spec().addr(addr).no_gids().build();
    rail.conf["gidCheck"] = json!("enforce");
    rail
}

/// ADD failed with 101 and left no trace: the GID is proved before the class
/// is taken, so the class file was never written, and there is no entry.
fn assert_gid_failure(r: &Run, tree: &Tree, state: &StateDirPath) -> String {
    assert_eq!(r.code(), 101, "{}", r.stdout);
    assert_eq!(tree.tc(DEV), "", "the class file was never written");
    assert!(state.entries().is_empty(), "{:?}", state.entries());
    let msg = r.msg();
    assert!(
        msg.contains(DEV) && msg.contains("index 3"),
        "101 names the device and the index: {msg}"
    );
    // The log says the failure once: the line that ends the request.
    assert_eq!(
        r.stderr.matches("GID check failed").count(),
        1,
        "one line for one failure:\n{}",
        r.stderr
    );
    msg
}

#[test]
fn gid_present_at_once() {
    needs!(root);
    let rail = enforcing(ADDR);
    rail.tree.set_ipv4_gids(DEV, IP);
    let r = rail.add("c1");
    r.ok();
    assert_eq!(r.json()["ips"][0]["address"], json!(ADDR));
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    assert_eq!(rail.state.entries(), vec!["c1:net1.state".to_string()]);
}

#[test]
fn gid_appearing_late_is_waited_for() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    rail.conf["gidTimeoutMs"] = json!(3000);
    let start = Instant::now();
    let r = std::thread::scope(|s| {
        // The kernel's workqueue adds the GID some time after the address.
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            rail.tree.set_ipv4_gids(DEV, IP);
        });
        rail.add("c1")
    });
    let took = start.elapsed();
    r.ok();
    assert!(
        took >= Duration::from_millis(300),
        "ADD cannot pass before the GID exists: {took:?}"
    );
    assert!(
        took < Duration::from_millis(3000),
        "it waited the whole timeout: {took:?}"
    );
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
}

#[test]
fn gid_never_appearing_fails_after_the_timeout() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    rail.conf["gidTimeoutMs"] = json!(500);
    let start = Instant::now();
    let r = rail.add("c1");
    let took = start.elapsed();
    let msg = assert_gid_failure(&r, &rail.tree, &rail.state);
    assert!(
        took >= Duration::from_millis(450) && took <= Duration::from_secs(3),
        "the wait is bounded by gidTimeoutMs 500: {took:?}"
    );
    assert!(msg.contains(&v4_gid(IP)), "names the expected GID: {msg}");
}

#[test]
fn gid_at_another_index_names_it() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    // An IPv6 address took 2/3 first: the IPv4 pair landed at 4/5.
    rail.tree.set_gid(DEV, 4, &v4_gid(IP), "IB/RoCE v1");
    rail.tree.set_gid(DEV, 5, &v4_gid(IP), "RoCE v2");
    rail.conf["gidTimeoutMs"] = json!(3000);
    let start = Instant::now();
    let r = rail.add("c1");
    let took = start.elapsed();
    let msg = assert_gid_failure(&r, &rail.tree, &rail.state);
    assert!(
        msg.contains("index 5") && msg.contains("NCCL_IB_GID_INDEX=5"),
        "{msg}"
    );
    // The kernel never moves a GID it has placed: no use waiting it out.
    assert!(
        took < Duration::from_millis(2000),
        "gave up early: {took:?}"
    );
}

#[test]
fn gid_of_type_roce_v1_fails() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    rail.tree.set_gid(DEV, 3, &v4_gid(IP), "IB/RoCE v1");
    rail.conf["gidTimeoutMs"] = json!(400);
    let msg = assert_gid_failure(&rail.add("c1"), &rail.tree, &rail.state);
    assert!(msg.contains("IB/RoCE v1"), "names the type found: {msg}");
}

#[test]
fn gid_of_zeros_fails() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    rail.tree.set_gid(DEV, 2, &v4_gid(IP), "IB/RoCE v1");
    rail.tree.set_gid(DEV, 3, ZERO_GID, "");
    rail.conf["gidTimeoutMs"] = json!(400);
    let msg = assert_gid_failure(&rail.add("c1"), &rail.tree, &rail.state);
    assert!(msg.contains(ZERO_GID), "{msg}");
    assert!(
        msg.contains("at no index"),
        "a v1 GID is not the one: {msg}"
    );
}

#[test]
fn ipv6_only_address() {
    needs!(root);
    let v6 = "fd00::34/64";
    let gid = "fd00:0000:0000:0000:0000:0000:0000:0034";
    let mut rail = enforcing(v6);
    rail.conf["gidTimeoutMs"] = json!(400);
    let msg = assert_gid_failure(&rail.add("c1"), &rail.tree, &rail.state);
    assert!(msg.contains(gid), "the address itself is the GID: {msg}");

    rail.tree.set_gid(DEV, 2, gid, "IB/RoCE v1");
    rail.tree.set_gid(DEV, 3, gid, "RoCE v2");
    rail.add("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
}

#[test]
fn gid_check_warn_logs_and_goes_on() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    rail.conf["gidCheck"] = json!("warn");
    rail.conf["gidTimeoutMs"] = json!(400);
    let r = rail.add("c1");
    r.ok();
    assert!(
        r.stderr.contains("GID check failed") && r.stderr.contains("index 3"),
        "the mismatch is logged: {}",
        r.stderr
    );
    assert_eq!(r.json()["ips"][0]["address"], json!(ADDR));
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    assert_eq!(rail.state.entries().len(), 1);
}

#[test]
fn gid_check_off_reads_no_gid() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    // No GID table at all: a check that read one would fail.
    std::fs::remove_dir_all(rail.tree.dev_dir(DEV).join("ports")).unwrap();
    rail.conf["gidCheck"] = json!("off");
    rail.conf["gidTimeoutMs"] = json!(3000);
    let start = Instant::now();
    rail.add("c1").ok();
    assert!(start.elapsed() < Duration::from_millis(2000));
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    assert_eq!(rail.state.entries().len(), 1);

    // Without a class to write either, the RDMA device is not needed at all.
    rail.conf.as_object_mut().unwrap().remove("trafficClass");
    rail.conf["deviceID"] = json!("0000:0c:00.7");
    rail.add("c2").ok();
}

#[test]
fn no_address_under_enforce_fails_before_any_change() {
    needs!(root);
    let mut rail = enforcing(ADDR);
    rail.tree.set_ipv4_gids(DEV, IP);
    rail.conf["prevResult"] = prev_result("1.1.0", "net1", &rail.pod.path(), &[]);
    rail.pod.set_sysctl("net.ipv4.conf.net1.arp_ignore", "0");
    let r = rail.add("c1");
    assert_eq!(r.code(), 101, "{}", r.stdout);
    assert!(r.msg().contains("no IP address"), "{}", r.msg());
    assert_eq!(rail.tree.tc(DEV), "", "nothing written");
    assert!(rail.state.entries().is_empty());
    assert_eq!(rail.pod.sysctl("net.ipv4.conf.net1.arp_ignore"), "0");
}
