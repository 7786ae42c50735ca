//! The case table of the bad-input tests (`tests/it/bad_inputs.rs`) and the
//! tampered-state tests (`tests/it/tampered_state.rs`): one `Case` type, its
//! constructors, the place a case runs in, and the checks every case gets.
//!
//! A case starts from a config that WORKS (it sets the class, records it,
//! proves the GID), changes one thing (an environment variable, the config,
//! the raw stdin, or files planted in the place) and must then get its exact
//! CNI code: exit status 1, an error object in a supported cniVersion whose
//! message holds the case's needle, no panic, no hang. A case without a
//! `setup` must also change nothing outside its place: the pod's six rail
//! sysctls, every file of the sysfs tree and every file, mode and link under
//! the place's base dir (the state dir, the node config, and a canary dir
//! beside them where a traversal out of the state dir would land) are
//! compared before and after, and /etc/passwd too. A case with a `setup`
//! runs in a place of its own and is judged by its `check`.

use super::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

pub const PCI: &str = "0000:0c:00.2";
pub const DEV: &str = "mlx5_2";
pub const ADDR: &str = "192.168.0.34/16";
pub const IP: &str = "192.168.0.34";
/// The container ID of every case that does not set its own.
pub const CID: &str = "case1";
/// The cniVersion of the base config: what an error must speak when the
/// config could be read.
pub const BASE_VERSION: &str = "1.0.0";
const SUPPORTED: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
/// Longer than any case needs; a run past it is a hang, killed and reported.
const CASE_HANG: Duration = Duration::from_secs(10);

/// Judges a planted case's place and run: `Err` says what is wrong.
pub type Check = fn(&Place, &Run) -> Result<(), String>;

/// What a case feeds the plugin on stdin.
pub enum Input {
    /// The base config with this change.
    Conf(Box<dyn Fn(&mut Value)>),
    /// These bytes, whatever the base config is.
    Raw(Vec<u8>),
}

/// One row of a table.
pub struct Case {
    pub name: String,
    /// CNI_COMMAND, unless `env` changes it.
    pub command: &'static str,
    /// Changes to the runtime's environment: `Some` sets, `None` removes.
    pub env: Vec<(&'static str, Option<OsString>)>,
    pub input: Input,
    /// 0: the run must succeed.
    pub code: u64,
    /// Must be part of the error's `msg` ("" for a success).
    pub needle: &'static str,
    /// The cniVersion the error must speak; `None`: any supported one.
    pub version: Option<&'static str>,
    /// The run must end within this (a refusal that does not read it all).
    pub within: Option<Duration>,
    /// Plants files in a place of the case's own before the run.
    pub setup: Option<fn(&Place)>,
    /// Judges the place and the run afterwards (cases with a `setup`).
    pub check: Option<Check>,
}

impl Case {
    fn new(name: &str, input: Input, code: u64, needle: &'static str) -> Case {
        Case {
            name: name.to_string(),
            command: "ADD",
            env: vec![],
            input,
            code,
            needle,
            version: None,
            within: None,
            setup: None,
            check: None,
        }
    }

    /// The base config with `f` applied; the error speaks its version.
    pub fn conf(
        name: &str,
        f: impl Fn(&mut Value) + 'static,
        code: u64,
        needle: &'static str,
    ) -> Case {
        Case {
            version: Some(BASE_VERSION),
            ..Case::new(name, Input::Conf(Box::new(f)), code, needle)
        }
    }

    /// The base config, with the variable `key` set to `value` (any bytes
    /// but NUL: execve takes C strings).
    pub fn env(
        name: &str,
        key: &'static str,
        value: impl Into<OsString>,
        code: u64,
        needle: &'static str,
    ) -> Case {
        let mut c = Case::conf(name, |_| {}, code, needle);
        c.env.push((key, Some(value.into())));
        c
    }

    /// The base config, with the variable `key` not set at all.
    pub fn unset(name: &str, key: &'static str, code: u64, needle: &'static str) -> Case {
        let mut c = Case::conf(name, |_| {}, code, needle);
        c.env.push((key, None));
        c
    }

    /// These bytes on stdin.
    pub fn raw(name: &str, stdin: Vec<u8>, code: u64, needle: &'static str) -> Case {
        Case::new(name, Input::Raw(stdin), code, needle)
    }

    /// The base config with the value at `path` replaced by the raw JSON
    /// text `value`: numbers serde_json would never print itself (1e400, -0,
    /// 2^64).
    pub fn raw_number(
        name: &str,
        path: &'static [&'static str],
        value: &'static str,
        code: u64,
        needle: &'static str,
    ) -> Case {
        Case::conf(
            name,
            move |c| {
                let (last, parents) = path.split_last().unwrap();
                let mut at = &mut *c;
                for p in parents {
                    at = match p.parse::<usize>() {
                        Ok(i) => &mut at[i],
                        Err(_) => &mut at[*p],
                    };
                }
                at[*last] = json!(RAW);
                c[RAW_KEY] = json!(value);
            },
            code,
            needle,
        )
    }

    /// Files planted in a place of the case's own, the base config on stdin,
    /// judged by `check` (the place is changed on purpose).
    pub fn planted(
        name: &str,
        command: &'static str,
        setup: fn(&Place),
        code: u64,
        check: Check,
    ) -> Case {
        Case {
            command,
            setup: Some(setup),
            check: Some(check),
            ..Case::conf(name, |_| {}, code, "")
        }
    }

    /// Run as CNI_COMMAND `command` instead of ADD.
    pub fn on(mut self, command: &'static str) -> Case {
        self.command = command;
        self
    }

    /// The error must speak `version` (the config's own cannot be read).
    pub fn speaks(mut self, version: &'static str) -> Case {
        self.version = Some(version);
        self
    }

    /// The run must end within `limit`.
    pub fn within(mut self, limit: Duration) -> Case {
        self.within = Some(limit);
        self
    }

    /// The bytes on stdin, given the base config.
    pub fn stdin(&self, base: &Value) -> Vec<u8> {
        match &self.input {
            Input::Raw(b) => b.clone(),
            Input::Conf(f) => {
                let mut c = base.clone();
                f(&mut c);
                match c.as_object_mut().unwrap().remove(RAW_KEY) {
                    Some(Value::String(raw)) => c
                        .to_string()
                        .replace(&format!("{RAW:?}"), &raw)
                        .into_bytes(),
                    _ => c.to_string().into_bytes(),
                }
            }
        }
    }

    /// What is wrong with `run` for this case, whatever the place: the code,
    /// the error object, the message, a panic, a hang, the time taken.
    pub fn judge(&self, run: &Run) -> Vec<String> {
        let mut why = Vec::new();
        if run.hung {
            why.push(format!("hung: {}", run.stderr.trim()));
        }
        if run.outcome() != self.code {
            why.push(format!(
                "code {} (status {}, signal {:?}), expected {}: {} {}",
                run.outcome(),
                run.status,
                run.signal,
                self.code,
                run.stdout.trim(),
                run.stderr.trim()
            ));
        }
        if self.code != 0 {
            if run.status != 1 {
                why.push(format!("exit status {}", run.status));
            }
            let v = serde_json::from_str::<Value>(&run.stdout)
                .ok()
                .and_then(|o| o["cniVersion"].as_str().map(str::to_owned))
                .unwrap_or_default();
            if !SUPPORTED.contains(&v.as_str()) {
                why.push(format!("error cniVersion {v:?}"));
            }
            if let Some(want) = self.version.filter(|w| *w != v) {
                why.push(format!("error cniVersion {v:?}, expected {want:?}"));
            }
        }
        if !run.msg().contains(self.needle) {
            why.push(format!("message {:?} lacks {:?}", run.msg(), self.needle));
        }
        if run.stderr.contains("panicked") {
            why.push(format!("panicked: {}", run.stderr));
        }
        if let Some(limit) = self.within.filter(|l| run.elapsed > *l) {
            why.push(format!("took {:?}, more than {limit:?}", run.elapsed));
        }
        why
    }
}

/// Stands for a raw JSON number text in a config; swapped in `Case::stdin`.
const RAW: &str = "@@RAW@@";
const RAW_KEY: &str = "@@raw";

/// Where a case runs: a base dir holding the state dir, the node config and
/// a canary dir (a traversal out of the state dir lands in base), and the
/// sysfs tree with one VF whose class is `Global tclass=106` and whose GID
/// of the pod's address is at index 3.
pub struct Place {
    pub base: PathBuf,
    pub state: PathBuf,
    pub canary: PathBuf,
    /// The node config naming the tree and the state dir.
    pub node: PathBuf,
    pub tree: Tree,
}

impl Place {
    pub fn new() -> Place {
        let base = private_dir("rt-case-");
        let canary = base.join("canary");
        std::fs::create_dir_all(&canary).unwrap();
        std::fs::write(canary.join("precious"), "do not touch\n").unwrap();
        let tree = Tree::new();
        tree.add_device(PCI, DEV, "Global tclass=106\n");
        tree.set_ipv4_gids(DEV, IP);
        let p = Place {
            state: base.join("state"),
            node: base.join("node.json"),
            base,
            canary,
            tree,
        };
        p.write_node(json!({}));
        p
    }

    /// The node config: the tree and the state dir, plus `extra` keys.
    pub fn write_node(&self, extra: Value) {
        let mut n =
            json!({"sysfsRoot": path_str(&self.tree.root), "stateDir": path_str(&self.state)});
        for (k, v) in extra.as_object().unwrap() {
            n[k] = v.clone();
        }
        std::fs::write(&self.node, n.to_string()).unwrap();
        std::fs::set_permissions(&self.node, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    /// The config every case starts from: it works in this place (the tree
    /// binds the pod's net1 to the VF, as the kernel would).
    pub fn conf(&self, pod: &Pod) -> Value {
        self.tree.bind(pod, "net1", PCI);
        json!({
            "cniVersion": BASE_VERSION, "name": "rail", "type": "roce-tune",
            "trafficClass": 41, "deviceID": PCI, "gidTimeoutMs": 0,
            "prevResult": prev_result(BASE_VERSION, "net1", &pod.path(), &[ADDR]),
        })
    }

    pub fn snapshot(&self) -> (BTreeMap<PathBuf, String>, BTreeMap<PathBuf, String>) {
        (snapshot(&self.base), snapshot(&self.tree.root))
    }

    /// The state entry of container `cid` on net1.
    pub fn entry(&self, cid: &str) -> PathBuf {
        self.state.join(format!("{cid}:net1.state"))
    }

    /// Run `case` against `pod` here.
    pub fn run(&self, pod: &Pod, case: &Case) -> Run {
        let exec = Exec::cni(BIN, &self.node, case.command, CID, &pod.path(), "net1")
            .hang_after(CASE_HANG)
            .stdin(case.stdin(&self.conf(pod)));
        case.env
            .iter()
            .fold(exec, |e, (k, v)| match v {
                Some(v) => e.env(k, v),
                None => e.env_remove(k),
            })
            .run()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        // A case may have made the state dir world-writable or a link.
        let _ = std::fs::remove_file(&self.state);
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Run every case of `cases` against `pod` (its rail is net1) and return
/// one line per failed case. Cases without a `setup` share one place, in
/// which the base config is first shown to work: ADD writes the class, DEL
/// gives it back (which also creates the state dir and its lock file, so
/// that any later change to them shows). Cases with a `setup` get a place
/// of their own.
pub fn failures(pod: &Pod, cases: &[Case]) -> Vec<String> {
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let shared = Place::new();
    let base = shared.conf(pod);
    let cni = |command| {
        Exec::cni(BIN, &shared.node, command, CID, &pod.path(), "net1")
            .stdin(base.to_string())
            .run()
    };
    cni("ADD").ok();
    assert_eq!(shared.tree.tc(DEV), "tclass=41", "the base config works");
    cni("DEL").ok();
    assert_eq!(shared.tree.tc(DEV), "tclass=106");
    pod.untune("net1");
    let sysctls = pod.rail_values("net1");
    let files = shared.snapshot();

    let mut failed = Vec::new();
    for case in cases {
        let mut why;
        if let Some(setup) = case.setup {
            let own = Place::new();
            setup(&own);
            let run = own.run(pod, case);
            why = case.judge(&run);
            if let Err(e) = (case.check.expect("a planted case has a check"))(&own, &run) {
                why.push(e);
            }
        } else {
            let run = shared.run(pod, case);
            why = case.judge(&run);
            if pod.rail_values("net1") != sysctls {
                why.push("the pod's sysctls changed".into());
            }
            let now = shared.snapshot();
            let changed: Vec<String> = snapshot_diff(&files.0, &now.0)
                .into_iter()
                .chain(snapshot_diff(&files.1, &now.1))
                .collect();
            if !changed.is_empty() {
                why.push(format!("files changed: {changed:?}"));
            }
        }
        if std::fs::read("/etc/passwd").unwrap() != passwd {
            why.push("/etc/passwd changed".into());
        }
        if !why.is_empty() {
            failed.push(format!("{}: {}", case.name, why.join("; ")));
        }
    }
    failed
}
