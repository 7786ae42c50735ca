//! Bad and hostile input, the one table: traversal and odd bytes in every
//! identifier, missing and malformed CNI_* variables, out-of-range and
//! wrongly typed numbers, bad sysctl keys and values, host paths in the
//! network config, oversized and malformed stdin. Each row is refused with
//! its exact code and message and changes nothing outside its place
//! (`tests/it/common/cases.rs` says what is checked, and how).
//!
//! The base config of each row WORKS (trafficClass, deviceID, GID present),
//! so a row that got past validation would visibly write something.
//! NUL cannot be put in an environment variable at all (execve takes C
//! strings), so NUL is tried only where JSON can carry it (`\u0000`).

use crate::common::cases::{Case, Place, ADDR};
use crate::common::*;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

fn nested(open: &str, close: &str, depth: usize) -> Vec<u8> {
    let mut v = open.repeat(depth);
    v.push_str(&close.repeat(depth));
    v.into_bytes()
}

/// `{"cniVersion":"1.0.0","pad":"xxx…"}` with `pad` x's.
fn padded(pad: usize) -> Vec<u8> {
    let mut v = br#"{"cniVersion":"1.0.0","pad":""#.to_vec();
    v.resize(v.len() + pad, b'x');
    v.extend_from_slice(b"\"}");
    v
}

/// The rows' names, for docs_figures.
pub(crate) fn row_names() -> Vec<String> {
    cases().into_iter().map(|c| c.name).collect()
}

fn cases() -> Vec<Case> {
    let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
    vec![
        // CNI_COMMAND.
        Case::unset(
            "CNI_COMMAND missing",
            "CNI_COMMAND",
            4,
            "CNI_COMMAND is not set",
        ),
        Case::env(
            "CNI_COMMAND empty",
            "CNI_COMMAND",
            "",
            4,
            "CNI_COMMAND is not set",
        ),
        Case::env(
            "CNI_COMMAND ATTACH",
            "CNI_COMMAND",
            "ATTACH",
            4,
            "\"ATTACH\"",
        ),
        Case::env(
            "CNI_COMMAND lower case",
            "CNI_COMMAND",
            "add",
            4,
            "CNI_COMMAND",
        ),
        Case::env(
            "CNI_COMMAND ADD;DEL",
            "CNI_COMMAND",
            "ADD;DEL",
            4,
            "CNI_COMMAND",
        ),
        Case::env(
            "CNI_COMMAND with newline",
            "CNI_COMMAND",
            "ADD\n",
            4,
            "CNI_COMMAND",
        ),
        // CNI_IFNAME: the kernel's rules, plus printable ASCII only.
        Case::env("ifname empty", "CNI_IFNAME", "", 4, "CNI_IFNAME"),
        Case::env(
            "ifname ../../etc",
            "CNI_IFNAME",
            "../../etc",
            4,
            "CNI_IFNAME \"../../etc\"",
        ),
        Case::env("ifname a/b", "CNI_IFNAME", "a/b", 4, "CNI_IFNAME \"a/b\""),
        Case::env("ifname .", "CNI_IFNAME", ".", 4, "CNI_IFNAME"),
        Case::env("ifname ..", "CNI_IFNAME", "..", 4, "CNI_IFNAME"),
        Case::env(
            "ifname with newline",
            "CNI_IFNAME",
            "net1\n",
            4,
            "CNI_IFNAME",
        ),
        Case::env("ifname with space", "CNI_IFNAME", "net 1", 4, "CNI_IFNAME"),
        Case::env(
            "ifname leading space",
            "CNI_IFNAME",
            " net1",
            4,
            "CNI_IFNAME",
        ),
        Case::env("ifname with tab", "CNI_IFNAME", "net\t1", 4, "CNI_IFNAME"),
        Case::env(
            "ifname 16 chars",
            "CNI_IFNAME",
            "sixteen_chars_xx",
            4,
            "CNI_IFNAME \"sixteen_chars_xx\"",
        ),
        Case::env("ifname non-ASCII", "CNI_IFNAME", "nét1", 4, "CNI_IFNAME"),
        Case::env(
            "ifname non-UTF-8",
            "CNI_IFNAME",
            bytes(b"net\xff"),
            4,
            "not valid UTF-8",
        ),
        Case::env("ifname with colon", "CNI_IFNAME", "net1:0", 4, "CNI_IFNAME"),
        Case::env(
            "ifname terminal escape",
            "CNI_IFNAME",
            "n\x1b[2J",
            4,
            "CNI_IFNAME",
        ),
        // DEL never refuses what ADD would have refused (nothing can be
        // recorded for it): libcni's DelNetworkList would stop before sriov.
        Case::env("DEL ifname ../../etc", "CNI_IFNAME", "../../etc", 0, "").on("DEL"),
        Case::env("DEL ifname empty", "CNI_IFNAME", "", 0, "").on("DEL"),
        // CNI_CONTAINERID: the spec's alphabet, 255 at most.
        Case::env(
            "containerID empty",
            "CNI_CONTAINERID",
            "",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID ../x",
            "CNI_CONTAINERID",
            "../x",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID ab/../c",
            "CNI_CONTAINERID",
            "ab/../c",
            4,
            "CNI_CONTAINERID \"ab/../c\"",
        ),
        Case::env(
            "containerID a/b",
            "CNI_CONTAINERID",
            "a/b",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID -x",
            "CNI_CONTAINERID",
            "-x",
            4,
            "CNI_CONTAINERID \"-x\"",
        ),
        Case::env(
            "containerID x;rm -rf /",
            "CNI_CONTAINERID",
            "x;rm -rf /",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID 300 chars",
            "CNI_CONTAINERID",
            "a".repeat(300),
            4,
            "longer than 255",
        ),
        Case::env(
            "containerID .hidden",
            "CNI_CONTAINERID",
            ".hidden",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID newline",
            "CNI_CONTAINERID",
            "c1\n",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID non-UTF-8",
            "CNI_CONTAINERID",
            bytes(b"c\xfe\xff"),
            4,
            "not valid UTF-8",
        ),
        Case::env(
            "containerID space",
            "CNI_CONTAINERID",
            "c1 x",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID non-ASCII",
            "CNI_CONTAINERID",
            "cé1",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID with colon",
            "CNI_CONTAINERID",
            "c1:net1",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID $(...)",
            "CNI_CONTAINERID",
            "c1$(reboot)",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env(
            "containerID glob",
            "CNI_CONTAINERID",
            "*",
            4,
            "CNI_CONTAINERID",
        ),
        Case::env("DEL containerID ../x", "CNI_CONTAINERID", "../x", 0, "").on("DEL"),
        Case::env("DEL containerID empty", "CNI_CONTAINERID", "", 0, "").on("DEL"),
        // CNI_NETNS.
        Case::unset("netns missing", "CNI_NETNS", 4, "CNI_NETNS"),
        Case::env(
            "netns relative",
            "CNI_NETNS",
            "netns/x",
            4,
            "must be an absolute path",
        ),
        Case::env(
            "netns that does not exist",
            "CNI_NETNS",
            "/var/run/netns/roce-tune-no-such-ns",
            3,
            "does not exist",
        ),
        Case::env(
            "netns a plain file",
            "CNI_NETNS",
            "/etc/passwd",
            4,
            "is not a network namespace",
        ),
        Case::env(
            "netns a directory",
            "CNI_NETNS",
            "/",
            4,
            "not a network namespace",
        ),
        Case::env("CHECK netns empty", "CNI_NETNS", "", 4, "CNI_NETNS").on("CHECK"),
        Case::env(
            "CHECK netns that does not exist",
            "CNI_NETNS",
            "/var/run/netns/roce-tune-no-such-ns",
            3,
            "does not exist",
        )
        .on("CHECK"),
        // CNI_ARGS.
        Case::env("args without =", "CNI_ARGS", "noequals", 4, "not KEY=VALUE"),
        Case::env(
            "args one bad pair",
            "CNI_ARGS",
            "K=V;bad",
            4,
            "not KEY=VALUE",
        ),
        Case::env(
            "args IgnoreUnknown does not excuse a bad pair",
            "CNI_ARGS",
            "IgnoreUnknown=1;junk",
            4,
            "CNI_ARGS pair \"junk\"",
        ),
        Case::env("args empty key", "CNI_ARGS", "=V", 4, "not KEY=VALUE"),
        Case::env(
            "args control char",
            "CNI_ARGS",
            "K=\x01",
            4,
            "control character",
        ),
        Case::env(
            "args newline",
            "CNI_ARGS",
            "K=V\nX=Y",
            4,
            "control character",
        ),
        Case::env(
            "args 64 KiB, bad pair last",
            "CNI_ARGS",
            format!("K={};bad", "v".repeat(64 << 10)),
            4,
            "not KEY=VALUE",
        ),
        Case::env(
            "DEL args 64 KiB (well formed)",
            "CNI_ARGS",
            format!("K={}", "v".repeat(64 << 10)),
            0,
            "",
        )
        .on("DEL"),
        // cniVersion: the error speaks the newest version, the config's is unusable.
        Case::conf(
            "cniVersion 0.2.0",
            |c| c["cniVersion"] = json!("0.2.0"),
            1,
            "\"0.2.0\" is not supported",
        )
        .speaks("1.1.0"),
        Case::conf(
            "cniVersion missing",
            |c| {
                c.as_object_mut().unwrap().remove("cniVersion");
            },
            7,
            "cniVersion is missing",
        )
        .speaks("1.1.0"),
        Case::conf(
            "name with a newline",
            |c| c["name"] = json!("rail\nforged"),
            7,
            "is not a network name",
        ),
        // deviceID / pciBusID: only DDDD:BB:DD.F.
        Case::conf(
            "deviceID without a domain",
            |c| c["deviceID"] = json!("0c:00.2"),
            7,
            "deviceID \"0c:00.2\"",
        ),
        Case::conf(
            "deviceID ../../../../etc",
            |c| c["deviceID"] = json!("../../../../etc"),
            7,
            "deviceID",
        ),
        Case::conf(
            "deviceID with traversal tail",
            |c| c["deviceID"] = json!("0000:0c:00.2/../../x"),
            7,
            "deviceID",
        ),
        Case::conf(
            "deviceID function 8",
            |c| c["deviceID"] = json!("0000:0c:00.8"),
            7,
            "deviceID",
        ),
        Case::conf(
            "deviceID device 0x20",
            |c| c["deviceID"] = json!("0000:0c:20.0"),
            7,
            "deviceID",
        ),
        Case::conf(
            "deviceID full-width digits",
            |c| c["deviceID"] = json!("\u{ff10}000:0c:00.2"),
            7,
            "deviceID",
        ),
        Case::conf(
            "deviceID Arabic-Indic digits",
            |c| c["deviceID"] = json!("\u{660}\u{660}\u{660}\u{660}:0c:00.2"),
            7,
            "deviceID",
        ),
        Case::conf(
            "deviceID trailing newline",
            |c| c["deviceID"] = json!("0000:0c:00.2\n"),
            7,
            "deviceID",
        ),
        Case::conf(
            "deviceID a number",
            |c| c["deviceID"] = json!(12),
            7,
            "deviceID",
        ),
        Case::conf(
            "pciBusID traversal",
            |c| c["pciBusID"] = json!("../x"),
            7,
            "pciBusID",
        ),
        Case::conf(
            "deviceID and pciBusID differ",
            |c| c["pciBusID"] = json!("0000:0c:00.3"),
            7,
            "name different devices",
        ),
        Case::conf(
            "deviceID of no device",
            |c| c["deviceID"] = json!("0000:0c:1f.7"),
            100,
            "deviceID 0000:0c:1f.7 is not the pod's net1, which is the PCI function 0000:0c:00.2",
        ),
        // sysctl keys and values.
        Case::conf(
            "sysctl key IFNAME/../../../kernel/x",
            |c| c["sysctl"] = json!({"net.ipv4.conf.IFNAME/../../../kernel/x": "1"}),
            7,
            "sysctl key \"net.ipv4.conf.IFNAME/../../../kernel/x\" has a '/' in a component",
        ),
        Case::conf(
            "sysctl key net/../../etc/passwd",
            |c| c["sysctl"] = json!({"net/../../etc/passwd": "1"}),
            7,
            "sysctl key",
        ),
        Case::conf(
            "sysctl key outside net.",
            |c| c["sysctl"] = json!({"kernel.core_pattern": "|/bin/sh"}),
            7,
            "\"kernel.core_pattern\" is outside net.",
        ),
        Case::conf(
            "sysctl key with an empty component",
            |c| c["sysctl"] = json!({"net..ipv4": "1"}),
            7,
            "\"net..ipv4\" has an empty component",
        ),
        Case::conf(
            "sysctl key with space",
            |c| c["sysctl"] = json!({"net.ipv4.conf.net 1.rp_filter": "0"}),
            7,
            "space",
        ),
        Case::conf(
            "sysctl key with newline",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter\n": "0"}),
            7,
            "sysctl key",
        ),
        Case::conf(
            "sysctl key with NUL",
            |c| c["sysctl"] = json!({"net.ipv4\u{0}.x": "0"}),
            7,
            "sysctl key",
        ),
        Case::conf(
            "sysctl key non-ASCII",
            |c| c["sysctl"] = json!({"net.ipv4.conf.é.rp_filter": "0"}),
            7,
            "sysctl key",
        ),
        Case::conf(
            "sysctl key 300 chars",
            |c| c["sysctl"] = json!({format!("net.{}", "a".repeat(300)): "0"}),
            7,
            "too long",
        ),
        Case::conf(
            "sysctl key just net",
            |c| c["sysctl"] = json!({"net": "0"}),
            7,
            "names no setting",
        ),
        Case::conf(
            "sysctl value with a newline and a second setting",
            |c| {
                c["sysctl"] = json!({"net.ipv4.conf.IFNAME.arp_ignore": "1\nnet.ipv4.ip_forward=1"})
            },
            7,
            // Escaped in the message too: no raw newline reaches a log line.
            "has value \"1\\nnet.ipv4.ip_forward=1\": give 1 to 256 printable characters",
        ),
        Case::conf(
            "sysctl value with NUL",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": "0\u{0}"}),
            7,
            "has value",
        ),
        Case::conf(
            "sysctl value 10 KiB",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": "0".repeat(10 << 10)}),
            7,
            "has value",
        ),
        Case::conf(
            "sysctl value empty",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": ""}),
            7,
            "has value",
        ),
        Case::conf(
            "sysctl value a number",
            |c| c["sysctl"] = json!({"net.ipv4.conf.IFNAME.arp_ignore": 1}),
            7,
            "must be a string",
        ),
        Case::conf(
            "sysctl 100 keys",
            |c| {
                let m: serde_json::Map<String, Value> = (0..100)
                    .map(|i| (format!("net.ipv4.conf.IFNAME.k{i}"), json!("1")))
                    .collect();
                c["sysctl"] = Value::Object(m);
            },
            7,
            "more than 64",
        ),
        Case::conf(
            "sysctl an array",
            |c| c["sysctl"] = json!(["net.ipv4.conf.all.rp_filter=0"]),
            7,
            "sysctl must be",
        ),
        // serde_json's Map is a BTreeMap: applied in key order, so the three
        // keys the kernel has (each of which differs in the pod now) are
        // written before the one it lacks fails, and must be put back.
        Case::conf(
            "sysctl key the kernel lacks, after three it has",
            |c| {
                c["sysctl"] = json!({
                    "net.ipv4.conf.IFNAME.accept_local": "1",
                    "net.ipv4.conf.IFNAME.arp_announce": "2",
                    "net.ipv4.conf.IFNAME.arp_ignore": "1",
                    "net.ipv4.conf.IFNAME.no_such_knob": "1",
                    "net.ipv4.conf.IFNAME.rp_filter": "0",
                })
            },
            7,
            "net.ipv4.conf.net1.no_such_knob",
        ),
        // Numbers out of range or of the wrong kind. 1e400 is a decoding
        // failure (6): no JSON decoder can give it a value, so the config's
        // version cannot be read either.
        Case::raw_number(
            "trafficClass 1e400",
            &["trafficClass"],
            "1e400",
            6,
            "out of range",
        )
        .speaks("1.1.0"),
        Case::raw_number(
            "trafficClass -0",
            &["trafficClass"],
            "-0",
            7,
            "trafficClass",
        ),
        Case::raw_number(
            "trafficClass 2^64",
            &["trafficClass"],
            "18446744073709551616",
            7,
            "trafficClass",
        ),
        Case::raw_number(
            "trafficClass 41.0",
            &["trafficClass"],
            "41.0",
            7,
            "trafficClass",
        ),
        Case::raw_number(
            "trafficClass 4.1e1",
            &["trafficClass"],
            "4.1e1",
            7,
            "trafficClass",
        ),
        Case::conf(
            "trafficClass 256",
            |c| c["trafficClass"] = json!(256),
            7,
            "trafficClass is 256",
        ),
        Case::conf(
            "trafficClass -1",
            |c| c["trafficClass"] = json!(-1),
            7,
            "trafficClass is -1",
        ),
        Case::conf(
            "trafficClass a string",
            |c| c["trafficClass"] = json!("41"),
            7,
            "trafficClass must be a whole number",
        ),
        Case::conf(
            "gidIndex -1",
            |c| c["gidIndex"] = json!(-1),
            7,
            "gidIndex is -1",
        ),
        Case::raw_number(
            "gidIndex 2^64",
            &["gidIndex"],
            "18446744073709551616",
            7,
            "gidIndex",
        ),
        Case::conf(
            "gidCheck maybe",
            |c| c["gidCheck"] = json!("maybe"),
            7,
            "gidCheck \"maybe\"",
        ),
        Case::conf(
            "gidTimeoutMs an hour",
            |c| c["gidTimeoutMs"] = json!(3_600_000),
            7,
            "gidTimeoutMs is 3600000",
        ),
        Case::raw_number(
            "gidTimeoutMs 1e10",
            &["gidTimeoutMs"],
            "1e10",
            7,
            "gidTimeoutMs",
        ),
        Case::conf(
            "rdmaPort 0",
            |c| c["rdmaPort"] = json!(0),
            7,
            "rdmaPort is 0",
        ),
        Case::conf(
            "rdmaPort 2^32",
            |c| c["rdmaPort"] = json!(1u64 << 32),
            7,
            "rdmaPort",
        ),
        // prevResult.
        Case::conf(
            "prevResult missing",
            |c| {
                c.as_object_mut().unwrap().remove("prevResult");
            },
            7,
            "prevResult is missing",
        ),
        Case::conf(
            "prevResult a string",
            |c| c["prevResult"] = json!("{}"),
            7,
            "prevResult",
        ),
        Case::conf(
            "ip interface index 1 of 1",
            |c| c["prevResult"]["ips"][0]["interface"] = json!(1),
            7,
            "prevResult.ips[0].interface: index 1 is out of range",
        ),
        Case::conf(
            "ip interface index -1",
            |c| c["prevResult"]["ips"][0]["interface"] = json!(-1),
            7,
            "interface",
        ),
        Case::raw_number(
            "ip interface index 2^64",
            &["prevResult", "ips", "0", "interface"],
            "18446744073709551616",
            7,
            "interface",
        ),
        Case::conf(
            "ip interface index 0.5",
            |c| c["prevResult"]["ips"][0]["interface"] = json!(0.5),
            7,
            "interface",
        ),
        Case::conf(
            "ip interface with no interfaces",
            |c| c["prevResult"]["interfaces"] = json!([]),
            7,
            "out of range",
        ),
        Case::conf(
            "ip address with octet 300",
            |c| c["prevResult"]["ips"][0]["address"] = json!("192.168.0.300/16"),
            7,
            "prevResult.ips[0].address",
        ),
        Case::conf(
            "ip address with prefix 99",
            |c| c["prevResult"]["ips"][0]["address"] = json!("192.168.0.34/99"),
            7,
            "address",
        ),
        Case::conf(
            "ip address 10 KiB",
            |c| c["prevResult"]["ips"][0]["address"] = json!("9".repeat(10 << 10)),
            7,
            "address",
        ),
        Case::conf(
            "interfaces an object",
            |c| c["prevResult"]["interfaces"] = json!({"name": "net1"}),
            7,
            "interfaces",
        ),
        // Host paths are the node config's: any of them in the network
        // config is refused, whatever the value.
        Case::conf(
            "stateDir in the network config",
            |c| c["stateDir"] = json!("/tmp/evil"),
            7,
            "stateDir is a node setting",
        ),
        Case::conf(
            "stateDir with NUL",
            |c| c["stateDir"] = json!("/tmp/a\u{0}b"),
            7,
            "stateDir is a node setting",
        ),
        Case::conf(
            "sysfsRoot in the network config",
            |c| c["sysfsRoot"] = json!("/sys/../etc"),
            7,
            "sysfsRoot is a node setting",
        ),
        Case::conf(
            "logFile in the network config",
            |c| c["logFile"] = json!("/tmp/x/../../etc/passwd"),
            7,
            "logFile is a node setting",
        ),
        // Stdin itself: never read past 1 MiB + 1 byte.
        Case::raw(
            "stdin just over 1 MiB",
            padded(1 << 20),
            7,
            "more than the 1048576",
        ),
        Case::raw("stdin 16 MiB", padded(16 << 20), 7, "more than the 1048576")
            .within(Duration::from_secs(2)),
        Case::raw("stdin empty", vec![], 6, "network config on stdin is empty"),
        Case::raw(
            "stdin malformed",
            br#"{"cniVersion": "1.0.0","#.to_vec(),
            6,
            "not valid JSON: EOF while parsing",
        ),
        Case::raw(
            "stdin non-UTF-8",
            b"{\"cniVersion\":\"1.0.0\",\"name\":\"r\xff\xfe\"}".to_vec(),
            6,
            "not UTF-8 (invalid byte at offset 31)",
        ),
        Case::raw(
            "stdin overlong UTF-8 '/'",
            b"{\"cniVersion\":\"1.0.0\",\"name\":\"\xc0\xaf\"}".to_vec(),
            6,
            "not UTF-8",
        ),
        Case::raw(
            "stdin 100k nested arrays",
            nested("[", "]", 100_000),
            6,
            "recursion limit",
        ),
        Case::raw(
            "stdin 100k nested objects",
            nested("{\"a\":", "}", 100_000),
            6,
            "recursion limit",
        ),
        Case::raw(
            "stdin duplicate top-level key",
            br#"{"cniVersion":"1.0.0","trafficClass":41,"trafficClass":0}"#.to_vec(),
            6,
            "duplicate key \"trafficClass\"",
        ),
        Case::raw(
            "stdin duplicate gidCheck",
            br#"{"cniVersion":"1.0.0","gidCheck":"off","gidCheck":"enforce"}"#.to_vec(),
            6,
            "duplicate key \"gidCheck\"",
        ),
        Case::raw(
            "stdin duplicate key in prevResult",
            br#"{"cniVersion":"1.0.0","prevResult":{"ips":[],"ips":[]}}"#.to_vec(),
            6,
            "duplicate key",
        ),
        Case::raw(
            "stdin trailing garbage",
            br#"{"cniVersion":"1.0.0"} x"#.to_vec(),
            6,
            "trailing characters",
        ),
        Case::raw(
            "stdin with BOM",
            b"\xef\xbb\xbf{\"cniVersion\":\"1.0.0\"}".to_vec(),
            6,
            "not valid JSON",
        ),
        Case::raw("stdin null", b"null".to_vec(), 7, "must be a JSON object"),
    ]
}

#[test]
fn bad_inputs_get_their_code_and_change_nothing() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    // How many rows there are is for docs_figures to check, against what
    // docs/ cites: a row lost in an edit shows there.
    let cases = cases();
    let failed = crate::common::cases::failures(&pod, &cases);
    println!("{} bad inputs, {} failed", cases.len(), failed.len());
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The same sysctl map without the key the kernel lacks does write: the
/// table's row for that key saw its writes undone, not skipped.
#[test]
fn the_undone_sysctl_writes_were_real() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    pod.untune("net1");
    let place = Place::new();
    let mut c = place.conf(&pod);
    c["sysctl"] = json!({
        "net.ipv4.conf.IFNAME.accept_local": "1",
        "net.ipv4.conf.IFNAME.arp_announce": "2",
        "net.ipv4.conf.IFNAME.arp_ignore": "1",
        "net.ipv4.conf.IFNAME.rp_filter": "0",
    });
    Exec::cni(BIN, &place.node, "ADD", "knob1", &pod.path(), "net1")
        .stdin(c.to_string())
        .run()
        .ok();
    assert_eq!(pod.sysctl("net.ipv4.conf.net1.arp_announce"), "2");
    assert_eq!(pod.sysctl("net.ipv4.conf.net1.accept_local"), "1");
    assert_eq!(pod.sysctl("net.ipv4.conf.net1.arp_ignore"), "1");
}
