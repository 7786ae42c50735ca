//! The state dir's unit tests: names, formats and migrations, the store,
//! the owner index and the locks.

use super::*;
use crate::netns::NsId;
use crate::rdma::reach::Reach;
use serde_json::json;

/// A format 4 entry of a rail that owns its class (other modules' tests
/// start from it too).
pub(crate) fn entry(cid: &str) -> Entry {
    Entry {
        version: FORMAT,
        network: "rdma-vf".into(),
        container_id: cid.into(),
        ifname: "net1".into(),
        netns: "/var/run/netns/p".into(),
        netns_id: Some(NsId {
            dev: 4,
            ino: 4026532000,
        }),
        reach: Reach::Host,
        device: "mlx5_2".into(),
        port: 1,
        pci: Some("0000:0c:00.2".into()),
        guid: Some("506b:4b03:00f3:8a3e".into()),
        owned: [(
            "trafficClass".to_string(),
            Owned {
                original: None,
                written: 41,
            },
        )]
        .into(),
        device_info: None,
        pod: None,
        placement: None,
        gid: Some("0000:0000:0000:0000:0000:ffff:c0a8:0022".into()),
        rail: Some(RailRecord {
            gid_index: Some(3),
            traffic_class: Some(41),
            rdma_cm_tos: None,
        }),
        created_ns: 1,
    }
}

#[test]
fn names_round_trip_and_refuse_foreign_files() {
    assert_eq!(entry_name("c1", "net1"), "c1:net1.state");
    assert_eq!(
        parse_entry_name("c1:net1.state"),
        Some(("c1".into(), "net1".into()))
    );
    assert_eq!(
        parse_entry_name("c1:net1.json"),
        Some(("c1".into(), "net1".into())),
        "version 1 files are still ours"
    );
    for bad in [
        "x.state",
        "c1:net1.state.corrupt",
        ".c1:net1.state.tmp1",
        "../c:n.state",
        "-c:n.state",
        "c:a/b.state",
    ] {
        assert_eq!(parse_entry_name(bad), None, "{bad}");
    }
}

#[test]
fn versions_decide_how_an_entry_is_read() {
    let e = entry("c1");
    let bytes = serde_json::to_vec(&e).unwrap();
    assert_eq!(decode(&bytes).unwrap(), e);
    let v1 = json!({"version": 1, "network": "rdma-vf", "containerId": "c1", "ifname": "net1",
        "netns": "/var/run/netns/p", "sysfsRoot": "/evil", "exclusive": false,
        "device": "mlx5_2", "port": 1, "original": 106, "written": 41, "created": 7});
    let old = decode(v1.to_string().as_bytes()).unwrap();
    assert_eq!(
        old.owned["trafficClass"],
        Owned {
            original: Some(106),
            written: 41
        }
    );
    assert_eq!(old.netns_id, None);
    assert_eq!(old.created_ns, 7_000_000_000);
    // Format 2: each setting a field of its own, `exclusive` for the reach.
    let mut v2 = serde_json::to_value(&e).unwrap();
    let m = v2.as_object_mut().unwrap();
    for new_in_3_or_4 in [
        "reach",
        "deviceInfo",
        "owned",
        "pod",
        "placement",
        "gid",
        "rail",
    ] {
        m.remove(new_in_3_or_4);
    }
    v2["version"] = json!(2);
    v2["exclusive"] = json!(true);
    v2["trafficClass"] = json!({"original": null, "written": 41});
    v2["rdmaCmTos"] = json!({"original": 0, "written": 106});
    let two = decode(v2.to_string().as_bytes()).unwrap();
    assert_eq!((two.version, two.reach), (2, Reach::Pod));
    assert_eq!(two.owned["trafficClass"], e.owned["trafficClass"]);
    assert_eq!(two.owned["rdmaCmTos"].written, 106);
    let newer = json!({"version": 5, "whatever": "a later binary wrote"});
    assert!(matches!(
        decode(newer.to_string().as_bytes()),
        Err(ReadError::Newer(what)) if what == "format 5"
    ));
    // A setting only a newer binary knows: left alone as newer, not corrupt.
    let mut later = serde_json::to_value(&e).unwrap();
    later["owned"]["laterSetting"] = json!({"original": 1500, "written": 9000});
    assert!(matches!(
        decode(later.to_string().as_bytes()),
        Err(ReadError::Newer(what)) if what == "the setting laterSetting"
    ));
    // serde would quote the bad value; the reason must not.
    let mut bad = serde_json::to_value(&e).unwrap();
    bad["port"] = json!("root:$6$secret");
    match decode(bad.to_string().as_bytes()) {
        Err(ReadError::Corrupt(why)) => assert!(!why.contains("secret"), "{why}"),
        other => panic!("{other:?}"),
    }
    let mut bad = serde_json::to_value(&e).unwrap();
    bad["device"] = json!("../../etc");
    assert!(matches!(
        decode(bad.to_string().as_bytes()),
        Err(ReadError::Corrupt(_))
    ));
}

/// Format 4 records a rail that owns nothing; format 3 (no `rail`) is
/// read as it is; an entry with neither a rail nor anything to give back
/// is not one of ours.
#[test]
fn a_rail_record_alone_is_an_entry() {
    let mut rail_only = entry("c1");
    rail_only.owned.clear();
    let bytes = serde_json::to_vec(&rail_only).unwrap();
    assert_eq!(decode(&bytes).unwrap(), rail_only);
    let mut v3 = serde_json::to_value(entry("c1")).unwrap();
    v3["version"] = json!(3);
    v3.as_object_mut().unwrap().remove("rail");
    let three = decode(v3.to_string().as_bytes()).unwrap();
    assert_eq!((three.version, three.rail), (3, None));
    assert_eq!(three.owned["trafficClass"].written, 41);
    let mut nothing = rail_only.clone();
    nothing.rail = None;
    assert!(matches!(
        decode(&serde_json::to_vec(&nothing).unwrap()),
        Err(ReadError::Corrupt(why)) if why.contains("no rail")
    ));
    let mut far = serde_json::to_value(&rail_only).unwrap();
    far["rail"]["gidIndex"] = json!(1024);
    assert!(matches!(
        decode(far.to_string().as_bytes()),
        Err(ReadError::Corrupt(why)) if why.contains("GID index")
    ));
    let mut odd = serde_json::to_value(&rail_only).unwrap();
    odd["rail"]["ncclIbHca"] = json!("mlx5_0");
    assert!(matches!(
        decode(odd.to_string().as_bytes()),
        Err(ReadError::Corrupt(_))
    ));
}

#[test]
fn co_owners_are_matched_by_pci_function_before_name() {
    let a = entry("c1");
    let mut b = entry("c2");
    b.device = "mlx5_9".into();
    assert!(a.same_device(&b), "renamed: the PCI function decides");
    b.pci = Some("0000:0c:00.3".into());
    b.device = "mlx5_2".into();
    assert!(!a.same_device(&b), "the name moved to another function");
    assert_eq!(a.lock_key(), "0000:0c:00.2.1");
}
