//! Orphan repair: pods deleted without a DEL (a kubelet restart, a crashed
//! runtime) leave entries whose netns is gone. `roce-tune gc --orphans` gives
//! each device its original back and drops the entry; every ADD repairs up to
//! four of them before its own work. Live pods and corrupt entries are never
//! touched by a sweep.

use crate::common::*;
use serde_json::json;

/// Device `i` of the test tree: its PCI address and name.
fn dev(i: usize) -> (String, String) {
    (format!("0000:0c:{:02x}.2", i), format!("mlx5_{i}"))
}

fn conf(tree: &Tree, state: &StateDirPath, pci: &str, pod: &Pod) -> String {
    write_node_config(state, Some(tree), json!({}));
    tree.bind(pod, "net1", pci);
    json!({
        "cniVersion": "1.1.0", "name": "rail", "type": "roce-tune", "trafficClass": 41,
        "deviceID": pci,
        "prevResult": prev_result("1.1.0", "net1", &pod.path(), &[ADDR]),
    })
    .to_string()
}

/// A pod on device `i` (original class `tc`) after a successful ADD.
fn attached(tree: &Tree, state: &StateDirPath, i: usize, tc: &str) -> Pod {
    let (pci, name) = dev(i);
    tree.add_device(&pci, &name, tc);
    tree.set_ipv4_gids(&name, IP);
    let pod = Pod::new("net1", Some(ADDR));
    run_plugin(
        state,
        "ADD",
        &format!("c{i}"),
        &pod.path(),
        "net1",
        conf(tree, state, &pci, &pod).as_bytes(),
    )
    .ok();
    assert_eq!(tree.tc(&name), "tclass=41");
    pod
}

/// The pod is deleted without a DEL, as a lost DEL leaves it.
fn vanish(pod: Pod) {
    pod.delete();
    // Its Drop would delete the netns again and complain that it is gone.
    std::mem::forget(pod);
}

/// The sweep's exit status and summary line.
fn sweep(state: &StateDirPath) -> (i32, String) {
    if !node_config(state).exists() {
        write_node_config(state, None, json!({}));
    }
    let r = gc_orphans(state);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    (r.status, r.stdout.trim().to_string())
}

#[test]
fn gc_orphans_restores_pods_deleted_without_del() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    let originals = ["", "Global tclass=106\n", "Global tclass=0\n"];
    let gone: Vec<Pod> = originals
        .iter()
        .enumerate()
        .map(|(i, tc)| attached(&tree, &state, i, tc))
        .collect();
    let live = attached(&tree, &state, 3, "Global tclass=7\n");
    // Corrupt: the sweep cannot know what to restore, and must not guess.
    let corrupt = state.0.join("c9:net1.state");
    std::fs::write(&corrupt, "{\"version\":1,").unwrap();
    let live_entry = std::fs::read(state.0.join("c3:net1.state")).unwrap();
    gone.into_iter().for_each(vanish);

    let (code, summary) = sweep(&state);
    assert_eq!(code, 0, "{summary}");
    assert_eq!(
        summary, "examined 5 entries, released 3 orphans, 0 failed",
        "the summary"
    );
    assert_eq!(
        tree.tc("mlx5_0"),
        "tclass=-1",
        "unset original: unset again"
    );
    assert_eq!(tree.tc("mlx5_1"), "tclass=106");
    assert_eq!(tree.tc("mlx5_2"), "tclass=0", "0 is a value, restored as 0");
    assert_eq!(
        tree.tc("mlx5_3"),
        "tclass=41",
        "the live pod keeps its class"
    );
    assert_eq!(
        std::fs::read(state.0.join("c3:net1.state")).unwrap(),
        live_entry,
        "the live pod's entry is untouched"
    );
    assert_eq!(
        std::fs::read_to_string(&corrupt).unwrap(),
        "{\"version\":1,",
        "a corrupt entry is left where it is"
    );
    assert_eq!(state.entries(), ["c3:net1.state", "c9:net1.state"]);

    // A second sweep finds nothing more to do.
    let (code, summary) = sweep(&state);
    assert_eq!(code, 0);
    assert_eq!(summary, "examined 2 entries, released 0 orphans, 0 failed");

    // The live pod still gets a normal DEL.
    run_plugin(
        &state,
        "DEL",
        "c3",
        &live.path(),
        "net1",
        conf(&tree, &state, &dev(3).0, &live).as_bytes(),
    )
    .ok();
    assert_eq!(tree.tc("mlx5_3"), "tclass=7");
}

#[test]
fn gc_orphans_without_a_state_dir_is_a_no_op() {
    needs!(root);
    let state = StateDirPath::new();
    let (code, summary) = sweep(&state);
    assert_eq!(code, 0);
    assert_eq!(summary, "examined 0 entries, released 0 orphans, 0 failed");
    assert!(!state.0.exists(), "gc must not create the state dir");
}

/// Each ADD repairs at most four orphans before its own work, so a node with
/// a backlog heals over a few ADDs without one ADD paying for all of it.
#[test]
fn each_add_repairs_up_to_four_orphans_first() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    // Two orphans, then a new pod: both are repaired by its ADD.
    for i in 0..2 {
        vanish(attached(&tree, &state, i, "Global tclass=106\n"));
    }
    let new_pod = attached(&tree, &state, 10, "");
    assert_eq!(tree.tc("mlx5_0"), "tclass=106");
    assert_eq!(tree.tc("mlx5_1"), "tclass=106");
    assert_eq!(state.entries(), ["c10:net1.state"]);

    // Seven orphans at once: c10 and six more, all deleted only after every
    // ADD (an ADD made while one is already gone would repair it).
    let mut pods: Vec<Pod> = (2..8).map(|i| attached(&tree, &state, i, "")).collect();
    pods.push(new_pod);
    pods.into_iter().for_each(vanish);
    assert_eq!(state.entries().len(), 7);
    let restored = |tree: &Tree| {
        (2..8)
            .chain([10])
            .filter(|i| tree.tc(&dev(*i).1) == "tclass=-1")
            .count()
    };
    let a = attached(&tree, &state, 11, "");
    assert_eq!(restored(&tree), 4, "one ADD repairs exactly four");
    assert_eq!(state.entries().len(), 3 + 1);
    let b = attached(&tree, &state, 12, "");
    assert_eq!(restored(&tree), 7, "the next ADD repairs the rest");
    assert_eq!(state.entries(), ["c11:net1.state", "c12:net1.state"]);
    drop((a, b));
}

/// A state dir that is refused (here: a link) is a failure the operator
/// sees, not an empty node.
#[test]
fn gc_orphans_reports_a_refused_state_dir() {
    needs!(root);
    let real = StateDirPath::new();
    std::fs::create_dir_all(&real.0).unwrap();
    let link = StateDirPath::new();
    std::os::unix::fs::symlink(&real.0, &link.0).unwrap();
    let (code, summary) = sweep(&link);
    assert_eq!(code, 1, "{summary}");
    assert!(
        summary.starts_with("examined 0 entries, released 0 orphans, 1 failed"),
        "{summary}"
    );
    assert!(summary.contains("symbolic link"), "{summary}");
    let _ = std::fs::remove_file(&link.0);
}

#[test]
fn an_orphan_behind_many_live_entries_is_reached_by_later_adds() {
    needs!(root);
    // Each ADD examines a bounded window of entries; the window starts at a
    // different place each time, so an orphan that sorts after more live
    // entries than one window holds is still repaired by some later ADD.
    let tree = Tree::new();
    let state = StateDirPath::new();
    let live = Pod::new("net1", Some(ADDR));
    for i in 0..24 {
        state.plant(&json!({
            "version": 1, "network": "rail", "containerId": format!("a-live{i:02}"), "ifname": "net1",
            "netns": live.path(), "sysfsRoot": path_str(&tree.root), "exclusive": false,
            "device": format!("mlx5_{}", 100 + i), "port": 1, "original": null, "written": 41,
            "created": epoch_secs(),
        }));
    }
    let orphan = attached(&tree, &state, 1, "Global tclass=106\n");
    vanish(orphan);
    // "c1" sorts after every "a-live.." entry, beyond a first window of 16.
    let mut adds = 0;
    let mut pods = Vec::new();
    for i in 2..14 {
        pods.push(attached(&tree, &state, i, ""));
        adds += 1;
        if tree.tc("mlx5_1") == "tclass=106" {
            break;
        }
    }
    assert_eq!(
        tree.tc("mlx5_1"),
        "tclass=106",
        "the orphan was never reached in {adds} ADDs"
    );
    assert!(state.entry("c1", "net1").is_none());
    assert_eq!(state.entries().len(), 24 + adds, "live entries untouched");
}

#[test]
fn a_netns_proved_live_for_one_rail_is_not_taken_for_another_at_its_path() {
    needs!(root);
    // A sweep proves a pod's netns live once for all the rails that name it,
    // by path and recorded identity together. Entries that name the same path
    // with another netns's identity (a reused /proc/<pid>/ns/net path, as in
    // del_never_stuck) are still orphans, in whatever order the sweep meets
    // them (it starts at a pid-chosen place: five of six orders put an orphan
    // after the live rail).
    let tree = Tree::new();
    let state = StateDirPath::new();
    let live = attached(&tree, &state, 1, "");
    let others: Vec<Pod> = (2..=6)
        .map(|i| attached(&tree, &state, i, "Global tclass=106\n"))
        .collect();
    // Only now (each ADD repairs orphans first): the five name the live path.
    for i in 2..=6 {
        let mut e = state.entry(&format!("c{i}"), "net1").unwrap();
        e["netns"] = json!(live.path());
        state.plant(&e);
    }
    let (status, summary) = sweep(&state);
    assert_eq!(status, 0, "{summary}");
    assert!(summary.contains("released 5 orphans"), "{summary}");
    for i in 2..=6 {
        assert_eq!(tree.tc(&dev(i).1), "tclass=106", "device {i} given back");
        assert!(state.entry(&format!("c{i}"), "net1").is_none());
    }
    assert_eq!(tree.tc("mlx5_1"), "tclass=41", "the live rail untouched");
    assert!(state.entry("c1", "net1").is_some());
    drop(others);
    drop(live);
}
