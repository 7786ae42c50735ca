//! The exclusive-mode mechanism: a sysfs instance shows the netns of the
//! thread that created it, so `View::fresh_sysfs` made on a thread inside the
//! pod netns (`NetNs::run`) must show the pod's devices, from ANY thread
//! afterwards, while nothing is mounted anywhere: the host's /sys and every
//! thread's mounts stay exactly as they were. Proved here with a real veth,
//! since no RDMA device can be moved into a netns on this machine.

mod common;
use common::*;
use roce_tune::netns::NetNs;
use roce_tune::rdma::{needs_pod_sysfs, NetnsMode};
use roce_tune::sysfs::View;
use serde_json::{json, Value};
use std::path::Path;

/// The sysfs mounts a mountinfo file lists (mount id and mount point).
fn sysfs_mounts(mountinfo: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(mountinfo).unwrap();
    let mut v: Vec<(String, String)> = text
        .lines()
        .filter(|l| {
            l.split_once(" - ")
                .is_some_and(|(_, fs)| fs.starts_with("sysfs "))
        })
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_string(), f[4].to_string())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_fresh_sysfs_shows_the_pod_and_mounts_nothing() {
    if !have_root("a_fresh_sysfs_shows_the_pod_and_mounts_nothing") {
        return;
    }
    // A name no host interface has, so its presence in a view proves the netns.
    let ifname = unique("rtx");
    assert!(ifname.len() <= 15, "{ifname}");
    let pod = Pod::new(&ifname, None);
    let class_net = format!("/sys/class/net/{ifname}");
    let host_sees = || Path::new(&class_net).exists();
    assert!(!host_sees(), "the host's sysfs shows the host netns");
    let host_has_eth0 = Path::new("/sys/class/net/eth0").exists();
    let before = (
        sysfs_mounts("/proc/self/mountinfo"),
        sysfs_mounts("/proc/thread-self/mountinfo"),
    );
    let want_index = sh(&format!("ip -n {} -o link show {ifname}", pod.ns))
        .split(':')
        .next()
        .unwrap()
        .trim()
        .to_string();

    let ns = NetNs::open_required(Path::new(&pod.path())).unwrap();
    let (view, inside_mounts, seen_inside_host_sysfs) = ns
        .run(|| {
            let v = View::fresh_sysfs("<pod>")
                .map_err(|e| roce_tune::cni::CniError::io("fsmount", e))?;
            Ok((v, sysfs_mounts("/proc/thread-self/mountinfo"), host_sees()))
        })
        .unwrap();
    // Read on THIS thread, which never left the host's namespaces.
    let net = view.list(Path::new("class/net")).unwrap();
    assert!(
        net.contains(&ifname),
        "the pod's view shows the pod's {ifname}: {net:?}"
    );
    let index = view
        .read(&Path::new("class/net").join(&ifname).join("ifindex"))
        .unwrap();
    assert_eq!(index.trim(), want_index, "and it is the pod's own link");
    if host_has_eth0 {
        assert!(
            !net.iter().any(|n| n == "eth0"),
            "the host's eth0 is not in the pod's view"
        );
    }
    assert_eq!(inside_mounts, before.1, "the worker mounted nothing");
    // The netns alone does not change what the host's sysfs mount shows:
    // the fresh instance is what makes the pod's devices reachable.
    assert!(
        !seen_inside_host_sysfs,
        "a thread in the pod netns still sees the host's /sys"
    );

    assert!(
        !host_sees(),
        "the pod's link did not leak into the host's /sys"
    );
    assert!(Path::new("/sys/class/net/lo").exists());
    assert_eq!(host_has_eth0, Path::new("/sys/class/net/eth0").exists());
    let after = (
        sysfs_mounts("/proc/self/mountinfo"),
        sysfs_mounts("/proc/thread-self/mountinfo"),
    );
    assert_eq!(
        after, before,
        "no sysfs mount anywhere in the test's namespace"
    );
}

#[test]
fn a_test_tree_never_needs_the_pod_sysfs() {
    let tree = Tree::new();
    std::fs::write(
        tree.root.join("module/ib_core/parameters/netns_mode"),
        "N\n",
    )
    .unwrap();
    let view = View::open(&tree.root).unwrap();
    assert_eq!(NetnsMode::read(&view), NetnsMode::Exclusive);
    assert!(
        !needs_pod_sysfs(&view),
        "a test tree is both the host and the pod view"
    );
    // On the real /sys it follows the module parameter.
    let sys = View::open(Path::new("/sys")).unwrap();
    assert_eq!(
        needs_pod_sysfs(&sys),
        NetnsMode::read(&sys) == NetnsMode::Exclusive
    );
}

/// A tree in exclusive mode, one VF with its GID, and a config for `pod`.
fn exclusive_tree(pod: &Pod, state: &StateDirPath) -> (Tree, Value) {
    let tree = Tree::new();
    std::fs::write(
        tree.root.join("module/ib_core/parameters/netns_mode"),
        "N\n",
    )
    .unwrap();
    tree.add_device("0000:0c:00.2", "mlx5_2", "Global tclass=106\n");
    tree.set_ipv4_gids("mlx5_2", "192.168.0.34");
    let c = rail_conf(&tree, state, "0000:0c:00.2", pod, 41, &["192.168.0.34/16"]);
    (tree, c)
}

#[test]
fn exclusive_mode_test_tree_add_and_del() {
    if !have_root("exclusive_mode_test_tree_add_and_del") {
        return;
    }
    let pod = Pod::new("net1", Some("192.168.0.34/16"));
    let state = StateDirPath::new();
    let (tree, c) = exclusive_tree(&pod, &state);
    run_conf(&state, "ADD", "c1", &pod, &c).ok();
    assert_eq!(tree.tc("mlx5_2"), "tclass=41");
    assert_eq!(
        state.entry("c1", "net1").unwrap()["exclusive"],
        json!(false),
        "the tree was written directly, not through a pod sysfs"
    );
    run_conf(&state, "CHECK", "c1", &pod, &c).ok();
    run_conf(&state, "DEL", "c1", &pod, &c).ok();
    assert_eq!(tree.tc("mlx5_2"), "tclass=106");
}

/// An entry recorded as exclusive is first looked for in a sysfs mounted in
/// the pod; where the device is not there (a test tree, or a device the
/// kernel already returned to the host) the recorded host view restores it.
#[test]
fn exclusive_entry_falls_back_to_the_host_view() {
    if !have_root("exclusive_entry_falls_back_to_the_host_view") {
        return;
    }
    let pod = Pod::new("net1", Some("192.168.0.34/16"));
    let state = StateDirPath::new();
    let (tree, c) = exclusive_tree(&pod, &state);
    let mounts_before = sysfs_mounts("/proc/self/mountinfo");
    for (cid, pod_alive) in [("c1", true), ("c2", false)] {
        tree.set_tc("mlx5_2", "tclass=41");
        state.plant(&json!({
            "version": 1, "network": "rdma-vf", "containerId": cid, "ifname": "net1",
            "netns": pod.path(), "sysfsRoot": path_str(&tree.root), "exclusive": true,
            "device": "mlx5_2", "port": 1, "original": 106, "written": 41,
            "created": epoch_secs(),
        }));
        if !pod_alive {
            pod.delete();
        }
        run_plugin(&state, "DEL", cid, "", "net1", c.to_string().as_bytes()).ok();
        assert_eq!(tree.tc("mlx5_2"), "tclass=106", "pod alive: {pod_alive}");
        assert!(state.entries().is_empty());
    }
    assert_eq!(sysfs_mounts("/proc/self/mountinfo"), mounts_before);
}
