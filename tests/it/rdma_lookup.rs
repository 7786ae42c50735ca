//! From the VF to its RDMA device (docs/design.md, "RDMA netns modes"): by the PCI address Multus
//! injects (`deviceID`, or `pciBusID` alone), else by the netdev's parent as
//! netlink reports it. `infiniband/` must hold exactly one entry; anything
//! else is 100, before anything on the node is changed.

use crate::common::*;
use roce_tune::netlink::{Link, Netlink};
use roce_tune::netns::{Lookup, NetNs};
use roce_tune::rdma::device::{self, Parent};
use roce_tune::rdma::lookup;
use roce_tune::rdma::reach::{PodSide, Sysfs};
use roce_tune::sysfs::View;
use serde_json::{json, Value};
use std::path::Path;

/// Two VFs, so a lookup that picks the wrong one shows.
fn two_vf_tree() -> Tree {
    let tree = Tree::new();
    for (pci, dev) in [("0000:0c:00.2", "mlx5_2"), ("0000:0c:00.3", "mlx5_3")] {
        tree.add_device(pci, dev, "");
        tree.set_ipv4_gids(dev, IP);
    }
    tree
}

#[test]
fn found_by_device_id_and_by_pci_bus_id_alone() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let tree = two_vf_tree();
    let state = StateDirPath::new();
    let c = rail_conf(&tree, &state, "0000:0c:00.3", &pod, 41, &[ADDR]);
    run_conf(&state, "ADD", "c1", &pod, &c).ok();
    assert_eq!(tree.tc("mlx5_3"), "tclass=41");
    assert_eq!(tree.tc("mlx5_2"), "", "the other VF is untouched");
    assert_eq!(
        state.entry("c1", "net1").unwrap()["device"],
        json!("mlx5_3")
    );
    run_conf(&state, "DEL", "c1", &pod, &c).ok();

    let mut c = rail_conf(&tree, &state, "0000:0c:00.2", &pod, 50, &[ADDR]);
    c.as_object_mut().unwrap().remove("deviceID");
    c["pciBusID"] = json!("0000:0c:00.2");
    run_conf(&state, "ADD", "c2", &pod, &c).ok();
    assert_eq!(tree.tc("mlx5_2"), "tclass=50");
    assert_eq!(tree.tc("mlx5_3"), "tclass=-1", "as c1's DEL left it");
}

/// ADD on a config whose lookup must fail: 100, and the sysctls and the
/// classes are as they were (the device is found before anything changes).
fn lookup_fails(pod: &Pod, tree: &Tree, state: &StateDirPath, c: &Value) -> String {
    pod.set_sysctl("net.ipv4.conf.net1.arp_ignore", "0");
    let r = run_conf(state, "ADD", "c1", pod, c);
    assert_eq!(r.code(), 100, "{}", r.stdout);
    assert_eq!(pod.sysctl("net.ipv4.conf.net1.arp_ignore"), "0");
    for dev in ["mlx5_2", "mlx5_3"] {
        if tree.tc_path(dev).exists() {
            assert_eq!(tree.tc(dev), "", "{dev}");
        }
    }
    r.msg()
}

#[test]
fn device_id_without_pci_dir_is_100() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let tree = two_vf_tree();
    let state = StateDirPath::new();
    let c = rail_conf(&tree, &state, "0000:0c:00.7", &pod, 41, &[ADDR]);
    let msg = lookup_fails(&pod, &tree, &state, &c);
    let dir = tree.root.join("bus/pci/devices/0000:0c:00.7/infiniband");
    assert!(
        msg.contains("its PCI function 0000:0c:00.7") && msg.contains(&path_str(&dir)),
        "{msg}"
    );
    assert!(state.entries().is_empty());
}

#[test]
fn empty_infiniband_dir_is_100() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let tree = two_vf_tree();
    let state = StateDirPath::new();
    // The VF is there but not bound to an RDMA driver (or the rdma plugin
    // already moved the device away).
    std::fs::create_dir_all(tree.root.join("bus/pci/devices/0000:0c:00.4/infiniband")).unwrap();
    let c = rail_conf(&tree, &state, "0000:0c:00.4", &pod, 41, &[ADDR]);
    let msg = lookup_fails(&pod, &tree, &state, &c);
    assert!(
        msg.contains("empty") && msg.contains("0000:0c:00.4"),
        "{msg}"
    );
}

#[test]
fn two_entries_are_ambiguous() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let tree = two_vf_tree();
    let state = StateDirPath::new();
    std::fs::create_dir_all(
        tree.root
            .join("bus/pci/devices/0000:0c:00.2/infiniband/mlx5_3"),
    )
    .unwrap();
    let c = rail_conf(&tree, &state, "0000:0c:00.2", &pod, 41, &[ADDR]);
    let msg = lookup_fails(&pod, &tree, &state, &c);
    assert!(
        msg.contains("ambiguous") && msg.contains("mlx5_2") && msg.contains("mlx5_3"),
        "{msg}"
    );
}

#[test]
fn veth_without_device_id_has_no_parent() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let tree = two_vf_tree();
    let state = StateDirPath::new();
    let mut c = rail_conf(&tree, &state, "0000:0c:00.2", &pod, 41, &[ADDR]);
    c.as_object_mut().unwrap().remove("deviceID");
    // The tree gives the pod's net1 no PCI function: a plain veth.
    tree.unbind(&pod, "net1");
    let msg = lookup_fails(&pod, &tree, &state, &c);
    assert!(msg.starts_with("net1 is not a VF"), "{msg}");

    // An interface the pod does not have is named as such (the class alone
    // needs the device; prevResult knows no address of net9).
    c["gidCheck"] = json!("off");
    let stdin = c.to_string();
    let r = run_plugin(&state, "ADD", "c1", &pod.path(), "net9", stdin.as_bytes());
    assert_eq!(r.code(), 100, "{}", r.stdout);
    assert!(r.msg().contains("no interface net9"), "{}", r.msg());
}

/// The netlink path against a netdev that has a real parent: this machine's
/// eth0 (a VF cannot be had here, and eth0 cannot be moved into a pod, so
/// this runs in the host netns through the library).
#[test]
fn netlink_parent_of_a_real_netdev_finds_its_rdma_device() {
    needs!(root);
    let dev_link = Path::new("/sys/class/net/eth0/device");
    let Ok(target) = std::fs::read_link(dev_link) else {
        eprintln!(
            "SKIPPED netlink parent test: {} is not a link (no eth0, or eth0 has no parent device)",
            dev_link.display()
        );
        return;
    };
    let want_dev = target.file_name().unwrap().to_str().unwrap().to_string();
    let bus = std::fs::read_link(dev_link.join("subsystem")).expect("a device has a subsystem");
    let want_bus = bus.file_name().unwrap().to_str().unwrap().to_string();

    let link = Netlink::open()
        .unwrap()
        .link_by_name("eth0")
        .unwrap()
        .expect("netlink knows eth0");
    assert_eq!(link.name, "eth0");
    assert_eq!(
        link.parent_bus.as_deref(),
        Some(want_bus.as_str()),
        "{link:?}"
    );
    assert_eq!(
        link.parent_dev.as_deref(),
        Some(want_dev.as_str()),
        "{link:?}"
    );

    // On the kernel, the pod's side is rtnetlink's answer (Linux 5.14+)...
    let sysfs = Sysfs::open(Path::new("/sys")).unwrap();
    let Lookup::Netns(me) = NetNs::lookup(Path::new("/proc/self/ns/net")).unwrap() else {
        panic!("/proc/self/ns/net is no netns");
    };
    let want = Parent {
        bus: want_bus.clone(),
        dev: want_dev.clone(),
    };
    let mut side = PodSide::new(&sysfs, me.id(), "<sysfs>".into());
    assert_eq!(
        lookup::parent_of(&mut side, &link).unwrap(),
        Some(want.clone())
    );
    // ... and, where rtnetlink has no parent attributes (older kernels), the
    // `class/net/<ifname>/device` link of a sysfs made in the netns.
    let bare = Link {
        parent_dev: None,
        parent_bus: None,
        ..link.clone()
    };
    let mut side = PodSide::new(&sysfs, me.id(), "<sysfs>".into());
    assert_eq!(
        lookup::parent_of(&mut side, &bare).unwrap(),
        Some(want.clone())
    );

    let tree = Tree::new();
    std::fs::create_dir_all(tree.root.join(format!(
        "bus/{want_bus}/devices/{want_dev}/infiniband/mlx5_9"
    )))
    .unwrap();
    let view = View::open(&tree.root).unwrap();
    assert_eq!(device::of_parent(&view, &want).unwrap(), "mlx5_9");
    // A second entry makes it ambiguous, as for every parent.
    std::fs::create_dir_all(tree.root.join(format!(
        "bus/{want_bus}/devices/{want_dev}/infiniband/mlx5_10"
    )))
    .unwrap();
    let e = device::of_parent(&view, &want).unwrap_err().to_string();
    assert!(
        e.contains("ambiguous") && e.contains("mlx5_10, mlx5_9"),
        "{e}"
    );

    // A name that does not exist is None, not an error.
    let missing = unique("nx");
    assert_eq!(
        Netlink::open().unwrap().link_by_name(&missing).unwrap(),
        None
    );
}
