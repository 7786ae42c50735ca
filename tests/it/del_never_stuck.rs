//! DEL never leaves a pod stuck, and the state knows exactly what it points
//! at. Each case of the rule "DEL never leaves a pod stuck": the pod's DEL
//! succeeds, what could not be restored stays recorded with a log line that
//! says why, and the orphan repair later restores every original exactly.
//! (The refused pod sysfs, which needs the fault-injection build, is in
//! tests/it/faults.rs.)

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// DEL as a runtime sends it once the sandbox is gone: no CNI_NETNS.
fn del_without_netns(state: &StateDirPath, cid: &str, c: &Value) -> Run {
    run_plugin(state, "DEL", cid, "", "net1", c.to_string().as_bytes())
}

/// The pod goes without a DEL reaching roce-tune (its Drop would delete the
/// netns again).
fn vanish(pod: Pod) {
    pod.delete();
    std::mem::forget(pod);
}

#[test]
fn a_stale_netns_path_is_gone_not_an_error() {
    needs!(root);
    // The mount is gone but its file is left: a plain file at the path.
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    let path = rail.pod.path();
    vanish(rail.pod);
    std::fs::write(&path, "").unwrap();
    let r = del_without_netns(&rail.state, "c1", &rail.conf);
    let _ = std::fs::remove_file(&path);
    r.ok();
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=106",
        "restored from the host's view"
    );
    assert!(
        rail.state.entries().is_empty(),
        "{:?}",
        rail.state.entries()
    );
}

#[test]
fn a_reused_netns_path_is_another_netns_and_the_entry_an_orphan() {
    needs!(root);
    // The entry names a path that is a live netns, but not the one recorded
    // (a /proc/<pid>/ns/net path whose pid was reused): an orphan.
    let rail = Rail::new();
    rail.add("c1").ok();
    let other = Pod::new("net1", Some(ADDR));
    let mut e = rail.state.entry("c1", "net1").unwrap();
    e["netns"] = json!(other.path());
    rail.state.plant(&e);
    let r = gc_orphans(&rail.state);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("released 1 orphans"), "{}", r.stdout);
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=-1",
        "unset original, unset again"
    );
    assert!(rail.state.entries().is_empty());
    drop(rail.pod);
}

#[test]
fn a_class_file_that_no_longer_parses_is_kept_and_repaired_later() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    rail.tree.set_tc(DEV, "Global tclass=garbage\n");
    let r = rail.del("c1");
    r.ok();
    assert!(
        r.stderr.contains("kept for the orphan repair"),
        "{}",
        r.stderr
    );
    assert_eq!(
        rail.state.entries(),
        ["c1:net1.state"],
        "the original stays recorded"
    );
    // The driver reads sanely again, still holding roce-tune's value; the pod
    // is gone by now: the repair gives the original back.
    rail.tree.set_tc(DEV, "Global tclass=41\n");
    vanish(rail.pod);
    let r = gc_orphans(&rail.state);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn a_driver_that_refuses_the_restore_is_retried_by_the_repair() {
    needs!(root);
    let rail = Rail::new();
    rail.add("c1").ok();
    let tc = path_str(&rail.tree.tc_path(DEV));
    sh(&format!(
        "mount --bind {tc} {tc} && mount -o remount,bind,ro {tc}"
    ));
    let r = rail.del("c1");
    sh(&format!("umount {tc}"));
    r.ok();
    assert!(r.stderr.contains("Read-only"), "says why: {}", r.stderr);
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    assert_eq!(rail.state.entries(), ["c1:net1.state"]);
    vanish(rail.pod);
    gc_orphans(&rail.state).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=-1");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn a_state_dir_whose_mode_changed_never_fails_del() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    std::fs::set_permissions(&rail.state.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = rail.del("c1");
    r.ok();
    assert!(
        r.stderr.contains("writable by group or others"),
        "{}",
        r.stderr
    );
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=41",
        "entries of an open dir are not trusted"
    );
    // The node admin fixes the mode; the repair finishes the job.
    std::fs::set_permissions(&rail.state.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    vanish(rail.pod);
    gc_orphans(&rail.state).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn an_invisible_exclusive_device_is_kept_until_it_comes_back() {
    needs!(root);
    // Exclusive mode: the pod's netns is gone, but the kernel moves the
    // device back only in the asynchronous netns exit. Until then its PCI
    // function shows no RDMA device.
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    let mut e = rail.state.entry("c1", "net1").unwrap();
    e["reach"] = json!("pod");
    rail.state.plant(&e);
    vanish(rail.pod);
    let ib = rail
        .tree
        .root
        .join(format!("bus/pci/devices/{PCI}/infiniband"));
    std::fs::rename(ib.join(DEV), rail.tree.root.join("moved-away")).unwrap();
    let r = del_without_netns(&rail.state, "c1", &rail.conf);
    r.ok();
    assert!(
        r.stderr.contains("exclusive mode"),
        "says why: {}",
        r.stderr
    );
    assert_eq!(
        rail.state.entries(),
        ["c1:net1.state"],
        "invisible is not gone"
    );
    let sweep = gc_orphans(&rail.state);
    assert_eq!(sweep.status, 1, "not yet restored is reported: {sweep:?}");
    assert_eq!(rail.state.entries(), ["c1:net1.state"]);
    // The netns exit completes: the device is back, still holding the class.
    std::fs::rename(rail.tree.root.join("moved-away"), ib.join(DEV)).unwrap();
    gc_orphans(&rail.state).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn a_dead_co_owner_is_never_the_heir() {
    needs!(root);
    let rail = Rail::new();
    let pod_b = Pod::new("net1", Some(ADDR));
    let mut cb = rail_conf(&rail.tree, &rail.state, PCI, &pod_b, 42, &[ADDR]);
    cb["name"] = json!("rdma-vf");
    rail.add("ca").ok();
    run_conf(&rail.state, "ADD", "cb", &pod_b, &cb).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=42");
    // a's pod goes without DEL; b's DEL must not hand the device to a's 41.
    vanish(rail.pod);
    run_conf(&rail.state, "DEL", "cb", &pod_b, &cb).ok();
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=-1",
        "the true original, not the dead pod's class"
    );
    // The dead entry is released later; the file no longer holds its value.
    gc_orphans(&rail.state).ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=-1");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn a_renamed_device_is_found_by_its_pci_function() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    // The device is renamed (mlx5_2 -> mlx5_7), identity unchanged.
    std::fs::rename(rail.tree.dev_dir(DEV), rail.tree.dev_dir("mlx5_7")).unwrap();
    let ib = rail
        .tree
        .root
        .join(format!("bus/pci/devices/{PCI}/infiniband"));
    std::fs::rename(ib.join(DEV), ib.join("mlx5_7")).unwrap();
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc("mlx5_7"), "tclass=106");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn another_device_under_the_recorded_name_is_not_touched() {
    needs!(root);
    // A version 1 entry knows only the name; the device now under that name
    // has another node GUID than... the entry recorded none, so the name
    // rules. A version 2 entry records the GUID: a different one is another
    // device, and its class is left alone.
    let rail = Rail::new();
    rail.add("c1").ok();
    std::fs::write(
        rail.tree.dev_dir(DEV).join("node_guid"),
        "0000:0000:0000:0bad\n",
    )
    .unwrap();
    rail.del("c1").ok();
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=41",
        "not the device the entry recorded"
    );
    assert!(
        rail.state.entries().is_empty(),
        "the recorded device is gone"
    );
}

#[test]
fn any_executable_name_works() {
    needs!(root);
    let mut rail = Rail::new();
    let dir = rail.state.base().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let renamed = dir.join("roce-tune-v2");
    std::fs::copy(BIN, &renamed).unwrap();
    rail.conf["type"] = json!("roce-tune-v2");
    Exec::cni(
        &renamed,
        &node_config(&rail.state),
        "ADD",
        "c1",
        &rail.pod.path(),
        "net1",
    )
    .env("CNI_PATH", &dir)
    .stdin(rail.conf.to_string())
    .run()
    .ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
}

#[test]
fn an_entry_from_a_newer_release_is_left_alone() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    let mut e = rail.state.entry("c1", "net1").unwrap();
    e["version"] = json!(roce_tune::state::FORMAT + 1);
    e["somethingNew"] = json!({"a": 1});
    rail.state.plant(&e);
    let planted = std::fs::read(rail.state.0.join("c1:net1.state")).unwrap();
    let r = rail.del("c1");
    r.ok();
    assert!(
        r.stderr.contains("newer roce-tune"),
        "says so: {}",
        r.stderr
    );
    vanish(rail.pod);
    gc_orphans(&rail.state).ok();
    assert_eq!(
        std::fs::read(rail.state.0.join("c1:net1.state")).unwrap(),
        planted,
        "left exactly as it was, never quarantined"
    );
    assert!(!rail.state.0.join("c1:net1.state.corrupt").exists());
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=41",
        "its restore is the newer release's"
    );
}

#[test]
fn a_version_1_entry_is_still_restored() {
    needs!(root);
    // Written by 0.1.0 before an upgrade: its own sysfsRoot is ignored (the
    // node config says where sysfs is).
    let rail = Rail::new();
    rail.tree.set_tc(DEV, "tclass=41");
    rail.state.plant(&json!({
        "version": 1, "network": "rdma-vf", "containerId": "c1", "ifname": "net1",
        "netns": rail.pod.path(), "sysfsRoot": "/somewhere/else", "exclusive": false,
        "device": DEV, "port": 1, "original": 106, "written": 41, "created": epoch_secs(),
    }));
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert!(rail.state.entries().is_empty());
}

#[test]
fn a_config_add_would_refuse_still_gets_its_del() {
    needs!(root);
    // The NAD was edited since (or is from 0.1.0, with stateDir in it).
    let mut rail = Rail::new();
    rail.add("c1").ok();
    rail.conf["stateDir"] = json!("/run/cni/roce-tune");
    rail.conf["trafficClass"] = json!(999);
    let r = rail.del("c1");
    r.ok();
    assert!(r.stderr.contains("DEL goes on"), "{}", r.stderr);
    assert_eq!(rail.tree.tc(DEV), "tclass=-1");
    assert!(rail.state.entries().is_empty());
    assert_eq!(rail.add("c2").code(), 7, "ADD refuses it");
}

/// libcni's DelNetworkList stops at the first plugin whose DEL fails, so a
/// DEL roce-tune refuses leaves the VF of sriov/host-device (which run after
/// it in DEL order) in the sandbox and the pod in Terminating. Every input
/// ADD would have refused (so nothing can have been recorded for it) gets a
/// successful DEL that logs why; where the attachment's identifiers are
/// readable, DEL releases its entry even if the rest of the input is not.
#[test]
fn del_never_refuses_what_add_would_have_refused() {
    needs!(root);
    let deep = format!(
        r#"{{"cniVersion":"1.0.0","name":"rail","type":"roce-tune","x":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let long_cid = "c".repeat(300);
    // (what, CNI_* changes, stdin or None for the rail's config, whether the
    // entry of c1/net1 must be released).
    type Row<'a> = (
        &'a str,
        Vec<(&'a str, Option<&'a str>)>,
        Option<String>,
        bool,
    );
    let rows: Vec<Row> = vec![
        ("nested 200 deep", vec![], Some(deep), true),
        (
            "cniVersion 0.2.0",
            vec![],
            Some(r#"{"cniVersion":"0.2.0","name":"rail","type":"roce-tune"}"#.into()),
            true,
        ),
        ("stdin not JSON", vec![], Some("not json".into()), true),
        ("stdin empty", vec![], Some(String::new()), true),
        (
            "CNI_ARGS malformed",
            vec![("CNI_ARGS", Some("junk"))],
            None,
            true,
        ),
        (
            "CNI_NETNS relative",
            vec![("CNI_NETNS", Some("x/y"))],
            None,
            true,
        ),
        ("ifname né1", vec![("CNI_IFNAME", Some("né1"))], None, false),
        (
            "ifname with a control byte",
            vec![("CNI_IFNAME", Some("n\x01t"))],
            None,
            false,
        ),
        ("ifname missing", vec![("CNI_IFNAME", None)], None, false),
        (
            "containerID of 300 characters",
            vec![("CNI_CONTAINERID", Some(&long_cid))],
            None,
            false,
        ),
        (
            "containerID ../x",
            vec![("CNI_CONTAINERID", Some("../x"))],
            None,
            false,
        ),
        (
            "containerID missing",
            vec![("CNI_CONTAINERID", None)],
            None,
            false,
        ),
    ];
    let mut failures = Vec::new();
    for (what, env, stdin, releases) in &rows {
        let rail = Rail::spec().class("Global tclass=106\n").build();
        rail.add("c1").ok();
        let exec = Exec::cni(
            BIN,
            &node_config(&rail.state),
            "DEL",
            "c1",
            &rail.pod.path(),
            "net1",
        )
        .stdin(stdin.clone().unwrap_or_else(|| rail.conf.to_string()));
        let r = env
            .iter()
            .fold(exec, |e, (k, v)| match v {
                Some(v) => e.env(k, v),
                None => e.env_remove(k),
            })
            .run();
        let mut why = Vec::new();
        if r.status != 0 || !r.stdout.is_empty() {
            why.push(format!("status {}: {} {}", r.status, r.stdout, r.stderr));
        }
        if !r.stderr.contains("DEL") {
            why.push(format!("nothing logged: {:?}", r.stderr));
        }
        let (class, entries) = (rail.tree.tc(DEV), rail.state.entries());
        if *releases && (class != "tclass=106" || !entries.is_empty()) {
            why.push(format!(
                "not released: class {class:?}, entries {entries:?}"
            ));
        }
        if !*releases && (class != "tclass=41" || entries != ["c1:net1.state"]) {
            why.push(format!(
                "another attachment touched: class {class:?}, entries {entries:?}"
            ));
        }
        if !why.is_empty() {
            failures.push(format!("{what}: {}", why.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An entry's netns path is only used once it proves to be a network
/// namespace; opening it must not block on whatever sits there now (a FIFO
/// blocks a plain open until a writer comes). Every ADD sweeps a few orphans
/// and the repair reads every entry: neither may hang on it.
#[test]
fn an_entry_whose_netns_is_a_fifo_hangs_nothing() {
    needs!(root);
    let rail = Rail::spec().class("Global tclass=106\n").build();
    rail.add("c1").ok();
    let fifo = rail.state.base().join("netns-fifo");
    sh(&format!("mkfifo {}", path_str(&fifo)));
    let mut e = rail.state.entry("c1", "net1").unwrap();
    e["netns"] = json!(path_str(&fifo));
    rail.state.plant(&e);
    let limit = Duration::from_secs(5);
    let r = gc_orphans(&rail.state);
    assert!(!r.hung && r.status == 0, "gc --orphans: {r:?}");
    assert_eq!(
        rail.tree.tc(DEV),
        "tclass=106",
        "a FIFO is no netns: the pod is gone"
    );
    // A fresh ADD (which sweeps) with another FIFO entry planted.
    rail.add("c2").ok();
    let mut e = rail.state.entry("c2", "net1").unwrap();
    e["netns"] = json!(path_str(&fifo));
    rail.state.plant(&e);
    let other = Pod::new("net1", Some(ADDR));
    let c3 = rail_conf(&rail.tree, &rail.state, PCI, &other, 41, &[ADDR]);
    let r = Exec::cni(
        BIN,
        &node_config(&rail.state),
        "ADD",
        "c3",
        &other.path(),
        "net1",
    )
    .stdin(c3.to_string())
    .hang_after(limit)
    .run();
    assert!(!r.hung && r.status == 0, "ADD: {r:?}");
}

/// The DaemonSet's container: `gc --orphans --every 1` restores pods deleted
/// without DEL on several devices within two periods, and stops on SIGTERM.
#[test]
fn the_repair_loop_restores_every_original_and_stops_on_sigterm() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    let originals = ["", "Global tclass=106\n", "Global tclass=0\n", ""];
    let mut pods = Vec::new();
    for (i, orig) in originals.iter().enumerate() {
        let (pci, dev) = (format!("0000:0c:{i:02x}.2"), format!("mlx5_{i}"));
        tree.add_device(&pci, &dev, orig);
        tree.set_ipv4_gids(&dev, IP);
        let pod = Pod::new("net1", Some(ADDR));
        let c = rail_conf(&tree, &state, &pci, &pod, 41, &[ADDR]);
        run_conf(&state, "ADD", &format!("c{i}"), &pod, &c).ok();
        pods.push(pod);
    }
    // The one process a test talks to while it runs, so spawned by hand (not
    // Exec), and killed if the test fails before it stops it.
    struct Repair(std::process::Child);
    impl Drop for Repair {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut repair = Repair(
        Command::new(AGENT_BIN)
            .env_clear()
            .args(["gc", "--orphans", "--every", "1", "--node-config"])
            .arg(node_config(&state))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut repair.0;
    // Three pods go without DEL while the loop runs; the fourth stays.
    let live = pods.pop().unwrap();
    let gone = Instant::now();
    pods.into_iter().for_each(vanish);
    let want = ["tclass=-1", "tclass=106", "tclass=0"];
    let restored = |t: &Tree| (0..3).all(|i| t.tc(&format!("mlx5_{i}")) == want[i]);
    // Done is the class written back AND the entry dropped after it: the
    // loop may be between the two when the classes first read right.
    let done = || restored(&tree) && state.entries() == ["c3:net1.state"];
    while !done() && gone.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(restored(&tree), "not all restored within two periods");
    assert_eq!(
        tree.tc("mlx5_3"),
        "tclass=41",
        "the live pod keeps its class"
    );
    assert_eq!(state.entries(), ["c3:net1.state"]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let stopped = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(2),
            "SIGTERM did not stop it"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0), "a clean exit");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    for i in 0..3 {
        assert!(
            err.contains(&format!("orphan c{i}/net1")),
            "each repair is logged: {err}"
        );
    }
    assert!(err.contains("SIGTERM") || err.contains("signal"), "{err}");
    assert!(Path::new(&live.path()).exists());
}
