//! The traffic class through the binary (docs/design.md, "The traffic class file" and "Behaviour"): ADD records the
//! original before writing, DEL gives exactly that back (unset included) and
//! only when the file still holds what roce-tune wrote. Real netns and veth;
//! the test tree's plain file holds what was last written.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;

#[test]
fn del_restores_each_kind_of_original() {
    needs!(root);
    // (file before ADD, original as recorded, file after DEL). An unset class
    // comes back through `tclass=-1`, never as 0: 0 would FORCE class 0.
    let cases = [
        ("", Value::Null, "tclass=-1"),
        ("Global tclass=0\n", json!(0), "tclass=0"),
        (
            "Global tclass=106\ndst_ip=10.0.0.0/8,tclass=96\n",
            json!(106),
            "tclass=106",
        ),
    ];
    for (before, recorded, after) in cases {
        let rail = Rail::spec().class(before).build();
        rail.add("c1").ok();
        assert_eq!(rail.tree.tc(DEV), "tclass=41", "original {before:?}");
        let e = rail
            .state
            .entry("c1", "net1")
            .expect("ADD recorded an entry");
        assert_eq!(
            e["owned"]["trafficClass"]["original"], recorded,
            "original {before:?}: {e}"
        );
        assert_eq!(e["owned"]["trafficClass"]["written"], json!(41));
        assert_eq!(e["device"], json!(DEV));
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&rail.state.0), 0o700);
        assert_eq!(mode(&rail.state.0.join("c1:net1.state")), 0o600);

        let r = rail.del("c1");
        r.ok();
        assert_eq!(r.stdout, "", "DEL prints nothing");
        assert_eq!(rail.tree.tc(DEV), after, "original {before:?}");
        assert!(
            rail.state.entries().is_empty(),
            "{:?}",
            rail.state.entries()
        );
    }
}

#[test]
fn del_after_device_recreated_leaves_the_file_alone() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    // A VF re-bind re-creates the device: the file starts unset again.
    rail.tree.set_tc(DEV, "");
    rail.del("c1").ok();
    assert_eq!(
        rail.tree.tc(DEV),
        "",
        "the new device's class is not ours to restore"
    );
    assert!(rail.state.entries().is_empty());
}

#[test]
fn del_after_add_died_before_its_write() {
    needs!(root);
    let rail = Rail::new();
    rail.state.plant(&json!({
        "version": 1, "network": "rdma-vf", "containerId": "c1", "ifname": "net1",
        "netns": rail.pod.path(), "sysfsRoot": path_str(&rail.tree.root), "exclusive": false,
        "device": DEV, "port": 1, "original": null, "written": 41, "created": epoch_secs(),
    }));
    rail.del("c1").ok();
    assert_eq!(
        rail.tree.tc(DEV),
        "",
        "the class was never written: nothing to give back"
    );
    assert!(rail.state.entries().is_empty());
}

#[test]
fn repeated_add_keeps_the_first_original() {
    needs!(root);
    let rail = Rail::new();
    rail.add("c1").ok();
    rail.add("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    let e = rail.state.entry("c1", "net1").unwrap();
    assert_eq!(
        e["owned"]["trafficClass"]["original"],
        Value::Null,
        "the second ADD must not take the first's 41 as the original: {e}"
    );
    assert_eq!(rail.state.entries().len(), 1);
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=-1");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn del_twice_and_del_without_netns() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    // Someone sets 41 by hand after our DEL: a second DEL has no entry, so
    // it must not touch the file.
    rail.tree.set_tc(DEV, "tclass=41");
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    rail.tree.set_tc(DEV, "Global tclass=106\n");

    // The pod's netns is gone before DEL: in shared mode the class is
    // reached through the host view, so it is still restored.
    rail.add("c2").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    let netns = rail.pod.path();
    rail.pod.delete();
    assert!(!std::path::Path::new(&netns).exists());
    let stdin = rail.conf.to_string();
    run_plugin(&rail.state, "DEL", "c2", &netns, "net1", stdin.as_bytes()).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert!(rail.state.entries().is_empty());
    // libcni sends an empty CNI_NETNS when the sandbox is gone.
    run_plugin(&rail.state, "DEL", "c2", "", "net1", stdin.as_bytes()).ok();
}

#[test]
fn del_without_state_dir_succeeds_and_creates_nothing() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    let r = rail.del("c1");
    r.ok();
    assert_eq!(r.stdout, "");
    assert!(!rail.state.0.exists(), "DEL must not create the state dir");
    assert_eq!(rail.tree.tc(DEV), "Global tclass=106\n");
}

#[test]
fn failed_add_rolls_back_class_and_sysctls() {
    needs!(root);
    // The GID never appears.
    let mut rail = Rail::spec().class("Global tclass=106\n").no_gids().build();
    // Values the ADD would change, so putting them back is observable.
    rail.pod.set_sysctl("net.ipv4.conf.all.rp_filter", "2");
    rail.pod.set_sysctl("net.ipv4.conf.net1.arp_ignore", "2");
    rail.pod.set_sysctl("net.ipv4.conf.net1.accept_local", "0");
    let keys = [
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.net1.arp_announce",
        "net.ipv4.conf.net1.arp_filter",
        "net.ipv4.conf.net1.arp_ignore",
        "net.ipv4.conf.net1.rp_filter",
        "net.ipv4.conf.net1.accept_local",
    ];
    let before: Vec<String> = keys.iter().map(|k| rail.pod.sysctl(k)).collect();
    rail.conf["gidTimeoutMs"] = json!(400);
    // A GID that never comes fails ADD before the class is taken.
    let r = rail.add("c1");
    assert_eq!(r.code(), 101, "{}", r.stdout);
    assert_eq!(
        rail.tree.tc(DEV),
        "Global tclass=106\n",
        "class never written"
    );
    assert!(
        rail.state.entries().is_empty(),
        "{:?}",
        rail.state.entries()
    );
    let after: Vec<String> = keys.iter().map(|k| rail.pod.sysctl(k)).collect();
    assert_eq!(after, before, "sysctls put back");

    // A class write the kernel refuses (here: a read-only bind mount of the
    // file, EROFS even for root) fails ADD after the original was recorded:
    // the entry goes, the sysctls come back, the class is as it was.
    rail.tree.set_ipv4_gids(DEV, IP);
    let tc = path_str(&rail.tree.tc_path(DEV));
    sh(&format!(
        "mount --bind {tc} {tc} && mount -o remount,bind,ro {tc}"
    ));
    let r = rail.add("c1");
    sh(&format!("umount {tc}"));
    assert_eq!(r.code(), 102, "{}", r.stdout);
    assert!(r.msg().contains("Read-only"), "{}", r.msg());
    assert_eq!(rail.tree.tc(DEV), "Global tclass=106\n", "class as it was");
    assert!(
        rail.state.entries().is_empty(),
        "{:?}",
        rail.state.entries()
    );
    let after: Vec<String> = keys.iter().map(|k| rail.pod.sysctl(k)).collect();
    assert_eq!(after, before, "sysctls put back");
    // The error left nothing for DEL to do, and DEL agrees.
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "Global tclass=106\n");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn corrupt_entry_is_moved_aside_and_class_left_alone() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    let path = rail.state.0.join("c1:net1.state");
    std::fs::write(&path, b"{\"version\":1,\"original\":").unwrap();
    let r = rail.del("c1");
    r.ok();
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=41",
        "a corrupt entry's original is never guessed"
    );
    assert!(!path.exists());
    let moved = rail.state.0.join("c1:net1.state.corrupt");
    assert_eq!(
        std::fs::read(&moved).unwrap(),
        b"{\"version\":1,\"original\":",
        "kept as found for the operator"
    );
    assert!(rail.state.entries().is_empty());
    assert!(r.stderr.contains("corrupt"), "{}", r.stderr);
}

#[test]
fn check_passes_after_add_and_reports_class_drift() {
    needs!(root);
    let rail = Rail::new();
    rail.add("c1").ok();
    let r = rail.check("c1");
    r.ok();
    assert_eq!(r.stdout, "", "CHECK prints nothing on success");
    // The driver's own form of the same value is no drift.
    rail.tree.set_tc(DEV, "Global tclass=41\n");
    rail.check("c1").ok();

    rail.tree.set_tc(DEV, "tclass=0");
    let r = rail.check("c1");
    assert_eq!(r.code(), 102, "{}", r.stdout);
    let msg = r.msg();
    assert!(
        msg.contains(DEV) && msg.contains("is 0") && msg.contains("expected 41"),
        "{msg}"
    );
    rail.tree.set_tc(DEV, "");
    let msg = rail.check("c1").msg();
    assert!(msg.contains("unset"), "{msg}");
}

#[test]
fn three_owners_newest_remaining_takes_over() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    let class = |tc: u8| {
        let mut c = rail.conf.clone();
        c["trafficClass"] = json!(tc);
        c
    };
    // Taken within one second and named opposite to their age: the order of
    // owners must come from when they took the device, not from their names.
    let owners = [("c-old", 41u8), ("b-mid", 50), ("a-new", 60)];
    for (cid, tc) in owners {
        rail.run_with("ADD", cid, &class(tc)).ok();
    }
    assert_eq!(rail.tree.tc(DEV), "tclass=60");
    for cid in ["c-old", "b-mid", "a-new"] {
        assert_eq!(
            rail.state.entry(cid, "net1").unwrap()["owned"]["trafficClass"]["original"],
            json!(106)
        );
    }
    let del = |cid, tc| {
        rail.run_with("DEL", cid, &class(tc)).ok();
    };
    del("a-new", 60);
    assert_eq!(rail.tree.tc(DEV), "tclass=50", "the newest remaining owner");
    del("c-old", 41);
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=50",
        "c-old did not hold the device"
    );
    del("b-mid", 50);
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn repeated_add_on_another_device_gives_the_first_one_back() {
    needs!(root);
    // The same (containerID, ifname) ADDed again, now resolving to another
    // VF: the first device must get its original back before the entry is
    // overwritten, or nothing would ever restore it.
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.tree.add_device("0000:0c:00.3", "mlx5_3", "");
    rail.tree.set_ipv4_gids("mlx5_3", IP);
    rail.add("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    let second = rail_conf(
        &rail.tree,
        &rail.state,
        "0000:0c:00.3",
        &rail.pod,
        41,
        &[ADDR],
    );
    rail.run_with("ADD", "c1", &second).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106", "first device given back");
    assert_eq!(rail.tree.tc("mlx5_3"), "tclass=41");
    rail.run_with("DEL", "c1", &second).ok();
    assert_eq!(rail.tree.tc("mlx5_3"), "tclass=-1");
    assert!(rail.state.entries().is_empty());
}
