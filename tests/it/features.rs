//! What RDMA cluster users ask for, each through the binary with a real netns
//! and a sysfs test tree: GIDs at any index (`gidCheck: present`), the rdma_cm
//! default ToS (`rdmaCmTos`), a class chosen per pod within what the network
//! allows (`podTrafficClasses` + `args.cni.trafficClass`), device info for the
//! pod (`CNIDeviceInfoFile`), and idle VFs left with a class by NVIDIA's rdma
//! CNI fork (`inspect`, `reset-idle`). The kernel lane proves rdmaCmTos on a
//! real configfs (integration/kernel/).

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

// ------------------------------------------------------------ gidCheck present

#[test]
fn gid_check_present_accepts_any_index_and_logs_it() {
    needs!(root);
    let mut rail = Rail::spec().no_gids().build();
    // NCCL picks the index itself: here the v2 GID of the address is at 5.
    rail.tree.set_gid(DEV, 5, &v4_gid(IP), "RoCE v2");
    assert_eq!(rail.add("c1").code(), 101, "enforce wants index 3");
    rail.conf["gidCheck"] = json!("present");
    let r = rail.add("c1");
    r.ok();
    assert!(
        r.stderr.contains("GID index 5 of mlx5_2"),
        "logs the index: {}",
        r.stderr
    );
    rail.check("c1").ok();
    // Where the GID never appears, present fails like enforce, naming it.
    rail.tree.set_gid(DEV, 5, ZERO_GID, "");
    rail.conf["gidTimeoutMs"] = json!(200);
    let r = rail.add("c2");
    assert_eq!(r.code(), 101, "{}", r.stdout);
    assert!(r.msg().contains("no index holds"), "{}", r.msg());
    // A late GID at another index is waited for.
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            rail.tree.set_gid(DEV, 7, &v4_gid(IP), "RoCE v2");
        });
        rail.conf["gidTimeoutMs"] = json!(3000);
        rail.add("c3")
    });
    r.ok();
    assert!(r.stderr.contains("GID index 7"), "{}", r.stderr);
}

// ------------------------------------------------------------ rdmaCmTos

/// configfs as a test tree plays it: the rdma_cm dir, and the device's
/// group with its port file (the kernel makes `ports/` on mkdir).
fn with_configfs(tree: &Tree, tos: &str) -> std::path::PathBuf {
    let port = tree
        .root
        .join(format!("kernel/config/rdma_cm/{DEV}/ports/1"));
    std::fs::create_dir_all(&port).unwrap();
    std::fs::write(port.join("default_roce_tos"), tos).unwrap();
    port.join("default_roce_tos")
}

#[test]
fn rdma_cm_tos_is_recorded_written_verified_and_restored_exactly() {
    needs!(root);
    let mut rail = Rail::new();
    let tos = with_configfs(&rail.tree, "0\n");
    rail.conf.as_object_mut().unwrap().remove("trafficClass");
    rail.conf["rdmaCmTos"] = json!(106);
    rail.add("c1").ok();
    assert_eq!(std::fs::read_to_string(&tos).unwrap(), "106");
    assert_eq!(
        rail.tree.tc(DEV),
        "",
        "the class is left alone without trafficClass"
    );
    let e = rail.state.entry("c1", "net1").unwrap();
    assert_eq!(
        e["owned"]["rdmaCmTos"],
        json!({"original": 0, "written": 106})
    );
    assert_eq!(e["owned"]["trafficClass"], Value::Null);
    rail.check("c1").ok();
    // A repeated ADD keeps the first original, not the 106 it finds.
    rail.add("c1").ok();
    assert_eq!(
        rail.state.entry("c1", "net1").unwrap()["owned"]["rdmaCmTos"]["original"],
        0
    );
    std::fs::write(&tos, "8").unwrap();
    let r = rail.check("c1");
    assert_eq!(r.code(), 105, "CHECK reports the drift: {}", r.stdout);
    std::fs::write(&tos, "106").unwrap();
    rail.del("c1").ok();
    assert_eq!(
        std::fs::read_to_string(&tos).unwrap(),
        "0",
        "the original, exactly"
    );
    assert!(rail.state.entries().is_empty());

    // Someone else changed it since: left alone.
    rail.add("c2").ok();
    std::fs::write(&tos, "32").unwrap();
    rail.del("c2").ok();
    assert_eq!(std::fs::read_to_string(&tos).unwrap(), "32");

    // Both knobs at once: each restored.
    rail.conf["trafficClass"] = json!(41);
    std::fs::write(&tos, "0").unwrap();
    rail.add("c3").ok();
    assert_eq!(
        (
            rail.tree.tc(DEV).as_str(),
            std::fs::read_to_string(&tos).unwrap().as_str()
        ),
        ("tclass=41", "106")
    );
    rail.del("c3").ok();
    assert_eq!(
        (
            rail.tree.tc(DEV).as_str(),
            std::fs::read_to_string(&tos).unwrap().as_str()
        ),
        ("tclass=-1", "0")
    );
}

#[test]
fn rdma_cm_tos_without_configfs_is_105_and_changes_nothing() {
    needs!(root);
    let mut rail = Rail::new();
    rail.conf["rdmaCmTos"] = json!(106);
    let r = rail.add("c1");
    assert_eq!(r.code(), 105, "{}", r.stdout);
    assert!(
        r.msg().contains("configfs") && r.msg().contains("rdma_cm"),
        "{}",
        r.msg()
    );
    assert_eq!(rail.tree.tc(DEV), "", "the class was not left written");
    assert!(rail.state.entries().is_empty());
    // configfs mounted, the device's group not made yet: roce-tune makes it
    // (a test tree's mkdir makes no port file, where the kernel would).
    std::fs::create_dir_all(rail.tree.root.join("kernel/config/rdma_cm")).unwrap();
    let r = rail.add("c1");
    assert_eq!(r.code(), 105, "{}", r.stdout);
    assert!(
        rail.tree
            .root
            .join(format!("kernel/config/rdma_cm/{DEV}"))
            .is_dir(),
        "mkdir of the group"
    );
}

#[test]
fn rdma_cm_tos_out_of_range_is_7() {
    needs!(root);
    let state = StateDirPath::new();
    write_node_config(&state, None, json!({}));
    let c = json!({"cniVersion": "1.0.0", "name": "n", "type": "roce-tune", "rdmaCmTos": 256});
    let r = run_plugin(
        &state,
        "ADD",
        "c1",
        "/var/run/netns/x",
        "net1",
        c.to_string().as_bytes(),
    );
    assert_eq!(r.code(), 7);
    assert!(r.msg().contains("rdmaCmTos"), "{}", r.msg());
}

// ------------------------------------------------------------ a class per pod

#[test]
fn a_pod_picks_its_class_only_from_the_networks_list() {
    needs!(root);
    let mut rail = Rail::new();
    rail.conf["args"] = json!({"cni": {"trafficClass": 106}});
    let r = rail.add("c1");
    assert_eq!(r.code(), 7, "without podTrafficClasses: {}", r.stdout);
    assert!(
        r.msg().contains("lists no podTrafficClasses"),
        "{}",
        r.msg()
    );
    rail.conf["podTrafficClasses"] = json!([41, 96]);
    let r = rail.add("c1");
    assert_eq!(r.code(), 7, "outside the list: {}", r.stdout);
    assert!(r.msg().contains("[41, 96]"), "names the list: {}", r.msg());
    assert_eq!(rail.tree.tc(DEV), "", "nothing written");
    rail.conf["args"]["cni"]["trafficClass"] = json!(96);
    rail.add("c1").ok();
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=96",
        "the pod's class overrides the network's 41"
    );
    rail.check("c1").ok();
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=-1");
    // Without args the network's class applies, list or not.
    rail.conf.as_object_mut().unwrap().remove("args");
    rail.add("c2").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
}

// ------------------------------------------------------------ device info

#[test]
fn device_info_names_the_rdma_device_and_stays_read_only() {
    needs!(root);
    let mut rail = Rail::new();
    let dir = rail.state.base().join("devinfo");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_node_config(
        &rail.state,
        Some(&rail.tree),
        json!({"deviceInfoDir": path_str(&dir)}),
    );
    // What sriov-cni wrote before roce-tune runs: read-only, no rdma-device,
    // under the name Multus gives it (`<NAD namespace>-<NAD name>-<cid>_<ifname>`).
    let file = dir.join("default-rdma-vf-c1_net1");
    std::fs::write(
        &file,
        json!({"type": "pci", "version": "1.1.0", "pci": {"pci-address": PCI}}).to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    rail.conf["capabilities"] = json!({"CNIDeviceInfoFile": true});
    rail.conf["runtimeConfig"] = json!({"CNIDeviceInfoFile": path_str(&file)});
    rail.add("c1").ok();
    let info: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(info["pci"]["rdma-device"], DEV);
    assert_eq!(info["pci"]["pci-address"], PCI, "what was there is kept");
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o444);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");

    // A missing file is created.
    let fresh = dir.join("default-rdma-vf-c2_net1");
    rail.conf["runtimeConfig"] = json!({"CNIDeviceInfoFile": path_str(&fresh)});
    rail.add("c2").ok();
    let info: Value = serde_json::from_slice(&std::fs::read(&fresh).unwrap()).unwrap();
    assert_eq!(info["pci"]["rdma-device"], DEV);
    assert_eq!(info["type"], "pci");
}

/// `runtimeConfig.CNIDeviceInfoFile` is tenant input (a NAD can carry its
/// own): only this attachment's file is written (Multus names it
/// `<NAD namespace>-<NAD name>-<container id>_<ifname>`), never one whose
/// `pci-address` is not the PCI function roce-tune proved, and a file
/// roce-tune created is removed on DEL; one sriov-cni made is left to it.
#[test]
fn device_info_is_only_this_attachments_own() {
    needs!(root);
    let mut rail = Rail::new();
    // deviceInfoDir does not exist yet: roce-tune makes it, root's, 0700.
    let dir = rail.state.base().join("run/devinfo/cni");
    write_node_config(
        &rail.state,
        Some(&rail.tree),
        json!({"deviceInfoDir": path_str(&dir)}),
    );
    rail.conf["capabilities"] = json!({"CNIDeviceInfoFile": true});
    let own = dir.join("default-rail-c1_net1");
    rail.conf["runtimeConfig"] = json!({"CNIDeviceInfoFile": path_str(&own)});
    rail.add("c1").ok();
    let meta = std::fs::metadata(&dir).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o777),
        (0, 0o700),
        "deviceInfoDir"
    );
    let info: Value = serde_json::from_slice(&std::fs::read(&own).unwrap()).unwrap();
    assert_eq!(info["pci"]["rdma-device"], DEV);
    assert_eq!(info["pci"]["pci-address"], PCI, "the PCI function proved");
    rail.del("c1").ok();
    assert!(
        !own.exists(),
        "the file roce-tune made outlived its attachment"
    );

    // Another attachment's file, and this attachment's file claiming another
    // VF: neither changes.
    let other = json!({"type": "pci", "version": "1.1.0",
        "pci": {"pci-address": "0000:0c:00.3", "rdma-device": "mlx5_3"}})
    .to_string();
    let theirs = dir.join("default-rail-c9_net1");
    std::fs::write(&theirs, &other).unwrap();
    std::fs::write(&own, &other).unwrap();
    for (file, why) in [(&theirs, "not this attachment's"), (&own, "0000:0c:00.3")] {
        rail.conf["runtimeConfig"] = json!({"CNIDeviceInfoFile": path_str(file)});
        let r = rail.add("c1");
        r.ok();
        assert!(r.stderr.contains(why), "{}: {}", file.display(), r.stderr);
        assert_eq!(
            std::fs::read_to_string(file).unwrap(),
            other,
            "{}",
            file.display()
        );
        rail.del("c1").ok();
        assert!(file.exists(), "DEL removed a file roce-tune did not make");
    }

    // The file sriov-cni made (the VF's own address): updated, and left on
    // DEL for sriov-cni, whose DEL runs after roce-tune's, to remove.
    let sriovs = json!({"type": "pci", "version": "1.1.0", "pci": {"pci-address": PCI}});
    std::fs::remove_file(&own).unwrap();
    std::fs::write(&own, sriovs.to_string()).unwrap();
    rail.conf["runtimeConfig"] = json!({"CNIDeviceInfoFile": path_str(&own)});
    rail.add("c1").ok();
    let info: Value = serde_json::from_slice(&std::fs::read(&own).unwrap()).unwrap();
    assert_eq!(info["pci"]["rdma-device"], DEV);
    rail.del("c1").ok();
    assert!(own.exists(), "sriov-cni's file is sriov-cni's to remove");
}

#[test]
fn device_info_outside_the_nodes_dir_is_never_written() {
    needs!(root);
    let mut rail = Rail::new();
    let dir = rail.state.base().join("devinfo");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_node_config(
        &rail.state,
        Some(&rail.tree),
        json!({"deviceInfoDir": path_str(&dir)}),
    );
    let host = rail.state.base().join("host");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("precious"), "do not touch\n").unwrap();
    // This attachment's name, but a link to a host file.
    let linked = dir.join("default-rail-c1_net1");
    std::os::unix::fs::symlink(host.join("precious"), &linked).unwrap();
    for (path, why) in [
        (path_str(&host.join("precious")), "not directly inside"),
        (
            format!("{}/../host/precious", path_str(&dir)),
            "not directly inside",
        ),
        (path_str(&linked), "symbolic link"),
        (
            path_str(&host.join("default-rail-c1_net1")),
            "not directly inside",
        ),
    ] {
        rail.conf["runtimeConfig"] = json!({"CNIDeviceInfoFile": path});
        let r = rail.add("c1");
        r.ok();
        assert!(r.stderr.contains(why), "{path}: {}", r.stderr);
        rail.del("c1").ok();
    }
    assert_eq!(
        std::fs::read_to_string(host.join("precious")).unwrap(),
        "do not touch\n"
    );
    assert!(!host.join("default-rail-c1_net1").exists());
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["default-rail-c1_net1"]);
}

// ------------------------------------------------------------ idle VFs

/// A VF of the tree: its PF link, and its netdev on the host when `idle`.
fn vf(tree: &Tree, pci: &str, dev: &str, class: &str, idle: bool) {
    tree.add_device(pci, dev, class);
    let func = tree.root.join(format!("bus/pci/devices/{pci}"));
    std::os::unix::fs::symlink("../0000:0c:00.0", func.join("physfn")).unwrap();
    if idle {
        std::fs::create_dir_all(func.join(format!("net/ens1f0v{}", &pci[11..]))).unwrap();
    }
}

fn cli(state: &StateDirPath, args: &[&str]) -> Run {
    Exec::new(BIN)
        .env("ROCE_TUNE_NODE_CONFIG", node_config(state))
        .args(args)
        .run()
}

#[test]
fn idle_vfs_left_with_a_class_by_the_rdma_cni_fork_are_flagged_and_reset() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    write_node_config(&state, Some(&tree), json!({}));
    // The fork's life of VF .2, with rdmaQoS unset: its ADD writes 0 (it reads
    // unset as 0); roce-tune records 0 as the original, writes 41, and its DEL
    // puts 0 back; the fork's DEL writes back the 0 it read. Idle, forced 0.
    vf(&tree, "0000:0c:00.2", "mlx5_2", "", true);
    tree.set_tc("mlx5_2", "tclass=0"); // fork ADD
    tree.set_tc("mlx5_2", "tclass=41"); // roce-tune ADD
    tree.set_tc("mlx5_2", "tclass=0"); // roce-tune DEL: the original it saw
    tree.set_tc("mlx5_2", "tclass=0"); // fork DEL: what it read
                                       // .3: idle and unset (nothing to do); .4: held by a pod (its netdev is in
                                       // the pod) with its class; .5: idle with a class, but a state entry names
                                       // it (the orphan repair's to restore); .6: idle with the fork's rdmaQoS 96.
    vf(&tree, "0000:0c:00.3", "mlx5_3", "", true);
    vf(&tree, "0000:0c:00.4", "mlx5_4", "Global tclass=41\n", false);
    vf(&tree, "0000:0c:00.5", "mlx5_5", "Global tclass=41\n", true);
    vf(&tree, "0000:0c:00.6", "mlx5_6", "Global tclass=96\n", true);
    state.plant(&json!({
        "version": 2, "network": "rail", "containerId": "gone", "ifname": "net1",
        "netns": "/var/run/netns/none", "netnsId": null, "exclusive": false,
        "device": "mlx5_5", "port": 1, "pci": "0000:0c:00.5", "guid": null,
        "trafficClass": {"original": null, "written": 41}, "rdmaCmTos": null, "createdNs": 1,
    }));

    let r = cli(&state, &["inspect", "--sysfs-root", &path_str(&tree.root)]);
    assert_eq!(r.status, 1, "a flagged VF fails inspect: {}", r.stdout);
    let flagged: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL idle-vf"))
        .collect();
    assert_eq!(flagged.len(), 2, "{}", r.stdout);
    assert!(
        flagged[0].contains("0000:0c:00.2") && flagged[0].contains("class 0"),
        "{}",
        flagged[0]
    );
    assert!(
        flagged[0].contains("rdma CNI fork"),
        "names the likely writer: {}",
        flagged[0]
    );
    assert!(
        flagged[1].contains("0000:0c:00.6") && flagged[1].contains("class 96"),
        "{}",
        flagged[1]
    );
    assert!(flagged.iter().all(|l| l.contains("reset-idle")), "the fix");

    let r = cli(&state, &["reset-idle", "--dry-run"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(
        r.stdout.contains("would reset mlx5_2") && r.stdout.contains("would reset mlx5_6"),
        "{}",
        r.stdout
    );
    assert_eq!(tree.tc("mlx5_2"), "tclass=0", "a dry run changes nothing");

    let r = cli(&state, &["reset-idle"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(tree.tc("mlx5_2"), "tclass=-1", "back to unset, not 0");
    assert_eq!(tree.tc("mlx5_6"), "tclass=-1");
    assert_eq!(tree.tc("mlx5_3"), "", "unset was left alone");
    assert_eq!(
        tree.tc("mlx5_4"),
        "Global tclass=41\n",
        "a pod's VF is not idle"
    );
    assert_eq!(
        tree.tc("mlx5_5"),
        "Global tclass=41\n",
        "an entry's device is the repair's"
    );
    let r = cli(&state, &["reset-idle"]);
    assert!(
        r.stdout.contains("0 idle VF ports held a class"),
        "{}",
        r.stdout
    );
    let r = cli(&state, &["inspect", "--sysfs-root", &path_str(&tree.root)]);
    assert!(!r.stdout.contains("FAIL idle-vf"), "{}", r.stdout);
}
