//! Shared harness for the integration tests: they run the built binary as a
//! process, the way a runtime does (env vars, stdin, stdout), against a real
//! netns with a veth end moved in and renamed, and an RDMA sysfs test tree
//! (DESIGN 2.3) in which the test plays the kernel.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub const BIN: &str = env!("CARGO_BIN_EXE_roce-tune");

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A name unique to this test process and call.
pub fn unique(tag: &str) -> String {
    format!(
        "{tag}{}x{}",
        std::process::id() % 100_000,
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

/// Tests that need root and netns call this first. Without root they say so
/// on stderr and return false; under CI (ROCE_TUNE_REQUIRE_ROOT=1) a skip is
/// a failure, so CI cannot pass by skipping.
pub fn have_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { nix::libc::geteuid() } == 0;
    if !root {
        if std::env::var("ROCE_TUNE_REQUIRE_ROOT").is_ok_and(|v| v == "1") {
            panic!("{test}: needs root (netns, veth, sysctls) and ROCE_TUNE_REQUIRE_ROOT=1 forbids skipping");
        }
        eprintln!("SKIPPED {test}: needs root to create a netns and veth; run the tests as root");
    }
    root
}

pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A pod: a named netns holding one veth end renamed `ifname`, up, with `addr`.
pub struct Pod {
    pub ns: String,
    pub ifname: String,
}

impl Pod {
    pub fn new(ifname: &str, addr: Option<&str>) -> Pod {
        let ns = unique("rtp");
        sh(&format!("ip netns add {ns}"));
        let pod = Pod {
            ns,
            ifname: ifname.to_owned(),
        };
        pod.add_rail(ifname, addr);
        pod
    }

    /// Another veth end moved in as `ifname` (a second rail).
    pub fn add_rail(&self, ifname: &str, addr: Option<&str>) {
        let host = unique("rv");
        sh(&format!(
            "ip link add {host} type veth peer name {host}p && ip link set {host} netns {ns} && \
             ip -n {ns} link set {host} name {ifname} && ip -n {ns} link set {ifname} up",
            ns = self.ns
        ));
        if let Some(a) = addr {
            sh(&format!("ip -n {} addr add {a} dev {ifname}", self.ns));
        }
    }

    pub fn path(&self) -> String {
        format!("/var/run/netns/{}", self.ns)
    }

    pub fn sysctl(&self, key: &str) -> String {
        sh(&format!("ip netns exec {} sysctl -n {key}", self.ns))
    }

    pub fn set_sysctl(&self, key: &str, value: &str) {
        sh(&format!(
            "ip netns exec {} sysctl -qw {key}={value}",
            self.ns
        ));
    }

    /// Delete the netns now (its veth ends go with it).
    pub fn delete(&self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.delete();
    }
}

pub const ZERO_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

/// The v4-mapped GID of an IPv4 address, as sysfs prints it.
pub fn v4_gid(ip: &str) -> String {
    let o: Vec<u8> = ip.split('.').map(|p| p.parse().unwrap()).collect();
    format!(
        "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}",
        o[0], o[1], o[2], o[3]
    )
}

/// An RDMA sysfs test tree under a temp dir, removed on drop.
pub struct Tree {
    pub root: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let root = std::env::temp_dir().join(unique("rt-tree-"));
        std::fs::create_dir_all(root.join("module/ib_core/parameters")).unwrap();
        std::fs::write(root.join("module/ib_core/parameters/netns_mode"), "Y\n").unwrap();
        Tree { root }
    }

    /// A VF at `pci` with RDMA device `dev`: tc file holding `tc` (empty =
    /// unset), 8 unused GIDs and the link-local pair at 0/1.
    pub fn add_device(&self, pci: &str, dev: &str, tc: &str) {
        std::fs::create_dir_all(
            self.root
                .join(format!("bus/pci/devices/{pci}/infiniband/{dev}")),
        )
        .unwrap();
        let d = self.dev_dir(dev);
        std::fs::create_dir_all(d.join("tc/1")).unwrap();
        std::fs::create_dir_all(d.join("ports/1/gids")).unwrap();
        std::fs::create_dir_all(d.join("ports/1/gid_attrs/types")).unwrap();
        std::fs::create_dir_all(d.join("ports/1/gid_attrs/ndevs")).unwrap();
        std::fs::write(d.join("tc/1/traffic_class"), tc).unwrap();
        // Identity, as real sysfs has it: the link to the PCI function and
        // the node GUID (derived from the PCI address, so each differs).
        let _ = std::fs::remove_file(d.join("device"));
        std::os::unix::fs::symlink(format!("../../../bus/pci/devices/{pci}"), d.join("device"))
            .unwrap();
        let digits: String = pci.chars().filter(char::is_ascii_hexdigit).collect();
        let g = format!("{:0>16}", &digits[digits.len().saturating_sub(16)..]);
        std::fs::write(
            d.join("node_guid"),
            format!("{}:{}:{}:{}\n", &g[0..4], &g[4..8], &g[8..12], &g[12..16]),
        )
        .unwrap();
        for i in 0..8 {
            self.set_gid(dev, i, ZERO_GID, "");
        }
        self.set_gid(
            dev,
            0,
            "fe80:0000:0000:0000:8cca:d1ff:fed4:647d",
            "IB/RoCE v1",
        );
        self.set_gid(dev, 1, "fe80:0000:0000:0000:8cca:d1ff:fed4:647d", "RoCE v2");
    }

    pub fn dev_dir(&self, dev: &str) -> PathBuf {
        self.root.join(format!("class/infiniband/{dev}"))
    }

    /// Write a GID entry as the kernel would (type "" = unused entry).
    pub fn set_gid(&self, dev: &str, index: u32, gid: &str, typ: &str) {
        let d = self.dev_dir(dev);
        std::fs::write(d.join(format!("ports/1/gids/{index}")), format!("{gid}\n")).unwrap();
        let t = if typ.is_empty() {
            String::new()
        } else {
            format!("{typ}\n")
        };
        std::fs::write(d.join(format!("ports/1/gid_attrs/types/{index}")), t).unwrap();
    }

    /// The kernel's order for an IPv4 address added first: v1 at 2, v2 at 3.
    pub fn set_ipv4_gids(&self, dev: &str, ip: &str) {
        self.set_gid(dev, 2, &v4_gid(ip), "IB/RoCE v1");
        self.set_gid(dev, 3, &v4_gid(ip), "RoCE v2");
    }

    pub fn tc_path(&self, dev: &str) -> PathBuf {
        self.dev_dir(dev).join("tc/1/traffic_class")
    }

    pub fn tc(&self, dev: &str) -> String {
        std::fs::read_to_string(self.tc_path(dev)).unwrap()
    }

    pub fn set_tc(&self, dev: &str, content: &str) {
        std::fs::write(self.tc_path(dev), content).unwrap();
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Where tests keep state dirs and node configs: the plugin refuses a state
/// dir with a parent that group or others can write (so not /tmp), and a
/// node config not owned by root.
pub const TEST_BASE: &str = "/run/roce-tune-tests";

/// A private dir for one test under `TEST_BASE`, removed on drop.
pub fn private_dir(tag: &str) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let d = Path::new(TEST_BASE).join(unique(tag));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d)
        .unwrap();
    d
}

/// A state dir path under a private test dir (the state dir itself is not
/// created: roce-tune creates it), and the node config that names it.
pub struct StateDirPath(pub PathBuf);

impl StateDirPath {
    pub fn new() -> Self {
        StateDirPath(private_dir("rt-state-").join("state"))
    }

    /// The private dir holding the state dir and the node config.
    pub fn base(&self) -> &Path {
        self.0.parent().unwrap()
    }

    /// Entry files (`*.state`, and version 1 `*.json`) left in the state dir.
    pub fn entries(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(&self.0) else {
            return vec![];
        };
        let mut v: Vec<String> = rd
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".state") || n.ends_with(".json"))
            .collect();
        v.sort();
        v
    }
}

impl Drop for StateDirPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.base());
    }
}

/// The node config file of a test: root-owned, 0644, naming the test tree and
/// state dir (and whatever else a test adds). Passed to the plugin through
/// ROCE_TUNE_NODE_CONFIG, as `make demo` does.
pub fn write_node_config(state: &StateDirPath, tree: Option<&Tree>, extra: Value) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let mut node = json!({"stateDir": path_str(&state.0)});
    if let Some(t) = tree {
        node["sysfsRoot"] = json!(path_str(&t.root));
    }
    if let (Some(n), Some(e)) = (node.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            n.insert(k.clone(), v.clone());
        }
    }
    let path = state.base().join("node.json");
    std::fs::write(&path, node.to_string()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

/// The node config path of a test's state dir (written by `write_node_config`).
pub fn node_config(state: &StateDirPath) -> PathBuf {
    state.base().join("node.json")
}

/// A prevResult in `version` as sriov-cni gives it: one interface, its
/// addresses with `interface: 0` (and `version` for 0.x).
pub fn prev_result(version: &str, ifname: &str, sandbox: &str, addrs: &[&str]) -> Value {
    let old = version.starts_with("0.");
    let ips: Vec<Value> = addrs
        .iter()
        .map(|a| {
            let mut ip = json!({"address": a, "interface": 0});
            if old {
                ip["version"] = json!(if a.contains(':') { "6" } else { "4" });
            }
            ip
        })
        .collect();
    json!({
        "cniVersion": version,
        "interfaces": [{"name": ifname, "mac": "8e:ca:d1:d4:64:7d", "sandbox": sandbox}],
        "ips": ips,
        "dns": {}
    })
}

/// What one plugin run gave back.
#[derive(Debug)]
pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
    }
    /// The error code on stdout (panics if the run succeeded).
    pub fn code(&self) -> u64 {
        assert_ne!(
            self.status, 0,
            "expected a failure, got success: {}",
            self.stdout
        );
        self.json()["code"]
            .as_u64()
            .expect("error object has a code")
    }
    pub fn msg(&self) -> String {
        self.json()["msg"].as_str().unwrap_or_default().to_string()
    }
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.status, 0,
            "plugin failed: stdout {} stderr {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Run the plugin as a runtime would: CNI_* env (all six set, empty ones
/// included, as libcni does), config on stdin, the node config of `state`.
pub fn run_plugin(
    state: &StateDirPath,
    command: &str,
    container_id: &str,
    netns: &str,
    ifname: &str,
    stdin: &[u8],
) -> Run {
    let node = path_str(&node_config(state));
    run_plugin_env(
        &[
            ("CNI_COMMAND", command),
            ("CNI_CONTAINERID", container_id),
            ("CNI_NETNS", netns),
            ("CNI_IFNAME", ifname),
            ("CNI_ARGS", ""),
            ("CNI_PATH", "/usr/lib/cni"),
            ("ROCE_TUNE_NODE_CONFIG", &node),
        ],
        stdin,
    )
}

pub fn run_plugin_env(env: &[(&str, &str)], stdin: &[u8]) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn roce-tune");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

pub fn path_str(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

// Helpers of the RDMA tests (rdma_traffic_class, rdma_gid, rdma_lookup,
// exclusive_sysfs).

/// The config those tests start from: a rail on the VF `pci` of `tree`,
/// trafficClass `tc`, the default GID check, and a prevResult giving `addrs`
/// to `pod`'s net1. Tests change keys on the returned value. The node config
/// naming `tree` and `state` is written too.
pub fn rail_conf(
    tree: &Tree,
    state: &StateDirPath,
    pci: &str,
    pod: &Pod,
    tc: u8,
    addrs: &[&str],
) -> Value {
    write_node_config(state, Some(tree), json!({}));
    json!({
        "cniVersion": "1.1.0", "name": "rdma-vf", "type": "roce-tune",
        "trafficClass": tc, "deviceID": pci, "gidTimeoutMs": 800,
        "prevResult": prev_result("1.1.0", &pod.ifname, &pod.path(), addrs),
    })
}

/// Run `command` for `pod`'s rail under `container_id` with config `conf`,
/// on the node of `state`.
pub fn run_conf(
    state: &StateDirPath,
    command: &str,
    container_id: &str,
    pod: &Pod,
    conf: &Value,
) -> Run {
    run_plugin(
        state,
        command,
        container_id,
        &pod.path(),
        &pod.ifname,
        conf.to_string().as_bytes(),
    )
}

impl StateDirPath {
    /// An attachment's state entry as JSON, `None` when there is none.
    pub fn entry(&self, container_id: &str, ifname: &str) -> Option<Value> {
        let p = self.0.join(format!("{container_id}:{ifname}.state"));
        let text = std::fs::read_to_string(p).ok()?;
        Some(serde_json::from_str(&text).expect("state entry is JSON"))
    }

    /// Write an entry by hand, the way an ADD that died after recording it
    /// would have left it (dir 0700, file 0600); a version 1 entry under its
    /// 0.1.0 name.
    pub fn plant(&self, entry: &Value) {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.0.join("locks"))
            .unwrap();
        let name = format!(
            "{}:{}.{}",
            entry["containerId"].as_str().unwrap(),
            entry["ifname"].as_str().unwrap(),
            if entry["version"] == 1 {
                "json"
            } else {
                "state"
            }
        );
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(self.0.join(name))
            .unwrap();
        f.write_all(entry.to_string().as_bytes()).unwrap();
    }
}

/// Seconds since the epoch, as state entries record `created`.
pub fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The six rail sysctls of DESIGN 1.5 for `ifname`, with the values roce-tune
/// must set: stated here independently of the plugin's own defaults, so a
/// wrong default fails the tests instead of agreeing with them.
pub fn rail_sysctls(ifname: &str) -> Vec<(String, &'static str)> {
    vec![
        ("net.ipv4.conf.all.rp_filter".into(), "0"),
        (format!("net.ipv4.conf.{ifname}.arp_announce"), "2"),
        (format!("net.ipv4.conf.{ifname}.arp_filter"), "1"),
        (format!("net.ipv4.conf.{ifname}.arp_ignore"), "1"),
        (format!("net.ipv4.conf.{ifname}.rp_filter"), "0"),
        (format!("net.ipv4.conf.{ifname}.accept_local"), "1"),
    ]
}
