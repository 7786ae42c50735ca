//! The network config's unit tests: every key's rules, rail profiles, a
//! pod's pick of its class, strays.

use super::*;
use serde_json::json;

const NODE: &str = "/etc/cni/roce-tune/node.json";

fn parse(v: Value) -> CniResult<NetConf> {
    NetConf::parse(v.to_string().as_bytes(), Path::new(NODE))
}

fn base() -> Value {
    json!({"cniVersion": "1.0.0", "name": "rdma-vf", "type": "roce-tune"})
}

fn with(key: &str, val: Value) -> Value {
    let mut b = base();
    b[key] = val;
    b
}

#[test]
fn defaults_match_design() {
    let c = parse(base()).unwrap();
    assert_eq!(c.sysctls.len(), 6);
    assert_eq!(c.sysctls[0].key, "net.ipv4.conf.all.rp_filter");
    assert_eq!(c.traffic_class, None);
    assert_eq!(c.gid_index, 3);
    assert_eq!(c.gid_check, GidCheck::Enforce);
    assert_eq!(c.gid_timeout_ms, 3000);
    assert_eq!(c.rdma_port, None);
    assert_eq!(c.log_level, LogLevel::Info);
    assert!(c.needs_rdma(), "gidCheck enforce needs the device");
}

#[test]
fn fixture_stdin_parses() {
    let c = NetConf::parse(
        include_bytes!("../../../tests/data/roce-tune-add-stdin.json"),
        Path::new(NODE),
    )
    .unwrap();
    assert_eq!(c.traffic_class, Some(41));
    assert_eq!(c.device_id.unwrap().as_str(), "0000:0c:00.2");
    assert!(c.prev_result.is_some());
}

#[test]
fn empty_sysctl_map_sets_none_and_given_map_replaces_defaults() {
    assert!(parse(with("sysctl", json!({}))).unwrap().sysctls.is_empty());
    let c = parse(with(
        "sysctl",
        json!({"net.ipv4.conf.IFNAME.arp_ignore": "2"}),
    ))
    .unwrap();
    assert_eq!(
        c.sysctls,
        vec![SysctlSetting {
            key: "net.ipv4.conf.IFNAME.arp_ignore".into(),
            value: "2".into()
        }]
    );
}

#[test]
fn unknown_keys_parse_and_are_kept_for_the_command_to_judge() {
    let mut v = base();
    v["runtimeConfig"] = json!({"x": 1});
    v["somethingNew"] = json!([1, 2]);
    let c = parse(v).unwrap();
    assert_eq!(c.strays.len(), 1);
    assert_eq!(c.strays[0].key, "somethingNew");
    assert!(c.refuse_typos().is_ok(), "another tool's key is no typo");
    let w = c.strays_warning().unwrap();
    assert!(
        w.starts_with("network config key \"somethingNew\" is neither roce-tune's nor one the runtime adds: ignored (roce-tune's keys: sysctl, trafficClass,"),
        "{w}"
    );
    // The runtime's keys, the spec's reserved prefix and the fixtures
    // of the field warn about nothing.
    let c = NetConf::parse(
        include_bytes!("../../../tests/data/roce-tune-add-stdin.json"),
        Path::new(NODE),
    )
    .unwrap();
    assert_eq!((c.strays.len(), c.strays_warning()), (0, None));
    let mut v = base();
    for (k, val) in [
        ("capabilities", json!({"CNIDeviceInfoFile": true})),
        ("args", json!({"cni": {}})),
        ("cni.dev/valid-attachments", json!([])),
        ("cni.dev/a-later-one", json!(1)),
    ] {
        v[k] = val;
    }
    assert_eq!(parse(v).unwrap().strays, []);
}

#[test]
fn a_typo_of_a_key_is_refused_naming_every_typo_and_what_was_meant() {
    let mut v = base();
    v["trafficclass"] = json!(41);
    v["gidindex"] = json!(1);
    v["vlan"] = json!(0);
    let c = parse(v).unwrap();
    assert_eq!(c.traffic_class, None, "the typo is not read");
    assert_eq!(c.gid_index, DEFAULT_GID_INDEX);
    let e = c.refuse_typos().unwrap_err();
    assert_eq!(e.code, 7);
    assert_eq!(
        e.msg,
        "network config keys roce-tune does not know, one edit (or a letter's case) from one it does: \"gidindex\": did you mean \"gidIndex\"; \"trafficclass\": did you mean \"trafficClass\"; fix the key (ignored, it would leave that setting at its default)"
    );
    // Where only a warning is due, it says the same, beside the rest.
    let w = c.strays_warning().unwrap();
    assert!(
        w.starts_with("network config keys \"gidindex\" (did you mean \"gidIndex\"?), \"trafficclass\" (did you mean \"trafficClass\"?), \"vlan\" are neither"),
        "{w}"
    );
    // A host-path key misspelt is a typo too, and still a node setting.
    let e = parse(with("statedir", json!("/run/x")))
        .unwrap()
        .refuse_typos()
        .unwrap_err();
    assert!(
        e.msg
            .contains("\"statedir\": did you mean \"stateDir\"; stateDir is a node setting"),
        "{}",
        e.msg
    );
}

#[test]
fn the_warning_names_a_few_strays_and_counts_the_rest() {
    let mut v = base();
    for i in 0..20 {
        v[format!("x-{i:02}")] = json!(i);
    }
    let w = parse(v).unwrap().strays_warning().unwrap();
    assert!(w.contains("\"x-07\", and 12 more are neither"), "{w}");
    assert!(!w.contains("x-08"), "{w}");
}

#[test]
fn a_profile_names_the_key_a_typo_meant() {
    let e = NetConf::from_profile(&json!({"trafficclass": 41}), "draRails", None).unwrap_err();
    assert!(
        e.msg.starts_with("unknown key \"trafficclass\" (did you mean \"trafficClass\"?): a rail profile's keys are sysctl, trafficClass,"),
        "{}",
        e.msg
    );
    // A network config's key a profile may not carry is no typo there.
    let e = NetConf::from_profile(&json!({"deviceId": "x"}), "draRails", None).unwrap_err();
    assert!(e.msg.starts_with("unknown key \"deviceId\": "), "{}", e.msg);
}

#[test]
fn bad_values_are_code_7_and_name_the_key() {
    let cases: Vec<(&str, Value)> = vec![
        ("trafficClass", json!(256)),
        ("trafficClass", json!(-1)),
        ("trafficClass", json!("41")),
        ("trafficClass", json!(4.5)),
        ("gidIndex", json!(-3)),
        ("gidIndex", json!(5000)),
        ("gidCheck", json!("maybe")),
        ("gidTimeoutMs", json!(600000)),
        ("placementCheck", json!("strict")),
        ("gdrLevel", json!("NVL")),
        ("gdrLevel", json!("pxb")),
        ("rdmaPort", json!(0)),
        ("deviceID", json!("0c:00.2")),
        ("pciBusID", json!("0000:0c:00.9")),
        ("deviceID", json!(12)),
        ("stateDir", json!("/run/cni/roce-tune")),
        ("sysfsRoot", json!("/sys")),
        ("logFile", json!("/var/log/x")),
        ("stateDir", json!(null)),
        ("name", json!("a\nb")),
        ("name", json!("-x")),
        ("name", json!("")),
        ("name", json!(7)),
        ("logLevel", json!("loud")),
        ("sysctl", json!(["a"])),
        ("sysctl", json!({"net.ipv4.ip_forward": 1})),
        ("prevResult", json!("x")),
    ];
    for (key, val) in cases {
        let e = parse(with(key, val.clone())).unwrap_err();
        assert_eq!(e.code, 7, "{key}={val}: {e}");
        assert!(
            e.msg.contains(key),
            "{key}={val}: message {:?} does not name the key",
            e.msg
        );
    }
}

#[test]
fn host_path_keys_say_where_they_go_and_type_is_not_checked() {
    let e = parse(with("stateDir", json!("/run/x"))).unwrap_err();
    assert!(
        e.msg.contains("node setting") && e.msg.contains("/etc/cni/roce-tune/node.json"),
        "{}",
        e.msg
    );
    assert!(parse(with("type", json!("roce-tune-v2"))).is_ok());
    let mut v = base();
    v.as_object_mut().unwrap().remove("name");
    assert_eq!(parse(v).unwrap_err().code, 7);
    assert!(parse(with("name", json!("rail-1.a_b"))).is_ok());
}

#[test]
fn version_and_decode_errors() {
    assert_eq!(
        parse(with("cniVersion", json!("0.2.0"))).unwrap_err().code,
        1
    );
    let mut v = base();
    v.as_object_mut().unwrap().remove("cniVersion");
    assert_eq!(parse(v).unwrap_err().code, 7);
    assert_eq!(
        NetConf::parse(b"{not json", Path::new(NODE))
            .unwrap_err()
            .code,
        6
    );
    assert_eq!(
        NetConf::parse(
            br#"{"cniVersion":"1.0.0","cniVersion":"1.0.0"}"#,
            Path::new(NODE)
        )
        .unwrap_err()
        .code,
        6
    );
    assert_eq!(NetConf::parse(b"[]", Path::new(NODE)).unwrap_err().code, 7);
    assert_eq!(
        NetConf::parse(&vec![b' '; MAX_STDIN_BYTES + 1], Path::new(NODE))
            .unwrap_err()
            .code,
        7
    );
}

#[test]
fn device_id_and_pci_bus_id_must_agree() {
    let mut v = with("deviceID", json!("0000:0c:00.2"));
    v["pciBusID"] = json!("0000:0C:00.2");
    assert_eq!(
        parse(v.clone()).unwrap().device_id.unwrap().as_str(),
        "0000:0c:00.2"
    );
    v["pciBusID"] = json!("0000:0c:00.3");
    assert_eq!(parse(v).unwrap_err().code, 7);
    assert_eq!(
        parse(with("pciBusID", json!("0000:3b:01.7")))
            .unwrap()
            .device_id
            .unwrap()
            .as_str(),
        "0000:3b:01.7"
    );
}

#[test]
fn sysctl_keys() {
    for ok in [
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.IFNAME.arp_filter",
        "net.core.somaxconn",
    ] {
        assert!(validate_sysctl_key(ok).is_ok(), "{ok}");
    }
    for bad in [
        "kernel.panic",
        "net",
        "net.",
        "net..ipv4",
        "net.ipv4/../../kernel/x",
        "net.ipv4.conf.a/b.x",
        "net.ipv4. .x",
        "vm.swappiness",
        "netx.y",
        "",
    ] {
        let e = validate_sysctl_key(bad).unwrap_err();
        assert_eq!(e.code, 7, "{bad:?}");
    }
}

#[test]
fn sysctl_values() {
    assert!(parse(with(
        "sysctl",
        json!({"net.core.rmem": "4096 87380\t6291456"})
    ))
    .is_ok());
    for bad in ["", "1\n2", "\u{0}"] {
        assert_eq!(
            parse(with("sysctl", json!({"net.core.x": bad})))
                .unwrap_err()
                .code,
            7,
            "{bad:?}"
        );
    }
}

#[test]
fn gc_attachments_both_keys() {
    let a = json!([{"containerID": "c1", "ifname": "net1"}]);
    assert_eq!(
        parse(with("cni.dev/valid-attachments", a.clone()))
            .unwrap()
            .valid_attachments
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        parse(with("cni.dev/attachments", a))
            .unwrap()
            .valid_attachments
            .unwrap()[0]
            .ifname,
        "net1"
    );
    assert_eq!(
        parse(with(
            "cni.dev/valid-attachments",
            json!([{"containerID": 1}])
        ))
        .unwrap_err()
        .code,
        7
    );
}

#[test]
fn pci_addr_forms() {
    assert!(PciAddr::parse("0000:0c:00.2").is_some());
    assert!(PciAddr::parse("0000:af:1f.7").is_some());
    for bad in [
        "0000:0c:20.0",
        "000:0c:00.2",
        "0000:0c:00.8",
        "0000-0c-00.2",
        "0000:0g:00.2",
        "../../x/y.z",
    ] {
        assert!(PciAddr::parse(bad).is_none(), "{bad}");
    }
}
