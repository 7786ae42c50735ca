//! The job environment: every RDMA ADD records its rail, and a
//! pod's rails give the lines `roce-tune inspect --env` prints and the NRI
//! plugin injects (`job_env::Rails`, the same code). Pods with four rails,
//! each a veth end the test tree binds to a VF of its own (docs/design.md,
//! "Test trees"), added one by one as a runtime runs a pod's networks, in a
//! shuffled order: the lines follow the pod's interfaces, not the ADDs.

use crate::common::*;
use roce_tune::job_env::{EnvPolicy, Family, NoEnv, Rails};
use roce_tune::netns::{Lookup, NetNs, NsId};
use roce_tune::state::StateDir;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;

const HCA: &str = "NCCL_IB_HCA==mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1";

/// A node with four VFs and a pod whose four rails (net1..net4 on
/// mlx5_2..mlx5_5) are bound to them, one sandbox.
struct Node {
    rail: Rail,
    cid: String,
}

impl Node {
    fn new(node_extra: Value) -> Node {
        Node {
            rail: Rail::spec().rails(4).node(node_extra).build(),
            cid: unique("sandbox"),
        }
    }

    /// The rail's network config: `extra` over the defaults (gidCheck
    /// enforce at index 3, no class).
    fn conf(&self, rail: usize, extra: &Value) -> Value {
        let vf = &self.rail.vfs[rail];
        let mut c = json!({
            "cniVersion": "1.1.0", "name": format!("rail-{}", rail + 1), "type": "roce-tune",
            "gidTimeoutMs": 500,
            "prevResult": prev_result("1.1.0", &vf.ifname, &self.rail.pod.path(), &[&vf.addr]),
        });
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    fn run(&self, command: &str, rail: usize, extra: &Value) -> Run {
        self.rail
            .run_rail(command, &self.cid, rail, &self.conf(rail, extra))
    }

    /// Every rail, in the order given, as a runtime runs the pod's networks.
    fn add_all(&self, order: &[usize], extra: &Value) {
        for &i in order {
            self.run("ADD", i, extra).ok();
        }
    }

    /// Play the kernel: the rail's address came second on its VF, so its
    /// RoCE v2 GID is at `index`, not at 3.
    fn move_gid(&self, rail: usize, index: u32) {
        let vf = &self.rail.vfs[rail];
        self.rail.tree.set_gid(&vf.dev, 2, ZERO_GID, "");
        self.rail.tree.set_gid(&vf.dev, 3, ZERO_GID, "");
        self.rail
            .tree
            .set_gid(&vf.dev, index, &v4_gid(&vf.ip), "RoCE v2");
    }

    fn entry(&self, rail: usize) -> Option<Value> {
        self.rail
            .state
            .entry(&self.cid, &self.rail.vfs[rail].ifname)
    }

    fn inspect_env(&self, extra_args: &[&str]) -> Run {
        let r = Exec::new(BIN)
            .args(["inspect", "--netns", &self.rail.pod.path(), "--env"])
            .args(extra_args)
            .env("ROCE_TUNE_NODE_CONFIG", node_config(&self.rail.state))
            .run();
        // docs/inspect.md's "--env" runs are pasted from these:
        // INSPECT_SHOW=1 cargo test --test it job_env:: -- --nocapture --test-threads=1
        let netns = self.rail.pod.path();
        shown(
            &format!(
                "roce-tune inspect --netns {netns} --env {}",
                extra_args.join(" ")
            ),
            r,
        )
    }

    fn ns_id(&self) -> NsId {
        match NetNs::lookup(std::path::Path::new(&self.rail.pod.path())).unwrap() {
            Lookup::Netns(ns) => ns.id(),
            _ => panic!("the pod's netns is gone"),
        }
    }
}

fn lines(r: &Run) -> Vec<&str> {
    r.stdout.lines().collect()
}

/// Every RDMA ADD records its rail, owning a file or not: the GID index it
/// verified (enforce) or found (present; warn, where the index is another),
/// none when the check is off, and the class and ToS asked for.
#[test]
fn every_rdma_add_records_its_rail() {
    needs!(root);
    let node = Node::new(json!({}));
    node.move_gid(2, 5);
    for (rail, extra) in [
        (0, json!({})),
        (1, json!({"gidCheck": "present"})),
        (2, json!({"gidCheck": "warn"})),
        (3, json!({"gidCheck": "off", "trafficClass": 41})),
    ] {
        node.run("ADD", rail, &extra).ok();
    }
    let rail = |i: usize| {
        node.entry(i)
            .map(|e| (e["version"].clone(), e["rail"].clone()))
    };
    let record = |index: Value, class: Value, tos: Value| {
        Some((
            json!(4),
            json!({"gidIndex": index, "trafficClass": class, "rdmaCmTos": tos}),
        ))
    };
    assert_eq!(
        rail(0),
        record(json!(3), Value::Null, Value::Null),
        "enforce, nothing owned"
    );
    assert_eq!(
        rail(1),
        record(json!(3), Value::Null, Value::Null),
        "present finds 3"
    );
    assert_eq!(
        rail(2),
        record(json!(5), Value::Null, Value::Null),
        "warn finds 5"
    );
    assert_eq!(
        rail(3),
        record(Value::Null, json!(41), Value::Null),
        "the check off"
    );
    let e = node.entry(0).unwrap();
    assert_eq!(e["owned"], json!({}), "a rail that owns nothing");
    assert_eq!(e["gid"], json!(v4_gid(&node.rail.vfs[0].ip)));
    // The owned class is taken as before, and the rail is recorded beside it.
    assert_eq!(node.rail.tree.tc(&node.rail.vfs[3].dev), "tclass=41");
    assert_eq!(
        node.entry(3).unwrap()["owned"]["trafficClass"]["written"],
        41
    );
}

/// `present` records where it found the GID; an ADD that fails (the GID not
/// at the enforced index) leaves no record and changes nothing.
#[test]
fn present_records_the_index_it_found_and_a_failed_add_records_nothing() {
    needs!(root);
    let node = Node::new(json!({}));
    node.move_gid(0, 4);
    let failed = node.run("ADD", 0, &json!({"gidTimeoutMs": 50}));
    assert_eq!(failed.code(), 101, "{}", failed.stderr);
    assert_eq!(node.entry(0), None, "a failed ADD left a record");
    assert!(node.rail.state.entries().is_empty());
    node.run("ADD", 0, &json!({"gidCheck": "present"})).ok();
    assert_eq!(node.entry(0).unwrap()["rail"]["gidIndex"], 4);
}

/// Four rails ADDed out of order: `inspect --env` prints the exact lines, in
/// the order of the pod's interfaces; with UCX asked for, its lines follow.
#[test]
fn a_pod_with_four_rails_gets_its_exact_lines() {
    needs!(root);
    let node = Node::new(json!({"jobEnvFamilies": ["nccl", "ucx"]}));
    node.add_all(&[2, 0, 3, 1], &json!({"trafficClass": 41}));
    let r = node.inspect_env(&[]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let devices = "mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1";
    assert_eq!(
        lines(&r),
        [
            HCA.to_string(),
            "NCCL_IB_GID_INDEX=3".into(),
            "NCCL_IB_TC=41".into(),
            format!("UCX_NET_DEVICES={devices}"),
            "UCX_IB_GID_INDEX=3".into(),
            "UCX_IB_TRAFFIC_CLASS=41".into(),
        ]
    );
    assert_eq!(r.stderr, "", "nothing is missing, so nothing to note");
    // `--pid`: the netns of a process in the pod, the same lines.
    let mut sleeper = std::process::Command::new("ip")
        .args(["netns", "exec", &node.rail.pod.ns, "sleep", "30"])
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    // `ip netns exec` enters the netns, then execs: wait until it has.
    let ino = || std::fs::metadata(format!("/proc/{pid}/ns/net")).map(|m| m.ino());
    let t = std::time::Instant::now();
    while ino().ok() != Some(node.rail.pod.ino()) && t.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let by_pid = Exec::new(BIN)
        .args(["inspect", "--pid", &pid, "--env"])
        .env("ROCE_TUNE_NODE_CONFIG", node_config(&node.rail.state))
        .run();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(by_pid.stdout, r.stdout, "{}", by_pid.stderr);
    let j = node.inspect_env(&["--json"]).json();
    assert_eq!(j["view"], "env");
    assert_eq!(j["rails"], 4);
    assert_eq!(j["pass"], true);
    assert_eq!(
        j["env"][0],
        json!({"name": "NCCL_IB_HCA", "value": &HCA[12..]})
    );
    assert_eq!(j["env"].as_array().unwrap().len(), 6);
}

/// The class comes from rdmaCmTos where no trafficClass is asked (an inbox
/// driver has no tc file: NCCL_IB_TC is then how NCCL's traffic gets it),
/// and a variable the node config omits is never printed.
#[test]
fn the_class_from_rdma_cm_tos_and_an_omitted_variable() {
    needs!(root);
    let node = Node::new(json!({"jobEnvOmit": ["NCCL_IB_GID_INDEX"]}));
    for dev in node.rail.vfs.iter().map(|v| &v.dev) {
        std::fs::create_dir_all(
            node.rail
                .tree
                .root
                .join(format!("kernel/config/rdma_cm/{dev}/ports/1")),
        )
        .unwrap();
        std::fs::write(
            node.rail.tree.root.join(format!(
                "kernel/config/rdma_cm/{dev}/ports/1/default_roce_tos"
            )),
            "0\n",
        )
        .unwrap();
    }
    node.add_all(&[0, 1, 2, 3], &json!({"rdmaCmTos": 106}));
    let r = node.inspect_env(&[]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(lines(&r), [HCA, "NCCL_IB_TC=106"]);
}

/// Rails that disagree on the GID index: no index is claimed; NCCL's own
/// selection (2.21+) is told RoCE v2 and the pod's address family, and the
/// note on stderr says which rail holds which.
#[test]
fn rails_that_disagree_on_the_gid_index() {
    needs!(root);
    let node = Node::new(json!({}));
    node.move_gid(1, 5);
    node.add_all(
        &[0, 1, 2, 3],
        &json!({"gidCheck": "present", "trafficClass": 41}),
    );
    let r = node.inspect_env(&[]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(
        lines(&r),
        [
            HCA,
            "NCCL_IB_ROCE_VERSION_NUM=2",
            "NCCL_IB_ADDR_FAMILY=AF_INET",
            "NCCL_IB_TC=41"
        ]
    );
    assert!(
        r.stderr.contains("net1 3, net2 5, net3 3, net4 3"),
        "{}",
        r.stderr
    );
}

/// A pod without rails gets nothing, and the reason; so does a pod whose
/// only interface is a veth that went through roce-tune without RDMA.
#[test]
fn a_pod_without_rails_gets_nothing_and_the_reason() {
    needs!(root);
    let node = Node::new(json!({}));
    let r = node.inspect_env(&[]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("no live rail"), "{}", r.stderr);
    let j = node.inspect_env(&["--json"]).json();
    assert_eq!(
        (j["pass"].clone(), j["env"].clone()),
        (json!(false), json!([]))
    );
    assert!(j["reason"].as_str().unwrap().contains("no live rail"));
    // Sysctls only (gidCheck off, nothing to set): no RDMA, no record.
    node.run("ADD", 0, &json!({"gidCheck": "off"})).ok();
    assert_eq!(node.entry(0), None);
    assert_eq!(node.inspect_env(&[]).status, 1);
    // Another pod's rails are not this pod's.
    let other = Node::new(json!({}));
    other.add_all(&[0, 1], &json!({}));
    write_node_config(
        &node.rail.state,
        Some(&node.rail.tree),
        json!({"stateDir": path_str(&other.rail.state.0)}),
    );
    let r = node.inspect_env(&[]);
    assert_eq!((r.status, r.stdout.as_str()), (1, ""), "{}", r.stderr);
}

/// DEL takes its rail out of the environment; the last DEL takes it all.
#[test]
fn del_removes_the_rail_from_the_environment() {
    needs!(root);
    let node = Node::new(json!({}));
    node.add_all(&[0, 1, 2, 3], &json!({}));
    assert_eq!(lines(&node.inspect_env(&[]))[0], HCA);
    node.run("DEL", 1, &json!({})).ok();
    assert_eq!(node.entry(1), None);
    let r = node.inspect_env(&[]);
    assert_eq!(
        lines(&r),
        [
            "NCCL_IB_HCA==mlx5_2:1,mlx5_4:1,mlx5_5:1",
            "NCCL_IB_GID_INDEX=3"
        ]
    );
    for rail in [0, 2, 3] {
        node.run("DEL", rail, &json!({})).ok();
    }
    assert!(node.rail.state.entries().is_empty());
    assert_eq!(node.inspect_env(&[]).status, 1);
}

/// The NRI plugin's picture (`Rails`): a refresh reads only what is new or
/// changed, sees a new ADD and a DEL, and matches the pod by its netns.
#[test]
fn the_rails_cache_follows_adds_and_dels() {
    needs!(root);
    let node = Node::new(json!({}));
    let policy = EnvPolicy {
        families: vec![Family::Nccl],
        omit: vec![],
    };
    let state = || StateDir::existing(&node.rail.state.0).unwrap().unwrap();
    let hca = |rails: &Rails| {
        rails
            .env_for(&node.ns_id(), &policy)
            .map(|e| e.vars[0].1.clone())
    };
    let mut rails = Rails::new();
    node.run("ADD", 0, &json!({})).ok();
    let r = rails.refresh(&state());
    assert_eq!((r.read, r.kept, r.dropped), (1, 0, 0));
    assert_eq!(hca(&rails), Ok("=mlx5_2:1".into()));
    node.run("ADD", 1, &json!({})).ok();
    let r = rails.refresh(&state());
    assert_eq!(
        (r.read, r.kept, r.dropped),
        (1, 1, 0),
        "only the new entry is read"
    );
    assert_eq!(hca(&rails), Ok("=mlx5_2:1,mlx5_3:1".into()));
    // A repeated ADD rewrites its entry (a new file): read again.
    node.run("ADD", 1, &json!({"trafficClass": 41})).ok();
    let r = rails.refresh(&state());
    assert_eq!((r.read, r.kept), (1, 1));
    node.run("DEL", 0, &json!({})).ok();
    let r = rails.refresh(&state());
    assert_eq!((r.read, r.kept, r.dropped), (0, 1, 1));
    assert_eq!(hca(&rails), Ok("=mlx5_3:1".into()));
    let r = rails.refresh(&state());
    assert_eq!(
        (r.read, r.kept, r.dropped),
        (0, 1, 0),
        "nothing new: nothing read"
    );
    assert!(
        r.listed,
        "the dir changed a moment ago: its stamp proves nothing"
    );
    // A dir quiet for longer than a file time's granularity: its own stamp
    // shows nothing changed, and no entry is even listed.
    sh(&format!(
        "touch -d '1 hour ago' {}",
        node.rail.state.0.display()
    ));
    assert!(rails.refresh(&state()).listed);
    let r = rails.refresh(&state());
    assert_eq!((r.listed, r.read, r.kept), (false, 0, 1));
    node.run("ADD", 2, &json!({})).ok();
    let r = rails.refresh(&state());
    assert_eq!(
        (r.listed, r.read, r.kept),
        (true, 1, 1),
        "a write moves the dir's stamp"
    );
    assert_eq!(hca(&rails), Ok("=mlx5_3:1,mlx5_4:1".into()));
    node.run("DEL", 2, &json!({})).ok();
    // Another netns (the host's) has no rails here.
    let host = match NetNs::lookup(std::path::Path::new("/proc/self/ns/net")).unwrap() {
        Lookup::Netns(ns) => ns.id(),
        _ => unreachable!(),
    };
    assert_eq!(rails.env_for(&host, &policy), Err(NoEnv::NoRail));
    // The pod gone, its orphan entry no longer counts, whatever its inode.
    let id = node.ns_id();
    node.rail.pod.delete();
    assert_eq!(rails.env_for(&id, &policy), Err(NoEnv::NoRail));
}

/// The entry of a rail whose pod is gone: `live`'s, under another sandbox
/// and a netns path that no longer exists (an orphan the agent has not
/// released yet).
fn dead_entry(live: &Value, i: usize) -> Value {
    let mut e = live.clone();
    e["containerId"] = json!(format!("gone{i}"));
    e["netns"] = json!(format!("/var/run/netns/gone-{i}"));
    e["netnsId"] = json!({"dev": 4, "ino": 4_026_600_000u64 + i as u64});
    e
}

/// The NRI plugin's picture (`Rails::follow_dir`, what each CreateContainer
/// calls) on a node with 10,000 entries whose netns is gone, while a
/// neighbour's rail comes and goes: a refresh examines the entries that
/// changed, not every entry the dir holds (with the dir changed in the
/// last 2 s, each call stat'ed all 10,000: 35 ms at the median, 58 ms at
/// the 99th percentile on the runtime's clock). And when the dir's
/// changes outran what could be told one by one (more of them than the
/// kernel queues), the next refresh lists it whole and misses none.
#[test]
fn a_refresh_examines_what_changed_not_every_dead_entry() {
    needs!(root);
    let node = Node::new(json!({}));
    let policy = EnvPolicy {
        families: vec![Family::Nccl],
        omit: vec![],
    };
    let dir = node.rail.state.0.clone();
    node.run("ADD", 0, &json!({})).ok();
    let live = node.entry(0).unwrap();
    const DEAD: usize = 10_000;
    for i in 0..DEAD {
        node.rail.state.plant(&dead_entry(&live, i));
    }
    let mut rails = Rails::new();
    let first = rails.follow_dir(&dir);
    assert_eq!((first.read, rails.len()), (DEAD + 1, DEAD + 1));
    let hca = |rails: &Rails| {
        rails
            .env_for(&node.ns_id(), &policy)
            .map(|e| e.vars[0].1.clone())
    };
    assert_eq!(hca(&rails), Ok("=mlx5_2:1".into()));
    // An ADD writes its entry and releases up to four orphans beside it
    // (`orphans::sweep_bounded`): those names, and no other, are looked at.
    const SWEPT: usize = 4;
    for round in 0..3 {
        node.run("ADD", 1, &json!({})).ok();
        let r = rails.follow_dir(&dir);
        assert!(
            r.examined <= 1 + SWEPT && r.read == 1,
            "round {round}, after an ADD: {r:?}"
        );
        assert_eq!(hca(&rails), Ok("=mlx5_2:1,mlx5_3:1".into()));
        node.run("DEL", 1, &json!({})).ok();
        let r = rails.follow_dir(&dir);
        assert!(
            r.examined <= 1 + SWEPT && r.dropped >= 1,
            "round {round}, after a DEL: {r:?}"
        );
        assert_eq!(hca(&rails), Ok("=mlx5_2:1".into()));
        let r = rails.follow_dir(&dir);
        assert_eq!(r.examined, 0, "round {round}, nothing changed: {r:?}");
        assert_eq!(rails.len(), node.rail.state.entries().len());
    }

    // More changes than the kernel queues for one reader
    // (fs.inotify.max_queued_events): the next refresh lists the dir. Each
    // file planted is two events at least (its creation, its close after
    // writing).
    let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let more = queued / 2 + 1;
    for i in DEAD..DEAD + more {
        node.rail.state.plant(&dead_entry(&live, i));
    }
    let r = rails.follow_dir(&dir);
    assert!(r.listed, "{more} new entries: {r:?}");
    assert_eq!(rails.len(), node.rail.state.entries().len());
    assert_eq!(hca(&rails), Ok("=mlx5_2:1".into()));
    let r = rails.follow_dir(&dir);
    assert_eq!(r.examined, 0, "{r:?}");
}
