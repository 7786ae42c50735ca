//! The CNI protocol and the rail sysctls in every cniVersion roce-tune
//! speaks, against a real netns. The RDMA part is off (gidCheck "off", no
//! trafficClass) so that each failure here is about the protocol or sysctls.
//!
//! Every test runs over the same cases: each supported version with a
//! prevResult of its own version, and pairs whose prevResult was written in
//! another version than the config (a chain can mix plugin versions).

use crate::common::*;
use serde_json::{json, Value};

const VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// (config cniVersion, prevResult cniVersion).
fn cases() -> Vec<(&'static str, &'static str)> {
    let mut v: Vec<_> = VERSIONS.iter().map(|v| (*v, *v)).collect();
    v.extend([
        ("1.1.0", "0.4.0"),
        ("0.4.0", "1.1.0"),
        ("1.0.0", "0.3.0"),
        ("0.3.1", "1.0.0"),
        ("0.3.0", "1.1.0"),
    ]);
    v
}

fn label(c: (&str, &str)) -> String {
    format!("config {} / prevResult {}", c.0, c.1)
}

fn snapshot(pod: &Pod, keys: &[(String, &str)]) -> Vec<(String, String)> {
    keys.iter()
        .map(|(k, _)| (k.clone(), pod.sysctl(k)))
        .collect()
}

/// A pod whose rp_filter values are not the ones roce-tune sets: the kernel
/// default of a new netns is already 0, which would hide a missed write.
fn pod_with_strict_rp_filter(ifname: &str) -> Pod {
    let pod = Pod::new(ifname, Some(ADDR));
    pod.set_sysctl("net.ipv4.conf.all.rp_filter", "1");
    pod.set_sysctl(&format!("net.ipv4.conf.{ifname}.rp_filter"), "2");
    pod
}

/// Host sysctls that a netns leak would change.
fn host_sysctls() -> Vec<(String, String)> {
    let mut keys = vec![];
    for scope in ["all", "default"] {
        for k in [
            "rp_filter",
            "arp_ignore",
            "arp_announce",
            "arp_filter",
            "accept_local",
        ] {
            keys.push(format!("net/ipv4/conf/{scope}/{k}"));
        }
    }
    keys.into_iter()
        .map(|k| {
            let v = std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap();
            (k, v.trim().to_string())
        })
        .collect()
}

fn conf(version: &str, prev: Value, state: &StateDirPath) -> Value {
    write_node_config(state, None, json!({}));
    json!({
        "cniVersion": version,
        "name": "rail",
        "type": "roce-tune",
        "gidCheck": "off",
        "prevResult": prev,
    })
}

/// A prevResult richer than sriov-cni's: an IPv6 address, a route, DNS and
/// the 1.1.0 interface fields, to see what survives each conversion.
fn rich_prev(version: &str, ifname: &str, sandbox: &str) -> Value {
    let mut p = prev_result(version, ifname, sandbox, &[ADDR, "fd00::22/64"]);
    p["ips"][0]["gateway"] = json!("192.168.0.1");
    p["routes"] = json!([{"dst": "10.0.0.0/8", "gw": "192.168.0.1"}]);
    p["dns"] = json!({"nameservers": ["10.96.0.10"], "search": ["svc.local"]});
    if version == "1.1.0" {
        p["interfaces"][0]["mtu"] = json!(9000);
        p["interfaces"][0]["pciID"] = json!("0000:0c:00.2");
    }
    p
}

fn add(state: &StateDirPath, pod: &Pod, cid: &str, c: &Value) -> Run {
    run_plugin(
        state,
        "ADD",
        cid,
        &pod.path(),
        &pod.ifname,
        c.to_string().as_bytes(),
    )
}

#[test]
fn add_outputs_prev_result_in_the_config_version() {
    needs!(root);
    for case in cases() {
        let (cv, pv) = case;
        let l = label(case);
        let pod = Pod::new("net1", Some(ADDR));
        let state = StateDirPath::new();
        let prev = rich_prev(pv, "net1", &pod.path());
        let r = add(&state, &pod, "cv1", &conf(cv, prev, &state));
        assert_eq!(r.status, 0, "{l}: ADD failed: {r:?}");
        let out = r.json();
        assert_eq!(
            out["cniVersion"], cv,
            "{l}: output speaks the config's version"
        );
        let ifs = out["interfaces"].as_array().expect("interfaces");
        assert_eq!(ifs.len(), 1, "{l}");
        assert_eq!(ifs[0]["name"], "net1", "{l}");
        assert_eq!(ifs[0]["mac"], "8e:ca:d1:d4:64:7d", "{l}");
        assert_eq!(ifs[0]["sandbox"], pod.path().as_str(), "{l}");
        let ext = pv == "1.1.0" && cv == "1.1.0";
        assert_eq!(
            ifs[0].get("mtu").cloned(),
            ext.then(|| json!(9000)),
            "{l}: mtu exists in 1.1.0 only"
        );
        assert_eq!(
            ifs[0].get("pciID").cloned(),
            ext.then(|| json!("0000:0c:00.2")),
            "{l}: pciID exists in 1.1.0 only"
        );

        let ips = out["ips"].as_array().expect("ips");
        assert_eq!(ips.len(), 2, "{l}");
        for (ip, (addr, fam)) in ips.iter().zip([(ADDR, "4"), ("fd00::22/64", "6")]) {
            assert_eq!(ip["address"], addr, "{l}");
            assert_eq!(ip["interface"], 0, "{l}");
            if cv.starts_with("0.") {
                assert_eq!(ip["version"], fam, "{l}: 0.x ips carry version");
            } else {
                assert!(
                    ip.get("version").is_none(),
                    "{l}: 1.x ips have no version: {ip}"
                );
            }
        }
        assert_eq!(ips[0]["gateway"], "192.168.0.1", "{l}");
        assert_eq!(out["routes"][0]["dst"], "10.0.0.0/8", "{l}");
        assert_eq!(out["routes"][0]["gw"], "192.168.0.1", "{l}");
        assert_eq!(out["dns"]["nameservers"][0], "10.96.0.10", "{l}");
        assert_eq!(out["dns"]["search"][0], "svc.local", "{l}");
        assert!(state.entries().is_empty(), "{l}: no class, no state");
    }
}

/// docs/design.md, "The CNI protocol": reference tests feed 1.0.0 prevResults that still hold
/// `ips[].version`: accepted, and dropped from a 1.x output.
#[test]
fn stale_version_field_in_a_1x_prev_result_is_tolerated() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let state = StateDirPath::new();
    for cv in VERSIONS {
        let mut prev = prev_result("1.0.0", "net1", &pod.path(), &[ADDR]);
        prev["ips"][0]["version"] = json!("4");
        let r = add(&state, &pod, "cv2", &conf(cv, prev, &state));
        assert_eq!(r.status, 0, "config {cv}: {r:?}");
        let ip = &r.json()["ips"][0];
        assert_eq!(
            ip.get("version").is_some(),
            cv.starts_with("0."),
            "config {cv}: {ip}"
        );
    }
}

#[test]
fn default_sysctls_land_in_the_pod_and_not_on_the_host() {
    needs!(root);
    for case in cases() {
        let l = label(case);
        let pod = pod_with_strict_rp_filter("net1");
        let state = StateDirPath::new();
        let keys = rail_sysctls("net1");
        let before = snapshot(&pod, &keys);
        for ((k, want), (_, was)) in keys.iter().zip(&before) {
            assert_ne!(
                was, want,
                "{l}: {k} already holds the target value: the test could not tell"
            );
        }
        let host_before = host_sysctls();
        let prev = prev_result(case.1, "net1", &pod.path(), &[ADDR]);
        add(&state, &pod, "cv3", &conf(case.0, prev, &state)).ok();
        for (k, want) in &keys {
            assert_eq!(pod.sysctl(k), *want, "{l}: {k} in the pod");
        }
        assert_eq!(
            host_sysctls(),
            host_before,
            "{l}: the host's sysctls changed"
        );
    }
}

#[test]
fn custom_sysctl_map_replaces_the_defaults() {
    needs!(root);
    for case in cases() {
        let l = label(case);
        let pod = pod_with_strict_rp_filter("net1");
        let state = StateDirPath::new();
        let keys = rail_sysctls("net1");
        let before = snapshot(&pod, &keys);
        let mut c = conf(
            case.0,
            prev_result(case.1, "net1", &pod.path(), &[ADDR]),
            &state,
        );
        c["sysctl"] = json!({"net.ipv4.conf.IFNAME.arp_ignore": "2"});
        add(&state, &pod, "cv4", &c).ok();
        for (k, was) in &before {
            let want = if k.ends_with("net1.arp_ignore") {
                "2"
            } else {
                was.as_str()
            };
            assert_eq!(pod.sysctl(k), want, "{l}: {k}");
        }

        // `{}` sets nothing at all.
        let pod = pod_with_strict_rp_filter("net1");
        let before = snapshot(&pod, &keys);
        c["sysctl"] = json!({});
        c["prevResult"] = prev_result(case.1, "net1", &pod.path(), &[ADDR]);
        add(&state, &pod, "cv5", &c).ok();
        assert_eq!(
            snapshot(&pod, &keys),
            before,
            "{l}: sysctl {{}} changed something"
        );
    }
}

/// `IFNAME` becomes CNI_IFNAME, in the defaults and in a custom map alike.
#[test]
fn ifname_placeholder_is_replaced_by_cni_ifname() {
    needs!(root);
    for case in cases() {
        let l = label(case);
        let pod = pod_with_strict_rp_filter("rail_3");
        pod.add_rail("net1", None);
        let state = StateDirPath::new();
        let other = snapshot(&pod, &rail_sysctls("net1")[1..]);
        let prev = prev_result(case.1, "rail_3", &pod.path(), &[ADDR]);
        let mut c = conf(case.0, prev, &state);
        add(&state, &pod, "cv6", &c).ok();
        for (k, want) in rail_sysctls("rail_3") {
            assert_eq!(pod.sysctl(&k), want, "{l}: {k}");
        }
        assert_eq!(
            snapshot(&pod, &rail_sysctls("net1")[1..]),
            other,
            "{l}: another interface of the pod was touched"
        );

        c["sysctl"] = json!({"net.ipv4.conf.IFNAME.arp_announce": "1"});
        add(&state, &pod, "cv6", &c).ok();
        assert_eq!(
            pod.sysctl("net.ipv4.conf.rail_3.arp_announce"),
            "1",
            "{l}: custom key with IFNAME"
        );
        assert_eq!(
            pod.sysctl("net.ipv4.conf.net1.arp_announce"),
            other[0].1,
            "{l}"
        );
    }
}

/// A pod after a successful ADD of `case`, and the config CHECK gets: libcni
/// hands CHECK the chain's cached result as prevResult.
fn added_for_check(case: (&str, &str), cid: &str) -> (Pod, StateDirPath, Value) {
    let pod = Pod::new("net1", Some(ADDR));
    let state = StateDirPath::new();
    let prev = prev_result(case.1, "net1", &pod.path(), &[ADDR]);
    let mut c = conf(case.0, prev, &state);
    let r = add(&state, &pod, cid, &c);
    r.ok();
    c["prevResult"] = r.json();
    (pod, state, c)
}

fn check(state: &StateDirPath, pod: &Pod, cid: &str, c: &Value) -> Run {
    run_plugin(
        state,
        "CHECK",
        cid,
        &pod.path(),
        "net1",
        c.to_string().as_bytes(),
    )
}

#[test]
fn check_passes_from_0_4_0_and_is_refused_before() {
    needs!(root);
    for case in cases() {
        let l = label(case);
        let (pod, state, c) = added_for_check(case, "cv7");
        let r = check(&state, &pod, "cv7", &c);
        if case.0.starts_with("0.3.") {
            assert_eq!(r.code(), 1, "{l}: CHECK needs 0.4.0: {r:?}");
            assert!(r.msg().contains("0.4.0"), "{l}: {}", r.msg());
            assert_eq!(r.json()["cniVersion"], case.0, "{l}");
        } else {
            assert_eq!(r.status, 0, "{l}: CHECK failed: {r:?}");
            assert_eq!(r.stdout, "", "{l}: CHECK prints nothing on success");
        }
    }
}

#[test]
fn check_reports_a_sysctl_changed_by_hand() {
    needs!(root);
    for case in cases() {
        let l = label(case);
        let (pod, state, c) = added_for_check(case, "cv8");
        pod.set_sysctl("net.ipv4.conf.net1.arp_announce", "1");
        let r = check(&state, &pod, "cv8", &c);
        if case.0.starts_with("0.3.") {
            assert_eq!(r.code(), 1, "{l}: {r:?}");
            continue;
        }
        assert_eq!(r.code(), 103, "{l}: {r:?}");
        let m = r.msg();
        for part in ["net.ipv4.conf.net1.arp_announce", "\"1\"", "\"2\""] {
            assert!(m.contains(part), "{l}: message {m:?} lacks {part}");
        }
        assert_eq!(r.json()["cniVersion"], case.0, "{l}");
    }
}

#[test]
fn del_is_best_effort_and_repeatable() {
    needs!(root);
    for case in cases() {
        let l = label(case);
        let pod = Pod::new("net1", Some(ADDR));
        let state = StateDirPath::new();
        let prev = prev_result(case.1, "net1", &pod.path(), &[ADDR]);
        let c = conf(case.0, prev, &state).to_string();
        run_plugin(&state, "ADD", "cv9", &pod.path(), "net1", c.as_bytes()).ok();
        for attempt in ["first", "second"] {
            let r = run_plugin(&state, "DEL", "cv9", &pod.path(), "net1", c.as_bytes());
            assert_eq!(r.status, 0, "{l}: {attempt} DEL: {r:?}");
            assert_eq!(r.stdout, "", "{l}: DEL prints nothing");
        }
        let gone = pod.path();
        pod.delete();
        // Already deleted: its Drop would only complain that the netns is gone.
        std::mem::forget(pod);
        assert!(!std::path::Path::new(&gone).exists());
        let r = run_plugin(&state, "DEL", "cv9", &gone, "net1", c.as_bytes());
        assert_eq!(r.status, 0, "{l}: DEL after the netns is gone: {r:?}");
        let r = run_plugin(&state, "DEL", "cv9", "", "net1", c.as_bytes());
        assert_eq!(r.status, 0, "{l}: DEL with CNI_NETNS empty: {r:?}");
        assert_eq!(r.stdout, "", "{l}");
    }
}
