//! Crash consistency: the plugin is killed (abort) at every fault point, then
//! the runtime does what it does next, and the node must end exactly as it
//! was: the class back to its original (unset reads as unset), no state left,
//! no device lock held. Sysctls are not checked: the runtime's DEL does not
//! restore them (docs/design.md, "The sysctls"), so a crash after they were
//! applied is repaired by the netns dying, not by roce-tune.
//!
//! The crash points exist only in a build with the `fault-injection` feature,
//! which is built into target/fault (its own target dir, so the normal test
//! build is never rebuilt with the feature and back). A test that runs it
//! says `needs!(fault_bin)`, which builds it (common/need.rs says why).

use crate::common::need::fault_build;
use crate::common::*;
use nix::fcntl::{Flock, FlockArg};
use roce_tune::rdma::traffic_class::{self, TrafficClass};
use serde_json::{json, Value};
use std::path::Path;

pub(crate) const ADD_POINTS: &[&str] = &[
    "add-after-validation",
    "add-after-sysctls",
    "add-after-state-write",
    "add-after-class-write",
    "add-after-readback",
    "add-gid-wait",
];
pub(crate) const DEL_POINTS: &[&str] = &[
    "del-after-read-state",
    "del-after-restore-write",
    "del-before-state-remove",
];

/// One run as a runtime does it, optionally told to crash at `fault`.
fn run(
    state: &StateDirPath,
    command: &str,
    cid: &str,
    netns: &str,
    stdin: &str,
    fault: Option<&str>,
) -> Run {
    let exec = Exec::cni(
        fault_build(),
        &node_config(state),
        command,
        cid,
        netns,
        "net1",
    )
    .stdin(stdin);
    match fault {
        Some(f) => exec.env("ROCE_TUNE_FAULT", f),
        None => exec,
    }
    .run()
}

fn conf(tree: &Tree, state: &StateDirPath, pod: &Pod) -> String {
    conf_of(tree, state, pod, Some(CLASS))
}

/// The rail's config; without a class it owns nothing and records its rail.
fn conf_of(tree: &Tree, state: &StateDirPath, pod: &Pod, class: Option<u8>) -> String {
    write_node_config(state, Some(tree), json!({}));
    tree.bind(pod, "net1", PCI);
    let mut c = json!({
        "cniVersion": "1.1.0", "name": "rail", "type": "roce-tune",
        "deviceID": PCI, "gidTimeoutMs": 2000,
        "prevResult": prev_result("1.1.0", "net1", &pod.path(), &[ADDR]),
    });
    if let Some(class) = class {
        c["trafficClass"] = json!(class);
    }
    c.to_string()
}

fn class(tree: &Tree) -> Result<TrafficClass, String> {
    traffic_class::parse(&tree.tc(DEV))
}

fn show(tc: &Result<TrafficClass, String>) -> String {
    match tc {
        Ok(t) => traffic_class::describe(*t),
        Err(e) => format!("unreadable ({e})"),
    }
}

/// Everything in the state dir but `locks/`: entries, temp files, quarantined ones.
fn leftovers(state: &StateDirPath) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(&state.0) else {
        return vec![];
    };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !is_state_infrastructure(n))
        .collect();
    v.sort();
    v
}

/// Lock files in `locks/` that another process could not take right now.
fn held_locks(state: &StateDirPath) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(state.0.join("locks")) else {
        return vec![];
    };
    let mut held = Vec::new();
    for e in rd.filter_map(Result::ok) {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(e.path())
            .expect("open lock file");
        if Flock::lock(f, FlockArg::LockExclusiveNonblock).is_err() {
            held.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    held
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Next {
    /// ADD crashed: the runtime gives up on the pod and runs DEL.
    Del,
    /// ADD crashed and the sandbox went with it: DEL with CNI_NETNS empty.
    DelNoNetns,
    /// ADD crashed: the runtime retries ADD (it succeeds), later DEL.
    RetryAddThenDel,
    /// DEL crashed: the runtime runs DEL again.
    DelAgain,
    /// DEL crashed, the sandbox is gone: DEL again with CNI_NETNS empty.
    DelAgainNoNetns,
    /// The crash took the pod with it and no DEL ever comes (a lost DEL):
    /// the node's repair loop (`gc --orphans`) finds the orphan.
    OrphanRepair,
}

impl Next {
    fn label(self) -> &'static str {
        match self {
            Next::Del => "DEL",
            Next::DelNoNetns => "DEL, no netns",
            Next::RetryAddThenDel => "ADD (retry), DEL",
            Next::DelAgain => "DEL again",
            Next::DelAgainNoNetns => "DEL again, no netns",
            Next::OrphanRepair => "pod gone, no DEL: gc --orphans",
        }
    }
}

/// The class files the scenarios start from: unset, and a class.
pub(crate) const ORIGINALS: &[&str] = &["", "Global tclass=106\n"];
/// The third start: a rail that asks no class (unset stays unset), so its
/// ADD records the rail alone and its DEL only drops the record.
pub(crate) const RAIL_ONLY: &str = "rail only";
/// The points such a rail never reaches: it writes and restores nothing.
const NOT_REACHED_BY_A_RAIL_ALONE: &[&str] = &[
    "add-after-class-write",
    "add-after-readback",
    "del-after-restore-write",
];
/// What comes after a crash in ADD, and after one in DEL.
pub(crate) const ADD_NEXT: &[Next] = &[
    Next::Del,
    Next::DelNoNetns,
    Next::RetryAddThenDel,
    Next::OrphanRepair,
];
pub(crate) const DEL_NEXT: &[Next] = &[Next::DelAgain, Next::DelAgainNoNetns, Next::OrphanRepair];

/// Every scenario (fault point, original, next step), in the order they run.
pub(crate) fn plan() -> Vec<(&'static str, &'static str, Next)> {
    let mut v = Vec::new();
    for &original in ORIGINALS.iter().chain(&[RAIL_ONLY]) {
        let reached =
            |p: &&&str| original != RAIL_ONLY || !NOT_REACHED_BY_A_RAIL_ALONE.contains(*p);
        for &point in ADD_POINTS.iter().filter(reached) {
            for &next in ADD_NEXT {
                v.push((point, original, next));
            }
        }
        for &point in DEL_POINTS.iter().filter(reached) {
            for &next in DEL_NEXT {
                v.push((point, original, next));
            }
        }
    }
    v
}

struct Row {
    point: &'static str,
    original: &'static str,
    next: Next,
    after_crash: String,
    final_class: String,
    outcome: Result<(), String>,
}

fn crashed_at(out: &Run, point: &str) -> Result<(), String> {
    let aborted = out.signal == Some(nix::libc::SIGABRT);
    let reached = out
        .stderr
        .contains(&format!("fault injection: aborting at {point}"));
    if aborted && reached {
        Ok(())
    } else {
        Err(format!(
            "expected an abort at {point}, got status {} signal {:?}: stdout {} stderr {}",
            out.status,
            out.signal,
            out.stdout.trim(),
            out.stderr.trim()
        ))
    }
}

/// The repair loop's sweep, once, by the fault build.
fn gc_orphans(state: &StateDirPath) -> Run {
    gc_orphans_with(fault_build(), state)
}

fn scenario(shared: &Pod, point: &'static str, original: &'static str, next: Next) -> Row {
    // A pod of its own when it is to vanish; the shared one otherwise.
    let own = (next == Next::OrphanRepair).then(|| Pod::new("net1", Some(ADDR)));
    let pod = own.as_ref().unwrap_or(shared);
    let tree = Tree::new();
    let state = StateDirPath::new();
    let rail_only = original == RAIL_ONLY;
    let original = if rail_only { "" } else { original };
    tree.add_device(PCI, DEV, original);
    let want = traffic_class::parse(original).unwrap();
    let cid = unique("fault");
    let netns = pod.path();
    let c = conf_of(&tree, &state, pod, (!rail_only).then_some(CLASS));
    let del_netns = match next {
        Next::DelNoNetns | Next::DelAgainNoNetns => "",
        _ => netns.as_str(),
    };
    let mut after_crash = String::new();
    let mut steps = || -> Result<(), String> {
        if point.starts_with("add-") {
            // The kernel is slow here: the GID never appears before the crash.
            if point != "add-gid-wait" {
                tree.set_ipv4_gids(DEV, IP);
            }
            crashed_at(&run(&state, "ADD", &cid, &netns, &c, Some(point)), point)?;
            after_crash = format!(
                "class {}, {} entry",
                show(&class(&tree)),
                state.entries().len()
            );
            if next == Next::RetryAddThenDel {
                tree.set_ipv4_gids(DEV, IP);
                let add = run(&state, "ADD", &cid, &netns, &c, None);
                add.succeeded("retried ADD")?;
                let out: Value = serde_json::from_str(&add.stdout)
                    .map_err(|e| format!("retried ADD printed no result: {e}"))?;
                if out["interfaces"][0]["name"] != "net1" {
                    return Err(format!("retried ADD result lost prevResult: {out}"));
                }
                let asked = if rail_only { want } else { Some(CLASS) };
                if class(&tree) != Ok(asked) {
                    return Err(format!("retried ADD left class {}", show(&class(&tree))));
                }
                let rail = state.entry(&cid, "net1").map(|e| e["rail"].clone());
                if rail.as_ref().is_none_or(|r| r["gidIndex"] != 3) {
                    return Err(format!("retried ADD recorded no rail: {rail:?}"));
                }
            }
            if next == Next::OrphanRepair {
                pod.delete();
                return gc_orphans(&state).succeeded("gc --orphans");
            }
            run(&state, "DEL", &cid, del_netns, &c, None).succeeded("DEL")
        } else {
            tree.set_ipv4_gids(DEV, IP);
            run(&state, "ADD", &cid, &netns, &c, None).succeeded("ADD")?;
            crashed_at(&run(&state, "DEL", &cid, &netns, &c, Some(point)), point)?;
            after_crash = format!(
                "class {}, {} entry",
                show(&class(&tree)),
                state.entries().len()
            );
            if next == Next::OrphanRepair {
                pod.delete();
                return gc_orphans(&state).succeeded("gc --orphans");
            }
            run(&state, "DEL", &cid, del_netns, &c, None).succeeded("second DEL")
        }
    };
    let mut outcome = steps();
    let fin = class(&tree);
    if outcome.is_ok() {
        outcome = if fin != Ok(want) {
            Err(format!(
                "class is {}, was {}",
                show(&fin),
                traffic_class::describe(want)
            ))
        } else if !leftovers(&state).is_empty() {
            Err(format!("state left: {:?}", leftovers(&state)))
        } else if !held_locks(&state).is_empty() {
            Err(format!("locks still held: {:?}", held_locks(&state)))
        } else {
            Ok(())
        };
    }
    Row {
        point,
        original: match (rail_only, original.is_empty()) {
            (true, _) => RAIL_ONLY,
            (false, true) => "unset",
            (false, false) => "106",
        },
        next,
        after_crash,
        final_class: show(&fin),
        outcome,
    }
}

#[test]
fn every_fault_point_leaves_the_node_as_it_was() {
    needs!(root);
    needs!(fault_bin);
    let pod = Pod::new("net1", Some(ADDR));
    let planned = plan();
    let mut rows: Vec<Row> = planned
        .iter()
        .map(|&(point, original, next)| scenario(&pod, point, original, next))
        .collect();
    rows.sort_by_key(|r| {
        let i = ADD_POINTS
            .iter()
            .chain(DEL_POINTS)
            .position(|p| *p == r.point);
        let start = ["unset", "106", RAIL_ONLY]
            .iter()
            .position(|o| *o == r.original);
        (i, r.next as u8, start)
    });
    println!("\n| fault point | original | after the crash | then | final class | state, locks | result |");
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.point,
            r.original,
            r.after_crash,
            r.next.label(),
            r.final_class,
            if r.outcome.is_ok() { "none, free" } else { "-" },
            match &r.outcome {
                Ok(()) => "PASS".to_string(),
                Err(e) => format!("FAIL: {e}"),
            }
        );
    }
    let failed: Vec<_> = rows.iter().filter(|r| r.outcome.is_err()).collect();
    println!(
        "\n{} scenarios over {} fault points: {} survived, {} failed",
        rows.len(),
        ADD_POINTS.len() + DEL_POINTS.len(),
        rows.len() - failed.len(),
        failed.len()
    );
    assert_eq!(rows.len(), planned.len(), "every scenario ran");
    assert!(
        failed.is_empty(),
        "{} scenarios did not end as they began: {}",
        failed.len(),
        failed
            .iter()
            .map(|r| format!(
                "{} / {} / {}: {}",
                r.point,
                r.original,
                r.next.label(),
                r.outcome.as_ref().unwrap_err()
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
}

/// A fault point added to src/ without a scenario here would go untested.
#[test]
fn every_fault_point_in_src_has_a_scenario() {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                walk(&p, found);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for part in text.split("fault::point(\"").skip(1) {
                    found.push(part.split('"').next().unwrap().to_string());
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    found.sort();
    // A point may sit on more than one path (a DEL with and without files).
    found.dedup();
    let mut tested: Vec<String> = ADD_POINTS
        .iter()
        .chain(DEL_POINTS)
        .map(|s| s.to_string())
        .collect();
    tested.sort();
    assert_eq!(found, tested);
}

/// Exclusive mode with the pod's sysfs refused (a seccomp or LSM denial,
/// played by the fault build's ROCE_TUNE_REFUSE): the device is in the live
/// pod and invisible from the host, so nothing can be restored now. DEL
/// still succeeds, the entry stays, and once the pod is gone and the device
/// back on the host, the repair restores the original.
#[test]
fn a_refused_pod_sysfs_never_fails_del() {
    needs!(root);
    let bin = needs!(fault_bin);
    let pod = Pod::new("net1", Some(ADDR));
    let tree = Tree::new();
    let state = StateDirPath::new();
    tree.add_device(PCI, DEV, "Global tclass=106\n");
    tree.set_ipv4_gids(DEV, IP);
    let c = conf(&tree, &state, &pod);
    let cid = unique("refused");
    run(&state, "ADD", &cid, &pod.path(), &c, None)
        .succeeded("ADD")
        .unwrap();
    let mut e = state.entry(&cid, "net1").unwrap();
    e["reach"] = json!("pod");
    state.plant(&e);
    // Exclusive mode: the device is in the pod, whose sysfs is refused.
    tree.move_into(&pod, PCI, DEV);
    let out = Exec::cni(bin, &node_config(&state), "DEL", &cid, &pod.path(), "net1")
        .env("ROCE_TUNE_REFUSE", "pod-sysfs")
        .stdin(c.as_str())
        .run();
    let stderr = &out.stderr;
    assert_eq!(out.status, 0, "DEL failed: {stderr}");
    assert!(
        stderr.contains("Operation not permitted"),
        "says why: {stderr}"
    );
    assert!(stderr.contains("kept for the orphan repair"), "{stderr}");
    assert_eq!(state.entries().len(), 1, "the original stays recorded");
    let ino = pod.ino();
    pod.delete();
    tree.move_back(ino, PCI, DEV);
    gc_orphans(&state).succeeded("gc --orphans").unwrap();
    assert_eq!(class(&tree), Ok(Some(106)));
    assert!(state.entries().is_empty());
}
