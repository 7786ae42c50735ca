//! The exclusive-mode mechanism: a sysfs instance shows the netns of the
//! thread that created it, so `View::fresh_sysfs` made on a thread inside the
//! pod netns (`NetNs::run`) must show the pod's devices, from ANY thread
//! afterwards, while nothing is mounted anywhere: the host's /sys and every
//! thread's mounts stay exactly as they were. Proved here with a real veth,
//! since no RDMA device can be moved into a netns on this machine.

use crate::common::*;
use roce_tune::netns::{Lookup, NetNs, NsId};
use roce_tune::rdma::reach::{Reach, Sysfs};
use roce_tune::rdma::NetnsMode;
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
    needs!(root);
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

    let Lookup::Netns(ns) = NetNs::lookup(Path::new(&pod.path())).unwrap() else {
        panic!("{} is no netns", pod.path());
    };
    let (view, inside_mounts, seen_inside_host_sysfs) = ns
        .run(|| {
            let v = View::fresh_sysfs("<pod>").expect("fsmount");
            (v, sysfs_mounts("/proc/thread-self/mountinfo"), host_sees())
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

/// A test tree stands for the kernel: each netns sees `netns/<inode>/`
/// (docs/design.md, "Test trees"), and exclusive mode reaches the device
/// there, as it does on the real /sys through a sysfs made in the pod.
#[test]
fn a_test_tree_gives_each_netns_its_own_view() {
    let tree = Tree::new();
    tree.set_exclusive(true);
    let sysfs = Sysfs::open(&tree.root).unwrap();
    assert_eq!(NetnsMode::read(sysfs.host()), NetnsMode::Exclusive);
    assert_eq!(sysfs.reach(), Reach::Pod, "the same reach as on the kernel");
    let ns = NsId {
        dev: 4,
        ino: 4026531999,
    };
    assert!(
        sysfs.pod_side(ns, "<pod>").unwrap().is_none(),
        "nothing given"
    );
    std::fs::create_dir_all(tree.root.join("netns/4026531999/class/net/net1")).unwrap();
    let pod = sysfs
        .pod_side(ns, "<pod>")
        .unwrap()
        .expect("the netns's view");
    assert_eq!(pod.list(Path::new("class/net")).unwrap(), ["net1"]);
    // On the real /sys the reach follows the module parameter.
    let sys = Sysfs::open(Path::new("/sys")).unwrap();
    let want = match NetnsMode::read(sys.host()) {
        NetnsMode::Exclusive => Reach::Pod,
        NetnsMode::Shared => Reach::Host,
    };
    assert_eq!(sys.reach(), want);
}

/// A tree in exclusive mode, one VF with its GID moved into `pod` (as the
/// rdma plugin does), and a config for `pod`.
fn exclusive_tree(pod: &Pod, state: &StateDirPath) -> (Tree, Value) {
    let tree = Tree::new();
    tree.set_exclusive(true);
    tree.add_device("0000:0c:00.2", "mlx5_2", "Global tclass=106\n");
    tree.set_ipv4_gids("mlx5_2", "192.168.0.34");
    let c = rail_conf(&tree, state, "0000:0c:00.2", pod, 41, &["192.168.0.34/16"]);
    tree.move_into(pod, "0000:0c:00.2", "mlx5_2");
    (tree, c)
}

#[test]
fn exclusive_mode_test_tree_add_and_del() {
    needs!(root);
    let pod = Pod::new("net1", Some("192.168.0.34/16"));
    let state = StateDirPath::new();
    let (tree, c) = exclusive_tree(&pod, &state);
    run_conf(&state, "ADD", "c1", &pod, &c).ok();
    assert_eq!(
        tree.tc_in(pod.ino(), "mlx5_2"),
        "tclass=41",
        "the pod's device"
    );
    assert_eq!(
        state.entry("c1", "net1").unwrap()["reach"],
        json!("pod"),
        "reached through the pod's sysfs, as on the kernel"
    );
    run_conf(&state, "CHECK", "c1", &pod, &c).ok();
    run_conf(&state, "DEL", "c1", &pod, &c).ok();
    assert_eq!(tree.tc_in(pod.ino(), "mlx5_2"), "tclass=106");
    // Without the rdma plugin the device stays on the host: not the pod's.
    let other = Pod::new("net1", Some("192.168.0.34/16"));
    tree.move_back(pod.ino(), "0000:0c:00.2", "mlx5_2");
    let c = rail_conf(
        &tree,
        &state,
        "0000:0c:00.2",
        &other,
        41,
        &["192.168.0.34/16"],
    );
    let r = run_conf(&state, "ADD", "c2", &other, &c);
    assert_eq!(r.code(), 100, "{}", r.stdout);
    assert!(r.msg().contains("rdma plugin"), "{}", r.msg());
    assert_eq!(tree.tc("mlx5_2"), "tclass=106");
}

/// The kernel moves a device back to the host only in the asynchronous
/// netns exit, after the netns path is gone: a DEL that sees it nowhere must
/// keep the entry ("invisible" is not "gone"), and the repair restores the
/// original once the device shows again.
#[test]
fn an_invisible_exclusive_device_is_kept_and_restored_when_it_returns() {
    needs!(root);
    let pod = Pod::new("net1", Some("192.168.0.34/16"));
    let state = StateDirPath::new();
    let (tree, c) = exclusive_tree(&pod, &state);
    run_conf(&state, "ADD", "c1", &pod, &c).ok();
    let ino = pod.ino();
    pod.delete();
    std::mem::forget(pod);
    // The netns is gone (its view is no one's now), the device not yet back
    // on the host: no view shows it.
    let r = run_plugin(&state, "DEL", "c1", "", "net1", c.to_string().as_bytes());
    r.ok();
    assert!(
        r.stderr.contains("kept for the orphan repair"),
        "{}",
        r.stderr
    );
    assert_eq!(state.entries(), ["c1:net1.state"], "the original is kept");
    assert!(gc_orphans(&state).status != 0, "not restorable yet");
    // The netns exit finishes: the device is the host's again.
    tree.move_back(ino, "0000:0c:00.2", "mlx5_2");
    let r = gc_orphans(&state);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(tree.tc("mlx5_2"), "tclass=106");
    assert!(state.entries().is_empty());
}
/// An entry recorded as exclusive is first looked for in a sysfs mounted in
/// the pod; where the device is not there (a test tree, or a device the
/// kernel already returned to the host) the recorded host view restores it.
#[test]
fn exclusive_entry_falls_back_to_the_host_view() {
    needs!(root);
    let pod = Pod::new("net1", Some("192.168.0.34/16"));
    let state = StateDirPath::new();
    let (tree, c) = exclusive_tree(&pod, &state);
    tree.move_back(pod.ino(), "0000:0c:00.2", "mlx5_2");
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
