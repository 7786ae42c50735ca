//! `roce-tune-agent nri` as a process against containerd's own NRI adaptation
//! (../shared/nri: `nri-sim-0.12` is NRI v0.12.2, `nri-sim-old` v0.11.0,
//! both driven by a JSON script, their result JSON read back), and against a
//! raw peer of the test's own where a real runtime cannot send the bad
//! bytes: each case cites the adaptation's behaviour it plays.

use crate::common::need::NriSims;
use crate::common::*;
use roce_tune::wire::nri_messages as messages;
use roce_tune::wire::nri_mux::{self as mux, PLUGIN_CONN, RUNTIME_CONN};
use roce_tune::wire::protobuf::Writer;
use roce_tune::wire::ttrpc::{self, Assembler, Item};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const REGISTERED: &str = "50-roce-tune";

/// A runtime: nri-sim serving `socket`, running `script`.
pub(crate) struct Sim {
    child: Child,
    out: PathBuf,
    log: PathBuf,
}

impl Sim {
    pub(crate) fn start(bin: &Path, socket: &Path, script: &Value, extra: &[&str]) -> Sim {
        let dir = socket.parent().unwrap();
        let tag = unique("sim");
        let script_path = dir.join(format!("{tag}.json"));
        std::fs::write(&script_path, script.to_string()).unwrap();
        let out = dir.join(format!("{tag}-result.json"));
        let log = dir.join(format!("{tag}.log"));
        let child = Command::new(bin)
            .arg("--socket")
            .arg(socket)
            .arg("--script")
            .arg(&script_path)
            .arg("--out")
            .arg(&out)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Sim { child, out, log }
    }

    /// Wait until the runtime's log holds `needle` (its step markers:
    /// `step 1 wait_plugins: begin`), at most 30 s.
    pub(crate) fn wait_log(&self, needle: &str) {
        let t = Instant::now();
        while !read(&self.log).contains(needle) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "nri-sim never said {needle:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The result, once the script has run (at most 60 s).
    pub(crate) fn finish(mut self) -> Value {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                assert!(s.success(), "nri-sim: {s}: {}", read(&self.log));
                let text = std::fs::read_to_string(&self.out).unwrap();
                return serde_json::from_str(&text).unwrap();
            }
            assert!(t.elapsed() < Duration::from_secs(60), "nri-sim did not end");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// `roce-tune-agent nri` (or the agent, with `args`) on a node config of its own.
pub(crate) struct Plugin {
    child: Child,
    log: PathBuf,
    _state: StateDirPath,
}

impl Plugin {
    pub(crate) fn start(socket: &Path, extra: Value, args: &[&str]) -> Plugin {
        let state = StateDirPath::new();
        let mut node = json!({"nriSocket": path_str(socket)});
        for (k, v) in extra.as_object().unwrap() {
            node[k] = v.clone();
        }
        let config = write_node_config(&state, None, node);
        Plugin::on(state, &config, args)
    }

    /// The plugin on the node config of `state` (a node whose rails a test
    /// ADDed).
    pub(crate) fn on(state: StateDirPath, config: &Path, args: &[&str]) -> Plugin {
        Plugin::on_bin(Path::new(AGENT_BIN), &[], state, config, args)
    }

    /// `on`, with the agent binary `bin` (the fault-injection build) and
    /// the environment `env`.
    pub(crate) fn on_bin(
        bin: &Path,
        env: &[(&str, &Path)],
        state: StateDirPath,
        config: &Path,
        args: &[&str],
    ) -> Plugin {
        let log = state.base().join("plugin.log");
        let child = Command::new(bin)
            .env_clear()
            .envs(env.iter().copied())
            .args(args)
            .arg("--node-config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Plugin {
            child,
            log,
            _state: state,
        }
    }

    pub(crate) fn nri(socket: &Path, extra: Value) -> Plugin {
        Plugin::start(socket, extra, &["nri"])
    }

    pub(crate) fn log(&self) -> String {
        read(&self.log)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status once it has ended.
    pub(crate) fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Wait until the log holds `needle` `times` times (at most `bound`).
    pub(crate) fn wait_log(&self, needle: &str, times: usize, bound: Duration) -> String {
        let t = Instant::now();
        loop {
            let log = self.log();
            if log.matches(needle).count() >= times {
                return log;
            }
            assert!(
                t.elapsed() < bound,
                "no {times} x {needle:?} in the plugin's log within {bound:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Plugin {
    /// SIGTERM, then the exit status and how long it took (the agent's
    /// bound is a second; 5 s fails the test).
    pub(crate) fn terminate(&mut self) -> (std::process::ExitStatus, Duration) {
        let log = self.log.clone();
        crate::common::terminate(&mut self.child, || read(&log))
    }
}

impl Plugin {
    /// SIGKILL, as a crash or the OOM killer ends it: nothing of its own
    /// runs after.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A socket path in a private dir of the test.
pub(crate) fn socket(tag: &str) -> (PathBuf, PathBuf) {
    let dir = private_dir(tag);
    let s = dir.join("nri.sock");
    (dir, s)
}

pub(crate) fn pod(id: &str, netns: Option<&str>, annotations: Value) -> Value {
    let mut p = json!({"id": id, "name": format!("{id}-name"), "namespace": "team-a",
                       "uid": format!("uid-{id}"), "annotations": annotations});
    if let Some(n) = netns {
        p["netns"] = json!(n);
    }
    p
}

pub(crate) fn ctr(id: &str, pod: &str, env: &[&str]) -> Value {
    json!({"id": id, "pod_id": pod, "name": format!("{id}-name"), "env": env})
}

pub(crate) fn steps(result: &Value) -> &Vec<Value> {
    result["steps"].as_array().unwrap()
}

/// Every step after `from` kept the plugin registered, and every step ran.
pub(crate) fn never_dropped(name: &str, result: &Value, from: usize) {
    assert_eq!(result["ok"], true, "{name}: {result:#}");
    for s in &steps(result)[from..] {
        let after: Vec<&str> = s["registered_after"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            after.contains(&REGISTERED),
            "{name}: step {} ({}) lost the plugin: {after:?}",
            s["step"],
            s["kind"]
        );
    }
}

/// The env a step's merged adjustment adds, as `K=V`.
pub(crate) fn adjusted_env(step: &Value) -> Vec<String> {
    step["adjust"]["env"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    format!(
                        "{}={}",
                        kv["key"].as_str().unwrap(),
                        kv["value"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The ttrpc calls of a result to the plugin, by method name.
pub(crate) fn rpcs<'a>(result: &'a Value, method: &str) -> Vec<&'a Value> {
    result["rpcs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["method"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/{method}"))
        })
        .collect()
}

#[test]
fn registers_configures_and_stays_registered_under_both_generations() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let netns = Pod::new("net1", None);
    for (name, bin) in sims.both() {
        let (_dir, sock) = socket("nri-reg-");
        // The plugin first: the DaemonSet may come up before the runtime.
        let plugin = Plugin::nri(&sock, json!({}));
        plugin.wait_log("retrying every", 1, Duration::from_secs(5));
        let p1 = pod(
            "pod-1",
            Some(&netns.path()),
            json!({"roce-tune.io/nccl-env": "true"}),
        );
        let script = json!([
            {"existing_pods": [pod("pod-0", Some("/var/run/netns/gone"), json!({}))],
             "existing_containers": [ctr("ctr-0", "pod-0", &[])]},
            {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
            {"run_pod": p1},
            {"create_container": ctr("ctr-1", "pod-1", &["PATH=/bin"])},
            {"start_container": "ctr-1"},
            {"stop_container": "ctr-1"},
            {"remove_container": "ctr-1"},
            {"stop_pod": "pod-1"},
            {"remove_pod": "pod-1"}
        ]);
        let result = Sim::start(bin, &sock, &script, &[]).finish();
        never_dropped(name, &result, 1);
        let configure = rpcs(&result, "Configure");
        assert_eq!(configure.len(), 1, "{name}: {result:#}");
        assert_eq!(rpcs(&result, "Synchronize").len(), 1, "{name}");
        // The pod events reach the plugin in its generation's form.
        let (dedicated, state_change) = (
            rpcs(&result, "RunPodSandbox").len(),
            rpcs(&result, "StateChange").len(),
        );
        if name == "nri-sim-0.12" {
            assert_eq!(
                (
                    dedicated,
                    rpcs(&result, "StopPodSandbox").len(),
                    rpcs(&result, "RemovePodSandbox").len()
                ),
                (1, 1, 1),
                "{name}"
            );
            assert_eq!(state_change, 0, "{name}: it asked for no container event");
        } else {
            assert_eq!(
                (dedicated, state_change),
                (0, 3),
                "{name}: run, stop and remove as StateChange"
            );
        }
        for r in result["rpcs"].as_array().unwrap() {
            assert!(r["ms"].as_f64().unwrap() < 100.0, "{name}: {r}");
        }
        let log = plugin.log();
        // What the runtime handed over: the state when the plugin came (the
        // plugin may come before the script's first step adds pod-0).
        let sync = result["syncs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["for"] == "external")
            .unwrap();
        let synced = format!(
            "synchronized: {} pods, {} containers, answered in",
            sync["pods"], sync["containers"]
        );
        for line in [
            "registered as 50-roce-tune",
            "configured by containerd",
            "request timeout 2000 ms",
            "events 0xf",
            &synced,
        ] {
            assert!(log.contains(line), "{name}: no {line:?} in\n{log}");
        }
        let v = if name == "nri-sim-0.12" {
            "NRI v0.12.2"
        } else {
            "NRI before v0.12"
        };
        assert!(log.contains(v), "{name}: {log}");
        // The runtime's own log names the plugin and its NRI version.
        let sim_log = result["log"].to_string();
        assert!(
            sim_log.contains("registered as \\\"50-roce-tune\\\""),
            "{name}: {sim_log}"
        );
    }
}

#[test]
fn pods_that_do_not_ask_or_cannot_be_matched_get_nothing_and_the_log_says_why() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let netns = Pod::new("net1", None);
    let not_a_netns = private_dir("nri-file-").join("netns");
    std::fs::write(&not_a_netns, "").unwrap();
    for (name, bin) in sims.both() {
        let (_dir, sock) = socket("nri-bad-pods-");
        let sim = Sim::start(
            bin,
            &sock,
            &json!([
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"run_pod": pod("plain", Some(&netns.path()), json!({}))},
                {"create_container": ctr("c-plain", "plain", &[])},
                {"run_pod": pod("yes", Some(&netns.path()), json!({"roce-tune.io/nccl-env": "yes"}))},
                {"create_container": ctr("c-yes", "yes", &[])},
                {"run_pod": pod("hostnet", None, json!({"roce-tune.io/nccl-env": "true"}))},
                {"create_container": ctr("c-hostnet", "hostnet", &[])},
                {"run_pod": pod("file", Some(&path_str(&not_a_netns)), json!({"roce-tune.io/nccl-env": "true"}))},
                {"create_container": ctr("c-file", "file", &[])},
                {"run_pod": pod("gone", Some("/var/run/netns/roce-tune-gone"), json!({"roce-tune.io/nccl-env": "true"}))},
                {"create_container": ctr("c-gone", "gone", &[])}
            ]),
            &[],
        );
        let plugin = Plugin::nri(&sock, json!({}));
        let result = sim.finish();
        never_dropped(name, &result, 0);
        for s in steps(&result)
            .iter()
            .filter(|s| s["kind"] == "create_container")
        {
            assert!(adjusted_env(s).is_empty(), "{name}: {s}");
        }
        let log = plugin.wait_log("no environment", 4, Duration::from_secs(5));
        for line in [
            "pod team-a/yes-name: annotation roce-tune.io/nccl-env is \"yes\", not \"true\": no environment",
            "pod team-a/hostnet-name container c-hostnet-name: no network namespace of its own (hostNetwork?): no environment",
            &format!("pod team-a/file-name container c-file-name: {} is not a network namespace: no environment", path_str(&not_a_netns)),
            "pod team-a/gone-name container c-gone-name: its network namespace /var/run/netns/roce-tune-gone is gone: no environment",
        ] {
            assert!(log.contains(line), "{name}: no {line:?} in\n{log}");
        }
        assert!(
            !log.contains("plain-name"),
            "{name}: a pod that did not ask is not logged: {log}"
        );
    }
}

#[test]
fn a_restarted_runtime_has_the_plugin_back_within_a_second() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let (_dir, sock) = socket("nri-restart-");
        let first = Sim::start(
            bin,
            &sock,
            &json!([{"wait_plugins": ["roce-tune"], "timeout_ms": 5000}, {"sleep_ms": 100}]),
            &[],
        );
        let plugin = Plugin::nri(&sock, json!({}));
        never_dropped(name, &first.finish(), 0);
        plugin.wait_log(
            "disconnected: the runtime closed the connection; reconnecting at once",
            1,
            Duration::from_secs(5),
        );
        // The runtime comes back a moment later, on the same path.
        std::thread::sleep(Duration::from_millis(300));
        let second = Sim::start(
            bin,
            &sock,
            &json!([{"wait_plugins": ["roce-tune"], "timeout_ms": 3000}]),
            &[],
        )
        .finish();
        never_dropped(name, &second, 0);
        // From the socket's creation (the sync inside Start) to the
        // plugin's RegisterPlugin, on the runtime's own clock.
        let started = second["syncs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["for"] == "pre-installed")
            .unwrap()["at_ms"]
            .as_f64()
            .unwrap();
        let registered = rpcs(&second, "RegisterPlugin")[0]["at_ms"]
            .as_f64()
            .unwrap();
        let back = registered - started;
        let _ = writeln!(
            std::io::stderr(),
            "{name}: the plugin was back {back:.1} ms after the runtime's socket came back"
        );
        assert!(back < 3000.0, "{name}: back after {back} ms");
        plugin.wait_log("registered as 50-roce-tune", 2, Duration::from_secs(5));
    }
}

/// 10,000 pods, each with an annotation and a netns path
/// `/var/run/netns/<tag>-<i>` (none of them made).
fn ten_thousand_pods(tag: &str) -> Vec<Value> {
    (0..10_000)
        .map(|i| {
            pod(
                &format!("p{i}"),
                Some(&format!("/var/run/netns/{tag}-{i}")),
                json!({"a": "b"}),
            )
        })
        .collect()
}

/// The milliseconds the plugin's log gives right after `said`.
fn answered_ms(log: &str, said: &str) -> f64 {
    log.split(said)
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {said:?} in\n{log}"))
}

#[test]
fn a_synchronize_of_10000_pods_is_answered_within_100_ms() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let pods = ten_thousand_pods("cni");
    let ctrs: Vec<Value> = (0..10_000)
        .map(|i| ctr(&format!("c{i}"), &format!("p{i}"), &["PATH=/bin"]))
        .collect();
    for (name, bin) in sims.both() {
        let (_dir, sock) = socket("nri-sync-");
        let sim = Sim::start(
            bin,
            &sock,
            &json!([
                {"existing_pods": pods, "existing_containers": ctrs},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 10000},
                {"run_pod": pod("late", None, json!({}))}
            ]),
            &[],
        );
        // A plugin that registers while the runtime still adds the pods
        // is handed the state as it is then (nri-sim's sync callback).
        sim.wait_log("step 1 wait_plugins: begin");
        let plugin = Plugin::nri(&sock, json!({}));
        let result = sim.finish();
        never_dropped(name, &result, 1);
        // The runtime's clock holds its own marshalling of the 2 MB and the
        // socket's copies too: the plugin must be well inside the request
        // timeout there, and answer within 100 ms by its own.
        let sync = rpcs(&result, "Synchronize");
        assert!(!sync.is_empty(), "{name}");
        for s in &sync {
            assert!(s["ms"].as_f64().unwrap() < 1000.0, "{name}: {s}");
        }
        let said = "synchronized: 10000 pods, 10000 containers, answered in ";
        let log = plugin.wait_log(said, 1, Duration::from_secs(5));
        let ms = answered_ms(&log, said);
        let _ = writeln!(
            std::io::stderr(),
            "{name}: 10,000 pods answered in {ms} ms by the plugin, {} ms on the runtime's clock",
            sync[0]["ms"]
        );
        assert!(ms < 100.0, "{name}: {ms} ms");
    }
}

/// With a `draRails` profile the answer keeps the Synchronize's bytes for
/// the DRA rails' catch-up (docs/design.md, "DRA rails"): still answered
/// within 100 ms, the 10,000 pods (whose netns paths are gone) walked on
/// the catch-up thread, and a SIGTERM in the middle of it still ends the
/// process within a second.
#[test]
fn with_dra_rails_a_synchronize_of_10000_pods_is_answered_within_100_ms_and_sigterm_stops_its_catch_up(
) {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let pods = ten_thousand_pods("gone");
    for (name, bin) in sims.both() {
        let (_dir, sock) = socket("nri-sync-dra-");
        let sim = Sim::start(
            bin,
            &sock,
            &json!([
                {"existing_pods": pods},
                {"wait_plugins": ["roce-tune"], "timeout_ms": 10000},
                {"sleep_ms": 3000}
            ]),
            &[],
        );
        sim.wait_log("step 1 wait_plugins: begin");
        let mut plugin = Plugin::nri(&sock, json!({"draRails": {"trafficClass": 41}}));
        let said = "synchronized: 10000 pods, 0 containers, answered in ";
        let log = plugin.wait_log(said, 1, Duration::from_secs(10));
        let ms = answered_ms(&log, said);
        assert!(ms < 100.0, "{name}: {ms} ms");
        let (status, took) = plugin.terminate();
        assert!(
            status.success() && took < Duration::from_secs(1),
            "{name}: {status} after {took:?}"
        );
        let log = plugin.log();
        let summary = log
            .lines()
            .find(|l| l.contains("caught up 0 pods' DRA rails after Synchronize"))
            .unwrap_or("(no summary: stopped before the thread took the list)");
        let _ = writeln!(
            std::io::stderr(),
            "{name}: answered in {ms} ms with the catch-up on; SIGTERM took {took:?}; {summary}"
        );
        assert!(!log.contains("did not end within"), "{name}: {log}");
    }
}

/// A peer of the test's own playing the runtime's end, for the bytes a real
/// runtime never sends: a listening socket, one accepted connection at a
/// time, and the mux and ttrpc framing by hand.
pub(crate) struct Raw {
    listener: UnixListener,
}

pub(crate) struct RawConn {
    pub(crate) s: UnixStream,
    served: Assembler,
    runtime: Assembler,
    pub(crate) next_stream: u32,
}

impl Raw {
    pub(crate) fn bind(sock: &Path) -> Raw {
        let listener = UnixListener::bind(sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        Raw { listener }
    }

    /// The plugin's next connection, registered: RegisterPlugin read and
    /// answered OK, then Configure sent and answered.
    pub(crate) fn accept(&self, bound: Duration) -> RawConn {
        let mut c = self.accept_registering(bound);
        let mut configure = Writer::new();
        configure
            .text(2, "raw-runtime")
            .text(3, "v0")
            .varint(4, 5000)
            .varint(5, 2000);
        let r = c.call("Configure", configure.as_bytes());
        assert_eq!(r.0, 0, "{r:?}");
        c
    }

    /// The plugin's next connection within `bound`, `None` past it.
    pub(crate) fn try_accept(&self, bound: Duration) -> Option<UnixStream> {
        let t = Instant::now();
        loop {
            match self.listener.accept() {
                Ok((s, _)) => return Some(s),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if t.elapsed() >= bound {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    /// The plugin's next connection with its RegisterPlugin read and
    /// answered OK, nothing sent yet on the Plugin conn.
    pub(crate) fn accept_registering(&self, bound: Duration) -> RawConn {
        self.try_accept_registering(bound)
            .unwrap_or_else(|| panic!("the plugin did not connect within {bound:?}"))
    }

    /// [`Raw::accept_registering`], `None` when the plugin did not connect
    /// within `bound`.
    pub(crate) fn try_accept_registering(&self, bound: Duration) -> Option<RawConn> {
        let s = self.try_accept(bound)?;
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut c = RawConn {
            s,
            served: Assembler::default(),
            runtime: Assembler::default(),
            next_stream: 1,
        };
        let (h, body) = c.read_on(RUNTIME_CONN);
        let req = ttrpc::Request::decode(&body).unwrap();
        assert_eq!(
            (req.service, req.method),
            ("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin")
        );
        c.send(
            RUNTIME_CONN,
            &ttrpc::encode(h.stream, ttrpc::TYPE_RESPONSE, b""),
        );
        Some(c)
    }
}

impl RawConn {
    pub(crate) fn send(&mut self, conn: u32, bytes: &[u8]) {
        mux::write_frames(&mut self.s, conn, bytes).unwrap();
    }

    /// The next ttrpc message on `conn` (the other conn's are queued).
    pub(crate) fn read_on(&mut self, conn: u32) -> (ttrpc::Header, Vec<u8>) {
        loop {
            let asm = if conn == PLUGIN_CONN {
                &mut self.served
            } else {
                &mut self.runtime
            };
            if let Some(Item::Message(h, body)) = asm.next_item() {
                return (h, body);
            }
            let (id, payload) = mux::read_frame(&mut self.s)
                .unwrap()
                .expect("the plugin closed the connection");
            assert!(
                payload.len() <= mux::MAX_SEND,
                "a frame of {} bytes to the runtime",
                payload.len()
            );
            if id == PLUGIN_CONN {
                self.served.push(&payload)
            } else {
                self.runtime.push(&payload)
            }
        }
    }

    /// A request to the Plugin service on the next stream: (status code,
    /// message, payload) of its answer.
    pub(crate) fn call(&mut self, method: &str, payload: &[u8]) -> (u32, String, Vec<u8>) {
        self.call_raw("nri.pkg.api.v1alpha1.Plugin", method, payload)
    }

    pub(crate) fn call_raw(
        &mut self,
        service: &str,
        method: &str,
        payload: &[u8],
    ) -> (u32, String, Vec<u8>) {
        let req = ttrpc::Request {
            service,
            method,
            payload,
            timeout_nano: 2_000_000_000,
        }
        .encode();
        let stream = self.next_stream;
        self.next_stream += 2;
        self.send_message(stream, &req)
    }

    pub(crate) fn send_message(&mut self, stream: u32, body: &[u8]) -> (u32, String, Vec<u8>) {
        self.send(
            PLUGIN_CONN,
            &ttrpc::encode(stream, ttrpc::TYPE_REQUEST, body),
        );
        self.answer(stream)
    }

    pub(crate) fn answer(&mut self, stream: u32) -> (u32, String, Vec<u8>) {
        let (h, body) = self.read_on(PLUGIN_CONN);
        assert_eq!((h.stream, h.kind), (stream, ttrpc::TYPE_RESPONSE));
        let r = ttrpc::Response::decode(&body).unwrap();
        (r.code, r.message.to_string(), r.payload.to_vec())
    }

    /// The plugin closed its end (read returns 0 within 5 s).
    pub(crate) fn closed(&mut self) -> bool {
        let mut b = [0u8; 64];
        loop {
            match self.s.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

/// The payload of an OK answer to `method`.
fn payload_of(c: &mut RawConn, method: &str, payload: &[u8]) -> Vec<u8> {
    let (code, message, p) = c.call(method, payload);
    assert_eq!(code, 0, "{method}: {message}");
    p
}

/// A CreateContainerRequest for a pod without a netns, with fields from a
/// newer NRI in every message.
fn create_request_with_unknown_fields() -> Vec<u8> {
    let mut p = Writer::new();
    p.text(1, "pod-u")
        .text(2, "u")
        .text(4, "team-a")
        .varint(77, 1)
        .text(78, "x");
    let mut c = Writer::new();
    c.text(1, "c-u")
        .text(3, "app")
        .text(8, "PATH=/bin")
        .varint(200, 3);
    let mut r = Writer::new();
    r.message(1, &p).message(2, &c).text(15, "from the future");
    r.into_bytes()
}

#[test]
fn garbled_truncated_and_oversized_bytes_from_the_socket_are_answered_as_the_protocol_says() {
    needs!(root);
    let (_dir, sock) = socket("nri-raw-");
    let raw = Raw::bind(&sock);
    let plugin = Plugin::nri(&sock, json!({}));
    let mut c = raw.accept(Duration::from_secs(5));

    // A Synchronize in parts: each part but the last says `more`, and so
    // must its answer, with no updates (plugin.go `synchronize` closes a
    // plugin that answers otherwise).
    let mut part = Writer::new();
    part.message(1, &Writer::new()).varint(3, 1);
    let (code, _, payload) = c.call("Synchronize", part.as_bytes());
    assert_eq!((code, payload), (0, messages::synchronize_response(true)));
    assert_eq!(payload_of(&mut c, "Synchronize", b""), b"");

    // A message with unknown fields everywhere: skipped as proto3 says,
    // answered, and no environment for a pod without a netns.
    let (code, _, payload) = c.call("CreateContainer", &create_request_with_unknown_fields());
    assert_eq!(code, 0);
    assert!(messages::adjusted_env(&payload).unwrap().is_empty());
    // ttrpc's Request with metadata (field 5) and a field it does not know.
    let mut req = Writer::new();
    let mut md = Writer::new();
    md.text(1, "k").text(2, "v");
    req.text(1, "nri.pkg.api.v1alpha1.Plugin")
        .text(2, "Synchronize")
        .message(5, &md)
        .varint(9, 1);
    let stream = c.next_stream;
    c.next_stream += 2;
    assert_eq!(c.send_message(stream, req.as_bytes()).0, 0);

    // A method the Plugin service has not (the adaptation never calls
    // Shutdown, PROTOCOL.md section 3), and another service: UNIMPLEMENTED
    // (ttrpc services.go:108, 163). The connection stays.
    let (code, message, _) = c.call("Shutdown", b"");
    assert_eq!(code, 12, "{message}");
    assert_eq!(c.call_raw("grpc.health.v1.Health", "Check", b"").0, 12);

    // Garbled payloads: INVALID_ARGUMENT, the connection kept.
    for garbage in [&[0x0a, 0x7f, 0x01][..], &[0xff; 11], &[0x0b]] {
        let (code, message, _) = c.call("CreateContainer", garbage);
        assert_eq!(code, 3, "{garbage:?}: {message}");
        assert!(
            message.contains("CreateContainer does not decode"),
            "{message}"
        );
    }
    let stream = c.next_stream;
    c.next_stream += 2;
    assert_eq!(
        c.send_message(stream, &[0x12, 0x05, b'x']).0,
        3,
        "a Request that does not decode"
    );

    // Stream ids are odd and increase (ttrpc server.go:402, 444).
    let sync = ttrpc::Request {
        service: "nri.pkg.api.v1alpha1.Plugin",
        method: "Synchronize",
        ..Default::default()
    }
    .encode();
    for (stream, why) in [(4, "an even id"), (1, "an id that does not increase")] {
        assert_eq!(c.send_message(stream, &sync).0, 3, "{why}");
    }

    // A frame for a conn NRI never opens: dropped without a word, as the
    // runtime's mux does (mux.go:345-356); the next request is answered.
    c.send(7, b"\x00\x00\x00\x01garbage");
    assert_eq!(c.call("Synchronize", b"").0, 0);

    // A ttrpc message over 4 MiB: discarded, answered RESOURCE_EXHAUSTED on
    // its stream, the connection kept (ttrpc channel.go `recv`).
    let stream = c.next_stream;
    c.next_stream += 2;
    let big = ttrpc::encode(
        stream,
        ttrpc::TYPE_REQUEST,
        &vec![0u8; ttrpc::MAX_MESSAGE + 1],
    );
    for chunk in big.chunks(mux::MAX_PAYLOAD) {
        let mut frame = Vec::new();
        frame.extend_from_slice(&PLUGIN_CONN.to_be_bytes());
        frame.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        frame.extend_from_slice(chunk);
        c.s.write_all(&frame).unwrap();
    }
    assert_eq!(c.answer(stream).0, 8);
    assert_eq!(c.call("Synchronize", b"").0, 0, "the connection survived");

    // Each session below lasts a second before it breaks, as a runtime's
    // do: one that ends sooner makes the plugin back off and hold its
    // lines to one per 10 s (tests/it/nri_session.rs), and every line is
    // looked for here.
    let lasting = Duration::from_millis(1100);
    // A frame header announcing more than a runtime sends: the plugin
    // closes the connection, says why, and comes back at once.
    std::thread::sleep(lasting);
    c.s.write_all(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff])
        .unwrap();
    assert!(c.closed(), "an oversized frame closes the connection");
    let mut c = raw.accept(Duration::from_secs(2));

    // The runtime's end closing inside a frame: the plugin reconnects.
    std::thread::sleep(lasting);
    c.s.write_all(&[0, 0, 0, 1, 0, 0, 0, 40, 1, 2, 3]).unwrap();
    drop(c);
    let c = raw.accept(Duration::from_secs(2));
    std::thread::sleep(lasting);
    drop(c);
    // ... and between frames.
    let mut c = raw.accept(Duration::from_secs(2));

    // SIGTERM while registered: the connection is shut, the process gone.
    let mut plugin = plugin;
    let (status, took) = plugin.terminate();
    assert!(
        status.success() && took < Duration::from_secs(1),
        "{status} after {took:?}"
    );
    assert!(c.closed(), "the runtime's end sees the plugin close");

    let log = plugin.wait_log("registered as 50-roce-tune", 4, Duration::from_secs(5));
    for line in [
        "Shutdown\" is not a method of this plugin",
        "dropped a frame for conn 7",
        "more than ttrpc's 4194304: answered RESOURCE_EXHAUSTED",
        "a frame announces 4294967295 bytes",
        "the connection ended inside a frame's payload (3 of 40 bytes)",
        "disconnected: the runtime closed the connection; reconnecting at once",
        "ttrpc's ids are odd and increasing",
    ] {
        assert!(log.contains(line), "no {line:?} in\n{log}");
    }
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_socket_served_by_anyone_but_root_is_never_registered_with() {
    needs!(root);
    // A listener that binds as root in a dir of root's (nriSocket's
    // directory must be: no one else may put a socket there), then drops
    // to nobody before listen(2): a connecting peer's SO_PEERCRED is the
    // listener's at listen time (net/unix/af_unix.c, unix_listen's
    // init_peercred), so the kernel says uid 65534.
    let dir = private_dir("roce-tune-nri-peer-");
    let sock = dir.join("nri.sock");
    let mut nobody = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(format!(
            "import os,socket,time\ns=socket.socket(socket.AF_UNIX)\ns.bind({:?})\nos.setgroups([])\nos.setgid(65534)\nos.setuid(65534)\ns.listen(8)\nwhile True:\n  c,_=s.accept()\n  time.sleep(0.2)\n",
            path_str(&sock)
        ))
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !sock.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the listener did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let plugin = Plugin::nri(&sock, json!({}));
    let log = plugin.wait_log("not root: not registering", 1, Duration::from_secs(5));
    assert!(log.contains("is served by uid 65534"), "{log}");
    std::thread::sleep(Duration::from_millis(500));
    let log = plugin.log();
    assert!(!log.contains("registered as"), "{log}");
    assert_eq!(
        log.matches("not root").count(),
        1,
        "said once, not every attempt: {log}"
    );
    let _ = nobody.kill();
    let _ = nobody.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One HTTP GET of the agent's metrics.
pub(crate) fn scrape(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    all.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn the_agent_runs_the_plugin_and_exports_its_counters_within_a_second() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    let (_dir, sock) = socket("nri-agent-");
    let sim = Sim::start(
        &sims.v012,
        &sock,
        &json!([
            {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
            {"run_pod": pod("p", None, json!({}))},
            {"create_container": ctr("c", "p", &[])},
            {"sleep_ms": 2500}
        ]),
        &[],
    );
    let agent = Plugin::start(
        &sock,
        json!({"metricsAddress": "127.0.0.1:0"}),
        &["agent", "--every", "3600", "--nri"],
    );
    let log = agent.wait_log("metrics on http://", 1, Duration::from_secs(5));
    let addr = log
        .split("metrics on http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let wait_for = |want: &[&str], bound: Duration| -> String {
        let t = Instant::now();
        loop {
            let m = scrape(&addr);
            if want.iter().all(|w| m.lines().any(|l| l == *w)) {
                return m;
            }
            assert!(
                t.elapsed() < bound,
                "no {want:?} within {bound:?}:\n{m}\n{}",
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(
        &[
            "roce_tune_nri_connected 1",
            "roce_tune_nri_requests_total{method=\"Configure\",outcome=\"ok\"} 1",
            "roce_tune_nri_requests_total{method=\"Synchronize\",outcome=\"ok\"} 1",
            "roce_tune_nri_requests_total{method=\"RunPodSandbox\",outcome=\"ok\"} 1",
            "roce_tune_nri_requests_total{method=\"CreateContainer\",outcome=\"ok\"} 1",
            "roce_tune_nri_env_injected_total 0",
        ],
        Duration::from_secs(8),
    );
    never_dropped("nri-sim-0.12", &sim.finish(), 0);
    // The runtime is gone: the metric says so within the agent's second.
    wait_for(&["roce_tune_nri_connected 0"], Duration::from_secs(3));
    // The plugin waits to reconnect; SIGTERM stops it with the agent.
    let mut agent = agent;
    let (status, took) = agent.terminate();
    assert!(
        status.success() && took < Duration::from_secs(1),
        "{status} after {took:?}"
    );
    assert!(
        agent.log().contains("the NRI plugin stops"),
        "{}",
        agent.log()
    );
}

/// net1..net4 on mlx5_2..mlx5_5, each at 10.10.<i>.2.
const RAILS: [(&str, &str, &str, &str); 4] = [
    ("net1", "mlx5_2", "0000:0c:00.2", "10.10.1.2"),
    ("net2", "mlx5_3", "0000:0c:00.3", "10.10.2.2"),
    ("net3", "mlx5_4", "0000:0c:00.4", "10.10.3.2"),
    ("net4", "mlx5_5", "0000:0c:00.5", "10.10.4.2"),
];
const HCA: &str = "NCCL_IB_HCA==mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1";

/// A pod with four rails on a test tree, each ADDed as the runtime runs the
/// plugin (trafficClass 41), the RoCE v2 GID of rail `i` at `gid_index[i]`
/// (gidCheck present, so a GID away from 3 still comes up): the records the
/// NRI plugin reads. Then `roce-tune-agent nri` on that node, on `socket`.
fn four_rails(socket: &Path, gid_index: [u32; 4]) -> (Tree, Pod, Plugin) {
    let tree = Tree::new();
    let state = StateDirPath::new();
    let config = write_node_config(&state, Some(&tree), json!({"nriSocket": path_str(socket)}));
    let pod = Pod::new(RAILS[0].0, Some(&format!("{}/24", RAILS[0].3)));
    let cid = unique("sandbox");
    for (i, (ifname, dev, pci, ip)) in RAILS.iter().enumerate() {
        if i > 0 {
            pod.add_rail(ifname, Some(&format!("{ip}/24")));
        }
        tree.add_device(pci, dev, "");
        tree.set_gid(dev, gid_index[i], &v4_gid(ip), "RoCE v2");
        tree.bind(&pod, ifname, pci);
    }
    // Out of order, as a runtime may run a pod's networks: the variables
    // follow the pod's interfaces.
    for i in [2, 0, 3, 1] {
        let (ifname, _, pci, ip) = RAILS[i];
        let conf = json!({
            "cniVersion": "1.1.0", "name": format!("rail-{}", i + 1), "type": "roce-tune",
            "trafficClass": 41, "deviceID": pci, "gidCheck": "present", "gidTimeoutMs": 500,
            "prevResult": prev_result("1.1.0", ifname, &pod.path(), &[&format!("{ip}/24")]),
        });
        run_plugin(
            &state,
            "ADD",
            &cid,
            &pod.path(),
            ifname,
            conf.to_string().as_bytes(),
        )
        .ok();
    }
    let plugin = Plugin::on(state, &config, &["nri"]);
    (tree, pod, plugin)
}

/// What the job environment must do: under both generations, an annotated pod with 4
/// rails gets NCCL_IB_HCA (the exact list, in the pod's interface order),
/// NCCL_IB_GID_INDEX and NCCL_IB_TC in its container's adjustment; a
/// container that sets one keeps its own; a pod without the annotation gets
/// none; the plugin stays registered through every step.
#[test]
fn an_annotated_pod_with_four_rails_gets_its_rails_environment_under_both_generations() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let (_dir, sock) = socket("nri-env-");
        let (_tree, pod, plugin) = four_rails(&sock, [3; 4]);
        let ns = pod.path();
        let result = Sim::start(
            bin,
            &sock,
            &json!([
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"run_pod": pod_("job", &ns, json!({"roce-tune.io/nccl-env": "true"}))},
                {"create_container": ctr("worker", "job", &["PATH=/bin"])},
                {"create_container": ctr("own-tc", "job", &["NCCL_IB_TC=106"])},
                {"run_pod": pod_("plain", &ns, json!({}))},
                {"create_container": ctr("plain-c", "plain", &[])}
            ]),
            &[],
        )
        .finish();
        never_dropped(name, &result, 0);
        let env = |i: usize| adjusted_env(&steps(&result)[i]);
        assert_eq!(
            env(2),
            [HCA, "NCCL_IB_GID_INDEX=3", "NCCL_IB_TC=41"],
            "{name}"
        );
        assert_eq!(
            env(3),
            [HCA, "NCCL_IB_GID_INDEX=3"],
            "{name}: the container's own class wins"
        );
        assert!(env(5).is_empty(), "{name}: a pod that did not ask");
        for r in rpcs(&result, "CreateContainer") {
            assert!(r["ms"].as_f64().unwrap() < 100.0, "{name}: {r}");
        }
        let log = plugin.wait_log(
            "sets NCCL_IB_TC itself: its own value wins",
            1,
            Duration::from_secs(5),
        );
        assert!(
            log.contains(
                "container worker-name: injected NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_TC"
            ),
            "{name}: {log}"
        );
    }
}

/// Rails whose RoCE v2 GIDs sit at different indexes: no NCCL_IB_GID_INDEX
/// (NCCL's own selection picks each), and what that selection needs.
#[test]
fn rails_that_disagree_on_the_gid_index_leave_it_to_nccl() {
    needs!(root);
    let sims: NriSims = needs!(nri_sim);
    for (name, bin) in sims.both() {
        let (_dir, sock) = socket("nri-gid-");
        let (_tree, pod, plugin) = four_rails(&sock, [3, 3, 5, 3]);
        let result = Sim::start(
            bin,
            &sock,
            &json!([
                {"wait_plugins": ["roce-tune"], "timeout_ms": 5000},
                {"run_pod": pod_("job", &pod.path(), json!({"roce-tune.io/nccl-env": "true"}))},
                {"create_container": ctr("worker", "job", &[])}
            ]),
            &[],
        )
        .finish();
        never_dropped(name, &result, 0);
        let env = adjusted_env(&steps(&result)[2]);
        assert_eq!(
            env,
            [
                HCA,
                "NCCL_IB_ROCE_VERSION_NUM=2",
                "NCCL_IB_ADDR_FAMILY=AF_INET",
                "NCCL_IB_TC=41"
            ],
            "{name}"
        );
        plugin.wait_log("injected NCCL_IB_HCA", 1, Duration::from_secs(5));
    }
}

/// A pod with a netns, as nri-sim's script takes one.
fn pod_(id: &str, netns: &str, annotations: Value) -> Value {
    pod(id, Some(netns), annotations)
}
