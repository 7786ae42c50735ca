//! `roce-tune inspect` run as an operator runs it: the built binary, no
//! CNI_COMMAND, against a real netns holding a veth renamed net1 and an RDMA
//! sysfs test tree in which the test plays the kernel (`tests/it/common`'s
//! `Tree`: the class, PCI and GID files a driver would make).

use crate::common::*;
use serde_json::Value;
use std::process::Command;

/// The seed's check pod output (shared/fixtures/seed-check-pod-output.txt):
/// device, address, and GIDs 0..3 with their types, for both netns modes.
const SEED_SHARED: (&str, &str, [(&str, &str); 4]) = (
    "mlx5_26",
    "192.168.0.34",
    [
        ("fe80:0000:0000:0000:8cca:d1ff:fed4:647d", "IB/RoCE v1"),
        ("fe80:0000:0000:0000:8cca:d1ff:fed4:647d", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:c0a8:0022", "IB/RoCE v1"),
        ("0000:0000:0000:0000:0000:ffff:c0a8:0022", "RoCE v2"),
    ],
);
const SEED_EXCLUSIVE: (&str, &str, [(&str, &str); 4]) = (
    "mlx5_31",
    "192.168.0.18",
    [
        ("fe80:0000:0000:0000:4044:00ff:fecb:f958", "IB/RoCE v1"),
        ("fe80:0000:0000:0000:4044:00ff:fecb:f958", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:c0a8:0012", "IB/RoCE v1"),
        ("0000:0000:0000:0000:0000:ffff:c0a8:0012", "RoCE v2"),
    ],
);

fn inspect(args: &[&str]) -> Run {
    let r = Exec::new(BIN).arg("inspect").args(args).run();
    // docs/inspect.md is pasted from these runs:
    // INSPECT_SHOW=1 cargo test --test it inspect:: -- --nocapture --test-threads=1
    shown(&format!("roce-tune inspect {}", args.join(" ")), r)
}

fn lines_starting<'a>(r: &'a Run, prefix: &str) -> Vec<&'a str> {
    r.stdout.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// A pod with net1 at `ip`/24 and a tree whose `dev` holds the seed's GIDs, in the
/// exclusive netns mode or the shared one.
fn seed_case(seed: &(&str, &str, [(&str, &str); 4]), exclusive: bool) -> (Tree, Pod) {
    let (dev, ip, gids) = seed;
    let tree = Tree::new();
    tree.set_exclusive(exclusive);
    tree.add_device("0000:0c:00.2", dev, "");
    for (i, (g, t)) in gids.iter().enumerate() {
        tree.set_gid(dev, i as u32, g, t);
    }
    let pod = Pod::new("net1", Some(&format!("{ip}/24")));
    if exclusive {
        // Exclusive mode: the rdma plugin moved the device into the pod.
        tree.move_into(&pod, "0000:0c:00.2", dev);
    }
    (tree, pod)
}

fn set_recommended(pod: &Pod) {
    for (k, v) in rail_sysctls("net1") {
        pod.set_sysctl(&k, v);
    }
}

fn pod_args<'a>(pod_path: &'a str, tree: &'a Tree, dev: &'a str) -> Vec<&'a str> {
    vec![
        "--netns",
        pod_path,
        "--ifname",
        "net1",
        "--device",
        dev,
        "--sysfs-root",
        tree.root.to_str().unwrap(),
    ]
}

/// Every GID row of the seed appears in the table, index, GID and type.
fn assert_seed_gids(r: &Run, gids: &[(&str, &str); 4]) {
    for (i, (g, t)) in gids.iter().enumerate() {
        let row = r
            .stdout
            .lines()
            .find(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.first() == Some(&i.to_string().as_str()) && cells.get(1) == Some(g)
            })
            .unwrap_or_else(|| panic!("no row for gid {i} {g}:\n{}", r.stdout));
        assert!(row.contains(t), "gid {i} type {t}: {row}");
    }
}

#[test]
fn seed_shared_example_passes_gid_index_3() {
    needs!(root);
    let (tree, pod) = seed_case(&SEED_SHARED, false);
    let path = pod.path();
    let r = inspect(&pod_args(&path, &tree, "mlx5_26"));
    assert!(
        r.stdout
            .contains("RDMA netns mode: Y (Y = shared, N = exclusive)"),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .contains("Interface net1: ip=192.168.0.34 rdma_device=mlx5_26"));
    assert_seed_gids(&r, &SEED_SHARED.2);
    assert_eq!(
        lines_starting(&r, "PASS gid-index"),
        ["PASS gid-index: GID index 3 of mlx5_26 is the RoCE v2 GID of 192.168.0.34"],
        "{}",
        r.stdout
    );
    // A fresh netns has the kernel's defaults (arp_ignore 0): the rail is not
    // right yet, whatever the GID says.
    assert_eq!(r.status, 1, "{}", r.stdout);
    assert!(!lines_starting(&r, "FAIL sysctl").is_empty());
}

#[test]
fn seed_exclusive_example_is_reported_and_passes() {
    needs!(root);
    let (tree, pod) = seed_case(&SEED_EXCLUSIVE, true);
    set_recommended(&pod);
    let path = pod.path();
    let r = inspect(&pod_args(&path, &tree, "mlx5_31"));
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    assert!(r
        .stdout
        .contains("RDMA netns mode: N (Y = shared, N = exclusive)"));
    assert!(r
        .stdout
        .contains("a test tree: the pod's view is netns/<inode>/, nothing mounted"));
    assert_seed_gids(&r, &SEED_EXCLUSIVE.2);
    assert!(r
        .stdout
        .contains("PASS gid-index: GID index 3 of mlx5_31 is the RoCE v2 GID of 192.168.0.18"));
    let mut a = pod_args(&path, &tree, "mlx5_31");
    a.push("--json");
    let j = inspect(&a).json();
    assert_eq!(j["mode"], "exclusive");
    assert_eq!(j["netns_mode"], "N");
}

/// Run a case whose only defect is `make_wrong`, and return the one FAIL line.
fn single_failure(
    test: &str,
    extra: &[&str],
    make_wrong: impl FnOnce(&Tree, &Pod),
) -> Option<(Run, String)> {
    needs!(root);
    let (tree, pod) = seed_case(&SEED_SHARED, false);
    set_recommended(&pod);
    tree.set_tc("mlx5_26", "tclass=41");
    make_wrong(&tree, &pod);
    let path = pod.path();
    let mut a = pod_args(&path, &tree, "mlx5_26");
    a.extend_from_slice(extra);
    let r = inspect(&a);
    assert_eq!(r.status, 1, "{test}: {}{}", r.stdout, r.stderr);
    let fails = lines_starting(&r, "FAIL ");
    assert_eq!(fails.len(), 1, "{test}: {}", r.stdout);
    let line = fails[0].to_string();
    assert!(r.stdout.contains("Result: FAIL (1 of"), "{}", r.stdout);
    Some((r, line))
}

#[test]
fn gid_at_index_5_names_the_index_and_nccl_setting() {
    let Some((_, line)) = single_failure("gid_at_index_5", &[], |t, _| {
        let v4 = v4_gid("192.168.0.34");
        t.set_gid("mlx5_26", 2, ZERO_GID, "");
        t.set_gid("mlx5_26", 3, ZERO_GID, "");
        t.set_gid("mlx5_26", 4, &v4, "IB/RoCE v1");
        t.set_gid("mlx5_26", 5, &v4, "RoCE v2");
    }) else {
        return;
    };
    assert!(line.starts_with("FAIL gid-index: index 3 of mlx5_26 holds 0000:0000:0000:0000:0000:0000:0000:0000 (unused)"), "{line}");
    assert!(
        line.contains("the RoCE v2 GID of 192.168.0.34 is at index 5: set NCCL_IB_GID_INDEX=5"),
        "{line}"
    );
}

#[test]
fn gid_zeros_fail() {
    let Some((_, line)) = single_failure("gid_zeros_fail", &[], |t, _| {
        t.set_gid("mlx5_26", 2, ZERO_GID, "");
        t.set_gid("mlx5_26", 3, ZERO_GID, "");
    }) else {
        return;
    };
    assert!(line.starts_with("FAIL gid-index:"), "{line}");
    assert!(
        line.contains("(unused)") && line.contains("is at no index"),
        "{line}"
    );
}

#[test]
fn gid_of_wrong_type_names_the_type() {
    let Some((_, line)) = single_failure("gid_of_wrong_type", &[], |t, _| {
        let v4 = v4_gid("192.168.0.34");
        t.set_gid("mlx5_26", 3, &v4, "IB/RoCE v1");
    }) else {
        return;
    };
    assert!(line.starts_with("FAIL gid-index:"), "{line}");
    assert!(line.contains("type IB/RoCE v1, not RoCE v2"), "{line}");
}

#[test]
fn forced_class_0_fails_against_41() {
    let Some((r, line)) = single_failure("forced_class_0", &["--traffic-class", "41"], |t, _| {
        t.set_tc("mlx5_26", "Global tclass=0\n");
    }) else {
        return;
    };
    assert_eq!(
        line.split(": set trafficClass").next().unwrap(),
        "FAIL traffic-class: mlx5_26 is 0, expected 41 (class 0 falls to the lossy priority)"
    );
    assert!(r.stdout.contains("traffic_class=0"), "{}", r.stdout);
}

#[test]
fn wrong_sysctl_names_the_key() {
    let Some((r, line)) = single_failure("wrong_sysctl", &[], |_, p| {
        p.set_sysctl("net.ipv4.conf.net1.arp_ignore", "0");
    }) else {
        return;
    };
    assert!(
        line.starts_with(
            "FAIL sysctl: net.ipv4.conf.net1.arp_ignore is 0, recommended 1: nsenter --net="
        ),
        "{line}"
    );
    let row = r
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("net.ipv4.conf.net1.arp_ignore"))
        .unwrap();
    assert!(row.ends_with("DIFFERS"), "{row}");
}

/// The seed's shared rail as roce-tune leaves it: the sysctls set, class 41
/// and rdma_cm ToS 106.
fn right_rail() -> (Tree, Pod) {
    let (tree, pod) = seed_case(&SEED_SHARED, false);
    set_recommended(&pod);
    tree.set_tc("mlx5_26", "tclass=41");
    set_tos(&tree, "mlx5_26", 106);
    (tree, pod)
}

#[test]
fn all_good_exits_0() {
    needs!(root);
    let (tree, pod) = right_rail();
    let path = pod.path();
    let mut a = pod_args(&path, &tree, "mlx5_26");
    a.extend_from_slice(&["--traffic-class", "41"]);
    let r = inspect(&a);
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    assert!(lines_starting(&r, "FAIL").is_empty());
    let line = lines_starting(&r, "Interface net1:")[0];
    assert!(
        line.contains(" traffic_class=41") && line.contains(" rdma_cm_tos=106"),
        "{line}"
    );
    assert_eq!(lines_starting(&r, "PASS").len(), 3, "{}", r.stdout);
    assert!(r.stdout.contains("Result: PASS (3 checks)"));
    // Sanity: the case really depends on what the test set (not a tool that
    // passes everything): undo one sysctl and the same run fails.
    pod.set_sysctl("net.ipv4.conf.net1.arp_filter", "0");
    assert_eq!(inspect(&a).status, 1);
}

#[test]
fn pid_reaches_the_same_netns() {
    needs!(root);
    let (tree, pod) = seed_case(&SEED_SHARED, false);
    // `ip netns exec` execs the command: the child's pid is a process in the pod.
    let mut child = Command::new("ip")
        .args(["netns", "exec", &pod.ns, "sleep", "30"])
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // Wait until the exec into the netns has happened.
    let ns_of = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    let want = std::fs::metadata(pod.path())
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap();
    for _ in 0..200 {
        if ns_of(&pid).is_some_and(|l| l.to_string_lossy().contains(&want.to_string())) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let root = tree.root.to_str().unwrap().to_string();
    let r = inspect(&[
        "--pid",
        &pid,
        "--ifname",
        "net1",
        "--device",
        "mlx5_26",
        "--sysfs-root",
        &root,
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        r.stdout.contains("PASS gid-index: GID index 3 of mlx5_26"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains(&format!("Pod netns: /proc/{pid}/ns/net")));
    assert!(r
        .stdout
        .contains("Character devices: - (no /dev/infiniband in the pod)"));
}

#[test]
fn json_carries_the_same_verdicts_as_the_table() {
    needs!(root);
    let (tree, pod) = seed_case(&SEED_SHARED, false);
    // Two defects and one good check: GID at 5, class forced to 0.
    let v4 = v4_gid("192.168.0.34");
    tree.set_gid("mlx5_26", 2, ZERO_GID, "");
    tree.set_gid("mlx5_26", 3, ZERO_GID, "");
    tree.set_gid("mlx5_26", 4, &v4, "IB/RoCE v1");
    tree.set_gid("mlx5_26", 5, &v4, "RoCE v2");
    tree.set_tc("mlx5_26", "tclass=0");
    set_recommended(&pod);
    let path = pod.path();
    let mut a = pod_args(&path, &tree, "mlx5_26");
    a.extend_from_slice(&["--traffic-class", "41"]);
    let text = inspect(&a);
    a.push("--json");
    let js = inspect(&a);
    assert_eq!(text.status, 1);
    assert_eq!(js.status, 1);
    let j: Value = js.json();
    let checks = j["checks"].as_array().unwrap();
    let verdict_lines: Vec<&str> = text
        .stdout
        .lines()
        .filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL "))
        .collect();
    assert_eq!(checks.len(), verdict_lines.len(), "{}", text.stdout);
    for (c, line) in checks.iter().zip(&verdict_lines) {
        let pass = c["pass"].as_bool().unwrap();
        let mut want = format!(
            "{} {}: {}",
            if pass { "PASS" } else { "FAIL" },
            c["name"].as_str().unwrap(),
            c["reason"].as_str().unwrap()
        );
        if !pass {
            want.push_str(&format!(": {}", c["fix"].as_str().unwrap()));
        }
        assert_eq!(*line, want);
        assert_eq!(c["ifname"], "net1");
    }
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| c["pass"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["gid-index", "traffic-class"]);
    assert_eq!(j["pass"], false);
    assert_eq!(j["view"], "pod");
    let i = &j["interfaces"][0];
    assert_eq!(i["device"], "mlx5_26");
    assert_eq!(i["settings"]["trafficClass"]["value"], 0);
    assert_eq!(i["addresses"][0]["address"], "192.168.0.34/24");
    assert_eq!(i["addresses"][0]["roce_v2_index"], 5);
}

/// A node: a PF 0000:0c:00.0 (mlx5_0) with a netdev and an ACTIVE port, a VF
/// 0000:0c:00.2 (mlx5_2) whose physfn links to the PF and whose rdma_cm ToS
/// is 106, and a non-mlx5 device without a tc file. configfs is mounted
/// with rdma_cm loaded; only mlx5_2 has a directory in it. No netns: runs
/// without root.
fn node_tree() -> Tree {
    let tree = Tree::new();
    tree.add_device("0000:0c:00.0", "mlx5_0", "");
    tree.add_device("0000:0c:00.2", "mlx5_2", "tclass=41");
    std::fs::create_dir_all(tree.root.join("kernel/config/rdma_cm")).unwrap();
    set_tos(&tree, "mlx5_2", 106);
    let pci = tree.root.join("bus/pci/devices");
    std::os::unix::fs::symlink("../0000:0c:00.0", pci.join("0000:0c:00.2/physfn")).unwrap();
    std::fs::create_dir_all(pci.join("0000:0c:00.0/net/ens1f0np0")).unwrap();
    std::fs::write(tree.dev_dir("mlx5_0").join("ports/1/state"), "4: ACTIVE\n").unwrap();
    tree.add_device("0000:3b:00.0", "rxe0", "");
    std::fs::remove_dir_all(tree.dev_dir("rxe0").join("tc")).unwrap();
    tree
}

/// The cells of a table line: columns are two spaces or more apart, and no
/// cell holds two spaces.
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

fn row<'a>(r: &'a Run, dev: &str) -> Vec<&'a str> {
    cells(
        r.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(dev))
            .unwrap_or_else(|| panic!("no row for {dev}:\n{}", r.stdout)),
    )
}

/// The node view's header: the device's own columns, then one per
/// registered setting (its key in snake case, upper case, spaced).
fn node_header() -> Vec<String> {
    ["DEVICE", "PCI", "PF", "NETDEV", "PORT", "STATE"]
        .map(String::from)
        .into_iter()
        .chain(roce_tune::settings::SETTINGS.iter().map(|s| {
            roce_tune::settings::snake_name(s.key())
                .replace('_', " ")
                .to_uppercase()
        }))
        .collect()
}

/// `dev`'s row of the node view, by column.
fn columns<'a>(r: &'a Run, dev: &str) -> std::collections::BTreeMap<&'a str, &'a str> {
    let header = r.stdout.lines().find(|l| l.starts_with("DEVICE")).unwrap();
    cells(header).into_iter().zip(row(r, dev)).collect()
}

#[test]
fn node_view_lists_devices_with_pci_pf_and_class() {
    let tree = node_tree();
    let root = tree.root.to_str().unwrap();
    let r = inspect(&["--sysfs-root", root]);
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("RDMA devices: 3"));
    let header = r.stdout.lines().find(|l| l.starts_with("DEVICE")).unwrap();
    assert_eq!(cells(header), node_header());
    let expect = |dev: &str, want: &[(&str, &str)]| {
        let got = columns(&r, dev);
        assert_eq!(got.len(), node_header().len(), "{dev}: {got:?}");
        for (column, cell) in want {
            assert_eq!(got[column], *cell, "{dev} {column}: {got:?}");
        }
    };
    let own = ["DEVICE", "PCI", "PF", "NETDEV", "PORT", "STATE"];
    let cells_of = |values: [&'static str; 8]| -> Vec<(&'static str, &'static str)> {
        own.iter()
            .copied()
            .chain(["TRAFFIC CLASS", "RDMA CM TOS"])
            .zip(values)
            .collect()
    };
    expect(
        "mlx5_0",
        &cells_of([
            "mlx5_0",
            "0000:0c:00.0",
            "-",
            "ens1f0np0",
            "1",
            "4: ACTIVE",
            "unset",
            "n/a",
        ]),
    );
    expect(
        "mlx5_2",
        &cells_of([
            "mlx5_2",
            "0000:0c:00.2",
            "0000:0c:00.0",
            "-",
            "1",
            "-",
            "41",
            "106",
        ]),
    );
    expect(
        "rxe0",
        &cells_of(["rxe0", "0000:3b:00.0", "-", "-", "1", "-", "n/a", "n/a"]),
    );
    // Columns line up: each row's PCI starts where the header's does.
    let col = header.find("PCI").unwrap();
    for dev in ["mlx5_0", "mlx5_2", "rxe0"] {
        let l = r.stdout.lines().find(|l| l.starts_with(dev)).unwrap();
        assert_eq!(&l[col..col + 5], "0000:", "{l}");
    }

    let r = inspect(&["--sysfs-root", root, "--device", "mlx5_2", "--json"]);
    assert_eq!(r.status, 0);
    let j = r.json();
    let devs = j["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0]["device"], "mlx5_2");
    assert_eq!(devs[0]["pf"], "0000:0c:00.0");
    assert_eq!(devs[0]["settings"]["trafficClass"]["value"], 41);
    assert_eq!(j["view"], "node");

    let r = inspect(&["--sysfs-root", root, "--device", "mlx5_2"]);
    assert!(r.stdout.contains("RDMA devices: 1"));
    assert!(!r.stdout.contains("mlx5_0"), "{}", r.stdout);
}

#[test]
fn node_view_checks_the_class_when_asked() {
    let tree = node_tree();
    let root = tree.root.to_str().unwrap();
    let r = inspect(&[
        "--sysfs-root",
        root,
        "--device",
        "mlx5_2",
        "--traffic-class",
        "41",
    ]);
    assert_eq!(r.status, 0, "{}", r.stdout);
    assert_eq!(lines_starting(&r, "PASS traffic-class: mlx5_2").len(), 1);
    let r = inspect(&["--sysfs-root", root, "--traffic-class", "41"]);
    assert_eq!(r.status, 1, "{}", r.stdout);
    let fails = lines_starting(&r, "FAIL traffic-class");
    assert_eq!(fails.len(), 2, "{}", r.stdout);
    assert!(fails[0].contains("mlx5_0 is unset, expected 41"));
    assert!(fails[1].contains("rxe0 has no traffic class file"));
    let r = inspect(&["--sysfs-root", root, "--device", "mlx5_9"]);
    assert_eq!(r.status, 1);
    assert!(
        lines_starting(&r, "FAIL rdma-device: mlx5_9 is not under").len() == 1,
        "{}",
        r.stdout
    );
}

/// The rdma_cm default ToS of `dev`'s port 1, as configfs holds it once
/// someone made the device's directory (a test tree's `kernel/config`).
fn set_tos(tree: &Tree, dev: &str, tos: u8) {
    let port = tree
        .root
        .join(format!("kernel/config/rdma_cm/{dev}/ports/1"));
    std::fs::create_dir_all(&port).unwrap();
    std::fs::write(port.join("default_roce_tos"), format!("{tos}\n")).unwrap();
}

/// The registered settings' keys, as the JSON keys them.
fn setting_keys() -> Vec<&'static str> {
    roce_tune::settings::SETTINGS
        .iter()
        .map(|s| s.key())
        .collect()
}

/// Every registered setting is a column of the node view and an object of
/// its JSON, the rdma_cm ToS included; a device whose configfs directory
/// nobody made shows n/a, and inspect does not make it (reading only).
#[test]
fn node_view_shows_every_setting_the_rdma_cm_tos_included() {
    let tree = node_tree();
    let root = tree.root.to_str().unwrap();
    let before = snapshot(&tree.root);
    let r = inspect(&["--sysfs-root", root]);
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    let header = r.stdout.lines().find(|l| l.starts_with("DEVICE")).unwrap();
    assert_eq!(cells(header), node_header(), "a column per setting");
    let vf = columns(&r, "mlx5_2");
    assert_eq!((vf["TRAFFIC CLASS"], vf["RDMA CM TOS"]), ("41", "106"));
    let pf = columns(&r, "mlx5_0");
    assert_eq!((pf["TRAFFIC CLASS"], pf["RDMA CM TOS"]), ("unset", "n/a"));
    let j = inspect(&["--sysfs-root", root, "--json"]).json();
    let devs = j["devices"].as_array().unwrap();
    let vf = devs.iter().find(|d| d["device"] == "mlx5_2").unwrap();
    let settings = vf["settings"].as_object().expect("settings, by key");
    let keys: Vec<&str> = settings.keys().map(String::as_str).collect();
    let mut want = setting_keys();
    want.sort();
    assert_eq!(keys, want, "every registered setting, by its key");
    assert_eq!(vf["settings"]["rdmaCmTos"]["state"], "set");
    assert_eq!(vf["settings"]["rdmaCmTos"]["value"], 106);
    assert!(vf["settings"]["rdmaCmTos"]["path"]
        .as_str()
        .unwrap()
        .ends_with("kernel/config/rdma_cm/mlx5_2/ports/1/default_roce_tos"));
    assert_eq!(vf["settings"]["trafficClass"]["value"], 41);
    let pf = devs.iter().find(|d| d["device"] == "mlx5_0").unwrap();
    assert_eq!(pf["settings"]["rdmaCmTos"]["state"], "n/a");
    assert_eq!(pf["settings"]["trafficClass"]["state"], "unset");
    assert_eq!(
        snapshot_diff(&before, &snapshot(&tree.root)),
        Vec::<String>::new(),
        "inspect changed the tree (made a configfs directory?)"
    );
}

/// The pod view's rail line names every registered setting, and its JSON
/// carries each by key: the rdma_cm ToS as much as the traffic class.
#[test]
fn pod_view_shows_every_setting_the_rdma_cm_tos_included() {
    needs!(root);
    let (tree, pod) = right_rail();
    let path = pod.path();
    let r = inspect(&pod_args(&path, &tree, "mlx5_26"));
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("Interface net1:"))
        .unwrap();
    assert!(
        line.contains(" traffic_class=41") && line.contains(" rdma_cm_tos=106"),
        "{line}"
    );
    for s in roce_tune::settings::SETTINGS {
        let name = roce_tune::settings::snake_name(s.key());
        assert!(line.contains(&format!(" {name}=")), "every setting: {line}");
    }
    let mut a = pod_args(&path, &tree, "mlx5_26");
    a.push("--json");
    let j = inspect(&a).json();
    let i = &j["interfaces"][0];
    let keys: Vec<&str> = i["settings"]
        .as_object()
        .expect("settings, by key")
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = setting_keys();
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(i["settings"]["rdmaCmTos"]["value"], 106);
    assert_eq!(i["settings"]["trafficClass"]["value"], 41);
    assert_eq!(i["settings"]["trafficClass"]["state"], "set");
}

#[test]
fn help_and_bad_options() {
    let r = inspect(&["--help"]);
    assert_eq!(r.status, 0);
    for opt in [
        "--netns",
        "--pid",
        "--ifname",
        "--device",
        "--gid-index",
        "--traffic-class",
        "--port",
        "--sysfs-root",
        "--json",
        "Exit codes",
    ] {
        assert!(r.stdout.contains(opt), "help does not explain {opt}");
    }
    for (args, says) in [
        (&["--bogus"][..], "unknown option \"--bogus\""),
        (
            &["--traffic-class", "300"][..],
            "--traffic-class \"300\" is not a number from 0 to 255",
        ),
        (&["--netns", "/a", "--pid", "1"][..], "not both"),
        (&["--ifname", "net1"][..], "--ifname needs --netns or --pid"),
        (&["--pid"][..], "--pid needs a value"),
    ] {
        let r = inspect(args);
        assert_eq!(r.status, 2, "{args:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty());
    }
    // A netns that does not exist stops the inspection: exit 2, not a FAIL.
    let r = inspect(&["--netns", "/var/run/netns/roce-tune-no-such-ns", "--json"]);
    assert_eq!(r.status, 2);
    assert!(r.json()["error"]
        .as_str()
        .unwrap()
        .contains("does not exist"));
    let r = inspect(&["--sysfs-root", "/nonexistent-roce-tune-tree"]);
    assert_eq!(r.status, 2);
    assert!(r.stderr.contains("is not a directory"));
    // A path that exists but is no network namespace stops it too.
    let r = inspect(&["--netns", "/proc/self/ns/uts"]);
    assert_eq!(r.status, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("/proc/self/ns/uts is not a network namespace"),
        "{}",
        r.stderr
    );
}

/// `--node-config` names the node config inspect reads (here: the state dir
/// whose entries give the pod's job environment), over
/// ROCE_TUNE_NODE_CONFIG, as gc's and reset-idle's option does.
#[test]
fn node_config_option_is_the_node_config_inspect_reads() {
    needs!(root);
    let rail = Rail::new();
    rail.add("c1").ok();
    let elsewhere = StateDirPath::new();
    let other = write_node_config(&elsewhere, None, serde_json::json!({}));
    let env = |node: Option<&std::path::Path>| {
        let e = Exec::new(BIN)
            .args(["inspect", "--netns", &rail.pod.path(), "--env"])
            .env("ROCE_TUNE_NODE_CONFIG", &other);
        match node {
            Some(n) => e.arg("--node-config").arg(n),
            None => e,
        }
        .run()
    };
    let r = env(None);
    assert_eq!(r.status, 1, "the other state dir has no rail: {r:?}");
    assert!(r.stderr.contains("nothing to inject"), "{}", r.stderr);
    let r = env(Some(&node_config(&rail.state)));
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("NCCL_IB_HCA==mlx5_2:1\n"), "{}", r.stdout);
    // A refused one stops inspect, naming why, as it stops every command.
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let r = Exec::new(BIN)
        .args([
            "inspect",
            "--sysfs-root",
            &path_str(&rail.tree.root),
            "--node-config",
        ])
        .arg(&other)
        .run();
    assert_eq!(r.status, 2, "{r:?}");
    assert!(
        r.stderr.contains("writable by group or others"),
        "{}",
        r.stderr
    );
}

/// A node with no RDMA device at all: inspect says which kernel modules
/// make one, in the table and as the fix of a failed class check.
#[test]
fn a_node_without_an_rdma_device_names_the_modules_to_look_for() {
    let tree = Tree::new();
    let root = path_str(&tree.root);
    let r = inspect(&["--sysfs-root", &root]);
    assert_eq!(r.status, 0, "{r:?}");
    let line = lines_starting(&r, "  none under ").join("");
    for module in [
        "mlx5_ib",
        "bnxt_re",
        "irdma",
        "rdma_rxe",
        "ib_core",
        "ib_uverbs",
    ] {
        assert!(line.contains(module), "{module}: {}", r.stdout);
    }
    assert!(line.contains(&format!("{root}/class/infiniband")), "{line}");
    let r = inspect(&["--sysfs-root", &root, "--traffic-class", "41"]);
    assert_eq!(r.status, 1, "{r:?}");
    let fail = lines_starting(&r, "FAIL rdma-device: no RDMA device under ");
    assert_eq!(fail.len(), 1, "{}", r.stdout);
    assert!(fail[0].contains("mlx5_ib"), "{}", fail[0]);
    // A tree with a device shows no such line.
    tree.add_device(PCI, DEV, "");
    let r = inspect(&["--sysfs-root", &root]);
    assert!(
        lines_starting(&r, "  none under ").is_empty(),
        "{}",
        r.stdout
    );
}

/// Without --device, the pod view finds the device as ADD does
/// (`rdma::lookup`): RDMA netlink, else the netdev's parent device. No
/// netdev with a parent can be moved into a test pod, so this inspects this
/// machine's eth0 in the test's own netns (`--pid`), with a tree whose
/// parent device of eth0 holds mlx5_9. This machine has no RDMA netlink, so
/// the parent device is what finds it; the real-kernel lane's `inspect`
/// scenario (integration/kernel/scenarios.sh) finds soft-RoCE by RDMA netlink.
#[test]
fn without_device_the_lookup_add_uses_finds_it_and_says_how() {
    needs!(root);
    // The tree plays the kernel: the pod's net1 is the PCI function
    // 0000:0c:00.7, whose RDMA device is mlx5_9 (no RDMA netlink here).
    let tree = Tree::new();
    tree.add_device("0000:0c:00.7", "mlx5_9", "tclass=41");
    let pod = Pod::new("net1", Some("192.168.0.34/24"));
    tree.bind(&pod, "net1", "0000:0c:00.7");
    let path = pod.path();
    let root = path_str(&tree.root);
    let mut a = vec![
        "--netns",
        &path,
        "--ifname",
        "net1",
        "--sysfs-root",
        &root,
        "--traffic-class",
        "41",
    ];
    let r = inspect(&a);
    let line = lines_starting(&r, "Interface net1:");
    assert_eq!(line.len(), 1, "{}{}", r.stdout, r.stderr);
    assert!(
        line[0].contains("rdma_device=mlx5_9 (by its PCI function 0000:0c:00.7) port=1 "),
        "{}",
        line[0]
    );
    assert!(
        r.stdout.contains("PASS traffic-class: mlx5_9 port 1 is 41"),
        "{}",
        r.stdout
    );
    a.push("--json");
    let j = inspect(&a).json();
    assert_eq!(j["interfaces"][0]["device"], "mlx5_9");
    assert_eq!(
        j["interfaces"][0]["device_source"],
        "its PCI function 0000:0c:00.7"
    );

    // A second device on the same function: the lookup refuses to guess, as
    // it does for ADD, and says which.
    std::fs::create_dir_all(
        tree.root
            .join("bus/pci/devices/0000:0c:00.7/infiniband/mlx5_10"),
    )
    .unwrap();
    a.pop();
    let r = inspect(&a);
    assert_eq!(r.status, 1);
    let fails = lines_starting(&r, "FAIL rdma-device:");
    assert_eq!(fails.len(), 1, "{}", r.stdout);
    assert!(
        fails[0].contains("ambiguous") && fails[0].contains("mlx5_10, mlx5_9"),
        "{}",
        fails[0]
    );
    // --device stays the operator's override.
    a.extend(["--device", "mlx5_9"]);
    let r = inspect(&a);
    assert!(
        r.stdout.contains("rdma_device=mlx5_9 (from --device)"),
        "{}",
        r.stdout
    );
}

#[test]
fn pod_without_an_rdma_interface_fails_rdma_device() {
    needs!(root);
    let (tree, pod) = seed_case(&SEED_SHARED, false);
    let path = pod.path();
    let root = tree.root.to_str().unwrap();
    // A veth has no parent device: discovery finds no rail and says why.
    let r = inspect(&["--netns", &path, "--sysfs-root", root]);
    assert_eq!(r.status, 1, "{}", r.stdout);
    let fails = lines_starting(&r, "FAIL rdma-device: no RDMA interface in the pod (net1: ");
    assert_eq!(fails.len(), 1, "{}", r.stdout);
    assert!(fails[0].contains("net1 is not a VF"), "{}", fails[0]);
    let r = inspect(&["--netns", &path, "--ifname", "net9", "--sysfs-root", root]);
    assert_eq!(r.status, 1);
    assert!(
        r.stdout.contains("there is no interface net9 in the pod"),
        "{}",
        r.stdout
    );
    // A named device that the tree does not have.
    let r = inspect(&[
        "--netns",
        &path,
        "--ifname",
        "net1",
        "--device",
        "mlx5_9",
        "--sysfs-root",
        root,
    ]);
    assert_eq!(r.status, 1);
    assert_eq!(
        lines_starting(
            &r,
            "FAIL rdma-device: RDMA device mlx5_9 (--device) is not under"
        )
        .len(),
        1,
        "{}",
        r.stdout
    );
}

/// A pod names its interfaces itself, and a name may hold any byte but '/',
/// ':', whitespace and NUL (the kernel's dev_valid_name): ESC sequences
/// included. What inspect prints of it must not move the operator's cursor
/// or forge a PASS line.
#[test]
fn pod_chosen_names_are_escaped() {
    needs!(root);
    let (tree, pod) = seed_case(&SEED_SHARED, false);
    let evil = "\x1b[1A\x1b[2KPASS";
    let out = Command::new("ip")
        .args(["-n", &pod.ns, "link", "set", "net1", "name", evil])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = pod.path();
    let root = path_str(&tree.root);
    for args in [
        vec!["--netns", &path, "--sysfs-root", &root],
        vec!["--netns", &path, "--ifname", evil, "--sysfs-root", &root],
        vec![
            "--netns",
            &path,
            "--ifname",
            evil,
            "--device",
            "mlx5_26",
            "--sysfs-root",
            &root,
        ],
    ] {
        let r = inspect(&args);
        for (what, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
            assert!(
                !text.contains('\x1b'),
                "{args:?}: an ESC byte reached {what}: {text:?}"
            );
        }
        assert!(
            r.stdout.contains("\\u{1b}[1A") || r.stderr.contains("\\u{1b}[1A"),
            "{args:?}: the name is not shown escaped: {}{}",
            r.stdout,
            r.stderr
        );
    }
}
