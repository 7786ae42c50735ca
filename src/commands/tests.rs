//! ADD, CHECK and DEL as the plugin runs them, on the unit tests' host
//! (`syscall::tests::TestHost`) and a sysfs test tree (`rail::tests::Rig`):
//! no root, no netns made, the rules of the traffic class, `rdmaCmTos`, the
//! GID check and the exclusive mode asserted on the files they leave. The
//! same commands against the kernel, a real netns and the reference plugins
//! are tests/it's; on soft-RoCE, the kernel lane's.

use crate::cni::{code, CniError};
use crate::rail::tests::{class, Rig, DEV, GID, IFINDEX, IFNAME, IP};
use crate::syscall::tests::RdmaPort;
use serde_json::{json, Value};

fn add(rig: &Rig, extra: Value) -> Result<Value, CniError> {
    super::add::run(&rig.host, &rig.env("ADD"), &rig.conf(extra), &rig.node)
}

fn check(rig: &Rig, extra: Value) -> Result<(), CniError> {
    super::check::run(&rig.host, &rig.env("CHECK"), &rig.conf(extra), &rig.node)
}

fn del(rig: &Rig) -> Result<(), CniError> {
    super::del::run(&rig.host, &rig.env("DEL"), &rig.node)
}

/// Both owned settings, each RDMA netns mode, an unset class and a set one:
/// ADD writes what the config asks, with the sysctls, in one trip; CHECK
/// passes; DEL puts back exactly what was there, unset included, and drops
/// the record.
#[test]
fn add_writes_the_owned_settings_and_del_puts_back_exactly_what_was_there() {
    for (exclusive, tc) in [
        (false, ""),
        (false, "tclass=41"),
        (true, ""),
        (true, "tclass=41"),
    ] {
        let what = format!("exclusive {exclusive}, class before {tc:?}");
        let rig = Rig::new(
            &format!("both-{exclusive}-{}", tc.len()),
            tc,
            "0\n",
            exclusive,
        );
        rig.give_address();
        let before = class(tc);
        let conf = json!({"trafficClass": 106, "rdmaCmTos": 104});
        let out = add(&rig, conf.clone()).unwrap_or_else(|e| panic!("{what}: {}", e.msg));
        assert_eq!(
            out["ips"][0]["address"],
            format!("{IP}/16"),
            "{what}: prevResult passed on"
        );
        assert_eq!(class(&rig.tc()), Some(106), "{what}");
        assert_eq!(rig.tos().trim(), "104", "{what}");
        assert_eq!(
            rig.host
                .sysctl(&format!("net.ipv4.conf.{IFNAME}.arp_ignore")),
            "1"
        );
        assert_eq!(rig.host.sysctl("net.ipv4.conf.all.rp_filter"), "0");
        assert_eq!(
            rig.host
                .sysctl(&format!("net.ipv4.conf.{IFNAME}.arp_announce")),
            "2"
        );
        assert_eq!(
            rig.host.trips.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "{what}: one trip"
        );
        assert_eq!(rig.entries().len(), 1, "{what}: the rail is recorded");
        check(&rig, conf).unwrap_or_else(|e| panic!("{what}: CHECK: {}", e.msg));
        del(&rig).unwrap_or_else(|e| panic!("{what}: DEL: {}", e.msg));
        assert_eq!(class(&rig.tc()), before, "{what}: DEL restores exactly");
        assert_eq!(rig.tos().trim(), "0", "{what}: DEL restores the ToS");
        assert!(rig.entries().is_empty(), "{what}: the record is dropped");
        // A second DEL finds nothing recorded and succeeds.
        del(&rig).unwrap();
    }
}

/// CHECK names what drifted, with the setting's own code.
#[test]
fn check_reports_a_drifted_setting_with_its_code() {
    let rig = Rig::new("drift", "", "0\n", false);
    rig.give_address();
    let conf = json!({"trafficClass": 106, "rdmaCmTos": 104});
    add(&rig, conf.clone()).unwrap();
    rig.set_tc("tclass=0");
    let e = check(&rig, conf.clone()).unwrap_err();
    assert_eq!(e.code, code::TRAFFIC_CLASS, "{}", e.msg);
    assert!(e.msg.contains("is 0, expected 106"), "{}", e.msg);
    rig.set_tc("tclass=106");
    std::fs::write(rig.tos_path(), "0\n").unwrap();
    let e = check(&rig, conf.clone()).unwrap_err();
    assert_eq!(e.code, code::RDMA_CM_TOS, "{}", e.msg);
    std::fs::write(rig.tos_path(), "104\n").unwrap();
    rig.host
        .set_sysctl(&format!("net.ipv4.conf.{IFNAME}.arp_ignore"), "0");
    let e = check(&rig, conf).unwrap_err();
    assert_eq!(e.code, code::SYSCTL_DRIFT, "{}", e.msg);
}

/// The GID check: enforce refuses an ADD whose address has no RoCE v2 GID
/// at the index and leaves the node as it was; at the right index it
/// passes; `present` finds it elsewhere; CHECK judges the index the same way.
#[test]
fn the_gid_check_refuses_a_missing_gid_and_changes_nothing() {
    for exclusive in [false, true] {
        let rig = Rig::new(&format!("gid-{exclusive}"), "", "0\n", exclusive);
        let before = rig.snapshot();
        let conf = json!({"trafficClass": 106, "gidCheck": "enforce", "gidTimeoutMs": 0});
        let e = add(&rig, conf.clone()).unwrap_err();
        assert_eq!(e.code, code::GID_CHECK, "{}", e.msg);
        assert!(
            e.msg.contains("index 3 should hold the RoCE v2 GID"),
            "{}",
            e.msg
        );
        assert_eq!(
            rig.snapshot(),
            before,
            "exclusive {exclusive}: the node is as it was"
        );
        assert!(rig.entries().is_empty());
        // The GID at index 5 instead: `present` takes it, and records it.
        rig.set_gid(5, GID, "RoCE v2\n");
        assert_eq!(add(&rig, conf.clone()).unwrap_err().code, code::GID_CHECK);
        add(
            &rig,
            json!({"trafficClass": 106, "gidCheck": "present", "gidTimeoutMs": 0}),
        )
        .unwrap();
        assert_eq!(class(&rig.tc()), Some(106));
        // CHECK with enforce judges index 3 again.
        let e = check(&rig, conf).unwrap_err();
        assert_eq!(e.code, code::GID_CHECK, "{}", e.msg);
        del(&rig).unwrap();
        assert_eq!(class(&rig.tc()), None);
    }
}

/// A pod netdev that is no device's (a veth) gets no device tuned, and a
/// config that names another VF is refused: the device is the one the pod's
/// side shows, never the config's.
#[test]
fn the_device_is_the_pods_netdevs_never_the_configs() {
    let rig = Rig::new("veth", "tclass=41", "0\n", false);
    rig.give_address();
    let before = rig.snapshot();
    let e = add(
        &rig,
        json!({"trafficClass": 106, "deviceID": "0000:0c:00.3"}),
    )
    .unwrap_err();
    assert_eq!(e.code, code::RDMA_DEVICE, "{}", e.msg);
    assert!(e.msg.contains("0000:0c:00.3"), "{}", e.msg);
    assert_eq!(rig.snapshot(), before);
    let pod = rig
        .tree
        .join(format!("netns/{}/class/net/{IFNAME}", rig.ns.id().ino));
    std::fs::remove_dir_all(&pod).unwrap();
    let e = add(&rig, json!({"trafficClass": 106})).unwrap_err();
    assert_eq!(e.code, code::RDMA_DEVICE, "{}", e.msg);
    assert_eq!(rig.snapshot(), before);
}

/// RDMA netlink's answer names the port where the pod's side shows no
/// parent, and only for the netdev of the pod's index AND name; an
/// `rdmaPort` that is not that port is refused.
#[test]
fn rdma_netlink_names_the_port_by_index_and_name() {
    let mut rig = Rig::new("nldev", "", "0\n", false);
    rig.give_address();
    let pod = rig
        .tree
        .join(format!("netns/{}/class/net/{IFNAME}", rig.ns.id().ino));
    std::fs::remove_dir_all(&pod).unwrap();
    // A port whose netdev has the pod's name but another index: another
    // netns's netdev, not the pod's.
    rig.host.rdma_ports.push(RdmaPort {
        ifindex: IFINDEX + 1,
        ifname: IFNAME.into(),
        device: DEV.into(),
        port: 1,
    });
    let before = rig.snapshot();
    let e = add(&rig, json!({"trafficClass": 106})).unwrap_err();
    assert_eq!(e.code, code::RDMA_DEVICE, "{}", e.msg);
    assert!(e.msg.contains("none with it as its netdev"), "{}", e.msg);
    assert_eq!(rig.snapshot(), before);
    rig.host.rdma_ports[0].ifindex = IFINDEX;
    let e = add(&rig, json!({"trafficClass": 106, "rdmaPort": 2})).unwrap_err();
    assert_eq!(e.code, code::RDMA_DEVICE, "{}", e.msg);
    assert_eq!(rig.snapshot(), before);
    add(&rig, json!({"trafficClass": 106})).unwrap();
    assert_eq!(class(&rig.tc()), Some(106));
    del(&rig).unwrap();
    assert_eq!(class(&rig.tc()), None);
}
