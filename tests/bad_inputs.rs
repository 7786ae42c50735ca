//! Bad inputs: each one is refused with its exact CNI error code, a message
//! naming the problem, exit status 1 and a spec error object on stdout, and
//! leaves the pod's sysctls exactly as they were (validation comes before
//! any change, DESIGN 2.2).

mod common;
use common::*;
use serde_json::{json, Value};

const ADDR: &str = "192.168.0.34/16";
const SUPPORTED: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// The six sysctls roce-tune sets by default, and its values for them.
fn snapshot(pod: &Pod) -> Vec<String> {
    rail_sysctls("net1")
        .iter()
        .map(|(k, _)| pod.sysctl(k))
        .collect()
}

/// A pod where none of the six holds roce-tune's value, so any write shows.
/// The kernel's defaults differ from ours except rp_filter (0 in a new netns).
fn pod() -> Pod {
    let pod = Pod::new("net1", Some(ADDR));
    pod.set_sysctl("net.ipv4.conf.all.rp_filter", "2");
    pod.set_sysctl("net.ipv4.conf.net1.rp_filter", "1");
    for ((k, ours), was) in rail_sysctls("net1").iter().zip(snapshot(&pod)) {
        assert_ne!(*ours, was.as_str(), "{k} already holds roce-tune's value");
    }
    pod
}

fn base(pod: &Pod, state: &StateDirPath) -> Value {
    write_node_config(state, None, json!({}));
    json!({
        "cniVersion": "1.0.0",
        "name": "rail",
        "type": "roce-tune",
        "gidCheck": "off",
        "prevResult": prev_result("1.0.0", "net1", &pod.path(), &[ADDR]),
    })
}

enum Stdin {
    Raw(Vec<u8>),
    /// The base config with `f` applied.
    Conf(fn(&mut Value)),
}

struct Case {
    name: &'static str,
    /// Env overrides of the ADD defaults; "-" removes the variable.
    env: &'static [(&'static str, &'static str)],
    stdin: Stdin,
    code: u64,
    needle: &'static str,
}

fn conf(name: &'static str, f: fn(&mut Value), code: u64, needle: &'static str) -> Case {
    Case {
        name,
        env: &[],
        stdin: Stdin::Conf(f),
        code,
        needle,
    }
}

fn env(
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    code: u64,
    needle: &'static str,
) -> Case {
    Case {
        name,
        env,
        stdin: Stdin::Conf(|_| {}),
        code,
        needle,
    }
}

fn raw(name: &'static str, stdin: Vec<u8>, code: u64, needle: &'static str) -> Case {
    Case {
        name,
        env: &[],
        stdin: Stdin::Raw(stdin),
        code,
        needle,
    }
}

fn cases() -> Vec<Case> {
    let big = {
        let mut v = br#"{"cniVersion":"1.0.0","pad":""#.to_vec();
        v.resize(v.len() + (1 << 20), b'x');
        v.extend_from_slice(b"\"}");
        v
    };
    vec![
        // Decoding (6).
        raw(
            "malformed JSON",
            br#"{"cniVersion": "1.0.0","#.to_vec(),
            6,
            "not valid JSON: EOF while parsing",
        ),
        raw(
            "non-UTF-8 stdin",
            b"{\"cniVersion\":\"1.0.0\",\"name\":\"r\xff\xfe\"}".to_vec(),
            6,
            "not UTF-8 (invalid byte at offset 31)",
        ),
        raw(
            "duplicate keys",
            br#"{"cniVersion":"1.0.0","gidCheck":"off","gidCheck":"enforce"}"#.to_vec(),
            6,
            "duplicate key \"gidCheck\"",
        ),
        raw("empty stdin", vec![], 6, "network config on stdin is empty"),
        // Environment (4; 3 for a netns that does not exist).
        env(
            "missing CNI_COMMAND",
            &[("CNI_COMMAND", "-")],
            4,
            "CNI_COMMAND is not set",
        ),
        env(
            "empty CNI_COMMAND",
            &[("CNI_COMMAND", "")],
            4,
            "CNI_COMMAND is not set",
        ),
        env(
            "unknown CNI_COMMAND",
            &[("CNI_COMMAND", "ATTACH")],
            4,
            "\"ATTACH\"",
        ),
        env(
            "missing CNI_CONTAINERID",
            &[("CNI_CONTAINERID", "")],
            4,
            "CNI_CONTAINERID",
        ),
        env("missing CNI_NETNS", &[("CNI_NETNS", "-")], 4, "CNI_NETNS"),
        env("missing CNI_IFNAME", &[("CNI_IFNAME", "")], 4, "CNI_IFNAME"),
        env(
            "container id with '/'",
            &[("CNI_CONTAINERID", "ab/../c")],
            4,
            "CNI_CONTAINERID \"ab/../c\"",
        ),
        env(
            "container id starting with '-'",
            &[("CNI_CONTAINERID", "-abc")],
            4,
            "CNI_CONTAINERID \"-abc\"",
        ),
        env(
            "ifname ../x",
            &[("CNI_IFNAME", "../x")],
            4,
            "CNI_IFNAME \"../x\"",
        ),
        env(
            "ifname a/b",
            &[("CNI_IFNAME", "a/b")],
            4,
            "CNI_IFNAME \"a/b\"",
        ),
        env(
            "ifname of 16 chars",
            &[("CNI_IFNAME", "sixteen_chars_xx")],
            4,
            "CNI_IFNAME \"sixteen_chars_xx\"",
        ),
        env(
            "relative CNI_NETNS",
            &[("CNI_NETNS", "var/run/netns/x")],
            4,
            "must be an absolute path",
        ),
        env(
            "netns that does not exist",
            &[("CNI_NETNS", "/var/run/netns/roce-tune-no-such-ns")],
            3,
            "does not exist",
        ),
        env(
            "netns that is a plain file",
            &[("CNI_NETNS", "/etc/hostname")],
            4,
            "is not a network namespace",
        ),
        env(
            "CNI_ARGS without '='",
            &[("CNI_ARGS", "IgnoreUnknown=1;junk")],
            4,
            "CNI_ARGS pair \"junk\"",
        ),
        // Version (1) and config (7).
        conf(
            "cniVersion 0.2.0",
            |c| c["cniVersion"] = json!("0.2.0"),
            1,
            "\"0.2.0\" is not supported",
        ),
        conf(
            "missing cniVersion",
            |c| {
                c.as_object_mut().unwrap().remove("cniVersion");
            },
            7,
            "cniVersion is missing",
        ),
        conf(
            "trafficClass 256",
            |c| c["trafficClass"] = json!(256),
            7,
            "trafficClass is 256",
        ),
        conf(
            "trafficClass -1",
            |c| c["trafficClass"] = json!(-1),
            7,
            "trafficClass is -1",
        ),
        conf(
            "trafficClass as a string",
            |c| c["trafficClass"] = json!("41"),
            7,
            "trafficClass must be a whole number",
        ),
        conf(
            "gidIndex -1",
            |c| c["gidIndex"] = json!(-1),
            7,
            "gidIndex is -1",
        ),
        conf(
            "gidCheck maybe",
            |c| c["gidCheck"] = json!("maybe"),
            7,
            "gidCheck \"maybe\"",
        ),
        conf(
            "gidTimeoutMs too large",
            |c| c["gidTimeoutMs"] = json!(3_600_000),
            7,
            "gidTimeoutMs is 3600000",
        ),
        conf(
            "rdmaPort 0",
            |c| c["rdmaPort"] = json!(0),
            7,
            "rdmaPort is 0",
        ),
        conf(
            "deviceID malformed",
            |c| c["deviceID"] = json!("0c:00.2"),
            7,
            "deviceID \"0c:00.2\"",
        ),
        conf(
            "deviceID and pciBusID disagree",
            |c| {
                c["deviceID"] = json!("0000:0c:00.2");
                c["pciBusID"] = json!("0000:0c:00.3");
            },
            7,
            "name different devices",
        ),
        conf(
            "sysctl outside net.",
            |c| c["sysctl"] = json!({"kernel.panic": "1"}),
            7,
            "\"kernel.panic\" is outside net.",
        ),
        conf(
            "sysctl key with a traversal",
            |c| c["sysctl"] = json!({"net.ipv4.conf.IFNAME/../../../kernel/x": "1"}),
            7,
            "has a '/' in a component",
        ),
        conf(
            "sysctl key with an empty component",
            |c| c["sysctl"] = json!({"net..x": "1"}),
            7,
            "\"net..x\" has an empty component",
        ),
        conf(
            "sysctl value with a newline",
            |c| {
                c["sysctl"] = json!({"net.ipv4.conf.IFNAME.arp_ignore": "1\nnet.ipv4.ip_forward=1"})
            },
            7,
            "printable characters",
        ),
        conf(
            "sysctl value not a string",
            |c| c["sysctl"] = json!({"net.ipv4.conf.IFNAME.arp_ignore": 1}),
            7,
            "must be a string",
        ),
        conf(
            "missing prevResult",
            |c| {
                c.as_object_mut().unwrap().remove("prevResult");
            },
            7,
            "prevResult is missing",
        ),
        conf(
            "prevResult with a bad CIDR",
            |c| c["prevResult"]["ips"][0]["address"] = json!("192.168.0.300/16"),
            7,
            "prevResult.ips[0].address",
        ),
        conf(
            "prevResult ips[].interface out of range",
            |c| c["prevResult"]["ips"][0]["interface"] = json!(1),
            7,
            "prevResult.ips[0].interface",
        ),
        conf(
            "stateDir in the network config",
            |c| c["stateDir"] = json!("/run/roce-tune"),
            7,
            "stateDir is a node setting",
        ),
        conf(
            "name with a newline",
            |c| c["name"] = json!("rail\nforged"),
            7,
            "is not a network name",
        ),
        raw("stdin over 1 MiB", big, 7, "more than the 1048576"),
    ]
}

fn check_refusal(r: &Run, case: &str, code: u64, needle: &str) {
    assert_eq!(r.status, 1, "{case}: exit status: {r:?}");
    let out: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{case}: stdout is not JSON ({e}): {:?}", r.stdout));
    assert_eq!(out["code"], code, "{case}: {out}");
    let v = out["cniVersion"].as_str().unwrap_or_default();
    assert!(SUPPORTED.contains(&v), "{case}: error cniVersion {v:?}");
    let msg = out["msg"].as_str().unwrap_or_default();
    assert!(
        msg.contains(needle),
        "{case}: message {msg:?} lacks {needle:?}"
    );
}

#[test]
fn bad_inputs_are_refused_without_touching_the_pod() {
    if !have_root("bad_inputs_are_refused_without_touching_the_pod") {
        return;
    }
    let pod = pod();
    let state = StateDirPath::new();
    let before = snapshot(&pod);
    let cases = cases();
    assert!(cases.len() >= 25);
    for case in cases {
        let netns = pod.path();
        let mut vars: Vec<(&str, &str)> = vec![
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "bad1"),
            ("CNI_NETNS", &netns),
            ("CNI_IFNAME", "net1"),
            ("CNI_ARGS", ""),
            ("CNI_PATH", "/usr/lib/cni"),
        ];
        for (k, v) in case.env {
            vars.retain(|(name, _)| name != k);
            if *v != "-" {
                vars.push((k, v));
            }
        }
        let stdin = match &case.stdin {
            Stdin::Raw(b) => b.clone(),
            Stdin::Conf(f) => {
                let mut c = base(&pod, &state);
                f(&mut c);
                c.to_string().into_bytes()
            }
        };
        let r = vars
            .iter()
            .fold(Exec::new(BIN), |e, (k, v)| e.env(k, v))
            .stdin(stdin)
            .run();
        check_refusal(&r, case.name, case.code, case.needle);
        if let Stdin::Conf(_) = case.stdin {
            // The config is readable, so the error speaks its version.
            let want = if case.code == 1 || case.name == "missing cniVersion" {
                "1.1.0"
            } else {
                "1.0.0"
            };
            assert_eq!(r.json()["cniVersion"], want, "{}", case.name);
        }
        assert_eq!(
            snapshot(&pod),
            before,
            "{}: the pod's sysctls changed",
            case.name
        );
        assert!(
            state.entries().is_empty(),
            "{}: state left behind",
            case.name
        );
    }
}

/// A key that passes validation but does not exist in the kernel fails when
/// applied; what the same ADD wrote before it is put back.
#[test]
fn unknown_kernel_knob_fails_and_earlier_writes_are_undone() {
    if !have_root("unknown_kernel_knob_fails_and_earlier_writes_are_undone") {
        return;
    }
    let pod = pod();
    let state = StateDirPath::new();
    let before = snapshot(&pod);
    let mut c = base(&pod, &state);
    // serde_json's Map is a BTreeMap: applied in key order, so the three
    // valid keys (each of which differs in the pod now) go first.
    c["sysctl"] = json!({
        "net.ipv4.conf.IFNAME.accept_local": "1",
        "net.ipv4.conf.IFNAME.arp_announce": "2",
        "net.ipv4.conf.IFNAME.arp_ignore": "1",
        "net.ipv4.conf.IFNAME.no_such_knob": "1",
        "net.ipv4.conf.IFNAME.rp_filter": "0",
    });
    let r = run_plugin(
        &state,
        "ADD",
        "bad2",
        &pod.path(),
        "net1",
        c.to_string().as_bytes(),
    );
    check_refusal(&r, "no_such_knob", 7, "net.ipv4.conf.net1.no_such_knob");
    assert_eq!(
        snapshot(&pod),
        before,
        "the writes before the failing key were not undone"
    );

    // The same map without the bad key does write: the undo above was real.
    c["sysctl"]
        .as_object_mut()
        .unwrap()
        .remove("net.ipv4.conf.IFNAME.no_such_knob");
    run_plugin(
        &state,
        "ADD",
        "bad2",
        &pod.path(),
        "net1",
        c.to_string().as_bytes(),
    )
    .ok();
    assert_eq!(pod.sysctl("net.ipv4.conf.net1.arp_announce"), "2");
    assert_eq!(pod.sysctl("net.ipv4.conf.net1.accept_local"), "1");
}

/// DEL and CHECK refuse the env errors too (DEL without a netns is fine, but
/// not without an interface name).
#[test]
fn del_and_check_validate_their_env() {
    if !have_root("del_and_check_validate_their_env") {
        return;
    }
    let pod = pod();
    let state = StateDirPath::new();
    let c = base(&pod, &state).to_string();
    let before = snapshot(&pod);
    let r = run_plugin(&state, "DEL", "bad3", &pod.path(), "", c.as_bytes());
    check_refusal(&r, "DEL without CNI_IFNAME", 4, "CNI_IFNAME");
    let r = run_plugin(&state, "DEL", "", &pod.path(), "net1", c.as_bytes());
    check_refusal(&r, "DEL without CNI_CONTAINERID", 4, "CNI_CONTAINERID");
    let r = run_plugin(&state, "CHECK", "bad3", "", "net1", c.as_bytes());
    check_refusal(&r, "CHECK without CNI_NETNS", 4, "CNI_NETNS");
    let r = run_plugin(
        &state,
        "CHECK",
        "bad3",
        "/var/run/netns/roce-tune-no-such-ns",
        "net1",
        c.as_bytes(),
    );
    check_refusal(&r, "CHECK on a missing netns", 3, "does not exist");
    assert_eq!(snapshot(&pod), before);
}
