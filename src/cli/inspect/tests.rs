//! The verdicts and the rendering, from plain structs: no root, no pod, no
//! sysfs. What reading them takes is proven by tests/it/inspect.rs.

use super::args::{parse_args, Options, Parsed};
use super::collect::{
    DeviceSource, Iface, NodeDevice, NodeView, PodView, QosObs, SettingObs, SettingState,
    SysctlObs, Topology,
};
use super::json;
use super::render::{check_line, node_text, pod_text, table};
use super::verdicts::*;
use crate::rdma::gid::{self, GidEntry};
use crate::rdma::lookup::How;
use crate::rdma::NetnsMode;
use crate::settings::{snake_name, SETTINGS};
use serde_json::json;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

fn opts(s: &str) -> Options {
    let args: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
    match parse_args(&args).unwrap() {
        Parsed::Run(o) => *o,
        Parsed::Help => panic!("help"),
    }
}

fn entry(gid: &str, typ: Option<&str>) -> GidEntry {
    GidEntry {
        gid: gid::parse_gid(gid),
        gid_type: typ.map(str::to_owned),
        ndev: None,
    }
}

const LL: &str = "fe80:0000:0000:0000:8cca:d1ff:fed4:647d";
const V4: &str = "0000:0000:0000:0000:0000:ffff:c0a8:0022";
const ZERO: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

/// An 8-entry table: the link-local pair at 0/1, `at` set, the rest unused.
fn table_with(at: &[(u32, &str, Option<&str>)]) -> Vec<(u32, GidEntry)> {
    let mut t: Vec<(u32, GidEntry)> = (0..8).map(|i| (i, entry(ZERO, None))).collect();
    t[0].1 = entry(LL, Some("IB/RoCE v1"));
    t[1].1 = entry(LL, Some("RoCE v2"));
    for (i, g, ty) in at {
        t[*i as usize].1 = entry(g, *ty);
    }
    t
}

fn addrs() -> Vec<(IpAddr, u8)> {
    vec![
        ("fe80::1".parse().unwrap(), 64),
        ("192.168.0.34".parse().unwrap(), 24),
    ]
}

fn sysctl(key: &str, value: &str, recommended: &str) -> SysctlObs {
    SysctlObs {
        key: key.into(),
        value: Ok(value.into()),
        recommended: recommended.into(),
    }
}

/// A port's settings as collect reads them, every registered one: the class
/// `tc`, the others with nothing to read (no rdma_cm configfs directory).
fn settings_with(tc: SettingState) -> Vec<SettingObs> {
    SETTINGS
        .iter()
        .map(|s| SettingObs {
            key: s.key(),
            state: match s.key() {
                "trafficClass" => tc.clone(),
                _ => SettingState::NoFile,
            },
            path: PathBuf::from(format!("/t/{}", s.key())),
        })
        .collect()
}

/// What the class `tc` and the other settings with nothing to read show, in
/// the list's order: `(snake name, cell)`.
fn shown_settings(tc: &str) -> Vec<(String, String)> {
    SETTINGS
        .iter()
        .map(|s| {
            let cell = if s.key() == "trafficClass" { tc } else { "n/a" };
            (snake_name(s.key()), cell.to_string())
        })
        .collect()
}

/// A rail as the pod view collects it: the seed's GIDs, class 41, sysctls
/// right; no settings read where no device was found.
fn rail(device: Result<(String, DeviceSource), String>) -> Iface {
    let settings = match device {
        Ok(_) => settings_with(SettingState::Value(Some(41))),
        Err(_) => Vec::new(),
    };
    Iface {
        ifname: "net1".into(),
        device,
        port: 1,
        port_state: Some("4: ACTIVE".into()),
        addrs: addrs(),
        gids: table_with(&[(2, V4, Some("IB/RoCE v1")), (3, V4, Some("RoCE v2"))]),
        settings,
        sysctls: vec![sysctl("net.ipv4.conf.net1.arp_ignore", "1", "1")],
        pci: Some("0000:0c:00.2".into()),
        qos: None,
    }
}

fn pod_with(interfaces: Vec<Iface>, not_rails: Vec<(String, String)>) -> PodView {
    PodView {
        netns: PathBuf::from("/var/run/netns/p"),
        pid: None,
        sysfs_root: PathBuf::from("/t"),
        mode: NetnsMode::Shared,
        sysfs: "a test tree: the pod's view is netns/<inode>/, nothing mounted",
        visible_devices: vec!["mlx5_2".into()],
        char_devices: None,
        interfaces,
        not_rails,
        placement: None,
    }
}

fn by_netlink() -> Result<(String, DeviceSource), String> {
    Ok(("mlx5_2".into(), DeviceSource::Lookup(How::RdmaNetlink)))
}

// ---------------------------------------------------------------- GID index

#[test]
fn gid_index_pass_is_the_seed_verdict() {
    let t = table_with(&[(2, V4, Some("IB/RoCE v1")), (3, V4, Some("RoCE v2"))]);
    let c = gid_check("mlx5_26", "net1", &addrs(), &t, 3);
    assert!(c.pass, "{c:?}");
    assert_eq!(
        check_line(&c),
        "PASS gid-index: GID index 3 of mlx5_26 is the RoCE v2 GID of 192.168.0.34"
    );
}

#[test]
fn gid_elsewhere_names_the_index_and_the_nccl_setting() {
    let t = table_with(&[(4, V4, Some("IB/RoCE v1")), (5, V4, Some("RoCE v2"))]);
    let c = gid_check("mlx5_2", "net1", &addrs(), &t, 3);
    assert!(!c.pass);
    assert_eq!(
        c.reason,
        format!("index 3 of mlx5_2 holds {ZERO} (unused); the RoCE v2 GID of 192.168.0.34 is at index 5")
    );
    assert!(c
        .fix
        .as_deref()
        .unwrap()
        .starts_with("set NCCL_IB_GID_INDEX=5"));
    assert!(check_line(&c).contains("is at index 5: set NCCL_IB_GID_INDEX=5"));
}

#[test]
fn gid_of_wrong_type_names_the_type() {
    let t = table_with(&[(3, V4, Some("IB/RoCE v1"))]);
    let c = gid_check("mlx5_2", "net1", &addrs(), &t, 3);
    assert!(!c.pass);
    assert!(
        c.reason.contains("type IB/RoCE v1, not RoCE v2"),
        "{}",
        c.reason
    );
    assert!(c.reason.contains("at no index"), "{}", c.reason);
    assert!(c.fix.unwrap().contains("run again"));
}

#[test]
fn gid_check_without_address_or_index() {
    let t = table_with(&[]);
    let ll_only = vec![("fe80::1".parse().unwrap(), 64)];
    let c = gid_check("mlx5_2", "net1", &ll_only, &t, 3);
    assert!(
        !c.pass && c.reason.contains("no IPv4 or global IPv6"),
        "{c:?}"
    );
    let c = gid_check("mlx5_2", "net1", &addrs(), &t, 9);
    assert!(!c.pass && c.reason.contains("indexes 0 to 7"), "{c:?}");
    let c = gid_check("mlx5_2", "net1", &addrs(), &[], 3);
    assert!(!c.pass && c.reason.contains("empty"), "{c:?}");
}

#[test]
fn the_checked_address_is_the_first_ipv4_else_a_global_ipv6() {
    let v6_first: Vec<(IpAddr, u8)> = vec![
        ("fe80::1".parse().unwrap(), 64),
        ("fd00::5".parse().unwrap(), 64),
        ("192.168.0.34".parse().unwrap(), 24),
    ];
    let (_, addr) = checked_address(&v6_first).unwrap();
    assert_eq!(addr.to_string(), "192.168.0.34");
    let (g, addr) = checked_address(&v6_first[..2]).unwrap();
    assert_eq!(addr.to_string(), "fd00::5", "the link-local one never");
    assert_eq!(locate_in(&table_with(&[]), &g), None);
    assert!(checked_address(&v6_first[..1]).is_none());
}

// ------------------------------------------------------------ traffic class

#[test]
fn traffic_class_verdicts() {
    let p = Path::new("/s/tc/1/traffic_class");
    let c = tc_check(
        "mlx5_2",
        1,
        Some("net1"),
        &SettingState::Value(Some(0)),
        41,
        p,
    );
    assert_eq!(
        c.reason,
        "mlx5_2 is 0, expected 41 (class 0 falls to the lossy priority)"
    );
    assert!(c
        .fix
        .unwrap()
        .contains("echo tclass=41 > /s/tc/1/traffic_class"));
    assert!(tc_check("mlx5_2", 1, None, &SettingState::Value(Some(41)), 41, p).pass);
    let c = tc_check("mlx5_2", 1, None, &SettingState::Value(None), 41, p);
    assert!(!c.pass && c.reason.contains("unset"));
    let c = tc_check("mlx5_2", 1, None, &SettingState::Value(Some(106)), 41, p);
    assert!(!c.pass && c.reason == "mlx5_2 is 106, expected 41");
    let c = tc_check("mlx5_2", 1, None, &SettingState::NoFile, 41, p);
    assert!(!c.pass && c.fix.unwrap().contains("MLNX_OFED"));
    let c = tc_check(
        "mlx5_2",
        1,
        None,
        &SettingState::Unreadable("bad".into()),
        41,
        p,
    );
    assert!(!c.pass && c.reason == "mlx5_2: bad");
}

// ------------------------------------------------------------------ sysctls

#[test]
fn sysctl_verdicts_name_each_key_that_is_off() {
    let obs = |v: &str| sysctl("net.ipv4.conf.net1.arp_ignore", v, "1");
    let ns = Path::new("/var/run/netns/p");
    let ok = sysctl_checks("net1", &[obs("1")], ns);
    assert_eq!(ok.len(), 1);
    assert!(ok[0].pass);
    let bad = sysctl_checks("net1", &[obs("1"), obs("0")], ns);
    assert_eq!(bad.len(), 1);
    assert_eq!(
        bad[0].reason,
        "net.ipv4.conf.net1.arp_ignore is 0, recommended 1"
    );
    assert!(bad[0]
        .fix
        .as_deref()
        .unwrap()
        .starts_with("nsenter --net=/var/run/netns/p sysctl -w net.ipv4.conf.net1.arp_ignore=1"));
    let unreadable = SysctlObs {
        value: Err("no such file".into()),
        ..obs("1")
    };
    assert!(!sysctl_checks("net1", &[unreadable], ns)[0].pass);
    // Multi-value sysctls print with tabs; they compare by words.
    assert!(sysctl_ok(&sysctl("k", "4096\t16384", "4096 16384")));
}

// ----------------------------------------------------------------- the views

#[test]
fn exit_code_is_one_on_any_failure() {
    let p = Check::pass("x", None, None, "ok".into());
    let f = Check::fail("x", None, None, "bad".into(), "fix".into());
    assert_eq!(exit_code(&[]), 0);
    assert_eq!(exit_code(std::slice::from_ref(&p)), 0);
    assert_eq!(exit_code(&[p, f.clone()]), 1);
    assert_eq!(check_line(&f), "FAIL x: bad: fix");
    let j = serde_json::to_value(json::check(&f)).unwrap();
    assert_eq!(
        j,
        json!({"device": null, "fix": "fix", "ifname": null, "name": "x", "pass": false, "reason": "bad"})
    );
    assert_eq!(json::stopped("gone"), "{\"error\":\"gone\"}\n");
}

#[test]
fn a_good_rail_passes_and_its_class_is_checked_only_when_asked() {
    let pod = pod_with(vec![rail(by_netlink())], vec![]);
    let names = |c: &[Check]| c.iter().map(|c| (c.name, c.pass)).collect::<Vec<_>>();
    let checks = pod_checks(&pod, &opts("--netns /p"));
    assert_eq!(names(&checks), [("gid-index", true), ("sysctl", true)]);
    let checks = pod_checks(&pod, &opts("--netns /p --traffic-class 41"));
    assert_eq!(
        names(&checks),
        [
            ("gid-index", true),
            ("traffic-class", true),
            ("sysctl", true)
        ]
    );
    let checks = pod_checks(&pod, &opts("--netns /p --traffic-class 42"));
    assert_eq!(exit_code(&checks), 1);
}

#[test]
fn an_interface_without_a_device_fails_rdma_device_and_still_checks_its_sysctls() {
    let pod = pod_with(vec![rail(Err("no RDMA device for net1".into()))], vec![]);
    let checks = pod_checks(&pod, &opts("--netns /p --traffic-class 41"));
    let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
    assert_eq!(names, ["rdma-device", "sysctl"], "no GID or class check");
    assert_eq!(checks[0].reason, "no RDMA device for net1");
    assert!(checks[0].fix.as_deref().unwrap().contains("--device DEV"));
}

#[test]
fn a_pod_without_rails_says_why_for_each_interface() {
    let pod = pod_with(
        vec![],
        vec![
            ("eth0".into(), "netlink reports no parent device".into()),
            ("net2".into(), "its RDMA device is mlx5_3".into()),
        ],
    );
    let checks = pod_checks(&pod, &opts("--netns /p --device mlx5_2"));
    assert_eq!(checks.len(), 1);
    assert_eq!(
        checks[0].reason,
        "no RDMA interface in the pod (eth0: netlink reports no parent device; net2: its RDMA device is mlx5_3)"
    );
    assert_eq!(checks[0].device.as_deref(), Some("mlx5_2"));
    let checks = pod_checks(&pod_with(vec![], vec![]), &opts("--netns /p"));
    assert!(checks[0].reason.contains("no interface but lo"));
}

fn node_with(devices: Vec<NodeDevice>, missing: Option<&str>, mode: NetnsMode) -> NodeView {
    NodeView {
        sysfs_root: PathBuf::from("/t"),
        root_note: Some("a test tree"),
        mode,
        devices,
        missing: missing.map(str::to_owned),
        idle: vec![],
        topology: Topology::default(),
    }
}

fn vf(tc: SettingState) -> NodeDevice {
    NodeDevice {
        name: "mlx5_2".into(),
        pci: Some("0000:0c:00.2".into()),
        pf: None,
        netdevs: vec![],
        port: 1,
        port_state: None,
        settings: settings_with(tc),
    }
}

#[test]
fn node_verdicts() {
    let node = node_with(
        vec![vf(SettingState::Value(Some(41)))],
        None,
        NetnsMode::Shared,
    );
    assert!(node_checks(&node, &opts("")).is_empty(), "nothing asked");
    let c = node_checks(&node, &opts("--traffic-class 41"));
    assert_eq!(c.len(), 1);
    assert!(c[0].pass);
    let node = node_with(vec![], Some("mlx5_9"), NetnsMode::Exclusive);
    let c = node_checks(&node, &opts(""));
    assert_eq!(c[0].name, "rdma-device");
    assert!(
        c[0].reason
            .starts_with("mlx5_9 is not under /t/class/infiniband")
            && c[0].reason.contains("exclusive mode"),
        "{}",
        c[0].reason
    );
    let node = node_with(vec![], None, NetnsMode::Shared);
    let c = node_checks(&node, &opts("--traffic-class 41"));
    assert!(!c[0].pass && c[0].reason.contains("no RDMA device"));
}

#[test]
fn an_idle_vf_with_a_class_fails_and_names_the_writer() {
    let mut node = node_with(vec![], None, NetnsMode::Shared);
    node.idle.push(crate::idle::Idle {
        port: crate::rdma::RdmaPort {
            device: "mlx5_2".into(),
            port: 1,
            pci: Some("0000:0c:00.2".into()),
            guid: None,
        },
        pci: "0000:0c:00.2".into(),
        netdev: "ens1f0v2".into(),
        class: 0,
    });
    let c = node_checks(&node, &opts(""));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].name, "idle-vf");
    assert!(c[0]
        .reason
        .contains("holds traffic class 0 on port 1: likely NVIDIA's rdma CNI fork"));
    assert!(c[0]
        .fix
        .as_deref()
        .unwrap()
        .starts_with("roce-tune reset-idle"));
}

// ---------------------------------------------------------------- rendering

#[test]
fn table_columns_align_without_trailing_blanks() {
    let t = table(
        "  ",
        &["A", "LONG HEADER", "C"],
        &[
            vec!["wide cell".into(), "x".into(), "1".into()],
            vec!["y".into(), "".into(), "".into()],
        ],
    );
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0], "  A          LONG HEADER  C");
    assert_eq!(lines[1], "  wide cell  x            1");
    assert_eq!(lines[2], "  y");
    for l in &lines {
        assert_eq!(l.trim_end(), *l);
    }
    // Every column starts at the same offset on every line.
    let col = lines[0].find("LONG").unwrap();
    assert_eq!(&lines[1][col..col + 1], "x");
}

#[test]
fn node_text_shows_dashes_for_absent_files() {
    let node = node_with(
        vec![vf(SettingState::Value(Some(41)))],
        None,
        NetnsMode::Shared,
    );
    let text = node_text(&node, &[]);
    let row = text.lines().find(|l| l.starts_with("mlx5_2")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    let mut want = vec!["mlx5_2", "0000:0c:00.2", "-", "-", "1", "-"];
    let settings = shown_settings("41");
    want.extend(settings.iter().map(|(_, cell)| cell.as_str()));
    assert_eq!(cells, want, "a column per registered setting");
    assert!(text.starts_with("RDMA netns mode: Y"));
    assert!(text.contains("sysfs: /t (a test tree)"));
    let j = serde_json::to_value(json::node(&node, &[])).unwrap();
    let settings = j["devices"][0]["settings"].as_object().unwrap();
    let mut keys: Vec<&str> = SETTINGS.iter().map(|s| s.key()).collect();
    keys.sort_unstable();
    assert!(
        settings.keys().eq(keys.iter()),
        "by key, sorted: {settings:?}"
    );
    assert_eq!(
        settings["trafficClass"],
        json!({"path": "/t/trafficClass", "state": "set", "value": 41})
    );
    assert_eq!(
        settings["rdmaCmTos"],
        json!({"path": "/t/rdmaCmTos", "state": "n/a", "value": null})
    );
    assert_eq!(j["pass"], true);
}

#[test]
fn the_pod_view_says_how_each_device_was_found() {
    let o = opts("--netns /p");
    let line = |device| {
        let pod = pod_with(vec![rail(device)], vec![]);
        let text = pod_text(&pod, &o, &pod_checks(&pod, &o));
        let json = serde_json::to_value(json::pod(&pod, &o, &[])).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("Interface net1:"))
            .unwrap()
            .to_owned();
        (line, json["interfaces"][0]["device_source"].clone())
    };
    let (text, json) = line(by_netlink());
    let settings: String = shown_settings("41")
        .iter()
        .map(|(name, cell)| format!(" {name}={cell}"))
        .collect();
    assert_eq!(
        text,
        format!("Interface net1: ip=192.168.0.34 rdma_device=mlx5_2 (by RDMA netlink) port=1 state=4: ACTIVE{settings}")
    );
    assert_eq!(json, "RDMA netlink");
    let parent = How::Parent(crate::rdma::device::Parent::pci("0000:0c:00.2"));
    let (text, json) = line(Ok(("mlx5_2".into(), DeviceSource::Lookup(parent))));
    assert!(
        text.contains("rdma_device=mlx5_2 (by its PCI function 0000:0c:00.2) "),
        "{text}"
    );
    assert_eq!(json, "its PCI function 0000:0c:00.2");
    let (text, json) = line(Ok(("mlx5_2".into(), DeviceSource::Forced)));
    assert!(
        text.contains("rdma_device=mlx5_2 (from --device) "),
        "{text}"
    );
    assert_eq!(json, "--device");
    let (text, json) = line(Err("none".into()));
    let unread: String = SETTINGS
        .iter()
        .map(|s| format!(" {}=-", snake_name(s.key())))
        .collect();
    assert!(
        text.contains("rdma_device=- (not found)") && text.ends_with(&unread),
        "{text}"
    );
    assert_eq!(json, json!(null));
}

#[test]
fn the_gid_table_keeps_used_entries_and_the_checked_index() {
    let o = opts("--netns /p --gid-index 3");
    let mut i = rail(by_netlink());
    i.gids = table_with(&[]);
    let pod = pod_with(vec![i], vec![]);
    let j = serde_json::to_value(json::pod(&pod, &o, &[])).unwrap();
    let shown: Vec<u64> = j["interfaces"][0]["gids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["index"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, [0, 1, 3], "used entries, and the empty checked one");
    let text = pod_text(&pod, &o, &[]);
    assert!(text.contains("(5 unused GID entries not shown)"), "{text}");
    assert_eq!(j["interfaces"][0]["addresses"][1]["checked"], true);
    assert_eq!(
        j["interfaces"][0]["addresses"][1]["roce_v2_index"],
        json!(null)
    );
}

/// The keys print in the order the earlier `serde_json::Value` output had
/// (sorted, as its maps are): a struct's field order is the print order, so
/// a field out of place shows here.
#[test]
fn json_keys_print_in_sorted_order() {
    let sorted = |text: &str| {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        serde_json::to_string_pretty(&v).unwrap() + "\n"
    };
    let node = node_with(
        vec![vf(SettingState::Unreadable("bad".into()))],
        None,
        NetnsMode::Shared,
    );
    let checks = node_checks(&node, &opts("--traffic-class 41"));
    let text = json::text(&json::node(&node, &checks));
    assert_eq!(text, sorted(&text));
    let o = opts("--netns /p --traffic-class 41");
    let pod = pod_with(
        vec![rail(by_netlink()), rail(Err("none".into()))],
        vec![("eth0".into(), "no parent".into())],
    );
    let text = json::text(&json::pod(&pod, &o, &pod_checks(&pod, &o)));
    assert_eq!(text, sorted(&text));
}

// ---------------------------------------------------------------- placement

fn placement(judged: Result<super::collect::Judged, String>) -> super::collect::Placement {
    super::collect::Placement {
        pod: crate::cni::env::PodRef {
            namespace: "team-a".into(),
            name: "trainer".into(),
            uid: None,
        },
        from: super::collect::PodFrom::Entry {
            container_id: "c1".into(),
            ifname: "net1".into(),
        },
        level: crate::topology::PathType::Pxb,
        judged,
    }
}

fn verdict(starved: bool) -> crate::topology::verdict::Verdict {
    use crate::topology::verdict::{GpuVerdict, Pool, RailVerdict, Verdict};
    use crate::topology::{Bdf, PathType};
    let gpu = Bdf::parse("0000:8c:00.0").unwrap();
    let rail = Bdf::parse("0000:0c:00.2").unwrap();
    Verdict {
        level: PathType::Pxb,
        share: 1,
        starved,
        gpus: vec![GpuVerdict {
            id: "GPU-1".into(),
            pci: gpu,
            near: if starved { vec![] } else { vec!["net1".into()] },
            share: 1,
            pool: 0,
            starved,
        }],
        rails: vec![RailVerdict {
            name: "net1".into(),
            pci: rail,
            near: !starved,
            best: Some(if starved {
                PathType::Sys
            } else {
                PathType::Pxb
            }),
            paths: vec![if starved {
                PathType::Sys
            } else {
                PathType::Pxb
            }],
        }],
        pools: vec![Pool {
            gpus: vec![0],
            near_rails: usize::from(!starved),
            node_ports: 1,
            need: 1,
            starved,
        }],
    }
}

#[test]
fn placement_passes_clean_fails_starved_and_is_silent_when_not_judged() {
    let judged = |starved| {
        Ok(super::collect::Judged {
            source: crate::podresources::Source::List,
            verdict: verdict(starved),
            unmapped: vec![("MIG-x".into(), "a MIG UUID".into())],
        })
    };
    let pass = placement_check(&placement(judged(false))).unwrap();
    assert_eq!(
        check_line(&pass),
        "PASS placement: pod team-a/trainer: clean: every GPU has its part of the 1 rail near it at PXB"
    );
    let fail = placement_check(&placement(judged(true))).unwrap();
    assert!(!fail.pass);
    assert_eq!(fail.fix.as_deref(), Some(crate::placement::FIX));
    assert!(
        fail.reason
            .contains("STARVED: GPUs 0000:8c:00.0 have 0 near rails and need 1"),
        "{}",
        fail.reason
    );
    // No kubelet, no GPUs: not the rails' fault, so no check.
    let skipped = placement(Err("the pod holds no GPU of the node's gpuResources".into()));
    assert_eq!(placement_check(&skipped), None);
    let mut pod = pod_with(vec![rail(by_netlink())], vec![]);
    pod.placement = Some(skipped);
    let o = opts("--netns /var/run/netns/p");
    let text = pod_text(&pod, &o, &pod_checks(&pod, &o));
    assert!(
        text.contains("\nPlacement of pod team-a/trainer (named by the state entry of c1:net1), GDR level PXB: not judged: the pod holds no GPU of the node's gpuResources\n"),
        "{text}"
    );
    pod.placement = Some(placement(judged(true)));
    let text = pod_text(&pod, &o, &pod_checks(&pod, &o));
    assert!(
        text.contains(
            "devices from the kubelet's List:\n      GPU0  near at PXB\nNIC0  SYS   far\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\nNot placed: GPU MIG-x: a MIG UUID\n"),
        "{text}"
    );
    let checks = pod_checks(&pod, &o);
    let v = serde_json::to_value(json::pod(&pod, &o, &checks)).unwrap();
    assert_eq!(v["placement"]["pod_from"], "the state entry of c1:net1");
    assert_eq!(v["placement"]["source"], "List");
    assert_eq!(
        v["placement"]["unplaced"],
        json!([{"id": "MIG-x", "why": "a MIG UUID"}])
    );
    assert_eq!(v["placement"]["verdict"]["rails"][0]["best"], "SYS");
}

#[test]
fn each_rail_has_a_qos_line_in_text_and_json() {
    use crate::qos::{verdict, Class, Fabric};
    use crate::wire::dcb::tests::{ack, answer_of, dscp_table, mlx5_answer};
    let pf = answer_of(
        &[
            mlx5_answer(0x08, &dscp_table(|d| Some((d >> 3) as u8))),
            ack(),
        ]
        .concat(),
    )
    .unwrap();
    let fabric = Fabric {
        priority: Some(3),
        lossless: true,
    };
    let o = opts("--netns /p");
    let mut wrong = rail(by_netlink());
    wrong.qos = Some(QosObs::Judged {
        pf: Some("enp12s0f0np0".into()),
        verdict: verdict(Class(41), Some(&pf), fabric),
        class: 41,
    });
    let mut off = rail(by_netlink());
    off.ifname = "net2".into();
    off.qos = Some(QosObs::Off);
    let pod = pod_with(vec![wrong, off], vec![]);
    let text = pod_text(&pod, &o, &[]);
    assert!(
        text.contains("  qos: class=41 dscp=10 ecn=1 pf=enp12s0f0np0 priority=1 pfc=off pause_sent=1001 pause_received=2001 verdict=wrong_priority: class 41"),
        "{text}"
    );
    assert!(text.contains("qos: not asked (qosCheck is off)"), "{text}");
    let j = serde_json::to_value(json::pod(&pod, &o, &[])).unwrap();
    let q = &j["interfaces"][0]["qos"];
    assert_eq!(
        (
            &q["verdict"],
            &q["priority"],
            &q["dscp"],
            &q["ecn"],
            &q["pfc"]
        ),
        (
            &json!("wrong_priority"),
            &json!(1),
            &json!(10),
            &json!(1),
            &json!(false)
        )
    );
    assert_eq!(
        (&q["pause_sent"], &q["pf"]),
        (&json!(1001), &json!("enp12s0f0np0"))
    );
    assert_eq!(j["interfaces"][1]["qos"]["asked"], json!(false));
}

#[test]
fn counters_takes_its_seconds_after_an_equals_sign_only() {
    use std::time::Duration;
    assert_eq!(opts("--counters").counters, Some(Duration::from_secs(1)));
    assert_eq!(
        opts("--counters=2.5 --json").counters,
        Some(Duration::from_millis(2500))
    );
    let o = opts("--counters --json --netns /run/netns/x --ifname net1");
    assert!(o.json && o.counters.is_some());
    let err = |s: &str| {
        let args: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
        parse_args(&args).unwrap_err()
    };
    for bad in [
        "--counters=0",
        "--counters=61",
        "--counters=-1",
        "--counters=1e1",
        "--counters=x",
    ] {
        assert!(err(bad).contains("--counters"), "{bad}");
    }
    assert!(err("--counters --counters").contains("twice"));
    assert!(err("--counters --traffic-class 41").contains("--traffic-class"));
    assert!(err("--counters --netns /run/netns/x --env").contains("--env"));
}
