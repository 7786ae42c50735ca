//! Shared harness for the integration tests: they run the built binary as a
//! process, the way a runtime does (env vars, stdin, stdout), against a real
//! netns with a veth end moved in and renamed, and an RDMA sysfs test tree
//! (docs/design.md, "Test trees") in which the test plays the kernel.
#![allow(dead_code)]

pub mod cases;
pub mod kubelet;
pub mod need;
pub mod promtool;
pub mod rail;
pub mod topology;

pub(crate) use need::needs;
pub use rail::*;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_roce-tune");
/// The long-running binary: `agent`, `nri`, `gc --orphans --every`.
pub const AGENT_BIN: &str = env!("CARGO_BIN_EXE_roce-tune-agent");

/// The checkout: where the docs, the charts and integration/ are.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the checkout's Markdown `file` under the first heading that
/// starts with `heading` (`"## Module map"`), up to the next heading of its
/// level or above; a `#` line inside a code fence is no heading.
pub fn doc_section(file: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let level = heading.len() - heading.trim_start_matches('#').len();
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading));
    assert!(lines.next().is_some(), "{file} has no heading {heading:?}");
    let mut fenced = false;
    let mut section = Vec::new();
    for line in lines {
        fenced ^= line.starts_with("```");
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !fenced && (1..=level).contains(&hashes) && line[hashes..].starts_with(' ') {
            break;
        }
        section.push(line);
    }
    section.join("\n")
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A name unique to this test process and call.
pub fn unique(tag: &str) -> String {
    format!(
        "{tag}{}x{}",
        std::process::id() % 100_000,
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
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

    /// The inode number of the pod's nsfs file (`stat -L -c %i`): what names
    /// the pod's own sysfs in a test tree (`Tree::bind`).
    pub fn ino(&self) -> u64 {
        std::fs::metadata(self.path()).unwrap().ino()
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

    /// The values of the six rail sysctls of `ifname` (`rail_sysctls`'s
    /// order), read in one process: one `sysctl` each is slow across a
    /// hundred cases.
    pub fn rail_values(&self, ifname: &str) -> Vec<String> {
        let files: Vec<String> = rail_sysctls(ifname)
            .iter()
            .map(|(k, _)| format!("/proc/sys/{}", k.replace('.', "/")))
            .collect();
        sh(&format!(
            "ip netns exec {} cat {}",
            self.ns,
            files.join(" ")
        ))
        .lines()
        .map(str::to_owned)
        .collect()
    }

    /// Give each rail sysctl of `ifname` a value other than roce-tune's, so
    /// that any write shows (a new netns already has rp_filter 0).
    pub fn untune(&self, ifname: &str) {
        let want = rail_sysctls(ifname);
        let kv: Vec<String> = want
            .iter()
            .map(|(k, v)| format!("{k}={}", if *v == "0" { "1" } else { "0" }))
            .collect();
        sh(&format!(
            "ip netns exec {} sysctl -qw {}",
            self.ns,
            kv.join(" ")
        ));
        for ((k, ours), now) in want.iter().zip(self.rail_values(ifname)) {
            assert_ne!(*ours, now, "{k} still holds roce-tune's value");
        }
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

    /// The RDMA subsystem's netns mode, as `ib_core`'s `netns_mode`
    /// parameter prints it: `true` is exclusive (`N`: each device lives in
    /// one netns, a pod sees only its own), `false` shared (`Y`, the
    /// default of a new tree).
    pub fn set_exclusive(&self, exclusive: bool) {
        let mode = if exclusive { "N\n" } else { "Y\n" };
        std::fs::write(self.root.join("module/ib_core/parameters/netns_mode"), mode).unwrap();
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

    /// The sysfs the netns with nsfs inode `ino` sees (docs/design.md, "Test
    /// trees"): `<root>/netns/<ino>/`.
    pub fn netns_dir(&self, ino: u64) -> PathBuf {
        self.root.join(format!("netns/{ino}"))
    }

    /// Play the kernel: `ifname` in `pod`'s netns is the netdev of the PCI
    /// function `pci`, as the kernel's `class/net/<ifname>/device` link seen
    /// from a sysfs made in that netns says. Without it the pod's netdev is
    /// no PCI function's (a veth).
    pub fn bind(&self, pod: &Pod, ifname: &str, pci: &str) {
        let net = self.netns_dir(pod.ino()).join("class/net").join(ifname);
        std::fs::create_dir_all(&net).unwrap();
        let _ = std::fs::remove_file(net.join("device"));
        std::os::unix::fs::symlink(
            format!("../../../../../bus/pci/devices/{pci}"),
            net.join("device"),
        )
        .unwrap();
    }

    /// Play the rdma plugin in exclusive mode: `dev` (on the VF `pci`) moves
    /// into `pod`'s netns, so only the sysfs made there shows it; the host's
    /// `bus/pci/devices/<pci>/infiniband/` is left empty, as the kernel's is.
    pub fn move_into(&self, pod: &Pod, pci: &str, dev: &str) {
        self.move_device(&self.root, &self.netns_dir(pod.ino()), pci, dev);
    }

    /// Play the kernel's netns exit: the device comes back to the host.
    pub fn move_back(&self, ino: u64, pci: &str, dev: &str) {
        self.move_device(&self.netns_dir(ino), &self.root, pci, dev);
    }

    fn move_device(&self, from: &Path, to: &Path, pci: &str, dev: &str) {
        for rel in [
            format!("class/infiniband/{dev}"),
            format!("bus/pci/devices/{pci}/infiniband/{dev}"),
        ] {
            let dst = to.join(&rel);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::rename(from.join(&rel), &dst).unwrap();
        }
    }

    /// The traffic class file of `dev` as the netns `ino` sees it.
    pub fn tc_in(&self, ino: u64, dev: &str) -> String {
        let p = self
            .netns_dir(ino)
            .join(format!("class/infiniband/{dev}/tc/1/traffic_class"));
        std::fs::read_to_string(p).unwrap()
    }

    /// Remove the binding of `ifname` in `pod`'s netns (the netdev left it).
    pub fn unbind(&self, pod: &Pod, ifname: &str) {
        let _ = std::fs::remove_dir_all(self.netns_dir(pod.ino()).join("class/net").join(ifname));
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

/// What a state dir holds besides entries: the device locks (with their
/// owner index), the CNI request tally the agent reads, and the pods'
/// kubelet answers (`pods/`, each gone with its pod's last rail). None is
/// an attachment's state: "no state left" means nothing but these.
pub fn is_state_infrastructure(name: &str) -> bool {
    matches!(name, "locks" | "pods") || is_tally(name)
}

/// The tally's file, by the name the plugin gives it (`tally::path`).
fn is_tally(name: &str) -> bool {
    let tally = roce_tune::tally::path(std::path::Path::new(""));
    tally.file_name().is_some_and(|t| t == name)
}

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

/// How long a run may take before it counts as hung: longer than any run
/// needs (the longest GID wait of a test is 3 s).
pub const HANG: Duration = Duration::from_secs(30);

/// One process run as a runtime (or an operator) runs roce-tune: the program
/// chosen by the caller (`BIN`, or the fault-injection build), an environment
/// holding only PATH and what the caller sets (byte strings allowed: a
/// runtime can pass any bytes but NUL), stdin bytes, and a hang limit past
/// which the process is killed and the run reported as hung.
///
/// This is the tests' only way to start roce-tune and wait for it; the
/// repair loop test, which talks to a process while it runs, is the one
/// place that spawns it by hand.
#[derive(Debug, Clone)]
pub struct Exec {
    bin: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    stdin: Vec<u8>,
    hang: Duration,
}

impl Exec {
    /// `bin` with an empty stdin and no variable but PATH.
    pub fn new(bin: impl AsRef<Path>) -> Exec {
        Exec {
            bin: bin.as_ref().to_owned(),
            args: vec![],
            env: vec![("PATH".into(), "/usr/sbin:/usr/bin:/sbin:/bin".into())],
            stdin: vec![],
            hang: HANG,
        }
    }

    /// `bin` run as a plugin the way libcni runs one: all six CNI_*
    /// variables set, the empty ones included, and the test's node config.
    pub fn cni(
        bin: impl AsRef<Path>,
        node_config: &Path,
        command: &str,
        container_id: &str,
        netns: &str,
        ifname: &str,
    ) -> Exec {
        Exec::new(bin)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", container_id)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", ifname)
            .env("CNI_ARGS", "")
            .env("CNI_PATH", "/usr/lib/cni")
            .env("ROCE_TUNE_NODE_CONFIG", node_config)
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Exec {
        self.args.push(a.as_ref().to_owned());
        self
    }

    pub fn args<A: AsRef<OsStr>>(self, args: impl IntoIterator<Item = A>) -> Exec {
        args.into_iter().fold(self, Exec::arg)
    }

    /// Set `key` (replacing an earlier value).
    pub fn env(self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Exec {
        let mut e = self.env_remove(&key);
        e.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        e
    }

    /// Leave `key` out of the environment altogether.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Exec {
        self.env.retain(|(k, _)| k != key.as_ref());
        self
    }

    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Exec {
        self.stdin = bytes.into();
        self
    }

    /// Kill the run after `limit` instead of `HANG`.
    pub fn hang_after(mut self, limit: Duration) -> Exec {
        self.hang = limit;
        self
    }

    pub fn run(self) -> Run {
        let start = Instant::now();
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A binary a test has just copied (a renamed plugin) is briefly "busy":
        // a child another test thread forked meanwhile holds the copy's write
        // fd until it execs. That passes in microseconds; retry, do not fail.
        let mut busy = 0;
        let mut child = loop {
            match cmd.spawn() {
                Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && busy < 100 => {
                    busy += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                r => break r.unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display())),
            }
        };
        let pidfd = pidfd_open(&child);
        // A plugin stops reading stdin past its size limit (or never reads
        // it): the rest meets a closed pipe, which is expected. Up to
        // PIPE_BUF bytes fit in the pipe at once, so the usual config is
        // written here; a larger stdin gets a thread, as a write can block.
        let mut input = child.stdin.take().unwrap();
        let stdin = self.stdin;
        let writer = if stdin.len() <= nix::libc::PIPE_BUF {
            let _ = input.write_all(&stdin);
            drop(input); // EOF
            None
        } else {
            Some(std::thread::spawn(move || {
                let _ = input.write_all(&stdin);
            }))
        };
        // wait_with_output reads both pipes together (so a child filling one
        // never blocks on the other) and reaps the child.
        let waiter = std::thread::spawn(move || child.wait_with_output());
        let hung = !exits_within(&pidfd, self.hang);
        if hung {
            // SAFETY: a signal to the process the pidfd holds; once it is
            // reaped the call fails (ESRCH) instead of reaching a reused pid.
            unsafe {
                nix::libc::syscall(
                    nix::libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    nix::libc::SIGKILL,
                    std::ptr::null::<nix::libc::siginfo_t>(),
                    0,
                );
            }
        }
        let out = waiter.join().unwrap().expect("wait for the child");
        let elapsed = start.elapsed();
        if let Some(w) = writer {
            let _ = w.join();
        }
        let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if hung {
            stderr.push_str(&format!("\nHUNG: killed after {:?}", self.hang));
        }
        Run {
            status: out.status.code().unwrap_or(-1),
            signal: out.status.signal(),
            hung,
            elapsed,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        }
    }
}

/// A pidfd of `child`: it turns readable the moment the process exits, and
/// it names that process alone, never one that reuses its pid.
fn pidfd_open(child: &std::process::Child) -> OwnedFd {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, child.id(), 0) };
    assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    // SAFETY: fd was just returned to us and is owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// Whether the process of `pidfd` exits within `limit` (no polling delay).
fn exits_within(pidfd: &OwnedFd, limit: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => panic!("poll on a pidfd: {e}"),
        }
    }
}

/// What one run gave back.
#[derive(Debug)]
pub struct Run {
    /// The exit status; -1 when a signal ended the process (or it hung).
    pub status: i32,
    /// The signal that ended the process, if one did.
    pub signal: Option<i32>,
    /// It outlived its hang limit and was killed.
    pub hung: bool,
    pub elapsed: Duration,
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
    /// 0 for a success, else the code of the error object on stdout
    /// (u64::MAX when there is none: a crash, a hang, not JSON).
    pub fn outcome(&self) -> u64 {
        if self.status == 0 {
            return 0;
        }
        serde_json::from_str::<Value>(&self.stdout)
            .ok()
            .and_then(|v| v["code"].as_u64())
            .unwrap_or(u64::MAX)
    }
    pub fn msg(&self) -> String {
        serde_json::from_str::<Value>(&self.stdout)
            .ok()
            .and_then(|v| v["msg"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.status, 0,
            "plugin failed: stdout {} stderr {}",
            self.stdout, self.stderr
        );
        self
    }
    /// `ok` for tests that collect failures instead of stopping at the first.
    pub fn succeeded(&self, what: &str) -> Result<(), String> {
        if self.status == 0 {
            Ok(())
        } else {
            Err(format!(
                "{what} failed (status {}, signal {:?}{}): stdout {} stderr {}",
                self.status,
                self.signal,
                if self.hung { ", hung" } else { "" },
                self.stdout.trim(),
                self.stderr.trim()
            ))
        }
    }
}

/// `r`, echoed to stderr as a terminal shows the run of `command_line`
/// when INSPECT_SHOW is set (with `--nocapture`): the `inspect` outputs in
/// docs/ are pasted from such runs, so they are what the binary prints.
pub fn shown(command_line: &str, r: Run) -> Run {
    if std::env::var_os("INSPECT_SHOW").is_some() {
        eprintln!(
            "$ {command_line}\n{}{}[exit {}]\n",
            r.stdout, r.stderr, r.status
        );
    }
    r
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
    Exec::cni(
        BIN,
        &node_config(state),
        command,
        container_id,
        netns,
        ifname,
    )
    .stdin(stdin)
    .run()
}

/// `roce-tune gc --orphans` (of `bin`: the fault build has its own) on the
/// node of `state`, as the DaemonSet's repair container runs it.
pub fn gc_orphans_with(bin: impl AsRef<Path>, state: &StateDirPath) -> Run {
    Exec::new(bin)
        .args(["gc", "--orphans", "--node-config"])
        .arg(node_config(state))
        .run()
}

pub fn gc_orphans(state: &StateDirPath) -> Run {
    gc_orphans_with(BIN, state)
}

pub fn path_str(p: &Path) -> String {
    p.to_str().unwrap().to_string()
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

/// Every path under `root` (links not followed) with its mode and what it
/// holds: a file's bytes, a link's target; FIFOs and other special files are
/// never opened. Two snapshots differ if anything under `root` was created,
/// removed, written, re-linked or chmod-ed. A state dir's tally (every
/// request counts itself there) is left out.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
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
    out.retain(|p, _| {
        p.file_name()
            .is_none_or(|n| !n.to_str().is_some_and(is_tally))
    });
    out
}

/// What changed from snapshot `a` to `b`, one line per path.
pub fn snapshot_diff(a: &BTreeMap<PathBuf, String>, b: &BTreeMap<PathBuf, String>) -> Vec<String> {
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

/// Seconds since the epoch, as state entries record `created`.
pub fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The rail sysctls for `ifname` with the values roce-tune must set, in the
/// order of tests/data/rail-sysctls.txt, which states them once for these
/// tests and integration/lib.sh alike (and says why apart from the plugin's
/// own defaults).
pub fn rail_sysctls(ifname: &str) -> Vec<(String, &'static str)> {
    include_str!("../../data/rail-sysctls.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (key, value) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("rail-sysctls.txt: no value in {l:?}"));
            assert!(
                key.starts_with("net.ipv4.conf.") && !value.is_empty(),
                "rail-sysctls.txt: {l:?}"
            );
            (key.replace("IFNAME", ifname), value)
        })
        .collect()
}

/// SIGTERM to a long-running process of the test (the agent, the NRI
/// plugin), then its exit status and how long it took: the bound they
/// promise is a second, and 5 s fails the test with `what` said.
pub fn terminate(
    child: &mut std::process::Child,
    what: impl Fn() -> String,
) -> (std::process::ExitStatus, std::time::Duration) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let t = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, t.elapsed());
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "SIGTERM did not stop it within 5 s: {}",
            what()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
