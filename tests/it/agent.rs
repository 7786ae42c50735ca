//! `roce-tune agent` as the DaemonSet runs it: a process with a node config,
//! a real pod netns, a sysfs test tree in which the test plays the kernel
//! and the other writers (NVIDIA's rdma CNI fork writing 0, a driver reset
//! unsetting the class, a re-created device), and its metrics read over
//! HTTP from the port it bound. Each test runs the agent with a period of
//! one second and holds it to the bound the README states: what drifts or
//! is orphaned is back within two periods.

use crate::common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The agent's period in these tests (`--every 1`).
const PERIOD: Duration = Duration::from_secs(1);
/// The bound the agent promises for a drift or an orphan.
const TWO_PERIODS: Duration = Duration::from_secs(2);
const NAMESPACE: &str = "team-a";

// ------------------------------------------------------------ the agent

/// A running `roce-tune agent`; killed (SIGKILL) if a test fails before it
/// stops it. Its stderr goes to a file, read while it runs: a pipe nobody
/// drains would stop it at its first 64 KiB of log.
struct Agent {
    child: Child,
    log: PathBuf,
    addr: SocketAddr,
}

impl Agent {
    /// `roce-tune agent --every <every>` on the node of `state`, whose node
    /// config must name `metricsAddress` 127.0.0.1:0: the port the kernel
    /// picks is read from the agent's own log line.
    fn start(state: &StateDirPath, every: u64) -> Agent {
        let log = state.base().join(unique("agent-").to_string() + ".log");
        let err = std::fs::File::create(&log).unwrap();
        let child = Command::new(BIN)
            .env_clear()
            .args(["agent", "--every", &every.to_string(), "--node-config"])
            .arg(node_config(state))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        let mut agent = Agent {
            child,
            log,
            addr: "127.0.0.1:0".parse().unwrap(),
        };
        let t = Instant::now();
        agent.addr = loop {
            let text = agent.log();
            if let Some(a) = text
                .lines()
                .find_map(|l| l.split("metrics on http://").nth(1))
                .and_then(|rest| rest.split('/').next())
                .and_then(|a| a.parse().ok())
            {
                break a;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "the agent did not say where it serves metrics: {text}"
            );
            if let Some(s) = agent.child.try_wait().unwrap() {
                panic!("the agent exited ({s}): {text}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        agent
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn scrape(&self) -> Metrics {
        let (status, body) = get(self.addr, "/metrics", Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("GET /metrics: {e}\nlog: {}", self.log()));
        assert_eq!(status, 200, "{body}");
        Metrics::parse(&body)
    }

    /// Scrape until `ok` holds, at most `bound`; the last scrape either way.
    fn wait_for(&self, bound: Duration, ok: impl Fn(&Metrics) -> bool) -> (Metrics, bool) {
        let t = Instant::now();
        loop {
            let m = self.scrape();
            if ok(&m) {
                return (m, true);
            }
            if t.elapsed() > bound {
                return (m, false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, and how long the agent took to exit (at most 5 s, then it is
    /// killed and the test fails).
    fn terminate(&mut self) -> (ExitStatus, Duration) {
        signal(&self.child, nix::sys::signal::Signal::SIGTERM);
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return (s, t.elapsed());
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "SIGTERM did not stop the agent within 5 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// One HTTP/1.1 GET: (status, body). The agent closes every connection.
fn get(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
    let mut all = String::new();
    s.read_to_string(&mut all)?;
    let (head, body) = all
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no head in {} bytes", all.len())))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(head.to_string()))?;
    Ok((status, body.to_string()))
}

// ------------------------------------------------------------ the exposition, read back

#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A text exposition as samples. A reader of our own, deliberately small:
/// what it checks is the values; `promtool` checks the format.
struct Metrics {
    text: String,
    samples: Vec<Sample>,
}

impl Metrics {
    fn parse(text: &str) -> Metrics {
        let mut samples = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("{line}")),
            };
            let (name, labels) = match series.split_once('{') {
                None => (series.to_string(), BTreeMap::new()),
                Some((name, rest)) => (name.to_string(), labels(rest.strip_suffix('}').unwrap())),
            };
            samples.push(Sample {
                name,
                labels,
                value,
            });
        }
        Metrics {
            text: text.to_string(),
            samples,
        }
    }

    /// The samples of `name` whose labels include `want`.
    fn all(&self, name: &str, want: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                want.iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The one sample of `name` with labels `want`, `None` when there is none.
    fn get(&self, name: &str, want: &[(&str, &str)]) -> Option<f64> {
        match self.all(name, want).as_slice() {
            [] => None,
            [one] => Some(one.value),
            many => panic!("{} samples of {name} {want:?}: {many:?}", many.len()),
        }
    }

    fn drift(&self, setting: &str) -> f64 {
        self.get("roce_tune_drift_total", &[("setting", setting)])
            .unwrap()
    }

    fn repairs(&self, setting: &str) -> f64 {
        self.get("roce_tune_drift_repairs_total", &[("setting", setting)])
            .unwrap()
    }
}

/// `a="x",b="y"` with the exposition's three escapes.
fn labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut chars = s.chars().peekable();
    while chars.peek().is_some() {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert_eq!(chars.next(), Some('"'), "{s}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => panic!("{s}"),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        if chars.peek() == Some(&',') {
            chars.next();
        }
        out.insert(name, value);
    }
    out
}

// ------------------------------------------------------------ the node

/// The node config of an agent test: the tree, the state dir, a port the
/// kernel picks, and the drift policy.
fn agent_node(state: &StateDirPath, tree: &Tree, policy: &str) {
    write_node_config(
        state,
        Some(tree),
        json!({"metricsAddress": "127.0.0.1:0", "driftPolicy": policy}),
    );
}

/// configfs as a test tree plays it: the device's rdma_cm group with its
/// port file (the kernel makes `ports/` on mkdir) holding `tos`.
fn with_configfs(tree: &Tree, dev: &str, tos: &str) -> PathBuf {
    let port = tree
        .root
        .join(format!("kernel/config/rdma_cm/{dev}/ports/1"));
    std::fs::create_dir_all(&port).unwrap();
    std::fs::write(port.join("default_roce_tos"), tos).unwrap();
    port.join("default_roce_tos")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// A rail's network config: `pod`'s net1 bound to the VF `pci` in `tree`
/// (as the kernel would show it from the pod), the GID of `ip` at index 3.
fn rail(tree: &Tree, pod: &Pod, pci: &str, ip: &str, extra: Value) -> Value {
    tree.bind(pod, &pod.ifname, pci);
    let addr = format!("{ip}/16");
    let mut c = json!({
        "cniVersion": "1.1.0", "name": "rdma-vf", "type": "roce-tune",
        "deviceID": pci, "gidTimeoutMs": 800,
        "prevResult": prev_result("1.1.0", &pod.ifname, &pod.path(), &[&addr]),
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// `command` for `pod`'s rail as Multus runs it: CNI_ARGS naming the pod.
fn cni(state: &StateDirPath, command: &str, cid: &str, pod: &Pod, name: &str, c: &Value) -> Run {
    Exec::cni(
        BIN,
        &node_config(state),
        command,
        cid,
        &pod.path(),
        &pod.ifname,
    )
    .env(
        "CNI_ARGS",
        format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={NAMESPACE};K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID={cid}"
        ),
    )
    .stdin(c.to_string())
    .run()
}

/// How long `ok` took to hold, polling every 10 ms; `None` past `bound`.
fn within(bound: Duration, ok: impl Fn() -> bool) -> Option<Duration> {
    let t = Instant::now();
    loop {
        if ok() {
            return Some(t.elapsed());
        }
        if t.elapsed() > bound {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The rail labels of `pod`'s net1 on `dev`/`pci` in network rdma-vf.
fn rail_labels<'a>(pod: &'a str, dev: &'a str, pci: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("namespace", NAMESPACE),
        ("pod", pod),
        ("interface", "net1"),
        ("rdma_device", dev),
        ("pci_address", pci),
        ("network", "rdma-vf"),
    ]
}

// ------------------------------------------------------------ drift

const PCI: &str = "0000:0c:00.2";
const DEV: &str = "mlx5_2";
const IP: &str = "192.168.0.34";

/// One rail with trafficClass 41 (original 106) and rdmaCmTos 106
/// (original 32), added for pod train-0, the agent running on its node.
struct Drift {
    pod: Pod,
    tree: Tree,
    state: StateDirPath,
    conf: Value,
    tos: PathBuf,
}

fn drift_setup(policy: &str) -> Drift {
    let pod = Pod::new("net1", Some(&format!("{IP}/16")));
    let tree = Tree::new();
    tree.add_device(PCI, DEV, "Global tclass=106\n");
    tree.set_ipv4_gids(DEV, IP);
    let tos = with_configfs(&tree, DEV, "32\n");
    let state = StateDirPath::new();
    agent_node(&state, &tree, policy);
    let conf = rail(
        &tree,
        &pod,
        PCI,
        IP,
        json!({"trafficClass": 41, "rdmaCmTos": 106}),
    );
    cni(&state, "ADD", "c1", &pod, "train-0", &conf).ok();
    assert_eq!(
        (tree.tc(DEV).as_str(), read(&tos).as_str()),
        ("tclass=41", "106")
    );
    Drift {
        pod,
        tree,
        state,
        conf,
        tos,
    }
}

#[test]
fn drift_is_repaired_within_two_periods_and_del_still_restores_the_original() {
    needs!(root);
    let d = drift_setup("repair");
    let agent = Agent::start(&d.state, 1);
    let rail = rail_labels("train-0", DEV, PCI);
    let (_, seen) = agent.wait_for(TWO_PERIODS, |m| {
        m.get("roce_tune_rail_info", &rail).is_some()
    });
    assert!(seen, "no rail after two periods: {}", agent.log());

    // (who writes, what the file then reads), in turn: the class, then the ToS.
    let class = d.tree.tc_path(DEV);
    let steps: [(&Path, &str, &str, &str, &str); 4] = [
        (
            &class,
            "Global tclass=0\n",
            "tclass=41",
            "traffic_class",
            "NVIDIA's rdma CNI fork",
        ),
        (&class, "", "tclass=41", "traffic_class", "a driver reset"),
        (&d.tos, "8\n", "106", "rdma_cm_tos", "set by someone else"),
        (&d.tos, "0\n", "106", "rdma_cm_tos", "set by someone else"),
    ];
    for (n, (file, drifted, ours, setting, who)) in steps.into_iter().enumerate() {
        std::fs::write(file, drifted).unwrap();
        let took = within(TWO_PERIODS, || read(file) == ours);
        assert!(
            took.is_some(),
            "{drifted:?} in {} not repaired within two periods: {:?}\n{}",
            file.display(),
            read(file),
            agent.log()
        );
        eprintln!("drift {drifted:?} repaired after {took:?}");
        let count = if n % 2 == 0 { 1.0 } else { 2.0 };
        let (m, ok) = agent.wait_for(PERIOD, |m| m.repairs(setting) == count);
        assert!(ok, "{setting}: {}", m.text);
        assert_eq!(m.drift(setting), count, "each drift counted once");
        assert!(agent.log().contains(who), "{who}: {}", agent.log());
    }
    let log = agent.log();
    for line in [
        "drift: the traffic class of mlx5_2 port 1 (pod team-a/train-0, net1) is 0, roce-tune wrote 41",
        "drift: the traffic class of mlx5_2 port 1 (pod team-a/train-0, net1) is unset, roce-tune wrote 41",
        "drift: the rdma_cm default ToS of mlx5_2 port 1 (pod team-a/train-0, net1) is 8, roce-tune wrote 106",
        "repaired: it holds 41 again",
        "repaired: it holds 106 again",
    ] {
        assert!(log.contains(line), "missing {line:?} in\n{log}");
    }
    let m = agent.scrape();
    assert_eq!(m.get("roce_tune_rail_traffic_class", &rail), Some(41.0));
    assert_eq!(m.get("roce_tune_rail_rdma_cm_tos", &rail), Some(106.0));

    // The repairs changed nothing recorded: DEL gives back the originals.
    let e = d.state.entry("c1", "net1").unwrap();
    assert_eq!(
        e["owned"]["trafficClass"],
        json!({"original": 106, "written": 41})
    );
    assert_eq!(
        e["owned"]["rdmaCmTos"],
        json!({"original": 32, "written": 106})
    );
    cni(&d.state, "DEL", "c1", &d.pod, "train-0", &d.conf).ok();
    assert_eq!(d.tree.tc(DEV), "tclass=106");
    assert_eq!(read(&d.tos), "32");
    // The agent does not fight the DEL: two periods on, the originals stay.
    std::thread::sleep(TWO_PERIODS);
    assert_eq!(d.tree.tc(DEV), "tclass=106");
    assert_eq!(read(&d.tos), "32");
    let m = agent.scrape();
    assert_eq!(m.get("roce_tune_rail_info", &rail), None, "{}", m.text);
    assert_eq!(m.drift("traffic_class"), 2.0);
    let mut agent = agent;
    let (status, took) = agent.terminate();
    assert!(
        status.success() && took < Duration::from_secs(1),
        "{status} after {took:?}"
    );
}

#[test]
fn drift_under_the_report_policy_is_counted_and_left_as_it_is() {
    needs!(root);
    let d = drift_setup("report");
    let agent = Agent::start(&d.state, 1);
    let rail = rail_labels("train-0", DEV, PCI);
    d.tree.set_tc(DEV, "Global tclass=0\n");
    std::fs::write(&d.tos, "8\n").unwrap();
    let (m, ok) = agent.wait_for(TWO_PERIODS, |m| {
        m.drift("traffic_class") >= 1.0 && m.drift("rdma_cm_tos") >= 1.0
    });
    assert!(ok, "no drift counted within two periods: {}", m.text);
    assert_eq!(m.get("roce_tune_rail_traffic_class", &rail), Some(0.0));
    assert_eq!(
        m.get("roce_tune_rail_traffic_class_wanted", &rail),
        Some(41.0)
    );
    assert_eq!(m.get("roce_tune_rail_rdma_cm_tos", &rail), Some(8.0));
    assert_eq!(
        m.get("roce_tune_rail_rdma_cm_tos_wanted", &rail),
        Some(106.0)
    );
    // Passes go on; the files stay as the other writer left them, and one
    // drift is one drift, not one per pass.
    std::thread::sleep(TWO_PERIODS + PERIOD);
    let m = agent.scrape();
    assert!(m.get("roce_tune_repair_passes_total", &[]).unwrap() >= 4.0);
    assert_eq!(d.tree.tc(DEV), "Global tclass=0\n");
    assert_eq!(read(&d.tos), "8\n");
    assert_eq!(m.repairs("traffic_class") + m.repairs("rdma_cm_tos"), 0.0);
    assert_eq!(m.drift("traffic_class"), 1.0, "{}", m.text);
    assert_eq!(m.drift("rdma_cm_tos"), 1.0);
    let log = agent.log();
    assert_eq!(
        log.matches("driftPolicy is report: left as it is").count(),
        2,
        "one line per drift: {log}"
    );
    // Another value is another drift.
    d.tree.set_tc(DEV, "");
    let (m, ok) = agent.wait_for(TWO_PERIODS, |m| m.drift("traffic_class") == 2.0);
    assert!(ok, "{}", m.text);
    assert_eq!(m.get("roce_tune_rail_traffic_class", &rail), Some(-1.0));
    assert_eq!(d.tree.tc(DEV), "");
    // DEL leaves what roce-tune did not write.
    d.tree.set_tc(DEV, "tclass=41");
    cni(&d.state, "DEL", "c1", &d.pod, "train-0", &d.conf).ok();
    assert_eq!(d.tree.tc(DEV), "tclass=106", "ours again: restored");
    assert_eq!(read(&d.tos), "8\n", "someone else's: left");
}

#[test]
fn a_re_created_device_is_not_drift() {
    needs!(root);
    let d = drift_setup("repair");
    let agent = Agent::start(&d.state, 1);
    let rail = rail_labels("train-0", DEV, PCI);
    let (_, seen) = agent.wait_for(TWO_PERIODS, |m| {
        m.get("roce_tune_rail_info", &rail).is_some()
    });
    assert!(seen, "{}", agent.log());
    // The driver re-created the VF's device: a new node GUID, the class
    // unset (it lived in driver memory). The file is the new device's.
    std::fs::write(
        d.tree.dev_dir(DEV).join("node_guid"),
        "7cfe:9003:00aa:bbcc\n",
    )
    .unwrap();
    d.tree.set_tc(DEV, "");
    let passes = agent
        .scrape()
        .get("roce_tune_repair_passes_total", &[])
        .unwrap();
    let (m, _) = agent.wait_for(TWO_PERIODS + PERIOD, |m| {
        m.get("roce_tune_repair_passes_total", &[]).unwrap() >= passes + 2.0
    });
    assert_eq!(d.tree.tc(DEV), "", "the new device's class was written");
    assert_eq!(m.drift("traffic_class"), 0.0, "{}", m.text);
    assert_eq!(
        m.get("roce_tune_rail_info", &rail),
        None,
        "not this rail's device"
    );
    // DEL drops the entry and gives the new device nothing of the old's.
    cni(&d.state, "DEL", "c1", &d.pod, "train-0", &d.conf).ok();
    assert_eq!(d.tree.tc(DEV), "");
    assert!(d.state.entries().is_empty());
}
