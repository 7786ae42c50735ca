//! The keys of a network config roce-tune does not know, and a node config
//! named but missing, as a runtime and an operator meet them: a typo of one
//! of roce-tune's keys refuses ADD (7, "did you mean"), any other key is one
//! warning line; DEL, CHECK and GC never fail on a key. A node config named
//! by ROCE_TUNE_NODE_CONFIG or --node-config that does not exist refuses ADD
//! (104), is logged by a DEL that still succeeds, and stops gc, reset-idle,
//! inspect and the agent; the default path missing still means the
//! defaults.

use crate::common::cases::{failures, Case};
use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The warning lines about keys roce-tune does not know.
fn stray_lines(r: &Run) -> Vec<&str> {
    r.stderr
        .lines()
        .filter(|l| l.contains("roce-tune does not know") || l.contains("neither roce-tune's"))
        .collect()
}

#[test]
fn a_typo_of_a_key_refuses_add_and_names_what_was_meant() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    // The platform engineer's config: both keys a letter's case away.
    let mut typo = rail.conf.clone();
    let obj = typo.as_object_mut().unwrap();
    obj.remove("trafficClass");
    obj.insert("trafficclass".into(), json!(41));
    obj.insert("gidindex".into(), json!(1));
    let r = rail.run_with("ADD", "c1", &typo);
    assert_eq!(r.code(), 7, "{r:?}");
    for said in [
        r#""trafficclass": did you mean "trafficClass""#,
        r#""gidindex": did you mean "gidIndex""#,
    ] {
        assert!(r.msg().contains(said), "{said}: {}", r.msg());
    }
    assert!(
        r.stderr
            .contains("error ADD c1/net1: code 7: network config keys"),
        "{}",
        r.stderr
    );
    assert_eq!(rail.tree.tc(DEV), "Global tclass=106\n", "no class written");
    assert!(rail.state.entries().is_empty(), "nothing recorded");
    assert_eq!(rail.pod.sysctl("net.ipv4.conf.net1.arp_ignore"), "0");

    // Spelt right, the index the typo hid is enforced: the pod's GID is at
    // 3, not 1, and ADD says so (101) instead of enforcing 3 in silence.
    let mut fixed = rail.conf.clone();
    fixed["gidIndex"] = json!(1);
    let r = rail.run_with("ADD", "c1", &fixed);
    assert_eq!(r.code(), 101, "{r:?}");
    assert!(
        r.msg().contains("index 3"),
        "names the real one: {}",
        r.msg()
    );
    fixed["gidIndex"] = json!(3);
    rail.run_with("ADD", "c1", &fixed).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
}

/// Through the bad-input table's machinery (`common::cases`): each refused
/// with its code, its error in the config's version, and nothing changed:
/// the pod's sysctls, the tree, the state dir and the node config compared
/// before and after.
#[test]
fn typos_and_a_missing_node_config_change_nothing() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let cases = vec![
        Case::conf(
            "trafficclass and gidindex",
            |c| {
                let class = c.as_object_mut().unwrap().remove("trafficClass").unwrap();
                c["trafficclass"] = class;
                c["gidindex"] = json!(1);
            },
            7,
            r#""trafficclass": did you mean "trafficClass""#,
        ),
        Case::conf(
            "TRAFFICCLASS beside trafficClass",
            |c| c["TRAFFICCLASS"] = json!(0),
            7,
            r#""TRAFFICCLASS": did you mean "trafficClass""#,
        ),
        Case::conf(
            "gidTimoutMs",
            |c| c["gidTimoutMs"] = json!(0),
            7,
            r#""gidTimoutMs": did you mean "gidTimeoutMs""#,
        ),
        Case::conf(
            "rdmaCmToS swapped",
            |c| c["rdmaCmTso"] = json!(106),
            7,
            r#"did you mean "rdmaCmTos""#,
        ),
        Case::conf(
            "statedir",
            |c| c["statedir"] = json!("/tmp/evil"),
            7,
            r#""statedir": did you mean "stateDir"; stateDir is a node setting"#,
        ),
        Case::env(
            "a named node config that does not exist",
            "ROCE_TUNE_NODE_CONFIG",
            "/nonexistent/roce-tune/node.json",
            104,
            "node config /nonexistent/roce-tune/node.json does not exist",
        ),
    ];
    let failed = failures(&pod, &cases);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn another_tools_key_is_one_warning_line_and_add_goes_on() {
    needs!(root);
    let rail = Rail::new();
    let mut c = rail.conf.clone();
    c["vlan"] = json!(0);
    c["mtu"] = json!(9000);
    let r = rail.run_with("ADD", "c1", &c);
    r.ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    let lines = stray_lines(&r);
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(
        lines[0].contains(r#"warn ADD c1/net1: network config keys "mtu", "vlan" are neither roce-tune's nor ones the runtime adds: ignored"#),
        "{}",
        lines[0]
    );
    rail.del("c1").ok();

    // What libcni, Multus and the spec put in a plugin's config warns
    // about nothing.
    let mut c = rail.conf.clone();
    for (k, v) in [
        ("pciBusID", rail.conf["deviceID"].clone()),
        ("capabilities", json!({"CNIDeviceInfoFile": true})),
        ("runtimeConfig", json!({})),
        ("args", json!({"cni": {}})),
        ("cni.dev/something-later", json!(true)),
    ] {
        c[k] = v;
    }
    let r = rail.run_with("ADD", "c2", &c);
    r.ok();
    assert_eq!(stray_lines(&r), Vec::<&str>::new());
    rail.run_with("DEL", "c2", &c).ok();
}

/// The sriov-network-operator's NAD (../shared/fixtures): roce-tune's
/// element as its template pastes `metaPlugins`, with what libcni and
/// Multus add, is ADD's without a word.
#[test]
fn the_operators_nad_warns_about_nothing() {
    needs!(root);
    let nad =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/sriov-network-nad.json");
    let nad: Value = serde_json::from_str(
        &std::fs::read_to_string(&nad)
            .unwrap_or_else(|e| panic!("{} (../shared beside the worktree): {e}", nad.display())),
    )
    .unwrap();
    let element = nad["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "roce-tune")
        .expect("roce-tune in the NAD's chain")
        .clone();
    let rail = Rail::new();
    let mut c = element;
    for k in ["name", "cniVersion", "prevResult", "deviceID"] {
        c[k] = rail.conf[k].clone();
    }
    c["pciBusID"] = rail.conf["deviceID"].clone();
    let r = rail.run_with("ADD", "c1", &c);
    r.ok();
    assert_eq!(stray_lines(&r), Vec::<&str>::new(), "{}", r.stderr);
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
}

#[test]
fn del_check_and_gc_only_warn_about_a_typo() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    // The NAD was edited since: a typo beside the keys ADD had.
    let mut typo = rail.conf.clone();
    typo["gidindx"] = json!(3);
    for command in ["CHECK", "DEL"] {
        let r = rail.run_with(command, "c1", &typo);
        assert_eq!(r.status, 0, "{command}: {r:?}");
        let lines = stray_lines(&r);
        assert_eq!(lines.len(), 1, "{command}: {}", r.stderr);
        assert!(
            lines[0].contains(&format!(
                r#"warn {command} c1/net1: network config key "gidindx" (did you mean "gidIndex"?) is neither"#
            )),
            "{command}: {}",
            lines[0]
        );
    }
    assert_eq!(rail.tree.tc(DEV), "tclass=106", "DEL gave the class back");
    assert!(rail.state.entries().is_empty());
    let mut gc = typo.clone();
    gc["cniVersion"] = json!("1.1.0");
    gc["cni.dev/valid-attachments"] = json!([]);
    let r = rail.run_with("GC", "", &gc);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(stray_lines(&r).len(), 1, "{}", r.stderr);
}

/// A path beside the test's state dir where no file is.
fn absent(state: &StateDirPath) -> PathBuf {
    state.base().join("no-such-dir/node.json")
}

#[test]
fn a_named_node_config_that_does_not_exist_is_refused_and_said() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    let missing = absent(&rail.state);
    let says = format!("node config {} does not exist", missing.display());
    let cni = |command: &str, cid: &str| {
        Exec::cni(BIN, &missing, command, cid, &rail.pod.path(), "net1")
            .stdin(rail.conf.to_string())
            .run()
    };

    let r = cni("ADD", "c2");
    assert_eq!(r.code(), 104, "{r:?}");
    assert!(r.msg().contains(&says), "{}", r.msg());
    assert_eq!(
        rail.state.entries(),
        ["c1:net1.state"],
        "c2 recorded nothing"
    );

    // DEL succeeds, says why it restores nothing now, and keeps the entry
    // for when the node config is back.
    let r = cni("DEL", "c1");
    assert_eq!((r.status, r.stdout.as_str()), (0, ""), "{r:?}");
    assert!(r.stderr.contains(&says), "{}", r.stderr);
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    assert_eq!(rail.state.entries(), ["c1:net1.state"]);

    // Every operator command and the agent's say it and stop, through the
    // option and through the variable.
    let arg = path_str(&missing);
    let runs: Vec<(&str, Exec)> = vec![
        (
            "gc",
            Exec::new(BIN).args(["gc", "--orphans", "--node-config", &arg]),
        ),
        (
            "gc (ROCE_TUNE_NODE_CONFIG)",
            Exec::new(BIN)
                .args(["gc", "--orphans"])
                .env("ROCE_TUNE_NODE_CONFIG", &missing),
        ),
        (
            "reset-idle",
            Exec::new(BIN).args(["reset-idle", "--node-config", &arg]),
        ),
        (
            "inspect",
            Exec::new(BIN).args(["inspect", "--node-config", &arg]),
        ),
        (
            "inspect --env (ROCE_TUNE_NODE_CONFIG)",
            Exec::new(BIN)
                .args(["inspect", "--netns", &rail.pod.path(), "--env"])
                .env("ROCE_TUNE_NODE_CONFIG", &missing),
        ),
        (
            "agent",
            Exec::new(AGENT_BIN).args(["agent", "--every", "1", "--node-config", &arg]),
        ),
        (
            "agent (ROCE_TUNE_NODE_CONFIG)",
            Exec::new(AGENT_BIN)
                .args(["agent", "--every", "1", "--nri"])
                .env("ROCE_TUNE_NODE_CONFIG", &missing),
        ),
        (
            "nri",
            Exec::new(AGENT_BIN).args(["nri", "--node-config", &arg]),
        ),
        (
            "gc --every",
            Exec::new(AGENT_BIN).args(["gc", "--orphans", "--every", "1", "--node-config", &arg]),
        ),
    ];
    for (what, exec) in runs {
        let r = exec.hang_after(Duration::from_secs(20)).run();
        assert!(!r.hung, "{what} did not stop: {r:?}");
        assert_ne!(r.status, 0, "{what}: {r:?}");
        assert!(r.stderr.contains(&says), "{what}: {}", r.stderr);
    }
    assert_eq!(rail.state.entries(), ["c1:net1.state"], "nothing ran");

    // Named right again, DEL gives the class back.
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
}

/// Only a file someone named must exist: /etc/cni/roce-tune/node.json
/// missing is the defaults, as before. Run in a mount namespace of its own
/// whose /etc is empty, whatever this machine's holds.
#[test]
fn the_default_node_config_missing_still_means_the_defaults() {
    needs!(root);
    let tree = Tree::new();
    tree.add_device(PCI, DEV, "tclass=41");
    let bin = path_str(Path::new(BIN));
    let root = path_str(&tree.root);
    for named in [None, Some("/etc/cni/roce-tune/node.json")] {
        let exec = Exec::new("unshare").args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            r#"mount -t tmpfs none /etc && exec "$0" inspect --sysfs-root "$1""#,
            &bin,
            &root,
        ]);
        let r = match named {
            Some(p) => exec.env("ROCE_TUNE_NODE_CONFIG", p),
            None => exec,
        }
        .run();
        assert_eq!(r.status, 0, "{named:?}: {r:?}");
        assert!(
            r.stdout.contains("RDMA devices: 1"),
            "{named:?}: {}",
            r.stdout
        );
    }
}
