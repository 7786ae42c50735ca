//! The node config's host paths as real nodes lay them out: on Debian,
//! Ubuntu and RHEL `/var/run` is a link to `/run` (root's, in root's `/var`),
//! and the shipped `deviceInfoDir` is under it. A path may pass through links that root owns inside directories only
//! root can write; a link anyone else owns, or could replace, is refused
//! with 104, naming the link or directory, its owner and the fix, and
//! nothing on the node changes. Each test runs the binary as a runtime does,
//! on a node whose `<base>/var/run` is such a link (the state dir, the
//! device-info dir and the log file all behind it).

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Multus's name for the attachment's file (`<NAD namespace>-<NAD name>-<cid>_<ifname>`).
const INFO: &str = "default-rail-c1_net1";

/// How the link is made: systemd's tmpfiles.d makes `/var/run -> ../run`,
/// Debian's base-files `/var/run -> /run`.
#[derive(Clone, Copy, Debug)]
enum Target {
    Relative,
    Absolute,
}

/// A node whose `<base>/var` (root's, 0755) holds the link `run` to the
/// real `<base>/run` (root's, 0755), and whose node config names its state
/// dir, device-info dir and log file through `<base>/var/run`.
struct Node {
    rail: Rail,
}

impl Node {
    fn new(target: Target) -> Node {
        let mut rail = Rail::new();
        let base = rail.state.base();
        for d in ["var", "run"] {
            std::fs::create_dir(base.join(d)).unwrap();
            std::fs::set_permissions(base.join(d), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let to = match target {
            Target::Relative => PathBuf::from("../run"),
            Target::Absolute => base.join("run"),
        };
        std::os::unix::fs::symlink(to, base.join("var/run")).unwrap();
        let info = path_str(&base.join("var/run/devinfo/cni").join(INFO));
        rail.conf["capabilities"] = json!({"CNIDeviceInfoFile": true});
        rail.conf["runtimeConfig"] = json!({"CNIDeviceInfoFile": info});
        let node = Node { rail };
        node.node_config(json!({}));
        node
    }

    /// `rel` under the link, as the node config names it.
    fn linked(&self, rel: &str) -> PathBuf {
        self.rail.state.base().join("var/run").join(rel)
    }

    /// `rel` where it really is.
    fn real(&self, rel: &str) -> PathBuf {
        self.rail.state.base().join("run").join(rel)
    }

    /// The node config: every path this node has behind the link, and `extra`.
    fn node_config(&self, extra: Value) {
        let mut keys = json!({
            "stateDir": path_str(&self.linked("roce-tune")),
            "deviceInfoDir": path_str(&self.linked("devinfo/cni")),
            "logFile": path_str(&self.linked("roce-tune.log")),
        });
        for (k, v) in extra.as_object().unwrap() {
            keys[k] = v.clone();
        }
        self.rail.node_config(keys);
    }

    fn run(&self, command: &str) -> Run {
        self.rail.run(command, "c1")
    }
}

#[test]
fn host_paths_through_a_root_link_in_a_root_dir_are_used() {
    needs!(root);
    for target in [Target::Relative, Target::Absolute] {
        let n = Node::new(target);
        let r = n.run("ADD");
        r.ok();
        assert!(!r.stderr.contains("refused"), "{target:?}: {}", r.stderr);
        assert!(
            n.real("roce-tune/c1:net1.state").is_file(),
            "{target:?}: the entry is in the real state dir"
        );
        let info: Value =
            serde_json::from_slice(&std::fs::read(n.real("devinfo/cni").join(INFO)).unwrap())
                .unwrap();
        assert_eq!(info["pci"]["rdma-device"], DEV, "{target:?}");
        let log = std::fs::read_to_string(n.real("roce-tune.log")).unwrap();
        assert!(log.contains("ADD c1/net1: done"), "{target:?}: {log}");
        assert!(
            std::fs::symlink_metadata(n.rail.state.base().join("var/run"))
                .unwrap()
                .file_type()
                .is_symlink(),
            "the link is left as it was"
        );
        n.run("DEL").ok();
        assert_eq!(n.rail.tree.tc(DEV), "tclass=-1", "{target:?}: DEL restored");
        assert!(!n.real("roce-tune/c1:net1.state").exists());
        assert!(
            !n.real("devinfo/cni").join(INFO).exists(),
            "{target:?}: the device-info file roce-tune made went with DEL"
        );
    }
}

/// A refused link: ADD is 104 with `needles` in its message, and nothing
/// under the node's base dir or in the test tree changes; DEL succeeds
/// (nothing could have been recorded through a refused node config).
fn refused(n: &Node, needles: &[&str]) {
    let before = (snapshot(n.rail.state.base()), snapshot(&n.rail.tree.root));
    let r = n.run("ADD");
    assert_eq!(r.code(), 104, "{}", r.stdout);
    for needle in needles {
        assert!(r.msg().contains(needle), "{needle:?} not in {}", r.msg());
    }
    n.run("DEL").ok();
    let after = (snapshot(n.rail.state.base()), snapshot(&n.rail.tree.root));
    assert!(
        before == after,
        "the node changed: {:?} {:?}",
        snapshot_diff(&before.0, &after.0),
        snapshot_diff(&before.1, &after.1)
    );
}

#[test]
fn a_link_another_uid_owns_is_refused_naming_it_and_its_owner() {
    needs!(root);
    let n = Node::new(Target::Relative);
    let link = n.rail.state.base().join("var/run");
    std::os::unix::fs::lchown(&link, Some(1000), Some(1000)).unwrap();
    refused(
        &n,
        &[
            "stateDir",
            &path_str(&link),
            "owned by uid 1000",
            "chown -h root",
        ],
    );
}

#[test]
fn a_link_in_a_dir_others_can_write_is_refused_naming_the_dir() {
    needs!(root);
    let n = Node::new(Target::Absolute);
    let var = n.rail.state.base().join("var");
    std::fs::set_permissions(&var, std::fs::Permissions::from_mode(0o775)).unwrap();
    refused(
        &n,
        &[
            &path_str(&n.rail.state.base().join("var/run")),
            &path_str(&var),
            "mode 775",
            "chmod go-w",
        ],
    );
    // A dir another uid owns is no better.
    std::fs::set_permissions(&var, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&var, Some(1000), None).unwrap();
    refused(&n, &[&path_str(&var), "owned by uid 1000"]);
}

#[test]
fn a_link_loop_is_refused() {
    needs!(root);
    let n = Node::new(Target::Relative);
    let base = n.rail.state.base();
    std::os::unix::fs::symlink("b", base.join("a")).unwrap();
    std::os::unix::fs::symlink("a", base.join("b")).unwrap();
    n.node_config(json!({"stateDir": path_str(&base.join("a/state"))}));
    refused(&n, &["stateDir", "40 symbolic links"]);
}

/// Every host path of the node config follows the one rule: through a link
/// another uid owns, each is refused naming its key.
#[test]
fn every_host_path_of_the_node_config_is_held_to_the_rule() {
    needs!(root);
    let n = Node::new(Target::Relative);
    // The test tree, behind the link too (its own last component is the
    // tree's, followed as before).
    std::os::unix::fs::symlink(&n.rail.tree.root, n.real("tree")).unwrap();
    let keys = [
        ("stateDir", "roce-tune"),
        ("logFile", "roce-tune.log"),
        ("deviceInfoDir", "devinfo/cni"),
        ("podResourcesSocket", "kubelet/pod-resources/kubelet.sock"),
        (
            "podResourcesCheckpoint",
            "kubelet/kubelet_internal_checkpoint",
        ),
        ("nvidiaGpusDir", "nvidia/gpus"),
        ("sysfsRoot", "tree"),
    ];
    let all: serde_json::Map<String, Value> = keys
        .iter()
        .map(|(k, rel)| (k.to_string(), json!(path_str(&n.linked(rel)))))
        .collect();
    n.node_config(Value::Object(all.clone()));
    let r = n.run("ADD");
    r.ok();
    n.run("DEL").ok();
    let bad = n.rail.state.base().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::os::unix::fs::symlink("../run", bad.join("run")).unwrap();
    std::os::unix::fs::lchown(bad.join("run"), Some(1000), None).unwrap();
    for (key, rel) in keys {
        let mut conf = all.clone();
        conf.insert(key.into(), json!(path_str(&bad.join("run").join(rel))));
        n.node_config(Value::Object(conf));
        refused(&n, &[key, &path_str(&bad.join("run")), "uid 1000"]);
    }
}

/// `nriSocket` is the NRI plugin's alone: ADD and DEL neither resolve it nor
/// refuse a pod's rail for it, and the NRI command (`nri`, `agent --nri`)
/// refuses it, naming the key, the link and its owner, before it connects.
#[test]
fn an_nri_socket_through_a_link_another_uid_owns_is_refused_by_the_nri_command_not_by_add() {
    needs!(root);
    let n = Node::new(Target::Relative);
    let bad = n.rail.state.base().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::os::unix::fs::symlink("../run", bad.join("run")).unwrap();
    std::os::unix::fs::lchown(bad.join("run"), Some(1000), None).unwrap();
    n.node_config(json!({"nriSocket": path_str(&bad.join("run/nri/nri.sock"))}));
    let r = n.run("ADD");
    r.ok();
    assert!(!r.stderr.contains("nriSocket"), "{}", r.stderr);
    n.run("DEL").ok();
    assert_eq!(n.rail.tree.tc(DEV), "tclass=-1", "DEL restored");
    let node = n.rail.state.base().join("node.json");
    for args in [&["nri"][..], &["agent", "--nri", "--every", "1"][..]] {
        let r = Exec::new(AGENT_BIN)
            .args(args)
            .arg("--node-config")
            .arg(&node)
            .run();
        assert_eq!(r.status, 1, "{args:?}: {}", r.stderr);
        for needle in ["nriSocket", &path_str(&bad.join("run")), "uid 1000"] {
            assert!(
                r.stderr.contains(needle),
                "{args:?}: {needle:?} not in {}",
                r.stderr
            );
        }
    }
}

/// The device-info file Multus names by the configured path (under the
/// link) and the one named by the real path are the same file in the same
/// directory; a path through any other link is not the node's deviceInfoDir.
#[test]
fn the_device_info_file_is_honoured_only_in_the_nodes_dir_by_either_name() {
    needs!(root);
    let mut n = Node::new(Target::Relative);
    n.rail.conf["runtimeConfig"] =
        json!({"CNIDeviceInfoFile": path_str(&n.real("devinfo/cni").join(INFO))});
    n.run("ADD").ok();
    assert!(n.real("devinfo/cni").join(INFO).is_file());
    n.run("DEL").ok();
    // A link of the tenant's choosing to the same directory.
    let other: &Path = &n.rail.state.base().join("other");
    std::os::unix::fs::symlink(n.real(""), other).unwrap();
    n.rail.conf["runtimeConfig"] =
        json!({"CNIDeviceInfoFile": path_str(&other.join("devinfo/cni").join(INFO))});
    let r = n.run("ADD");
    r.ok();
    assert!(r.stderr.contains("directly inside"), "{}", r.stderr);
    assert!(!n.real("devinfo/cni").join(INFO).exists());
    assert_eq!(
        std::fs::metadata(n.real("devinfo/cni")).unwrap().uid(),
        0,
        "the dir roce-tune made is root's"
    );
}
