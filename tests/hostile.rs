//! Hostile input: traversal and odd bytes in every identifier, out-of-range
//! numbers, oversized and malformed stdin, and a state dir someone tampered
//! with. Each case has its exact code, no panic, and changes nothing outside
//! its place: the pod's sysctls, the sysfs tree (tc files included) and every
//! file under the test's base dir (the canary dir, the state dir) stay as they
//! were, byte for byte and mode for mode.
//!
//! The base config of each case WORKS (trafficClass, deviceID, GID present),
//! so a case that got past validation would visibly write something.
//! NUL cannot be put in an environment variable at all (execve takes C
//! strings), so NUL is tried only where JSON can carry it (`\u0000`).

mod common;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PCI: &str = "0000:0c:00.2";
const DEV: &str = "mlx5_2";
const ADDR: &str = "192.168.0.34/16";
const IP: &str = "192.168.0.34";
const CID: &str = "hostile1";
/// Longer than any case needs; a run past it is a hang, and it is killed.
const HANG: Duration = Duration::from_secs(10);

const RAIL_FILES: &[&str] = &[
    "/proc/sys/net/ipv4/conf/all/rp_filter",
    "/proc/sys/net/ipv4/conf/net1/arp_announce",
    "/proc/sys/net/ipv4/conf/net1/arp_filter",
    "/proc/sys/net/ipv4/conf/net1/arp_ignore",
    "/proc/sys/net/ipv4/conf/net1/rp_filter",
    "/proc/sys/net/ipv4/conf/net1/accept_local",
];

/// The six rail sysctls in one process spawn (one `sysctl` each is slow
/// across a hundred cases).
fn sysctls(pod: &Pod) -> String {
    sh(&format!(
        "ip netns exec {} cat {}",
        pod.ns,
        RAIL_FILES.join(" ")
    ))
}

/// A pod in which none of roce-tune's values is already set, so a write shows.
fn pod() -> Pod {
    let pod = Pod::new("net1", Some(ADDR));
    pod.set_sysctl("net.ipv4.conf.all.rp_filter", "2");
    pod.set_sysctl("net.ipv4.conf.net1.rp_filter", "1");
    pod
}

/// Every path under `root` (links not followed) with its kind, mode and
/// content (or link target).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(p: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            return;
        };
        let ft = m.file_type();
        let what = if ft.is_symlink() {
            format!("link -> {:?}", std::fs::read_link(p).unwrap())
        } else if ft.is_dir() {
            for e in std::fs::read_dir(p).unwrap().filter_map(Result::ok) {
                walk(&e.path(), out);
            }
            "dir".to_string()
        } else if ft.is_file() {
            format!("{:?}", std::fs::read(p).unwrap())
        } else {
            "special".to_string()
        };
        out.insert(p.to_owned(), format!("{:o} {what}", m.mode()));
    }
    let mut out = BTreeMap::new();
    walk(root, &mut out);
    out
}

fn diff(a: &BTreeMap<PathBuf, String>, b: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => d.push(format!("removed {}", k.display())),
            Some(w) if w != v => d.push(format!("changed {}", k.display())),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        d.push(format!("created {}", k.display()));
    }
    d
}

/// The place of one test: a base dir holding the state dir and a canary dir
/// (a traversal out of the state dir lands in base), and the sysfs tree.
struct Place {
    base: PathBuf,
    state: PathBuf,
    canary: PathBuf,
    /// The node config naming the tree and the state dir.
    node: PathBuf,
    tree: Tree,
}

impl Place {
    fn new() -> Place {
        let base = private_dir("rt-hostile-");
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
    fn write_node(&self, extra: Value) {
        let mut n =
            json!({"sysfsRoot": path_str(&self.tree.root), "stateDir": path_str(&self.state)});
        for (k, v) in extra.as_object().unwrap() {
            n[k] = v.clone();
        }
        std::fs::write(&self.node, n.to_string()).unwrap();
        std::fs::set_permissions(&self.node, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    fn conf(&self, pod: &Pod) -> Value {
        json!({
            "cniVersion": "1.0.0", "name": "rail", "type": "roce-tune",
            "trafficClass": 41, "deviceID": PCI, "gidTimeoutMs": 0,
            "prevResult": prev_result("1.0.0", "net1", &pod.path(), &[ADDR]),
        })
    }

    fn snapshot(&self) -> (BTreeMap<PathBuf, String>, BTreeMap<PathBuf, String>) {
        (snapshot(&self.base), snapshot(&self.tree.root))
    }

    fn entry(&self, cid: &str) -> PathBuf {
        self.state.join(format!("{cid}:net1.state"))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        // A test may have made the state dir world-writable or a link.
        let _ = std::fs::remove_file(&self.state);
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

struct Out {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Out {
    fn code(&self) -> u64 {
        match self.status {
            Some(0) => 0,
            _ => serde_json::from_str::<Value>(&self.stdout)
                .ok()
                .and_then(|v| v["code"].as_u64())
                .unwrap_or(u64::MAX),
        }
    }
    fn msg(&self) -> String {
        serde_json::from_str::<Value>(&self.stdout)
            .ok()
            .and_then(|v| v["msg"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// Run the plugin with exactly `env` (byte strings allowed) and `stdin`; a
/// run that outlives HANG is killed and reported as hung (status None).
fn run_raw(bin: &str, args: &[&str], env: &[(&str, OsString)], stdin: Vec<u8>) -> Out {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn roce-tune");
    let pid = child.id();
    let mut input = child.stdin.take().unwrap();
    // The plugin stops reading past its limit: the rest of a huge stdin
    // meets a closed pipe, which is expected.
    std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(out)) => Out {
            status: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: start.elapsed(),
        },
        _ => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            Out {
                status: None,
                stdout: String::new(),
                stderr: format!("HUNG: killed after {HANG:?}"),
                took: start.elapsed(),
            }
        }
    }
}

fn cni_env(node: &Path, command: &str, cid: &str, netns: &str) -> Vec<(&'static str, OsString)> {
    vec![
        ("ROCE_TUNE_NODE_CONFIG", node.into()),
        ("CNI_COMMAND", command.into()),
        ("CNI_CONTAINERID", cid.into()),
        ("CNI_NETNS", netns.into()),
        ("CNI_IFNAME", "net1".into()),
        ("CNI_ARGS", "".into()),
        ("CNI_PATH", "/usr/lib/cni".into()),
    ]
}

fn run(node: &Path, command: &str, cid: &str, netns: &str, stdin: &Value) -> Out {
    run_raw(
        BIN,
        &[],
        &cni_env(node, command, cid, netns),
        stdin.to_string().into_bytes(),
    )
}

/// What a case feeds the plugin besides the default ADD env.
enum Input {
    /// The base config with this change.
    Conf(Box<dyn Fn(&mut Value)>),
    Raw(Vec<u8>),
}

struct Case {
    name: String,
    command: &'static str,
    env: Vec<(&'static str, OsString)>,
    input: Input,
    /// 0: the run must succeed (and still change nothing: DEL without state).
    code: u64,
    needle: &'static str,
}

fn env_case(
    name: &str,
    key: &'static str,
    value: impl Into<OsString>,
    code: u64,
    needle: &'static str,
) -> Case {
    Case {
        name: name.to_string(),
        command: "ADD",
        env: vec![(key, value.into())],
        input: Input::Conf(Box::new(|_| {})),
        code,
        needle,
    }
}

fn del_env_case(
    name: &str,
    key: &'static str,
    value: impl Into<OsString>,
    code: u64,
    needle: &'static str,
) -> Case {
    Case {
        command: "DEL",
        ..env_case(name, key, value, code, needle)
    }
}

fn conf_case(
    name: &str,
    f: impl Fn(&mut Value) + 'static,
    code: u64,
    needle: &'static str,
) -> Case {
    Case {
        name: name.to_string(),
        command: "ADD",
        env: vec![],
        input: Input::Conf(Box::new(f)),
        code,
        needle,
    }
}

/// Stands for a raw JSON number text in a config; swapped in `stdin_of`.
const RAW: &str = "@@RAW@@";

/// The base config with the value at `path` replaced by the raw JSON text
/// `value`: numbers serde_json would never print itself (1e400, -0, 2^64).
fn raw_number_case(
    name: &str,
    path: &'static [&'static str],
    value: &'static str,
    code: u64,
    needle: &'static str,
) -> Case {
    conf_case(
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
            c["@@raw"] = json!(value);
        },
        code,
        needle,
    )
}

fn raw_case(name: &str, stdin: Vec<u8>, code: u64, needle: &'static str) -> Case {
    Case {
        name: name.to_string(),
        command: "ADD",
        env: vec![],
        input: Input::Raw(stdin),
        code,
        needle,
    }
}

fn stdin_of(case: &Case, base: &Value) -> Vec<u8> {
    match &case.input {
        Input::Raw(b) => b.clone(),
        Input::Conf(f) => {
            let mut c = base.clone();
            f(&mut c);
            match c.as_object_mut().unwrap().remove("@@raw") {
                Some(Value::String(raw)) => c
                    .to_string()
                    .replace(&format!("{:?}", RAW), &raw)
                    .into_bytes(),
                _ => c.to_string().into_bytes(),
            }
        }
    }
}

fn nested(open: &str, close: &str, depth: usize) -> Vec<u8> {
    let mut v = open.repeat(depth);
    v.push_str(&close.repeat(depth));
    v.into_bytes()
}

fn cases() -> Vec<Case> {
    let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
    let mut c = vec![
        // CNI_IFNAME: the kernel's rules, plus printable ASCII only.
        env_case(
            "ifname ../../etc",
            "CNI_IFNAME",
            "../../etc",
            4,
            "CNI_IFNAME",
        ),
        env_case("ifname a/b", "CNI_IFNAME", "a/b", 4, "CNI_IFNAME"),
        env_case("ifname .", "CNI_IFNAME", ".", 4, "CNI_IFNAME"),
        env_case("ifname ..", "CNI_IFNAME", "..", 4, "CNI_IFNAME"),
        env_case(
            "ifname with newline",
            "CNI_IFNAME",
            "net1\n",
            4,
            "CNI_IFNAME",
        ),
        env_case("ifname with space", "CNI_IFNAME", "net 1", 4, "CNI_IFNAME"),
        env_case(
            "ifname leading space",
            "CNI_IFNAME",
            " net1",
            4,
            "CNI_IFNAME",
        ),
        env_case("ifname with tab", "CNI_IFNAME", "net\t1", 4, "CNI_IFNAME"),
        env_case(
            "ifname 16 chars",
            "CNI_IFNAME",
            "abcdefghijklmnop",
            4,
            "CNI_IFNAME",
        ),
        env_case("ifname non-ASCII", "CNI_IFNAME", "nét1", 4, "CNI_IFNAME"),
        env_case(
            "ifname non-UTF-8",
            "CNI_IFNAME",
            bytes(b"net\xff"),
            4,
            "not valid UTF-8",
        ),
        env_case("ifname with colon", "CNI_IFNAME", "net1:0", 4, "CNI_IFNAME"),
        env_case(
            "ifname terminal escape",
            "CNI_IFNAME",
            "n\x1b[2J",
            4,
            "CNI_IFNAME",
        ),
        del_env_case(
            "DEL ifname ../../etc",
            "CNI_IFNAME",
            "../../etc",
            4,
            "CNI_IFNAME",
        ),
        // CNI_CONTAINERID: SPEC's alphabet, 255 at most.
        env_case(
            "containerID ../x",
            "CNI_CONTAINERID",
            "../x",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID a/b",
            "CNI_CONTAINERID",
            "a/b",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID -x",
            "CNI_CONTAINERID",
            "-x",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID x;rm -rf /",
            "CNI_CONTAINERID",
            "x;rm -rf /",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID 300 chars",
            "CNI_CONTAINERID",
            "a".repeat(300),
            4,
            "longer than 255",
        ),
        env_case(
            "containerID .hidden",
            "CNI_CONTAINERID",
            ".hidden",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID newline",
            "CNI_CONTAINERID",
            "c1\n",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID non-UTF-8",
            "CNI_CONTAINERID",
            bytes(b"c\xfe\xff"),
            4,
            "not valid UTF-8",
        ),
        env_case(
            "containerID space",
            "CNI_CONTAINERID",
            "c1 x",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID non-ASCII",
            "CNI_CONTAINERID",
            "cé1",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID with colon",
            "CNI_CONTAINERID",
            "c1:net1",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID $(...)",
            "CNI_CONTAINERID",
            "c1$(reboot)",
            4,
            "CNI_CONTAINERID",
        ),
        env_case(
            "containerID glob",
            "CNI_CONTAINERID",
            "*",
            4,
            "CNI_CONTAINERID",
        ),
        del_env_case(
            "DEL containerID ../x",
            "CNI_CONTAINERID",
            "../x",
            4,
            "CNI_CONTAINERID",
        ),
        // CNI_NETNS.
        env_case("netns relative", "CNI_NETNS", "netns/x", 4, "absolute"),
        env_case(
            "netns missing",
            "CNI_NETNS",
            "/var/run/netns/roce-tune-hostile-none",
            3,
            "does not exist",
        ),
        env_case(
            "netns a plain file",
            "CNI_NETNS",
            "/etc/passwd",
            4,
            "not a network namespace",
        ),
        env_case(
            "netns a directory",
            "CNI_NETNS",
            "/",
            4,
            "not a network namespace",
        ),
        // CNI_COMMAND.
        env_case("command lower case", "CNI_COMMAND", "add", 4, "CNI_COMMAND"),
        env_case(
            "command ADD;DEL",
            "CNI_COMMAND",
            "ADD;DEL",
            4,
            "CNI_COMMAND",
        ),
        env_case(
            "command with newline",
            "CNI_COMMAND",
            "ADD\n",
            4,
            "CNI_COMMAND",
        ),
        // CNI_ARGS.
        env_case("args without =", "CNI_ARGS", "noequals", 4, "not KEY=VALUE"),
        env_case(
            "args one bad pair",
            "CNI_ARGS",
            "K=V;bad",
            4,
            "not KEY=VALUE",
        ),
        env_case("args empty key", "CNI_ARGS", "=V", 4, "not KEY=VALUE"),
        env_case(
            "args control char",
            "CNI_ARGS",
            "K=\x01",
            4,
            "control character",
        ),
        env_case(
            "args newline",
            "CNI_ARGS",
            "K=V\nX=Y",
            4,
            "control character",
        ),
        env_case(
            "args 64 KB, bad pair last",
            "CNI_ARGS",
            format!("K={};bad", "v".repeat(64 << 10)),
            4,
            "not KEY=VALUE",
        ),
        del_env_case(
            "DEL args 64 KB (well formed)",
            "CNI_ARGS",
            format!("K={}", "v".repeat(64 << 10)),
            0,
            "",
        ),
        // deviceID / pciBusID: only DDDD:BB:DD.F.
        conf_case(
            "deviceID ../../../../etc",
            |c| c["deviceID"] = json!("../../../../etc"),
            7,
            "deviceID",
        ),
        conf_case(
            "deviceID with traversal tail",
            |c| c["deviceID"] = json!("0000:0c:00.2/../../x"),
            7,
            "deviceID",
        ),
        conf_case(
            "deviceID function 8",
            |c| c["deviceID"] = json!("0000:0c:00.8"),
            7,
            "deviceID",
        ),
        conf_case(
            "deviceID device 0x20",
            |c| c["deviceID"] = json!("0000:0c:20.0"),
            7,
            "deviceID",
        ),
        conf_case(
            "deviceID full-width digits",
            |c| c["deviceID"] = json!("\u{ff10}000:0c:00.2"),
            7,
            "deviceID",
        ),
        conf_case(
            "deviceID Arabic-Indic digits",
            |c| c["deviceID"] = json!("\u{660}\u{660}\u{660}\u{660}:0c:00.2"),
            7,
            "deviceID",
        ),
        conf_case(
            "deviceID trailing newline",
            |c| c["deviceID"] = json!("0000:0c:00.2\n"),
            7,
            "deviceID",
        ),
        conf_case(
            "deviceID a number",
            |c| c["deviceID"] = json!(12),
            7,
            "deviceID",
        ),
        conf_case(
            "pciBusID traversal",
            |c| c["pciBusID"] = json!("../x"),
            7,
            "pciBusID",
        ),
        conf_case(
            "deviceID and pciBusID differ",
            |c| c["pciBusID"] = json!("0000:0c:00.3"),
            7,
            "different devices",
        ),
        conf_case(
            "deviceID of no device",
            |c| c["deviceID"] = json!("0000:0c:1f.7"),
            100,
            "no RDMA device",
        ),
        // sysctl keys and values.
        conf_case(
            "sysctl IFNAME/../../..",
            |c| c["sysctl"] = json!({"net.ipv4.conf.IFNAME/../../..": "1"}),
            7,
            "sysctl key",
        ),
        conf_case(
            "sysctl net/../../etc/passwd",
            |c| c["sysctl"] = json!({"net/../../etc/passwd": "1"}),
            7,
            "sysctl key",
        ),
        conf_case(
            "sysctl outside net.",
            |c| c["sysctl"] = json!({"kernel.core_pattern": "|/bin/sh"}),
            7,
            "outside net.",
        ),
        conf_case(
            "sysctl empty component",
            |c| c["sysctl"] = json!({"net..ipv4": "1"}),
            7,
            "empty component",
        ),
        conf_case(
            "sysctl key with space",
            |c| c["sysctl"] = json!({"net.ipv4.conf.net 1.rp_filter": "0"}),
            7,
            "space",
        ),
        conf_case(
            "sysctl key with newline",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter\n": "0"}),
            7,
            "sysctl key",
        ),
        conf_case(
            "sysctl key with NUL",
            |c| c["sysctl"] = json!({"net.ipv4\u{0}.x": "0"}),
            7,
            "sysctl key",
        ),
        conf_case(
            "sysctl key non-ASCII",
            |c| c["sysctl"] = json!({"net.ipv4.conf.é.rp_filter": "0"}),
            7,
            "sysctl key",
        ),
        conf_case(
            "sysctl key 300 chars",
            |c| c["sysctl"] = json!({format!("net.{}", "a".repeat(300)): "0"}),
            7,
            "too long",
        ),
        conf_case(
            "sysctl key just net",
            |c| c["sysctl"] = json!({"net": "0"}),
            7,
            "names no setting",
        ),
        conf_case(
            "sysctl value with newline",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": "0\n1"}),
            7,
            "has value",
        ),
        conf_case(
            "sysctl value with NUL",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": "0\u{0}"}),
            7,
            "has value",
        ),
        conf_case(
            "sysctl value 10 KB",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": "0".repeat(10 << 10)}),
            7,
            "has value",
        ),
        conf_case(
            "sysctl value empty",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": ""}),
            7,
            "has value",
        ),
        conf_case(
            "sysctl value a number",
            |c| c["sysctl"] = json!({"net.ipv4.conf.all.rp_filter": 0}),
            7,
            "must be a string",
        ),
        conf_case(
            "sysctl 100 keys",
            |c| {
                let m: serde_json::Map<String, Value> = (0..100)
                    .map(|i| (format!("net.ipv4.conf.IFNAME.k{i}"), json!("1")))
                    .collect();
                c["sysctl"] = Value::Object(m);
            },
            7,
            "more than 64",
        ),
        conf_case(
            "sysctl an array",
            |c| c["sysctl"] = json!(["net.ipv4.conf.all.rp_filter=0"]),
            7,
            "sysctl must be",
        ),
        // Numbers out of range or of the wrong kind.
        raw_number_case(
            "trafficClass 1e400",
            &["trafficClass"],
            "1e400",
            6,
            "out of range",
        ),
        raw_number_case(
            "trafficClass -0",
            &["trafficClass"],
            "-0",
            7,
            "trafficClass",
        ),
        raw_number_case(
            "trafficClass 2^64",
            &["trafficClass"],
            "18446744073709551616",
            7,
            "trafficClass",
        ),
        raw_number_case(
            "trafficClass 41.0",
            &["trafficClass"],
            "41.0",
            7,
            "trafficClass",
        ),
        raw_number_case(
            "trafficClass 4.1e1",
            &["trafficClass"],
            "4.1e1",
            7,
            "trafficClass",
        ),
        conf_case(
            "trafficClass 256",
            |c| c["trafficClass"] = json!(256),
            7,
            "trafficClass",
        ),
        conf_case(
            "trafficClass -1",
            |c| c["trafficClass"] = json!(-1),
            7,
            "trafficClass",
        ),
        conf_case(
            "trafficClass a string",
            |c| c["trafficClass"] = json!("41"),
            7,
            "trafficClass",
        ),
        raw_number_case(
            "gidIndex 2^64",
            &["gidIndex"],
            "18446744073709551616",
            7,
            "gidIndex",
        ),
        raw_number_case(
            "gidTimeoutMs 1e10",
            &["gidTimeoutMs"],
            "1e10",
            7,
            "gidTimeoutMs",
        ),
        conf_case("rdmaPort 0", |c| c["rdmaPort"] = json!(0), 7, "rdmaPort"),
        conf_case(
            "rdmaPort 2^32",
            |c| c["rdmaPort"] = json!(1u64 << 32),
            7,
            "rdmaPort",
        ),
        // prevResult.
        conf_case(
            "ip interface index 5 of 1",
            |c| c["prevResult"]["ips"][0]["interface"] = json!(5),
            7,
            "out of range",
        ),
        conf_case(
            "ip interface index -1",
            |c| c["prevResult"]["ips"][0]["interface"] = json!(-1),
            7,
            "interface",
        ),
        raw_number_case(
            "ip interface index 2^64",
            &["prevResult", "ips", "0", "interface"],
            "18446744073709551616",
            7,
            "interface",
        ),
        conf_case(
            "ip interface index 0.5",
            |c| c["prevResult"]["ips"][0]["interface"] = json!(0.5),
            7,
            "interface",
        ),
        conf_case(
            "ip interface with no interfaces",
            |c| c["prevResult"]["interfaces"] = json!([]),
            7,
            "out of range",
        ),
        conf_case(
            "prevResult a string",
            |c| c["prevResult"] = json!("{}"),
            7,
            "prevResult",
        ),
        conf_case(
            "ip address not a CIDR",
            |c| c["prevResult"]["ips"][0]["address"] = json!("192.168.0.34/99"),
            7,
            "address",
        ),
        conf_case(
            "ip address 10 KB",
            |c| c["prevResult"]["ips"][0]["address"] = json!("9".repeat(10 << 10)),
            7,
            "address",
        ),
        conf_case(
            "interfaces an object",
            |c| c["prevResult"]["interfaces"] = json!({"name": "net1"}),
            7,
            "interfaces",
        ),
        // Host paths are the node config's: any of them in the network
        // config is refused, whatever the value.
        conf_case(
            "stateDir in the network config",
            |c| c["stateDir"] = json!("/tmp/evil"),
            7,
            "stateDir is a node setting",
        ),
        conf_case(
            "stateDir with NUL",
            |c| c["stateDir"] = json!("/tmp/a\u{0}b"),
            7,
            "stateDir is a node setting",
        ),
        conf_case(
            "sysfsRoot in the network config",
            |c| c["sysfsRoot"] = json!("/sys/../etc"),
            7,
            "sysfsRoot is a node setting",
        ),
        conf_case(
            "logFile in the network config",
            |c| c["logFile"] = json!("/tmp/x/../../etc/passwd"),
            7,
            "logFile is a node setting",
        ),
    ];
    // Stdin itself.
    let mut huge = br#"{"cniVersion":"1.0.0","pad":""#.to_vec();
    huge.resize(16 << 20, b'x');
    huge.extend_from_slice(b"\"}");
    c.extend([
        raw_case("stdin 16 MiB", huge, 7, "more than the 1048576"),
        raw_case(
            "stdin non-UTF-8",
            b"{\"cniVersion\":\"1.0.0\",\"name\":\"\xc0\xaf\"}".to_vec(),
            6,
            "not UTF-8",
        ),
        raw_case(
            "stdin 100k nested arrays",
            nested("[", "]", 100_000),
            6,
            "recursion limit",
        ),
        raw_case(
            "stdin 100k nested objects",
            nested("{\"a\":", "}", 100_000),
            6,
            "recursion limit",
        ),
        raw_case(
            "stdin duplicate top-level key",
            br#"{"cniVersion":"1.0.0","trafficClass":41,"trafficClass":0}"#.to_vec(),
            6,
            "duplicate key",
        ),
        raw_case(
            "stdin duplicate key in prevResult",
            br#"{"cniVersion":"1.0.0","prevResult":{"ips":[],"ips":[]}}"#.to_vec(),
            6,
            "duplicate key",
        ),
        raw_case("stdin empty", vec![], 6, "empty"),
        raw_case(
            "stdin trailing garbage",
            br#"{"cniVersion":"1.0.0"} x"#.to_vec(),
            6,
            "trailing characters",
        ),
        raw_case(
            "stdin with BOM",
            b"\xef\xbb\xbf{\"cniVersion\":\"1.0.0\"}".to_vec(),
            6,
            "not valid JSON",
        ),
        raw_case("stdin null", b"null".to_vec(), 7, "must be a JSON object"),
    ]);
    c
}

#[test]
fn hostile_inputs_get_their_code_and_change_nothing() {
    if !have_root("hostile_inputs_get_their_code_and_change_nothing") {
        return;
    }
    let pod = pod();
    let place = Place::new();
    let base = place.conf(&pod);
    // The base config works: it writes the class and records it, and DEL
    // gives it back. This also creates the state dir and its lock file, so
    // that any later change to them shows in the snapshot.
    let add = run(&place.node, "ADD", CID, &pod.path(), &base);
    assert_eq!(add.code(), 0, "base config fails: {}", add.stdout);
    assert_eq!(place.tree.tc(DEV), "tclass=41");
    assert_eq!(run(&place.node, "DEL", CID, &pod.path(), &base).code(), 0);
    assert_eq!(place.tree.tc(DEV), "tclass=106");
    pod.set_sysctl("net.ipv4.conf.all.rp_filter", "2");
    pod.set_sysctl("net.ipv4.conf.net1.rp_filter", "1");
    for k in ["arp_announce", "arp_filter", "arp_ignore", "accept_local"] {
        pod.set_sysctl(&format!("net.ipv4.conf.net1.{k}"), "0");
    }
    let sys_before = sysctls(&pod);
    let files_before = place.snapshot();
    let passwd = std::fs::read("/etc/passwd").unwrap();

    let cases = cases();
    assert!(cases.len() >= 60, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let mut env = cni_env(&place.node, case.command, CID, &pod.path());
        for (k, v) in &case.env {
            env.retain(|(n, _)| n != k);
            env.push((k, v.clone()));
        }
        let out = run_raw(BIN, &[], &env, stdin_of(case, &base));
        let mut why = Vec::new();
        if out.code() != case.code {
            why.push(format!(
                "code {} (status {:?}), expected {}: {} {}",
                out.code(),
                out.status,
                case.code,
                out.stdout.trim(),
                out.stderr.trim()
            ));
        }
        if case.code != 0 && out.status != Some(1) {
            why.push(format!("exit status {:?}", out.status));
        }
        if !out.msg().contains(case.needle) {
            why.push(format!("message {:?} lacks {:?}", out.msg(), case.needle));
        }
        if out.stderr.contains("panicked") {
            why.push(format!("panicked: {}", out.stderr));
        }
        if case.name == "stdin 16 MiB" && out.took > Duration::from_secs(2) {
            why.push(format!("took {:?} to refuse", out.took));
        }
        if sysctls(&pod) != sys_before {
            why.push("the pod's sysctls changed".into());
        }
        let after = place.snapshot();
        let changed: Vec<String> = diff(&files_before.0, &after.0)
            .into_iter()
            .chain(diff(&files_before.1, &after.1))
            .collect();
        if !changed.is_empty() {
            why.push(format!("files changed: {changed:?}"));
        }
        if !why.is_empty() {
            failures.push(format!("{}: {}", case.name, why.join("; ")));
        }
    }
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
    println!("{} hostile inputs, {} failed", cases.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One tampered-state-dir case: set the place up, run, then check.
struct Planted {
    name: &'static str,
    setup: fn(&Place),
    command: &'static str,
    code: u64,
    check: fn(&Place, &Out) -> Result<(), String>,
}

fn expect(ok: bool, what: impl Into<String>) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what.into())
    }
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn mkfifo(p: &Path) {
    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

fn private_state(p: &Place) {
    std::fs::create_dir_all(p.state.join("locks")).unwrap();
    std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// A well-formed entry for `cid` as roce-tune writes it (class 41 over 106).
fn entry_json(_p: &Place, cid: &str) -> String {
    json!({
        "version": 2, "network": "rail", "containerId": cid, "ifname": "net1",
        "netns": "/var/run/netns/none", "netnsId": {"dev": 4, "ino": 1},
        "exclusive": false, "device": DEV, "port": 1, "pci": PCI, "guid": null,
        "trafficClass": {"original": 106, "written": 41}, "rdmaCmTos": null,
        "createdNs": 1,
    })
    .to_string()
}

/// What DEL of a corrupt entry must do: succeed, say so, leave the class
/// roce-tune wrote (it cannot know what to restore) and move the entry aside.
fn corrupt_on_del(p: &Place, out: &Out) -> Result<(), String> {
    expect(
        out.stderr.contains("corrupt"),
        format!("stderr does not say corrupt: {}", out.stderr),
    )?;
    expect(
        p.tree.tc(DEV) == "tclass=41",
        format!("tc written: {:?}", p.tree.tc(DEV)),
    )?;
    expect(
        std::fs::symlink_metadata(p.entry(CID)).is_err(),
        "entry still in place",
    )?;
    expect(
        std::fs::symlink_metadata(p.state.join(format!("{CID}:net1.state.corrupt"))).is_ok(),
        "entry not moved to .corrupt",
    )
}

fn canary_intact(p: &Place) -> Result<(), String> {
    let names: Vec<String> = std::fs::read_dir(&p.canary)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    expect(
        names == ["precious"],
        format!("canary dir now holds {names:?}"),
    )?;
    expect(
        std::fs::read_to_string(p.canary.join("precious")).unwrap() == "do not touch\n",
        "canary file written",
    )
}

fn planted() -> Vec<Planted> {
    vec![
        Planted {
            name: "entry is a link to /etc/passwd (ADD)",
            setup: |p| {
                private_state(p);
                symlink(Path::new("/etc/passwd"), &p.entry(CID));
            },
            command: "ADD",
            code: 0,
            check: |p, _| {
                let m = std::fs::symlink_metadata(p.entry(CID)).unwrap();
                expect(m.file_type().is_file(), "entry is not a regular file")?;
                expect(m.mode() & 0o777 == 0o600, "entry is not 0600")?;
                let moved = p.state.join(format!("{CID}:net1.state.corrupt"));
                expect(
                    std::fs::read_link(moved).is_ok_and(|t| t == Path::new("/etc/passwd")),
                    "the link was not moved aside as it was",
                )
            },
        },
        Planted {
            name: "entry is a link to a valid entry in the canary dir (DEL)",
            setup: |p| {
                private_state(p);
                std::fs::write(p.canary.join("precious"), "do not touch\n").unwrap();
                std::fs::write(p.canary.join("entry"), entry_json(p, CID)).unwrap();
                symlink(&p.canary.join("entry"), &p.entry(CID));
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: |p, out| {
                corrupt_on_del(p, out)?;
                expect(
                    std::fs::read_to_string(p.canary.join("entry")).unwrap() == entry_json(p, CID),
                    "link target changed",
                )
            },
        },
        Planted {
            name: "locks/ is a link to the canary dir",
            setup: |p| {
                std::fs::create_dir_all(&p.state).unwrap();
                std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o700)).unwrap();
                symlink(&p.canary, &p.state.join("locks"));
            },
            command: "ADD",
            code: 5,
            check: |p, _| {
                canary_intact(p)?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        },
        Planted {
            name: "a lock file is a link to the canary file",
            setup: |p| {
                private_state(p);
                symlink(
                    &p.canary.join("precious"),
                    &p.state.join(format!("locks/{PCI}.1.lock")),
                );
            },
            command: "ADD",
            code: 5,
            check: |p, _| {
                canary_intact(p)?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        },
        Planted {
            name: "state dir is a link (ADD)",
            setup: |p| symlink(&p.canary, &p.state),
            command: "ADD",
            code: 5,
            check: |p, _| {
                canary_intact(p)?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        },
        Planted {
            name: "state dir is a link (DEL: succeeds, follows nothing)",
            setup: |p| symlink(&p.canary, &p.state),
            command: "DEL",
            code: 0,
            check: |p, out| {
                expect(
                    out.stderr.contains("symbolic link"),
                    format!("stderr does not say why: {}", out.stderr),
                )?;
                canary_intact(p)
            },
        },
        Planted {
            name: "state dir is world-writable (ADD)",
            setup: |p| {
                std::fs::create_dir_all(&p.state).unwrap();
                std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o777)).unwrap();
            },
            command: "ADD",
            code: 5,
            check: |p, _| {
                let n = std::fs::read_dir(&p.state).unwrap().count();
                expect(n == 0, format!("{n} files created in the refused dir"))?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        },
        Planted {
            name: "state dir is group-writable (DEL: succeeds, trusts nothing)",
            setup: |p| {
                private_state(p);
                std::fs::write(p.entry(CID), entry_json(p, CID)).unwrap();
                std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o770)).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: |p, _| {
                expect(
                    p.tree.tc(DEV) == "tclass=41",
                    "a planted entry in an open dir was trusted",
                )?;
                expect(
                    p.entry(CID).exists(),
                    "the entry was not kept for the repair",
                )
            },
        },
        Planted {
            name: "entry is a FIFO (DEL)",
            setup: |p| {
                private_state(p);
                mkfifo(&p.entry(CID));
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: corrupt_on_del,
        },
        Planted {
            name: "entry is a FIFO (ADD)",
            setup: |p| {
                private_state(p);
                mkfifo(&p.entry(CID));
            },
            command: "ADD",
            code: 0,
            check: |p, _| {
                expect(p.tree.tc(DEV) == "tclass=41", "class not written")?;
                expect(
                    std::fs::symlink_metadata(p.entry(CID)).is_ok_and(|m| m.is_file()),
                    "no real entry written",
                )
            },
        },
        Planted {
            name: "entry is garbage (DEL)",
            setup: |p| {
                private_state(p);
                std::fs::write(p.entry(CID), "{\"version\": 1, \"orig").unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: corrupt_on_del,
        },
        Planted {
            name: "entry is a directory (DEL)",
            setup: |p| {
                private_state(p);
                std::fs::create_dir(p.entry(CID)).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: corrupt_on_del,
        },
        Planted {
            name: "entry is 100 KB (DEL)",
            setup: |p| {
                private_state(p);
                let mut e = entry_json(p, CID);
                e.push_str(&" ".repeat(100 << 10));
                std::fs::write(p.entry(CID), e).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: corrupt_on_del,
        },
        Planted {
            name: "entry names another attachment (DEL)",
            setup: |p| {
                private_state(p);
                std::fs::write(p.entry(CID), entry_json(p, "other1")).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: corrupt_on_del,
        },
        Planted {
            name: "entry's device climbs (DEL)",
            setup: |p| {
                private_state(p);
                let e = entry_json(p, CID).replace(DEV, "../../../canary");
                std::fs::write(p.entry(CID), e).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: |p, out| {
                corrupt_on_del(p, out)?;
                canary_intact(p)
            },
        },
        Planted {
            name: "quarantine name is a link to the canary file (DEL)",
            setup: |p| {
                private_state(p);
                std::fs::write(p.entry(CID), "garbage").unwrap();
                symlink(
                    &p.canary.join("precious"),
                    &p.state.join(format!("{CID}:net1.state.corrupt")),
                );
                p.tree.set_tc(DEV, "tclass=41");
            },
            command: "DEL",
            code: 0,
            check: |p, out| {
                corrupt_on_del(p, out)?;
                canary_intact(p)
            },
        },
        Planted {
            name: "foreign files in the state dir (ADD, DEL)",
            setup: |p| {
                private_state(p);
                for f in [
                    "notes.txt",
                    "x.json",
                    ":net1.state",
                    "-a:net1.state",
                    "a:b:c.json",
                ] {
                    std::fs::write(p.state.join(f), "foreign").unwrap();
                }
                symlink(&p.canary.join("precious"), &p.state.join("zz:net1.state"));
            },
            command: "ADD",
            code: 0,
            check: |p, _| {
                let del = run_raw(
                    BIN,
                    &[],
                    &cni_env(&p.node, "DEL", CID, ""),
                    json!({"cniVersion": "1.0.0", "name": "rail", "type": "roce-tune"})
                        .to_string()
                        .into_bytes(),
                );
                expect(del.code() == 0, format!("DEL failed: {}", del.stdout))?;
                expect(p.tree.tc(DEV) == "tclass=106", "class not restored")?;
                for f in [
                    "notes.txt",
                    "x.json",
                    ":net1.state",
                    "-a:net1.state",
                    "a:b:c.json",
                ] {
                    expect(
                        std::fs::read_to_string(p.state.join(f)).is_ok_and(|s| s == "foreign"),
                        format!("{f} touched"),
                    )?;
                }
                canary_intact(p)
            },
        },
        Planted {
            name: "sysfs device name with a space",
            setup: |p| {
                let ib = p
                    .tree
                    .root
                    .join(format!("bus/pci/devices/{PCI}/infiniband"));
                std::fs::rename(ib.join(DEV), ib.join("mlx5 2")).unwrap();
            },
            command: "ADD",
            code: 100,
            check: |p, _| {
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")?;
                expect(
                    std::fs::read_dir(&p.state).map_or(true, |d| {
                        d.filter_map(Result::ok).all(|e| e.file_name() == "locks")
                    }),
                    "state written",
                )
            },
        },
        Planted {
            name: "logFile is a FIFO nobody reads",
            setup: |p| mkfifo(&p.canary.join("log")),
            command: "ADD",
            code: 0,
            check: |p, _| expect(p.tree.tc(DEV) == "tclass=41", "class not written"),
        },
    ]
}

#[test]
fn a_tampered_state_dir_is_never_followed() {
    if !have_root("a_tampered_state_dir_is_never_followed") {
        return;
    }
    let pod = pod();
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let cases = planted();
    let mut failures = Vec::new();
    for case in &cases {
        let place = Place::new();
        (case.setup)(&place);
        let conf = place.conf(&pod);
        if case.name.starts_with("logFile") {
            place.write_node(json!({"logFile": path_str(&place.canary.join("log"))}));
        }
        let out = run(&place.node, case.command, CID, &pod.path(), &conf);
        let mut why = Vec::new();
        if out.code() != case.code {
            why.push(format!(
                "code {} (status {:?}), expected {}: {} {}",
                out.code(),
                out.status,
                case.code,
                out.stdout.trim(),
                out.stderr.trim()
            ));
        }
        if out.stderr.contains("panicked") {
            why.push(format!("panicked: {}", out.stderr));
        }
        if let Err(e) = (case.check)(&place, &out) {
            why.push(e);
        }
        if !why.is_empty() {
            failures.push(format!("{}: {}", case.name, why.join("; ")));
        }
    }
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
    println!(
        "{} tampered state dirs, {} failed",
        cases.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The state dir is created 0700 (parents included), entries and lock files
/// 0600, whatever the runtime's umask; an entry's name is exactly
/// `<containerID>:<ifname>.json` and it holds what ADD recorded.
#[test]
fn state_dir_is_private_whatever_the_umask() {
    if !have_root("state_dir_is_private_whatever_the_umask") {
        return;
    }
    let pod = pod();
    let place = Place::new();
    let conf = place.conf(&pod);
    let state = place.base.join("deep/er/state");
    place.write_node(json!({"stateDir": path_str(&state)}));
    let cid = "0123abcdef_.-Z";
    // umask 000 makes any mode that is not explicit show as world-writable.
    let out = run_raw(
        "/bin/sh",
        &["-c", "umask 000; exec \"$0\"", BIN],
        &cni_env(&place.node, "ADD", cid, &pod.path()),
        conf.to_string().into_bytes(),
    );
    assert_eq!(out.code(), 0, "{} {}", out.stdout, out.stderr);
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    for d in [
        place.base.join("deep"),
        place.base.join("deep/er"),
        state.clone(),
        state.join("locks"),
    ] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    let entry = state.join(format!("{cid}:net1.state"));
    assert_eq!(mode(&entry), 0o600);
    assert_eq!(mode(&state.join(format!("locks/{PCI}.1.lock"))), 0o600);
    let names: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n != "locks")
        .collect();
    assert_eq!(names, [format!("{cid}:net1.state")], "only the entry");
    let e: Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    assert_eq!(e["containerId"], cid);
    assert_eq!(e["ifname"], "net1");
    assert_eq!(e["device"], DEV);
    assert_eq!(e["trafficClass"]["original"], 106);
    assert_eq!(e["trafficClass"]["written"], 41);
    assert_eq!(e["netns"], pod.path());
    let out = run(&place.node, "DEL", cid, &pod.path(), &conf);
    assert_eq!(out.code(), 0, "{}", out.stdout);
    assert_eq!(place.tree.tc(DEV), "tclass=106");
    assert!(!entry.exists());
}
