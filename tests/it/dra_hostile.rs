//! The NRI plugin under hostile pods and runtimes, under containerd's own
//! adaptation (../shared/nri: `nri-sim-0.12`, `nri-sim-old`) and, for bytes
//! no real runtime sends, the raw peer of tests/it/nri.rs:
//!
//! - a pod is read for what the plugin reads, bounded by the message's size
//!   only: Kubernetes bounds a pod's annotations by their total size (256
//!   KiB), not their count, and a container's env has no bound but the
//!   message's (ttrpc's 4 MiB); a pod that does not decode is skipped alone;
//! - the DRA catch-up works per rail, a port told apart by the device's
//!   identity, never by an interface name a pod can change;
//! - every wait of RunPodSandbox and StopPodSandbox ends by one deadline,
//!   three quarters of the request timeout; what is left past it is
//!   finished after the answer, off the request path.
//!
//! The node is tests/it/dra.rs's (`Node`): the test plays dranet and the
//! kernel on a sysfs test tree (docs/design.md, "Test trees").

use crate::common::need::NriSims;
use crate::common::*;
use crate::dra::{line_of, profile, registered, run_pod_ms, tuned, Node, NETWORK};
use crate::nri::{adjusted_env, ctr, never_dropped, pod, rpcs, steps, Plugin, Raw, Sim};
use nix::fcntl::{Flock, FlockArg};
use roce_tune::wire::protobuf::Writer;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `n` annotations of five bytes each, key and value (`a0000` to
/// `a1000` for 4,097): legal in Kubernetes, whose API server bounds a pod's
/// annotations by their total size, not their count (docs/design.md, "NRI").
fn annotations(n: usize) -> Map<String, Value> {
    (0..n).map(|i| (format!("a{i:04x}"), json!(""))).collect()
}

/// `n` env entries (`E0=0` ...) then `last`.
fn env(n: usize, last: &str) -> Vec<String> {
    let mut v: Vec<String> = (0..n).map(|i| format!("E{i}={i}")).collect();
    v.push(last.to_owned());
    v
}

// ------------------------------------------------------------ sizes

/// A pod with 4,097 annotations that never asked for anything starts, and
/// its container with 65,537 env entries is created; a pod beside it with
/// as many annotations and its pick of class among them has its DRA rails
/// at that class, and its container, whose 65,537th variable is one the
/// plugin would inject, keeps its own value and gets the others.
#[test]
fn a_pod_with_4097_annotations_starts_and_a_container_with_65537_env_entries_is_created() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let mut node = Node::new(2, profile(), true);
        let plugin = node.plugin(&["nri"]);
        let (quiet, opted) = (unique("sbq"), unique("sbo"));
        let mut many = annotations(4097);
        let q = pod(&quiet, None, Value::Object(many.clone()));
        many.insert("roce-tune.io/nccl-env".into(), json!("true"));
        many.insert("roce-tune.io/traffic-class".into(), json!("106"));
        let o = pod(&opted, Some(&node.pod.path()), Value::Object(many));
        let quiet_env = env(65_536, "PATH=/bin");
        let opted_env = env(65_536, "NCCL_IB_TC=7");
        let result = node.run(
            bin,
            registered(json!([
                {"run_pod": q},
                {"create_container": ctr("c-quiet", &quiet, &quiet_env.iter().map(String::as_str).collect::<Vec<_>>())},
                {"run_pod": o},
                {"create_container": ctr("c-opted", &opted, &opted_env.iter().map(String::as_str).collect::<Vec<_>>())}
            ])),
            &[],
        );
        for s in &steps(&result)[1..] {
            assert_eq!(s["ok"], true, "{name}: {}", s["error"]);
        }
        never_dropped(name, &result, 0);
        assert!(adjusted_env(&steps(&result)[2]).is_empty(), "{name}");
        for vf in &node.vfs {
            assert_eq!(
                node.tree.tc(&vf.dev),
                "tclass=106",
                "{name}: the pod's pick"
            );
        }
        let got = adjusted_env(&steps(&result)[4]);
        assert_eq!(
            got,
            ["NCCL_IB_HCA==mlx5_2:1,mlx5_3:1", "NCCL_IB_GID_INDEX=3"],
            "{name}: NCCL_IB_TC is the container's own"
        );
        assert!(!plugin.log().contains("panicked"), "{name}");
    }
}

/// A Synchronize that lists a pod of 4,097 annotations and, beside it, a
/// pod whose two DRA rails were never tuned: the neighbour's rails end at
/// the profile's class.
#[test]
fn a_synchronize_with_a_4097_annotation_pod_tunes_its_neighbours_dra_rails() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let mut node = Node::new(2, profile(), true);
        let crowded = pod(&unique("sbc"), None, Value::Object(annotations(4097)));
        let sandbox = unique("sb");
        let neighbour = pod(&sandbox, Some(&node.pod.path()), json!({}));
        let sim = Sim::start(
            bin,
            &node.sock,
            &json!([
                {"existing_pods": [crowded, neighbour]},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"sleep_ms": 2500}
            ]),
            &[],
        );
        sim.wait_log("step 1 wait_plugins: begin");
        let plugin = node.plugin(&["nri"]);
        let log = plugin.wait_log("caught up ", 1, Duration::from_secs(8));
        never_dropped(name, &sim.finish(), 1);
        for vf in &node.vfs {
            assert_eq!(node.tree.tc(&vf.dev), "tclass=41", "{name}: {log}");
            assert_eq!(
                node.entry(&sandbox, &vf.ifname).unwrap()["network"],
                NETWORK
            );
        }
    }
}

/// A `PodSandbox` of the runtime's with one annotation whose key claims
/// more bytes than it holds: no runtime of ttrpc's sends it, a broken one
/// might.
fn broken_pod(id: &str) -> Writer {
    let mut p = Writer::new();
    p.text(1, id).text(2, "broken").text(4, "team-a");
    // map entry {1 key: 5 bytes claimed, 1 there}
    p.bytes(6, &[0x0a, 0x05, b'k']);
    p
}

/// The same, well formed: `PodSandbox{1 id, 2 name, 3 uid, 4 namespace,
/// 8 linux{5 namespaces{1 "network", 2 path}}}`.
fn good_pod(id: &str, netns: &str) -> Writer {
    let mut p = Writer::new();
    p.text(1, id)
        .text(2, "neighbour")
        .text(3, "uid-n")
        .text(4, "team-a");
    let mut ns = Writer::new();
    ns.text(1, "network").text(2, netns);
    let mut linux = Writer::new();
    linux.message(5, &ns);
    p.message(8, &linux);
    p
}

/// A pod in a Synchronize that does not decode is skipped with one line,
/// alone: the pod after it in the same part has its DRA rails tuned.
#[test]
fn an_undecodable_pod_in_a_synchronize_is_one_line_and_its_neighbours_are_judged() {
    needs!(root);
    let _: NriSims = needs!(nri_sim);
    let mut node = Node::new(2, profile(), true);
    let raw = Raw::bind(&node.sock);
    let plugin = node.plugin(&["nri"]);
    let mut c = raw.accept(Duration::from_secs(5));
    let sandbox = unique("sb");
    let mut part = Writer::new();
    part.message(1, &broken_pod("broken-1"))
        .message(1, &good_pod(&sandbox, &node.pod.path()));
    let (code, message, _) = c.call("Synchronize", part.as_bytes());
    assert_eq!(code, 0, "{message}");
    let log = plugin.wait_log("caught up ", 1, Duration::from_secs(8));
    for vf in &node.vfs {
        assert_eq!(node.tree.tc(&vf.dev), "tclass=41", "{log}");
    }
    let said: Vec<&str> = log.lines().filter(|l| l.contains("broken-1")).collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(said[0].contains("does not decode"), "{}", said[0]);
    assert!(
        line_of(&log, "caught up ").contains("1 that do not decode"),
        "{log}"
    );
}

// ------------------------------------------------------------ per rail

/// A runtime that lists `pod` in its Synchronize (a restart of the
/// plugin's or its own) to `plugin`: the plugin's log once its catch-up
/// has said its summary, the plugin registered throughout.
fn caught_up(
    name: &str,
    bin: &std::path::Path,
    node: &Node,
    plugin: &Plugin,
    pod: &Value,
) -> String {
    let sim = Sim::start(
        bin,
        &node.sock,
        &json!([
            {"existing_pods": [pod]},
            {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
            {"sleep_ms": 1500}
        ]),
        &[],
    );
    let log = plugin.wait_log("caught up ", 1, Duration::from_secs(8));
    never_dropped(name, &sim.finish(), 1);
    log
}

/// The plugin is killed while rail 2 of 2 waits for its GID (`gidCheck:
/// present`); rail 1 has its entry. Restarted, with rail 2's GID there now,
/// the catch-up after its Synchronize tunes rail 2 and leaves rail 1 as it
/// was (one take each).
#[test]
fn a_pod_whose_plugin_was_killed_mid_answer_has_its_untuned_rail_completed_by_the_catch_up() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let mut node = Node::new(
            2,
            json!({"trafficClass": 41, "gidCheck": "present", "gidTimeoutMs": 5000}),
            true,
        );
        let late = node.vfs[1].clone();
        for i in [2, 3] {
            node.tree.set_gid(&late.dev, i, ZERO_GID, "");
        }
        let config = node.config.clone();
        let mut first = node.plugin(&["nri"]);
        let sandbox = unique("sb");
        let p = pod(&sandbox, Some(&node.pod.path()), json!({}));
        let sim = Sim::start(bin, &node.sock, &registered(json!([{"run_pod": p}])), &[]);
        first.wait_log(
            "DRA rail net1 on mlx5_2 port 1 tuned",
            1,
            Duration::from_secs(5),
        );
        first.kill();
        sim.finish();
        assert!(node.entry(&sandbox, "net1").is_some(), "{name}");
        assert!(node.entry(&sandbox, "net2").is_none(), "{name}");
        assert_eq!(node.tree.tc(&late.dev), "Global tclass=106\n", "{name}");
        let created = node.entry(&sandbox, "net1").unwrap()["createdNs"].clone();

        node.tree.set_ipv4_gids(&late.dev, &late.ip);
        let second = Plugin::on(StateDirPath(node.state_dir()), &config, &["nri"]);
        let log = caught_up(name, bin, &node, &second, &p);
        assert_eq!(node.tree.tc(&late.dev), "tclass=41", "{name}: {log}");
        assert_eq!(node.pod.rail_values("net2"), tuned("net2"), "{name}");
        let e = node.entry(&sandbox, "net2").expect("rail 2's entry");
        assert_eq!(e["network"], NETWORK, "{name}");
        assert_eq!(e["owned"]["trafficClass"]["original"], json!(106), "{name}");
        assert_eq!(
            node.entry(&sandbox, "net1").unwrap()["createdNs"],
            created,
            "{name}: rail 1 taken once"
        );
        assert_eq!(node.entries().len(), 2, "{name}: {:?}", node.entries());
        assert!(!log.contains("DRA rail net1"), "{name}: {log}");
    }
}

/// A pod with CAP_NET_ADMIN renames its CNI rail (net1, the NAD's class
/// 41) to net9 and picks class 106 by annotation; after a reconnect the
/// catch-up knows the port by its device's identity: the VF keeps the
/// NAD's class and its one entry, and only the DRA rail (net2) takes the
/// pod's pick.
#[test]
fn a_renamed_cni_rail_is_never_tuned_as_a_dra_rail_after_a_reconnect() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let mut node = Node::new(2, profile(), true);
        let sandbox = unique("sb");
        node.cni_add_rail_1(&sandbox);
        sh(&format!(
            "ip -n {ns} link set net1 down && ip -n {ns} link set net1 name net9 && ip -n {ns} link set net9 up",
            ns = node.pod.ns
        ));
        node.tree.bind(&node.pod, "net9", &node.vfs[0].pci);
        let p = pod(
            &sandbox,
            Some(&node.pod.path()),
            json!({"roce-tune.io/traffic-class": "106"}),
        );
        let plugin = node.plugin(&["nri"]);
        let log = caught_up(name, bin, &node, &plugin, &p);
        assert_eq!(node.tree.tc(&node.vfs[0].dev), "tclass=41", "{name}: {log}");
        let on_cni_vf: Vec<Value> = node
            .entries()
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(node.state_dir().join(f)).unwrap();
                serde_json::from_str::<Value>(&text).unwrap()
            })
            .filter(|e| e["device"] == json!(node.vfs[0].dev))
            .collect();
        assert_eq!(on_cni_vf.len(), 1, "{name}: {on_cni_vf:?}");
        assert_eq!(on_cni_vf[0]["network"], "rail-1", "{name}");
        assert_eq!(node.tree.tc(&node.vfs[1].dev), "tclass=106", "{name}");
        assert_eq!(node.entry(&sandbox, "net2").unwrap()["network"], NETWORK);
        assert!(!log.contains("DRA rail net9"), "{name}: {log}");
    }
}

// ------------------------------------------------------------ one deadline

/// The runtime's request timeout in these tests (NRI's default), and the
/// bound every pod event's answer must meet on the runtime's clock: three
/// quarters of it, plus 100 ms for the answer's way back on this loaded
/// 2-core machine.
const TIMEOUT_MS: f64 = 2000.0;
const ANSWER_BOUND_MS: f64 = TIMEOUT_MS * 0.75 + 100.0;

/// Device locks held by this process, as a stuck ADD or DEL in another
/// process would hold them; dropped, they are free.
struct Held(Vec<Flock<std::fs::File>>);

impl Held {
    fn none() -> Held {
        Held(Vec::new())
    }

    /// Take `lock` (waiting while the plugin holds it for a take).
    fn take(&mut self, lock: &PathBuf) {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock)
            .unwrap();
        self.0.push(
            Flock::lock(f, FlockArg::LockExclusive)
                .map_err(|(_, e)| e)
                .unwrap(),
        );
    }
}

/// The lock file of `node`'s rail `i` (`<stateDir>/locks/<PCI>.<port>.lock`,
/// docs/design.md, "State entries"), its dir made as the plugin makes it.
fn lock_of(node: &Node, i: usize) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let locks = node.state_dir().join("locks");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&locks)
        .unwrap();
    locks.join(format!("{}.1.lock", node.vfs[i].pci))
}

/// Each rail's class file as it is now (untouched) and as it reads once a
/// take is given back: the class it held (`Global tclass=106`:
/// `tclass=106`), or unset (`tclass=-1`).
fn classes_given_back(node: &Node) -> Vec<(String, String)> {
    node.vfs
        .iter()
        .map(|v| {
            let now = node.tree.tc(&v.dev);
            let back = match now.as_str() {
                "" => "tclass=-1".to_owned(),
                held => format!(
                    "tclass={}",
                    held.trim().trim_start_matches("Global tclass=")
                ),
            };
            (now, back)
        })
        .collect()
}

/// `n` rails under `profile`, the last one's RoCE GID never there.
fn last_gid_never_comes(n: usize, profile: Value) -> Node {
    let node = Node::new(n, profile, true);
    let last = &node.vfs[n - 1].dev;
    node.tree.set_gid(last, 2, ZERO_GID, "");
    node.tree.set_gid(last, 3, ZERO_GID, "");
    node
}

/// RunPodSandbox of the pod, then RunPodSandbox of another pod (no netns of
/// its own) and a container of it: the later events the plugin must still
/// answer.
fn pod_then_a_later_event(sandbox: &str, netns: &str) -> Value {
    let later = unique("later");
    registered(json!([
        {"run_pod": pod(sandbox, Some(netns), json!({}))},
        {"run_pod": pod(&later, None, json!({"roce-tune.io/nccl-env": "true"}))},
        {"create_container": ctr("c-later", &later, &["PATH=/bin"])}
    ]))
}

/// The answer to step 1 left within the bound on the runtime's clock, and
/// the plugin answered the later events, registered throughout.
fn answered_in_time_and_still_registered(
    name: &str,
    result: &Value,
    what: &str,
    plugin: &Plugin,
) -> f64 {
    let ms = run_pod_ms(result);
    eprintln!("{name} {what}: RunPodSandbox answered in {ms:.1} ms (runtime's clock)");
    assert!(
        ms <= ANSWER_BOUND_MS,
        "{name} {what}: {ms} ms, past {ANSWER_BOUND_MS}: {}",
        plugin.log()
    );
    for s in steps(result) {
        assert!(
            s["registered_after"].to_string().contains("50-roce-tune"),
            "{name} {what}: dropped at step {}: {s}",
            s["step"]
        );
    }
    let later = &steps(result)[2];
    assert_eq!(later["ok"], true, "{name} {what}: {later}");
    let wire = rpcs(result, "RunPodSandbox").len() + rpcs(result, "StateChange").len();
    assert!(
        wire >= 2,
        "{name} {what}: the later pod never reached the plugin"
    );
    assert_eq!(
        rpcs(result, "CreateContainer").len(),
        1,
        "{name} {what}: the later container never reached the plugin"
    );
    ms
}

/// Wait (at most `bound`) until `done` holds of the node.
/// How long the work left after an answer may take to be finished: not
/// what these tests time (the answer is), so bounded generously. 20 s was
/// passed by 64 rails of a debug build at a load of 10 on 2 cores; alone
/// they take about 1 s.
const AFTER_THE_ANSWER: Duration = Duration::from_secs(90);

fn eventually(node: &Node, bound: Duration, what: &str, done: impl Fn(&Node) -> bool) {
    let t = Instant::now();
    while !done(node) {
        assert!(
            t.elapsed() < bound,
            "{what}: not within {bound:?}; entries {:?}",
            node.entries()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `gidCheck: enforce`, 16, 32 and 64 rails: the last rail's GID never
/// comes and, while it waits, another process takes the locks of every rail
/// tuned before it. The sandbox fails (nothing verified can be promised),
/// its answer leaves within three quarters of the request timeout (+100 ms)
/// on the runtime's clock with the rollback cut at the deadline, the plugin
/// stays registered and answers the next events; once the locks are free
/// the rest of the rollback is done after the answer: the node ends as it
/// was.
#[test]
fn under_enforce_held_locks_and_a_gid_that_never_comes_answer_within_the_deadline() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for n in [16, 32, 64] {
        for (name, bin) in sims.both() {
            let mut node = last_gid_never_comes(
                n,
                json!({"trafficClass": 41, "gidCheck": "enforce", "gidTimeoutMs": 5000}),
            );
            let before = node.picture();
            let classes = classes_given_back(&node);
            let plugin = node.plugin(&["nri"]);
            let sandbox = unique("sb");
            let locks: Vec<PathBuf> = (0..n - 1).map(|i| lock_of(&node, i)).collect();
            let script = pod_then_a_later_event(&sandbox, &node.pod.path());
            let sim = Sim::start(bin, &node.sock, &script, &[]);
            // Another process takes each tuned rail's lock once its entry
            // is written, as long as the answer runs.
            let mut held = Held::none();
            let t = Instant::now();
            while held.0.len() < n - 1 && t.elapsed() < Duration::from_secs(3) {
                let k = held.0.len();
                if node.entry(&sandbox, &node.vfs[k].ifname).is_some() {
                    held.take(&locks[k]);
                } else {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            let result = sim.finish();
            let what = format!("{n} rails, enforce, {} locks held", held.0.len());
            answered_in_time_and_still_registered(name, &result, &what, &plugin);
            let step = &steps(&result)[1];
            assert_eq!(step["ok"], false, "{name} {what}: {step}");
            drop(held);
            eventually(&node, Duration::from_secs(15), &what, |n| {
                n.entries().is_empty()
            });
            assert_eq!(node.picture().1, before.1, "{name} {what}: the sysctls");
            for (i, vf) in node.vfs.iter().enumerate() {
                let now = node.tree.tc(&vf.dev);
                assert!(
                    now == classes[i].0 || now == classes[i].1,
                    "{name} {what}: {} reads {now:?}, neither untouched nor given back: {}",
                    vf.ifname,
                    plugin.log()
                );
            }
        }
    }
}

/// `gidCheck` present, warn and off, 16, 32 and 64 rails: the locks of
/// rails 2 to n/2 are held by another process from the start and the last
/// rail's GID never comes. The sandbox starts, its answer leaves within the
/// deadline (+100 ms) with what is done, the plugin stays registered and
/// answers the next events; once the locks are free, the rails the answer
/// left are tuned after it, off the request path: every rail at the
/// profile's class with its entry.
#[test]
fn in_the_other_modes_held_locks_and_a_gid_that_never_comes_are_finished_after_the_answer() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for check in ["present", "warn", "off"] {
        for n in [16, 32, 64] {
            let mut node = last_gid_never_comes(
                n,
                json!({"trafficClass": 41, "gidCheck": check, "gidTimeoutMs": 5000}),
            );
            let mut held = Held::none();
            for i in 1..n / 2 {
                held.take(&lock_of(&node, i));
            }
            let plugin = node.plugin(&["nri"]);
            let sandbox = unique("sb");
            let result = node.run(
                &sims.v012,
                pod_then_a_later_event(&sandbox, &node.pod.path()),
                &[],
            );
            let what = format!("{n} rails, {check}, {} locks held", held.0.len());
            answered_in_time_and_still_registered("nri-sim-0.12", &result, &what, &plugin);
            assert_eq!(steps(&result)[1]["ok"], true, "{what}");
            drop(held);
            // The entry comes before the class is written: both awaited.
            eventually(&node, AFTER_THE_ANSWER, &what, |node| {
                node.vfs.iter().all(|vf| {
                    node.entry(&sandbox, &vf.ifname).is_some()
                        && node.tree.tc(&vf.dev) == "tclass=41"
                })
            });
            for vf in &node.vfs {
                assert_eq!(node.tree.tc(&vf.dev), "tclass=41", "{what}: {}", vf.ifname);
            }
            let log = plugin.log();
            assert!(!log.contains("panicked"), "{log}");
        }
    }
}

/// StopPodSandbox of a 64-rail pod while another process holds every
/// rail's lock: the answer leaves within the deadline (+100 ms), the plugin
/// stays registered, and once the locks are free every rail is given back
/// after the answer (classes restored exactly, no entry left), without the
/// agent.
#[test]
fn a_stop_pod_sandbox_with_held_locks_answers_within_the_deadline_and_gives_back_after() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let n = 64;
    let mut node = Node::new(n, profile(), true);
    let classes = classes_given_back(&node);
    let plugin = node.plugin(&["nri"]);
    let sandbox = unique("sb");
    let p = pod(&sandbox, Some(&node.pod.path()), json!({}));
    let result = node.run(&sims.v012, registered(json!([{"run_pod": p}])), &[]);
    never_dropped("nri-sim-0.12", &result, 0);
    eventually(&node, AFTER_THE_ANSWER, "tuned", |node| {
        node.entries().len() == n
    });
    let mut held = Held::none();
    for i in 0..n {
        held.take(&lock_of(&node, i));
    }
    let later = unique("later");
    let result = node.run(
        &sims.v012,
        json!([
            {"existing_pods": [p]},
            {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
            {"stop_pod": sandbox},
            {"run_pod": pod(&later, None, json!({}))}
        ]),
        &[],
    );
    never_dropped("nri-sim-0.12", &result, 1);
    let stop = rpcs(&result, "StopPodSandbox");
    let ms = stop[0]["ms"].as_f64().unwrap();
    eprintln!("StopPodSandbox of {n} rails, every lock held: answered in {ms:.1} ms");
    assert!(ms <= ANSWER_BOUND_MS, "{ms} ms, past {ANSWER_BOUND_MS}");
    assert_eq!(rpcs(&result, "RunPodSandbox").len(), 1, "the later pod");
    assert!(
        !node.entries().is_empty(),
        "nothing could be given back yet"
    );
    drop(held);
    eventually(&node, AFTER_THE_ANSWER, "given back", |node| {
        node.entries().is_empty()
    });
    let now: Vec<String> = node.vfs.iter().map(|v| node.tree.tc(&v.dev)).collect();
    let given_back: Vec<String> = classes.into_iter().map(|(_, back)| back).collect();
    assert_eq!(now, given_back, "{}", plugin.log());
}
