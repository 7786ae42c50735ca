//! DRA rails: the netdevs a DRA driver moved into a pod before
//! RunPodSandbox, tuned by `roce-tune-agent nri` with the node's `draRails`
//! profile and given back at StopPodSandbox, under containerd's own NRI
//! adaptation (../shared/nri: `nri-sim-0.12`, `nri-sim-old`). The test
//! plays dranet and the kernel: the pod's veths are bound to VFs on a test
//! tree (docs/design.md, "Test trees") before the script runs.

use crate::common::need::NriSims;
use crate::common::*;
use crate::nri::{adjusted_env, ctr, never_dropped, pod, rpcs, scrape, socket, steps, Plugin, Sim};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The pod's primary: eth0, holding the default route, bound to a VF of its
/// own so that only the rule keeps it untouched.
pub(crate) const PRIMARY_PCI: &str = "0000:0d:00.0";
pub(crate) const PRIMARY_DEV: &str = "mlx5_99";
pub(crate) const NETWORK: &str = "nri:dra-rails";
const HCA: &str = "NCCL_IB_HCA==mlx5_2:1,mlx5_3:1";

/// A node with one pod whose netns holds eth0 (primary, with the default
/// route) and `n` rails net1.. bound to VFs (rail 1's class file holding
/// `Global tclass=106`, the others unset), the rails' sysctls away from
/// roce-tune's, and a node config with the `draRails` profile `profile`.
pub(crate) struct Node {
    pub(crate) pod: Pod,
    pub(crate) tree: Tree,
    pub(crate) vfs: Vec<Vf>,
    pub(crate) config: PathBuf,
    pub(crate) state: Option<StateDirPath>,
    pub(crate) sock: PathBuf,
    _dir: PathBuf,
}

impl Node {
    pub(crate) fn new(n: usize, profile: Value, gids: bool) -> Node {
        let spec = Rail::spec().rails(n);
        let spec = if gids { spec } else { spec.no_gids() };
        let Rail {
            pod,
            tree,
            state,
            vfs,
            ..
        } = spec.build();
        pod.add_rail("eth0", Some("10.9.0.2/24"));
        sh(&format!(
            "ip -n {} route add default via 10.9.0.1 dev eth0",
            pod.ns
        ));
        tree.add_device(PRIMARY_PCI, PRIMARY_DEV, "");
        tree.set_ipv4_gids(PRIMARY_DEV, "10.9.0.2");
        tree.bind(&pod, "eth0", PRIMARY_PCI);
        if n > 1 {
            tree.set_tc(&vfs[1].dev, "Global tclass=106\n");
        }
        for vf in &vfs {
            pod.untune(&vf.ifname);
        }
        pod.untune("eth0");
        let (dir, sock) = socket("dra-");
        let config = write_node_config(
            &state,
            Some(&tree),
            json!({"nriSocket": path_str(&sock), "draRails": profile,
                   "metricsAddress": "127.0.0.1:0"}),
        );
        Node {
            pod,
            tree,
            vfs,
            config,
            state: Some(state),
            sock,
            _dir: dir,
        }
    }

    /// Two rails under `gidCheck: enforce` (300 ms), the second's RoCE v2
    /// GID never there.
    fn second_gid_never_comes() -> Node {
        let node = Node::new(
            2,
            json!({"trafficClass": 41, "gidCheck": "enforce", "gidTimeoutMs": 300}),
            true,
        );
        let late = node.vfs[1].dev.clone();
        node.tree.set_gid(&late, 2, ZERO_GID, "");
        node.tree.set_gid(&late, 3, ZERO_GID, "");
        node
    }

    /// After `second_gid_never_comes`'s pod failed: the sysctls as in
    /// `before`, the second rail's class never taken, no entry left.
    fn second_rail_failed_and_nothing_stays(&self, before: &Picture) {
        assert_eq!(self.picture().1, before.1, "the sysctls as they were");
        assert_eq!(
            self.tree.tc(&self.vfs[1].dev),
            "Global tclass=106\n",
            "never taken"
        );
        assert!(self.entries().is_empty(), "{:?}", self.entries());
    }

    /// Rail 1 (net1) ADDed by a CNI chain for `sandbox`, as the runtime
    /// runs it: the network `rail-1`, class 41.
    pub(crate) fn cni_add_rail_1(&self, sandbox: &str) {
        let conf = json!({
            "cniVersion": "1.1.0", "name": "rail-1", "type": "roce-tune",
            "trafficClass": 41, "deviceID": self.vfs[0].pci, "gidTimeoutMs": 800,
            "prevResult": prev_result("1.1.0", "net1", &self.pod.path(), &[&self.vfs[0].addr]),
        });
        run_plugin(
            self.state.as_ref().expect("before the plugin starts"),
            "ADD",
            sandbox,
            &self.pod.path(),
            "net1",
            conf.to_string().as_bytes(),
        )
        .ok();
    }

    pub(crate) fn plugin(&mut self, args: &[&str]) -> Plugin {
        Plugin::on(self.state.take().unwrap(), &self.config, args)
    }

    /// The state dir (the plugin holds its handle once started).
    pub(crate) fn state_dir(&self) -> PathBuf {
        self.config.parent().unwrap().join("state")
    }

    pub(crate) fn entry(&self, sandbox: &str, ifname: &str) -> Option<Value> {
        let p = self.state_dir().join(format!("{sandbox}:{ifname}.state"));
        let text = std::fs::read_to_string(p).ok()?;
        Some(serde_json::from_str(&text).unwrap())
    }

    pub(crate) fn entries(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.state_dir()) else {
            return vec![];
        };
        let mut v: Vec<String> = rd
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".state"))
            .collect();
        v.sort();
        v
    }

    /// What the node shows that a tuning changes: every class file, and
    /// every rail sysctl of the pod's interfaces.
    pub(crate) fn picture(&self) -> Picture {
        let mut names: Vec<&str> = self.vfs.iter().map(|v| v.ifname.as_str()).collect();
        names.push("eth0");
        (
            snapshot(&self.tree.root),
            names.iter().map(|n| self.pod.rail_values(n)).collect(),
        )
    }

    pub(crate) fn run(&self, bin: &Path, script: Value, extra: &[&str]) -> Value {
        Sim::start(bin, &self.sock, &script, extra).finish()
    }
}

/// The rail sysctls of `ifname` itself (not the netns-wide `all` keys,
/// which the pod's rails set for every interface).
fn own_values(pod: &Pod, ifname: &str) -> Vec<String> {
    rail_sysctls(ifname)
        .iter()
        .zip(pod.rail_values(ifname))
        .filter(|((k, _), _)| !k.contains(".all."))
        .map(|(_, v)| v)
        .collect()
}

pub(crate) fn tuned(ifname: &str) -> Vec<String> {
    rail_sysctls(ifname)
        .into_iter()
        .map(|(_, v)| v.to_owned())
        .collect()
}

pub(crate) fn profile() -> Value {
    json!({"trafficClass": 41, "podTrafficClasses": [41, 106], "gidTimeoutMs": 800})
}

/// A script whose steps start once the plugin has registered.
pub(crate) fn registered(steps: Value) -> Value {
    let mut all = vec![json!({"wait_plugins": ["roce-tune"], "timeout_ms": 5000})];
    all.extend(steps.as_array().expect("a list of steps").iter().cloned());
    Value::Array(all)
}

pub(crate) fn run_pod_ms(result: &Value) -> f64 {
    let dedicated = rpcs(result, "RunPodSandbox");
    let r = dedicated
        .first()
        .copied()
        .or_else(|| rpcs(result, "StateChange").first().copied())
        .expect("a RunPodSandbox on the wire");
    r["ms"].as_f64().unwrap()
}

/// What DRA rails must do: under both generations, a pod whose netns got
/// two VF-backed rails before RunPodSandbox has both tuned (sysctls, class,
/// state entries with the rail record), its primary (eth0, the default
/// route's, a VF too) untouched; its container's environment names both;
/// StopPodSandbox restores each class exactly (unset stays unset: -1;
/// 106 is 106 again) and drops the entries.
#[test]
fn two_dra_rails_are_tuned_at_run_pod_sandbox_and_given_back_at_stop_under_both_generations() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let mut node = Node::new(2, profile(), true);
        let primary_before = own_values(&node.pod, "eth0");
        let plugin = node.plugin(&["nri"]);
        let sandbox = unique("sb");
        let p = pod(
            &sandbox,
            Some(&node.pod.path()),
            json!({"roce-tune.io/nccl-env": "true"}),
        );
        let result = node.run(
            bin,
            registered(json!([
                {"run_pod": p},
                {"create_container": ctr("worker", &sandbox, &["PATH=/bin"])}
            ])),
            &[],
        );
        never_dropped(name, &result, 0);
        let ms = run_pod_ms(&result);
        eprintln!("{name}: RunPodSandbox of a 2-rail pod answered in {ms} ms (runtime's clock)");
        assert!(ms < 1500.0, "{name}: {ms} ms");
        for vf in &node.vfs {
            assert_eq!(node.tree.tc(&vf.dev), "tclass=41", "{name}: {}", vf.ifname);
            assert_eq!(
                node.pod.rail_values(&vf.ifname),
                tuned(&vf.ifname),
                "{name}"
            );
            let e = node
                .entry(&sandbox, &vf.ifname)
                .expect("an entry per DRA rail");
            assert_eq!(e["network"], NETWORK, "{name}: {e}");
            assert_eq!(e["containerId"], json!(sandbox));
            assert_eq!(e["device"], json!(vf.dev));
            assert_eq!(e["owned"]["trafficClass"]["written"], json!(41));
            assert_eq!(
                e["rail"],
                json!({"gidIndex": 3, "trafficClass": 41, "rdmaCmTos": null}),
                "{name}"
            );
            assert_eq!(e["gid"], json!(v4_gid(&vf.ip)));
        }
        assert_eq!(
            node.entry(&sandbox, "net2").unwrap()["owned"]["trafficClass"]["original"],
            json!(106)
        );
        assert_eq!(node.tree.tc(PRIMARY_DEV), "", "{name}: the primary's VF");
        assert_eq!(own_values(&node.pod, "eth0"), primary_before, "{name}");
        assert_eq!(node.entries().len(), 2, "{name}: {:?}", node.entries());
        let env = adjusted_env(&steps(&result)[2]);
        assert_eq!(env, [HCA, "NCCL_IB_GID_INDEX=3", "NCCL_IB_TC=41"], "{name}");
        plugin.wait_log("2 of 2 DRA rails tuned in", 1, Duration::from_secs(5));

        // The runtime restarts between the two (nri-sim runs one script):
        // the pod is in its state, and the plugin reconnects.
        let result = node.run(
            bin,
            json!([
                {"existing_pods": [p]},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"stop_pod": sandbox},
                {"remove_pod": sandbox}
            ]),
            &[],
        );
        never_dropped(name, &result, 1);
        assert_eq!(
            node.tree.tc(&node.vfs[0].dev),
            "tclass=-1",
            "{name}: unset stays unset"
        );
        assert_eq!(node.tree.tc(&node.vfs[1].dev), "tclass=106", "{name}");
        assert_eq!(node.tree.tc(PRIMARY_DEV), "", "{name}");
        assert!(node.entries().is_empty(), "{name}: {:?}", node.entries());
        let log = plugin.wait_log("StopPodSandbox pod team-a/", 2, Duration::from_secs(5));
        assert!(
            log.contains("DRA rail net1 on mlx5_2: traffic class restored to unset"),
            "{name}: {log}"
        );
    }
}

/// A pod with a CNI rail (its ADD run as the runtime runs the chain) and a
/// DRA rail: the plugin tunes only the DRA one, and the CNI rail's entry
/// stays its network's.
#[test]
fn a_pod_with_a_cni_rail_and_a_dra_rail_has_only_the_dra_one_tuned_by_the_plugin() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let mut node = Node::new(2, json!({"trafficClass": 106}), true);
    let sandbox = unique("sb");
    node.cni_add_rail_1(&sandbox);
    let cni_entry = node.entry(&sandbox, "net1").unwrap();
    let plugin = node.plugin(&["nri"]);
    let result = node.run(
        &sims.v012,
        registered(json!([
            {"run_pod": pod(&sandbox, Some(&node.pod.path()), json!({}))}
        ])),
        &[],
    );
    never_dropped("nri-sim-0.12", &result, 0);
    assert_eq!(
        node.tree.tc(&node.vfs[0].dev),
        "tclass=41",
        "the CNI rail's class"
    );
    assert_eq!(
        node.tree.tc(&node.vfs[1].dev),
        "tclass=106",
        "the DRA rail's"
    );
    assert_eq!(
        node.entry(&sandbox, "net1").unwrap(),
        cni_entry,
        "untouched"
    );
    assert_eq!(node.entry(&sandbox, "net2").unwrap()["network"], NETWORK);
    let log = plugin.wait_log("1 of 1 DRA rails tuned", 1, Duration::from_secs(5));
    assert!(!log.contains("DRA rail net1"), "{log}");
}

/// The whole answer ends within 3/4 of the request timeout whatever
/// `gidTimeoutMs` says: a GID that never comes fails the sandbox under
/// `enforce` (nothing changed), and under `present` the rails are recorded
/// for the agent (no GID index); the plugin is never dropped.
#[test]
fn a_gid_that_never_comes_is_bounded_by_the_answers_budget() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (check, fails) in [("enforce", true), ("present", false)] {
        let mut node = Node::new(
            2,
            json!({"trafficClass": 41, "gidCheck": check, "gidTimeoutMs": 5000}),
            false,
        );
        let before = node.picture();
        let plugin = node.plugin(&["nri"]);
        let sandbox = unique("sb");
        let result = node.run(
            &sims.v012,
            registered(json!([
                {"run_pod": pod(&sandbox, Some(&node.pod.path()), json!({}))}
            ])),
            &["--request-timeout-ms", "1000"],
        );
        let ms = run_pod_ms(&result);
        eprintln!("gidCheck {check}, no GID, request timeout 1000 ms: answered in {ms} ms");
        assert!(ms < 1000.0, "{check}: {ms} ms: past the request timeout");
        // The budget is 750 ms: the GID wait ends 300 ms before it (the
        // pass's reserve, 200 ms, and the take's, 100 ms), at 450 ms.
        assert!(
            ms >= 440.0,
            "{check}: {ms} ms: the wait was not the budget's"
        );
        let step = &steps(&result)[1];
        assert_eq!(step["ok"], json!(!fails), "{check}: {step}");
        assert!(
            step["registered_after"]
                .to_string()
                .contains("50-roce-tune"),
            "{check}: dropped: {step}"
        );
        if fails {
            assert!(
                step["error"].as_str().unwrap().contains("GID check failed"),
                "{step}"
            );
            assert_eq!(node.picture(), before, "enforce: nothing changed");
            assert!(node.entries().is_empty());
        } else {
            // Rail 1's wait took the budget: rail 2 is tuned in the answer
            // if it fits before the deadline, else right after it, off the
            // request path.
            let t = Instant::now();
            while node
                .vfs
                .iter()
                .any(|vf| node.entry(&sandbox, &vf.ifname).is_none())
            {
                assert!(
                    t.elapsed() < Duration::from_secs(5),
                    "not finished after the answer: {}",
                    plugin.log()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            for vf in &node.vfs {
                assert_eq!(node.tree.tc(&vf.dev), "tclass=41");
                let e = node.entry(&sandbox, &vf.ifname).unwrap();
                assert_eq!(e["rail"]["gidIndex"], Value::Null, "{e}");
            }
            plugin.wait_log("cut to", 1, Duration::from_secs(5));
        }
    }
}

/// A live DRA rail is seen by `inspect --env` and the agent's metrics, and
/// held by its drift repair; a StopPodSandbox that never comes (the netns gone with the pod):
/// the agent's orphan repair gives both classes back within two periods.
#[test]
fn a_lost_stop_pod_sandbox_is_finished_by_the_agent_within_two_periods() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let mut node = Node::new(2, profile(), true);
    // The kernel's counters of rail 1's device: a DRA rail's are exported too.
    let hw = node
        .tree
        .dev_dir(&node.vfs[0].dev)
        .join("ports/1/hw_counters");
    std::fs::create_dir_all(&hw).unwrap();
    std::fs::write(hw.join("out_of_sequence"), "17\n").unwrap();
    let plugin = node.plugin(&["agent", "--every", "1", "--nri"]);
    let sandbox = unique("sb");
    let result = node.run(
        &sims.v012,
        registered(json!([
            {"run_pod": pod(&sandbox, Some(&node.pod.path()), json!({}))}
        ])),
        &[],
    );
    never_dropped("nri-sim-0.12", &result, 0);
    assert_eq!(node.tree.tc(&node.vfs[0].dev), "tclass=41");
    // `inspect --env` reads a DRA rail's entry as it reads a CNI rail's.
    let env = Exec::new(BIN)
        .args(["inspect", "--netns", &node.pod.path(), "--env"])
        .env("ROCE_TUNE_NODE_CONFIG", &node.config)
        .run();
    env.ok();
    assert!(env.stdout.contains(HCA), "{}", env.stdout);
    // The agent's metrics show it as a rail like any other.
    let log = plugin.wait_log("metrics on http://", 1, Duration::from_secs(5));
    let addr = log
        .split("metrics on http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let class = |metrics: &str, dev: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with("roce_tune_rail_traffic_class{") && l.contains(dev))
            .map(|l| l.rsplit(' ').next().unwrap().to_owned())
    };
    // A scrape shows the last pass: the next one, within a period, sees it.
    let tuned_at = Instant::now();
    loop {
        let metrics = scrape(&addr);
        let both = ["\"mlx5_2\"", "\"mlx5_3\""].map(|d| class(&metrics, d));
        let counted = metrics.lines().any(|l| {
            l.starts_with("roce_tune_rail_hw_counter_total{")
                && l.contains("rdma_device=\"mlx5_2\"")
                && l.contains("counter=\"out_of_sequence\"")
                && l.ends_with(" 17")
        });
        if both == [Some("41".to_owned()), Some("41".to_owned())] && counted {
            break;
        }
        assert!(
            tuned_at.elapsed() < Duration::from_millis(2500),
            "{both:?}: {metrics}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The agent's drift repair holds a live DRA rail to what it wrote.
    node.tree.set_tc(&node.vfs[0].dev, "Global tclass=7\n");
    let drifted = Instant::now();
    while node.tree.tc(&node.vfs[0].dev) != "tclass=41" {
        assert!(
            drifted.elapsed() < Duration::from_millis(2500),
            "drift not repaired within two periods: {}",
            plugin.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    node.pod.delete();
    let gone = Instant::now();
    // A release restores the class, then drops the entry: both awaited.
    let restored = |n: &Node| {
        n.tree.tc(&n.vfs[0].dev) == "tclass=-1"
            && n.tree.tc(&n.vfs[1].dev) == "tclass=106"
            && n.entries().is_empty()
    };
    while !restored(&node) {
        assert!(
            gone.elapsed() < Duration::from_millis(2500),
            "not restored within two periods: {:?} {}",
            node.entries(),
            plugin.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "lost StopPodSandbox finished by the agent in {:?}",
        gone.elapsed()
    );
}

// ------------------------------------------------------------ bad input

/// What a bad input run found: the generation, the node, its picture
/// before the script, the RunPodSandbox step, the plugin, the sandbox id.
struct Ran {
    name: &'static str,
    node: Node,
    before: Picture,
    step: Value,
    plugin: Plugin,
}

pub(crate) type Picture = (
    std::collections::BTreeMap<PathBuf, String>,
    Vec<Vec<String>>,
);

/// One RunPodSandbox of a 2-rail pod (after `setup` played the kernel) under
/// both generations; the plugin stays registered whatever the answer.
fn run_once(pod_of: impl Fn(&Node, &str) -> Value, setup: impl Fn(&Node)) -> Vec<Ran> {
    let sims = crate::common::need::nri_sim(module_path!()).expect("nri-sim");
    let mut out = Vec::new();
    for (name, bin) in sims.both() {
        let mut node = Node::new(2, profile(), true);
        setup(&node);
        let before = node.picture();
        let plugin = node.plugin(&["nri"]);
        let sandbox = unique("sb");
        let result = node.run(
            bin,
            registered(json!([
                {"run_pod": pod_of(&node, &sandbox)}
            ])),
            &[],
        );
        for s in steps(&result) {
            assert!(
                s["registered_after"].to_string().contains("50-roce-tune"),
                "{name}: dropped: {s}"
            );
        }
        let step = steps(&result)[1].clone();
        out.push(Ran {
            name,
            node,
            before,
            step,
            plugin,
        });
    }
    out
}

/// Nothing a tuning changes has changed since `before`.
fn unchanged(r: &Ran, what: &str) {
    let now = r.node.picture();
    assert_eq!(
        snapshot_diff(&r.before.0, &now.0),
        Vec::<String>::new(),
        "{} {what}: the tree",
        r.name
    );
    assert_eq!(r.before.1, now.1, "{} {what}: the sysctls", r.name);
    assert!(
        r.node.entries().is_empty(),
        "{} {what}: {:?}",
        r.name,
        r.node.entries()
    );
}

#[test]
fn an_annotation_class_outside_the_list_or_not_a_number_fails_the_sandbox_and_changes_nothing() {
    needs!(root);
    let _: NriSims = needs!(nri_sim);
    for (value, says) in [
        ("7", "annotation roce-tune.io/traffic-class 7 is not one of the profile's podTrafficClasses [41, 106]"),
        ("forty", "annotation roce-tune.io/traffic-class must be a whole number from 0 to 255, got \"forty\""),
        ("-1", "must be a whole number from 0 to 255"),
    ] {
        for r in run_once(
            |n, id| pod(id, Some(&n.pod.path()), json!({"roce-tune.io/traffic-class": value})),
            |_| {},
        ) {
            assert_eq!(r.step["ok"], false, "{} {value}: {}", r.name, r.step);
            assert!(r.step["error"].as_str().unwrap().contains(says), "{}", r.step);
            let log = r.plugin.wait_log(says, 1, Duration::from_secs(5));
            assert!(log.contains("nothing was changed"), "{log}");
            unchanged(&r, value);
        }
    }
    // Within the list: the pod's pick.
    for r in run_once(
        |n, id| {
            pod(
                id,
                Some(&n.pod.path()),
                json!({"roce-tune.io/traffic-class": "106"}),
            )
        },
        |_| {},
    ) {
        assert_eq!(r.step["ok"], true, "{}: {}", r.name, r.step);
        assert_eq!(
            r.node.tree.tc(&r.node.vfs[0].dev),
            "tclass=106",
            "{}",
            r.name
        );
    }
}

#[test]
fn a_pod_netns_that_is_gone_not_a_netns_the_hosts_or_none_is_skipped_with_a_line() {
    needs!(root);
    let _: NriSims = needs!(nri_sim);
    // The host's netns as this test sees it (the plugin runs in it too).
    let host = format!("/proc/{}/ns/net", std::process::id());
    for (netns, says) in [
        (
            Some("/var/run/netns/never-made-here"),
            "is gone: no DRA rail",
        ),
        (
            Some("/etc/hostname"),
            "is not a network namespace: no DRA rail",
        ),
        (Some(host.as_str()), "is the host's: no DRA rail"),
        (
            None,
            "no network namespace of its own (hostNetwork): no DRA rail",
        ),
    ] {
        for r in run_once(|_, id| pod(id, netns, json!({})), |_| {}) {
            assert_eq!(r.step["ok"], true, "{} {netns:?}: {}", r.name, r.step);
            r.plugin.wait_log(says, 1, Duration::from_secs(5));
            unchanged(&r, says);
        }
    }
}

#[test]
fn two_netdevs_claiming_one_rdma_port_fail_the_sandbox_and_change_nothing() {
    needs!(root);
    let _: NriSims = needs!(nri_sim);
    for r in run_once(
        |n, id| pod(id, Some(&n.pod.path()), json!({})),
        // Play a broken kernel: net2 is net1's VF too.
        |n| n.tree.bind(&n.pod, "net2", &n.vfs[0].pci),
    ) {
        assert_eq!(r.step["ok"], false, "{}: {}", r.name, r.step);
        let says =
            "net1 and net2 both claim mlx5_2 port 1: a port is one rail's, so neither is tuned";
        assert!(
            r.step["error"].as_str().unwrap().contains(says),
            "{}",
            r.step
        );
        r.plugin.wait_log(says, 1, Duration::from_secs(5));
        unchanged(&r, "one port");
    }
}

#[test]
fn a_sandbox_id_with_a_slash_or_300_characters_is_refused_before_any_file() {
    needs!(root);
    let _: NriSims = needs!(nri_sim);
    for id in ["../../etc/sb".to_owned(), "s".repeat(300)] {
        for r in run_once(|n, _| pod(&id, Some(&n.pod.path()), json!({})), |_| {}) {
            assert_eq!(r.step["ok"], false, "{}: {}", r.name, r.step);
            let says = "its sandbox id is refused";
            assert!(
                r.step["error"].as_str().unwrap().contains(says),
                "{}",
                r.step
            );
            r.plugin.wait_log(says, 1, Duration::from_secs(5));
            unchanged(&r, &id);
            assert!(
                !r.node.state_dir().exists(),
                "{}: no state dir made",
                r.name
            );
        }
    }
}

/// A StopPodSandbox for a pod never seen: a line, success, nothing changed;
/// a rail renamed between RunPodSandbox and StopPodSandbox: given back by
/// its device's identity, with a line.
#[test]
fn a_stop_for_a_pod_never_seen_and_a_rail_renamed_before_the_stop() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let mut node = Node::new(2, profile(), true);
        let plugin = node.plugin(&["nri"]);
        let sandbox = unique("sb");
        let p = pod(&sandbox, Some(&node.pod.path()), json!({}));
        // Without a netns of its own, so that the catch-up after the
        // Synchronize that lists it leaves it alone.
        let stranger = pod("never-run", None, json!({}));
        let result = node.run(
            bin,
            json!([
                {"existing_pods": [stranger]},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"run_pod": p},
                {"stop_pod": "never-run"}
            ]),
            &[],
        );
        never_dropped(name, &result, 1);
        assert_eq!(steps(&result)[3]["ok"], true, "{name}");
        plugin.wait_log(
            "StopPodSandbox pod team-a/never-run-name (never-run): no DRA rail recorded for this sandbox",
            1,
            Duration::from_secs(5),
        );
        assert_eq!(node.entries().len(), 2, "{name}: the tuned pod's stay");
        assert_eq!(node.tree.tc(&node.vfs[0].dev), "tclass=41", "{name}");
        sh(&format!(
            "ip -n {ns} link set net1 down && ip -n {ns} link set net1 name net9 && ip -n {ns} link set net9 up",
            ns = node.pod.ns
        ));
        let result = node.run(
            bin,
            json!([
                {"existing_pods": [p]},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"stop_pod": sandbox}
            ]),
            &[],
        );
        never_dropped(name, &result, 1);
        plugin.wait_log(
            "DRA rail net1 is no longer in the pod netns by that name (renamed or moved out)",
            1,
            Duration::from_secs(5),
        );
        assert_eq!(node.tree.tc(&node.vfs[0].dev), "tclass=-1", "{name}");
        assert_eq!(node.tree.tc(&node.vfs[1].dev), "tclass=106", "{name}");
        assert!(node.entries().is_empty(), "{name}");
    }
}

/// Exclusive RDMA netns mode: the devices moved into the pod with their
/// netdevs. At StopPodSandbox dranet (index 00) has moved rail 0's device
/// back to the host already: it is restored through the host's view. Rail
/// 1's device no view shows yet: its entry stays, with a line, and the
/// RemovePodSandbox (no netns) restores it once the kernel has it back.
#[test]
fn in_exclusive_mode_stop_restores_through_the_view_that_shows_the_device_now() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let mut node = Node::new(2, profile(), true);
    node.tree.set_exclusive(true);
    let ino = node.pod.ino();
    for vf in &node.vfs {
        node.tree.move_into(&node.pod, &vf.pci, &vf.dev);
    }
    let plugin = node.plugin(&["nri"]);
    let sandbox = unique("sb");
    let p = pod(&sandbox, Some(&node.pod.path()), json!({}));
    let result = node.run(
        &sims.v012,
        registered(json!([
            {"run_pod": p}
        ])),
        &[],
    );
    never_dropped("nri-sim-0.12", &result, 0);
    for vf in &node.vfs {
        assert_eq!(node.tree.tc_in(ino, &vf.dev), "tclass=41", "{}", vf.ifname);
        let e = node.entry(&sandbox, &vf.ifname).unwrap();
        assert_eq!(e["reach"], "pod", "{e}");
    }
    // Play dranet's StopPodSandbox: rail 0's device is back on the host;
    // rail 1's is on its way (in no view yet).
    node.tree.move_back(ino, &node.vfs[0].pci, &node.vfs[0].dev);
    let limbo = node.tree.root.join("limbo");
    let (pci1, dev1) = (&node.vfs[1].pci, &node.vfs[1].dev);
    for rel in [
        format!("class/infiniband/{dev1}"),
        format!("bus/pci/devices/{pci1}/infiniband/{dev1}"),
    ] {
        let dst = limbo.join(&rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::rename(node.tree.netns_dir(ino).join(&rel), &dst).unwrap();
    }
    let result = node.run(
        &sims.v012,
        json!([
            {"existing_pods": [p]},
            {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
            {"stop_pod": sandbox}
        ]),
        &[],
    );
    never_dropped("nri-sim-0.12", &result, 1);
    assert_eq!(
        node.tree.tc(&node.vfs[0].dev),
        "tclass=-1",
        "through the host's view"
    );
    assert!(node.entry(&sandbox, "net1").is_none());
    assert!(
        node.entry(&sandbox, "net2").is_some(),
        "kept for the repair"
    );
    plugin.wait_log(
        "DRA rail net2 on mlx5_3: kept for the orphan repair",
        1,
        Duration::from_secs(5),
    );
    // The kernel has it back on the host once the netns is gone; the
    // RemovePodSandbox (without the netns, as containerd 2.3+ sends it)
    // releases what is left.
    node.pod.delete();
    for rel in [
        format!("class/infiniband/{dev1}"),
        format!("bus/pci/devices/{pci1}/infiniband/{dev1}"),
    ] {
        std::fs::rename(limbo.join(&rel), node.tree.root.join(&rel)).unwrap();
    }
    let result = node.run(
        &sims.v012,
        json!([
            {"existing_pods": [pod(&sandbox, None, json!({}))]},
            {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
            {"remove_pod": sandbox}
        ]),
        &[],
    );
    never_dropped("nri-sim-0.12", &result, 1);
    plugin.wait_log("RemovePodSandbox pod team-a/", 1, Duration::from_secs(5));
    assert_eq!(node.tree.tc(dev1), "tclass=106");
    assert!(node.entries().is_empty(), "{:?}", node.entries());
}

/// A later rail's failure gives back what the answer already did: net1 is
/// tuned, net2's GID never comes under `enforce`, the sandbox fails, and
/// net1's class is unset again and its sysctls as they were.
#[test]
fn a_failure_on_a_later_rail_gives_back_the_rails_tuned_before_it() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let mut node = Node::second_gid_never_comes();
    let before = node.picture();
    let plugin = node.plugin(&["nri"]);
    let sandbox = unique("sb");
    let result = node.run(
        &sims.v012,
        registered(json!([
            {"run_pod": pod(&sandbox, Some(&node.pod.path()), json!({}))}
        ])),
        &[],
    );
    let step = &steps(&result)[1];
    assert_eq!(step["ok"], false, "{step}");
    assert!(
        step["error"]
            .as_str()
            .unwrap()
            .contains("DRA rail net2: GID check failed"),
        "{step}"
    );
    let log = plugin.log();
    assert!(
        log.contains("DRA rail net1 on mlx5_2 port 1 tuned"),
        "{log}"
    );
    assert_eq!(node.tree.tc(&node.vfs[0].dev), "tclass=-1", "unset again");
    node.second_rail_failed_and_nothing_stays(&before);
}

// ------------------------------------------------------------ Synchronize

/// Milliseconds of the day of a log line's timestamp
/// (`2026-11-30T18:09:52.142Z roce-tune[..] ...`).
fn log_ms(line: &str) -> f64 {
    let time = line.split('T').nth(1).unwrap().split('Z').next().unwrap();
    let mut parts = time.split(':');
    let h: f64 = parts.next().unwrap().parse().unwrap();
    let m: f64 = parts.next().unwrap().parse().unwrap();
    let s: f64 = parts.next().unwrap().parse().unwrap();
    ((h * 60.0 + m) * 60.0 + s) * 1000.0
}

/// The first line of `log` holding `needle`.
pub(crate) fn line_of<'a>(log: &'a str, needle: &str) -> &'a str {
    log.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in {log}"))
}

/// A pod whose sandbox started while the plugin was not connected (an
/// agent's rolling update): the Synchronize that lists it, once answered,
/// has its two DRA rails tuned off the request path (class, sysctls,
/// entries) within 3 s of the registration, the plugin never dropped. A
/// reconnect's Synchronize lists it again: tuned already, it is skipped
/// (its entries as they were, no second take), and the later
/// StopPodSandbox restores both classes exactly (unset stays unset, 106 is
/// 106 again).
#[test]
fn a_pod_that_started_before_the_plugin_connected_has_its_dra_rails_tuned_after_synchronize() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let mut node = Node::new(2, profile(), true);
        let primary_before = own_values(&node.pod, "eth0");
        let sandbox = unique("sb");
        let p = pod(&sandbox, Some(&node.pod.path()), json!({}));
        let sim = Sim::start(
            bin,
            &node.sock,
            &json!([
                {"existing_pods": [p]},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"sleep_ms": 3500}
            ]),
            &[],
        );
        sim.wait_log("step 1 wait_plugins: begin");
        let plugin = node.plugin(&["nri"]);
        plugin.wait_log("registered as 50-roce-tune", 1, Duration::from_secs(5));
        let seen = Instant::now();
        let both = |n: &Node| n.vfs.iter().all(|vf| n.tree.tc(&vf.dev) == "tclass=41");
        while !both(&node) {
            assert!(
                seen.elapsed() < Duration::from_secs(3),
                "{name}: not tuned within 3 s: {}",
                plugin.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let summary = "caught up 1 pods' DRA rails after Synchronize: 2 rails tuned; of 1 pods walked, 0 tuned already";
        let log = plugin.wait_log(summary, 1, Duration::from_secs(3));
        for vf in &node.vfs {
            assert_eq!(
                node.pod.rail_values(&vf.ifname),
                tuned(&vf.ifname),
                "{name}"
            );
            let e = node
                .entry(&sandbox, &vf.ifname)
                .expect("an entry per DRA rail");
            assert_eq!(e["network"], NETWORK, "{name}: {e}");
            assert_eq!(
                e["rail"],
                json!({"gidIndex": 3, "trafficClass": 41, "rdmaCmTos": null}),
                "{name}"
            );
        }
        assert_eq!(node.tree.tc(PRIMARY_DEV), "", "{name}: the primary's VF");
        assert_eq!(own_values(&node.pod, "eth0"), primary_before, "{name}");
        assert_eq!(node.entries().len(), 2, "{name}: {:?}", node.entries());
        let registered_at = log_ms(line_of(&log, "registered as 50-roce-tune"));
        let tuned_at = log_ms(line_of(&log, "DRA rail net2 on mlx5_3 port 1 tuned"));
        eprintln!(
            "{name}: both DRA rails of an existing pod tuned {:.0} ms after the registration (plugin's log); {}",
            tuned_at - registered_at,
            line_of(&log, "caught up ").split("Synchronize: ").nth(1).unwrap()
        );
        let result = sim.finish();
        never_dropped(name, &result, 1);
        let created: Vec<Value> = node
            .vfs
            .iter()
            .map(|vf| node.entry(&sandbox, &vf.ifname).unwrap()["createdNs"].clone())
            .collect();

        // A reconnect (the runtime restarts): the pod is listed again.
        let sim = Sim::start(
            bin,
            &node.sock,
            &json!([
                {"existing_pods": [p]},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"sleep_ms": 1500},
                {"stop_pod": sandbox},
                {"remove_pod": sandbox}
            ]),
            &[],
        );
        let again = "caught up 0 pods' DRA rails after Synchronize: 0 rails tuned; of 1 pods walked, 1 tuned already";
        plugin.wait_log(again, 1, Duration::from_secs(5));
        let now: Vec<Value> = node
            .vfs
            .iter()
            .map(|vf| node.entry(&sandbox, &vf.ifname).unwrap()["createdNs"].clone())
            .collect();
        assert_eq!(now, created, "{name}: taken once");
        let result = sim.finish();
        never_dropped(name, &result, 1);
        let log = plugin.wait_log("StopPodSandbox pod team-a/", 2, Duration::from_secs(5));
        assert_eq!(
            log.matches("DRA rail net1 on mlx5_2 port 1 tuned").count(),
            1,
            "{name}: {log}"
        );
        assert_eq!(
            node.tree.tc(&node.vfs[0].dev),
            "tclass=-1",
            "{name}: unset stays unset"
        );
        assert_eq!(node.tree.tc(&node.vfs[1].dev), "tclass=106", "{name}");
        assert_eq!(node.tree.tc(PRIMARY_DEV), "", "{name}");
        assert!(node.entries().is_empty(), "{name}: {:?}", node.entries());
    }
}

/// An existing pod whose rail's GID is not there under `gidCheck:
/// enforce`: the catch-up cannot fail a running sandbox, so the pod is left
/// untuned (nothing changed) with a warn line naming it and the rail; the
/// plugin stays registered.
#[test]
fn a_catch_up_that_enforce_refuses_leaves_the_pod_untuned_with_a_line() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let mut node = Node::second_gid_never_comes();
    let before = node.picture();
    let sandbox = unique("sb");
    let sim = Sim::start(
        &sims.v012,
        &node.sock,
        &json!([
            {"existing_pods": [pod(&sandbox, Some(&node.pod.path()), json!({}))]},
            {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
            {"sleep_ms": 1500}
        ]),
        &[],
    );
    sim.wait_log("step 1 wait_plugins: begin");
    let plugin = node.plugin(&["nri"]);
    let log = plugin.wait_log("caught up 0 pods' DRA rails", 1, Duration::from_secs(5));
    let warn = line_of(&log, "catch-up after Synchronize: pod team-a/");
    assert!(warn.contains(" warn "), "{warn}");
    assert!(warn.contains(&sandbox), "{warn}");
    assert!(warn.contains("DRA rail net2: GID check failed"), "{warn}");
    assert!(
        line_of(&log, "caught up 0 pods'").contains("1 failed (untuned)"),
        "{log}"
    );
    never_dropped("nri-sim-0.12", &sim.finish(), 1);
    let first = node.tree.tc(&node.vfs[0].dev);
    assert!(
        first.is_empty() || first == "tclass=-1",
        "{first}: unset again"
    );
    node.second_rail_failed_and_nothing_stays(&before);
}
