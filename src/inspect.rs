//! `roce-tune inspect`: the operator's proof that a rail is right, replacing
//! the hand-written check pod and the shell loop over /sys. Two views:
//!
//! - node (no netns): every RDMA device with its PCI function, PF, netdev,
//!   port state and traffic class;
//! - pod (`--netns`/`--pid`): each RDMA interface of the pod with its
//!   addresses, GID table, rail sysctls and traffic class, and a PASS/FAIL
//!   line per check with the reason and the fix.
//!
//! Collecting (sysfs, netlink, /proc/sys, on a thread inside the pod netns)
//! is kept apart from judging and formatting, which are pure functions of
//! the collected data so the verdicts are unit-tested without a pod.

use crate::cni::config::{SysctlSetting, DEFAULT_SYSCTLS, MAX_GID_INDEX};
use crate::cni::env::validate_ifname;
use crate::cni::CniError;
use crate::cni::CniResult;
use crate::netlink::{Link, Netlink};
use crate::netns::{Lookup, NetNs};
use crate::rdma::gid::{self, GidEntry};
use crate::rdma::traffic_class::{self, TrafficClass};
use crate::rdma::{device, is_safe_component, needs_pod_sysfs, NetnsMode, RdmaPort};
use crate::sysctl;
use crate::sysfs::View;
use ipnetwork::IpNetwork;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::net::{IpAddr, Ipv6Addr};
use std::path::{Path, PathBuf};

pub const HELP: &str = "\
roce-tune inspect [--netns PATH | --pid PID] [--ifname NAME] [--device DEV]
                  [--gid-index N] [--traffic-class N] [--port N]
                  [--sysfs-root DIR] [--json]

Without --netns/--pid: the node view. Every RDMA device under
<sysfs-root>/class/infiniband with its PCI function, the PF of a VF, its
netdev, the port state, and its traffic class (unset, the value, or n/a when
the driver has no traffic class file). \"-\" means the file is absent.

With --netns/--pid: the pod view. Each RDMA interface of the pod with its RDMA
device, addresses, GID table (read from inside the pod netns, as MLNX_OFED
hides other netns' GIDs), the rail sysctls against the recommended values and
the traffic class, then one PASS/FAIL line per check with the reason and fix.

Options:
  --netns PATH         the pod's network namespace (e.g. /var/run/netns/<id>)
  --pid PID            the netns of process PID (/proc/PID/ns/net); also lists
                       the pod's /dev/infiniband character devices
  --ifname NAME        pod view: check only this interface (default: every
                       interface whose parent device has an RDMA device)
  --device DEV         the RDMA device. Node view: show only DEV. Pod view:
                       use DEV for --ifname when the netdev reports no parent
                       device (a veth, a kernel before 5.14); without --ifname,
                       check only the interfaces whose device is DEV
  --gid-index N        pod view: the index that must hold the RoCE v2 GID of
                       the interface's address (NCCL_IB_GID_INDEX; default 3)
  --traffic-class N    check that each device's traffic class is N (0..255);
                       without it the class is shown, not checked
  --port N             port of the RDMA device (default 1)
  --sysfs-root DIR     sysfs to read (default /sys); another directory is a
                       test tree, read as is for both views, nothing mounted
  --json               one JSON object on stdout instead of the tables:
                       {view, mode, netns_mode, devices | interfaces,
                        checks: [{name, device, ifname, pass, reason, fix}], pass}
  -h, --help           this text

Checks: gid-index and sysctl (pod view), traffic-class (with --traffic-class),
rdma-device (when an interface or device cannot be found).

In exclusive RDMA netns mode (netns_mode N) on the real /sys, the pod view
mounts a private sysfs on a thread inside the pod netns to reach the device.

Exit codes: 0 every check passed (or there was nothing to check),
            1 at least one check failed,
            2 bad option, or an error that stopped the inspection.
";

const DEFAULT_GID_INDEX: u32 = 3;

/// The command line, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub netns: Option<PathBuf>,
    pub pid: Option<u32>,
    pub ifname: Option<String>,
    pub device: Option<String>,
    pub gid_index: u32,
    pub traffic_class: Option<u8>,
    pub port: u32,
    pub sysfs_root: PathBuf,
    pub json: bool,
}

impl Options {
    /// The pod netns to inspect, if any (`--pid` is the process's netns).
    pub fn netns_path(&self) -> Option<PathBuf> {
        self.netns
            .clone()
            .or_else(|| self.pid.map(|p| PathBuf::from(format!("/proc/{p}/ns/net"))))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Help,
    Run(Options),
}

pub fn parse_args(args: &[String]) -> Result<Parsed, String> {
    let mut netns = None;
    let mut pid = None;
    let mut ifname = None;
    let mut device = None;
    let mut gid_index = None;
    let mut traffic_class = None;
    let mut port = None;
    let mut sysfs_root = None;
    let mut json = false;

    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        match name {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--json" => {
                if inline.is_some() {
                    return Err("--json takes no value".into());
                }
                json = true;
                continue;
            }
            "--netns" | "--pid" | "--ifname" | "--device" | "--gid-index" | "--traffic-class"
            | "--port" | "--sysfs-root" => {}
            other if other.starts_with('-') => {
                return Err(format!("unknown option {other:?}"));
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
        // A following option is a forgotten value, not the value itself.
        let value = match inline {
            Some(v) => v,
            None => match it.next() {
                Some(v) if !v.starts_with("--") => v.clone(),
                _ => return Err(format!("{name} needs a value")),
            },
        };
        let once = |slot_set: bool| {
            if slot_set {
                Err(format!("{name} is given twice"))
            } else {
                Ok(())
            }
        };
        match name {
            "--netns" => {
                once(netns.is_some())?;
                if !value.starts_with('/') {
                    return Err(format!(
                        "--netns {value:?} must be an absolute path to a network namespace (e.g. /var/run/netns/<id>)"
                    ));
                }
                netns = Some(PathBuf::from(value));
            }
            "--pid" => {
                once(pid.is_some())?;
                match value.parse::<u32>() {
                    Ok(p) if p > 0 && value.bytes().all(|b| b.is_ascii_digit()) => pid = Some(p),
                    _ => return Err(format!("--pid {value:?} is not a process id")),
                }
            }
            "--ifname" => {
                once(ifname.is_some())?;
                validate_ifname(&value).map_err(|_| {
                    format!("--ifname {value:?} is not an interface name (1 to 15 printable characters, no '/', ':' or spaces)")
                })?;
                ifname = Some(value);
            }
            "--device" => {
                once(device.is_some())?;
                if !is_safe_component(&value) {
                    return Err(format!(
                        "--device {value:?} is not an RDMA device name (e.g. mlx5_2)"
                    ));
                }
                device = Some(value);
            }
            "--gid-index" => {
                once(gid_index.is_some())?;
                gid_index = Some(number(name, &value, 0, MAX_GID_INDEX as u64)? as u32);
            }
            "--traffic-class" => {
                once(traffic_class.is_some())?;
                traffic_class = Some(number(name, &value, 0, 255)? as u8);
            }
            "--port" => {
                once(port.is_some())?;
                port = Some(number(name, &value, 1, 255)? as u32);
            }
            "--sysfs-root" => {
                once(sysfs_root.is_some())?;
                if !value.starts_with('/') {
                    return Err(format!("--sysfs-root {value:?} must be an absolute path"));
                }
                sysfs_root = Some(PathBuf::from(value));
            }
            _ => unreachable!("every option with a value is matched above"),
        }
    }
    if netns.is_some() && pid.is_some() {
        return Err("give --netns or --pid, not both".into());
    }
    let pod = netns.is_some() || pid.is_some();
    if !pod {
        if ifname.is_some() {
            return Err("--ifname needs --netns or --pid: interfaces belong to a pod".into());
        }
        if gid_index.is_some() {
            return Err(
                "--gid-index needs --netns or --pid: the GID to expect comes from a pod's address"
                    .into(),
            );
        }
    }
    Ok(Parsed::Run(Options {
        netns,
        pid,
        ifname,
        device,
        gid_index: gid_index.unwrap_or(DEFAULT_GID_INDEX),
        traffic_class,
        port: port.unwrap_or(1),
        sysfs_root: sysfs_root.unwrap_or_else(|| PathBuf::from("/sys")),
        json,
    }))
}

fn number(name: &str, value: &str, min: u64, max: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) && value.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(format!(
            "{name} {value:?} is not a number from {min} to {max}"
        )),
    }
}

/// Entry point of `roce-tune inspect`; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let opts = match parse_args(args) {
        Ok(Parsed::Help) => {
            print!("{HELP}");
            return 0;
        }
        Ok(Parsed::Run(o)) => o,
        Err(msg) => {
            eprintln!("roce-tune inspect: {msg}\nSee `roce-tune inspect --help`.");
            return 2;
        }
    };
    let outcome = if !opts.sysfs_root.is_dir() {
        Err(format!(
            "sysfs root {} is not a directory",
            opts.sysfs_root.display()
        ))
    } else if opts.netns_path().is_some() {
        collect_pod(&opts).map(|pod| {
            let checks = pod_checks(&pod, &opts);
            let out = if opts.json {
                serde_json::to_string_pretty(&pod_json(&pod, &opts, &checks)).unwrap_or_default()
                    + "\n"
            } else {
                pod_text(&pod, &opts, &checks)
            };
            (out, checks)
        })
    } else {
        let node = collect_node(&opts);
        let checks = node_checks(&node, &opts);
        let out = if opts.json {
            serde_json::to_string_pretty(&node_json(&node, &checks)).unwrap_or_default() + "\n"
        } else {
            node_text(&node, &checks)
        };
        Ok((out, checks))
    };
    match outcome {
        Ok((out, checks)) => {
            print!("{out}");
            exit_code(&checks)
        }
        Err(msg) => {
            if opts.json {
                println!("{}", json!({ "error": msg }));
            }
            eprintln!("roce-tune inspect: {msg}");
            2
        }
    }
}

// ---------------------------------------------------------------------------
// Verdicts (pure)

/// One PASS/FAIL line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub device: Option<String>,
    pub ifname: Option<String>,
    pub pass: bool,
    pub reason: String,
    pub fix: Option<String>,
}

impl Check {
    fn pass(
        name: &'static str,
        device: Option<&str>,
        ifname: Option<&str>,
        reason: String,
    ) -> Check {
        Check {
            name,
            device: device.map(str::to_owned),
            ifname: ifname.map(str::to_owned),
            pass: true,
            reason,
            fix: None,
        }
    }

    fn fail(
        name: &'static str,
        device: Option<&str>,
        ifname: Option<&str>,
        reason: String,
        fix: String,
    ) -> Check {
        Check {
            pass: false,
            fix: Some(fix),
            ..Check::pass(name, device, ifname, reason)
        }
    }

    /// `PASS name: reason` or `FAIL name: reason: fix`, one line so that
    /// `grep FAIL` keeps the fix with its failure.
    pub fn line(&self) -> String {
        let verdict = if self.pass { "PASS" } else { "FAIL" };
        match &self.fix {
            Some(fix) if !self.pass => format!("{verdict} {}: {}: {fix}", self.name, self.reason),
            _ => format!("{verdict} {}: {}", self.name, self.reason),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "device": self.device,
            "ifname": self.ifname,
            "pass": self.pass,
            "reason": self.reason,
            "fix": self.fix,
        })
    }
}

pub fn exit_code(checks: &[Check]) -> i32 {
    i32::from(checks.iter().any(|c| !c.pass))
}

/// What the traffic class file showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcState {
    /// No `tc/<port>/traffic_class`: not an MLNX_OFED/DOCA driver.
    NoFile,
    Unreadable(String),
    Value(TrafficClass),
}

impl TcState {
    pub fn show(&self) -> String {
        match self {
            TcState::NoFile => "n/a".into(),
            TcState::Unreadable(_) => "unreadable".into(),
            TcState::Value(v) => traffic_class::describe(*v),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            TcState::NoFile => json!({"state": "n/a", "value": null}),
            TcState::Unreadable(e) => json!({"state": "unreadable", "value": null, "error": e}),
            TcState::Value(None) => json!({"state": "unset", "value": null}),
            TcState::Value(Some(n)) => json!({"state": "set", "value": n}),
        }
    }
}

pub fn tc_check(
    device: &str,
    port: u32,
    ifname: Option<&str>,
    state: &TcState,
    want: u8,
    path: &Path,
) -> Check {
    let fix = format!(
        "set trafficClass: {want} in roce-tune's config (written on ADD, restored on DEL), or by hand: echo tclass={want} > {}",
        path.display()
    );
    let dev = Some(device);
    match state {
        TcState::Value(Some(n)) if *n == want => Check::pass(
            "traffic-class",
            dev,
            ifname,
            format!("{device} port {port} is {n}"),
        ),
        TcState::Value(Some(0)) => Check::fail(
            "traffic-class",
            dev,
            ifname,
            format!("{device} is 0, expected {want} (class 0 falls to the lossy priority)"),
            fix,
        ),
        TcState::Value(Some(n)) => Check::fail(
            "traffic-class",
            dev,
            ifname,
            format!("{device} is {n}, expected {want}"),
            fix,
        ),
        TcState::Value(None) => Check::fail(
            "traffic-class",
            dev,
            ifname,
            format!("{device} is unset, expected {want} (the class each application asks for applies)"),
            fix,
        ),
        TcState::NoFile => Check::fail(
            "traffic-class",
            dev,
            ifname,
            format!("{device} has no traffic class file {}", path.display()),
            "the file comes with the MLNX_OFED/DOCA-OFED mlx5 driver; without it, set the class in the application (NCCL_IB_TC)".into(),
        ),
        TcState::Unreadable(e) => Check::fail(
            "traffic-class",
            dev,
            ifname,
            format!("{device}: {e}"),
            format!("read {} by hand to see what the driver shows", path.display()),
        ),
    }
}

/// One rail sysctl as read in the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlObs {
    pub key: String,
    pub value: Result<String, String>,
    pub recommended: String,
}

impl SysctlObs {
    pub fn ok(&self) -> bool {
        matches!(&self.value, Ok(v) if sysctl::same_value(v, &self.recommended))
    }
}

/// One PASS for the whole set, or one FAIL per key that is off: a failure
/// must name its key, a success need not list six.
pub fn sysctl_checks(ifname: &str, obs: &[SysctlObs], netns: &Path) -> Vec<Check> {
    let failed: Vec<Check> = obs
        .iter()
        .filter(|s| !s.ok())
        .map(|s| {
            let set = format!(
                "nsenter --net={} sysctl -w {}={}",
                netns.display(),
                s.key,
                s.recommended
            );
            match &s.value {
                Ok(v) => Check::fail(
                    "sysctl",
                    None,
                    Some(ifname),
                    format!("{} is {v}, recommended {}", s.key, s.recommended),
                    format!("{set} (roce-tune's default sysctl config sets it on ADD)"),
                ),
                Err(e) => Check::fail(
                    "sysctl",
                    None,
                    Some(ifname),
                    format!("{} cannot be read in the pod: {e}", s.key),
                    "check that the interface exists in the pod netns".into(),
                ),
            }
        })
        .collect();
    if failed.is_empty() {
        vec![Check::pass(
            "sysctl",
            None,
            Some(ifname),
            format!(
                "the {} rail sysctls of {ifname} hold the recommended values",
                obs.len()
            ),
        )]
    } else {
        failed
    }
}

/// The GID the kernel derives from one address (sysfs form of the key).
pub fn gid_of(ip: &IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => *v6,
    }
}

fn is_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
}

/// The address whose RoCE v2 GID NCCL must find at the index: what ADD
/// checks against prevResult, which never holds the kernel's link-local
/// address, so that one is left out here too.
pub fn checked_address(addrs: &[(IpAddr, u8)]) -> Option<(Ipv6Addr, IpAddr)> {
    let nets: Vec<IpNetwork> = addrs
        .iter()
        .filter(|(ip, _)| !is_link_local(ip))
        .filter_map(|(ip, p)| IpNetwork::new(*ip, *p).ok())
        .collect();
    gid::expected_gid(&nets)
}

/// Where the RoCE v2 GID `want` sits in a table read earlier.
pub fn locate_in(gids: &[(u32, GidEntry)], want: &Ipv6Addr) -> Option<u32> {
    gids.iter()
        .find(|(_, e)| e.is_roce_v2_of(want))
        .map(|(i, _)| *i)
}

pub fn gid_check(
    device: &str,
    ifname: &str,
    addrs: &[(IpAddr, u8)],
    gids: &[(u32, GidEntry)],
    index: u32,
) -> Check {
    let dev = Some(device);
    let ifn = Some(ifname);
    let Some((want, addr)) = checked_address(addrs) else {
        return Check::fail(
            "gid-index",
            dev,
            ifn,
            format!(
                "{ifname} has no IPv4 or global IPv6 address, so it has no RoCE v2 GID to check"
            ),
            "check that the network's IPAM gave the interface an address".into(),
        );
    };
    let Some((_, found)) = gids.iter().find(|(i, _)| *i == index) else {
        let reason = match gids.last() {
            Some((last, _)) => {
                format!("index {index} is not in the GID table of {device} (indexes 0 to {last})")
            }
            None => format!("the GID table of {device} is empty or unreadable"),
        };
        return Check::fail(
            "gid-index",
            dev,
            ifn,
            reason,
            "check the device and --port; in exclusive mode the table is only visible from the pod"
                .into(),
        );
    };
    if found.is_roce_v2_of(&want) {
        return Check::pass(
            "gid-index",
            dev,
            ifn,
            format!("GID index {index} of {device} is the RoCE v2 GID of {addr}"),
        );
    }
    let held = if found.gid == Some(want) {
        format!(
            "holds the GID of {addr} with type {}, not RoCE v2",
            found.gid_type.as_deref().unwrap_or("unknown")
        )
    } else {
        format!("holds {}", found.describe())
    };
    let mut reason = format!("index {index} of {device} {held}");
    let fix = match locate_in(gids, &want) {
        Some(at) => {
            reason.push_str(&format!("; the RoCE v2 GID of {addr} is at index {at}"));
            format!(
                "set NCCL_IB_GID_INDEX={at} (and gidIndex: {at} in roce-tune's config), or give the pod its IPv4 address first so it takes index {index}"
            )
        }
        None => {
            reason.push_str(&format!(
                "; the RoCE v2 GID of {addr} ({}) is at no index",
                gid::format_gid(&want)
            ));
            format!(
                "check that {addr} is on {ifname} and RoCE is enabled on the VF; the kernel adds GIDs shortly after the address, so run again"
            )
        }
    };
    Check::fail("gid-index", dev, ifn, reason, fix)
}

// ---------------------------------------------------------------------------
// Node view

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDevice {
    pub name: String,
    pub pci: Option<String>,
    pub pf: Option<String>,
    pub netdevs: Vec<String>,
    pub port: u32,
    pub port_state: Option<String>,
    pub tc: TcState,
    pub tc_path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    pub sysfs_root: PathBuf,
    pub mode: NetnsMode,
    pub devices: Vec<NodeDevice>,
    /// `--device` named a device that is not there.
    pub missing: Option<String>,
    /// Idle VFs holding a class (`crate::idle`).
    pub idle: Vec<crate::idle::Idle>,
}

/// A short attribute (a port state, a netdev name): only what is printable
/// and short is shown, never whatever a file holds.
fn read_short(view: &View, rel: &Path) -> Option<String> {
    view.read_trimmed(rel)
        .filter(|s| s.len() <= 64 && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
}

fn link_basename(view: &View, rel: &Path) -> Option<String> {
    let name = view.link_name(rel).ok()?;
    is_safe_component(&name).then_some(name)
}

fn dir_names(view: &View, rel: &Path) -> Vec<String> {
    sorted_names(view.list(rel).unwrap_or_default())
}

fn sorted_names(names: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = names.into_iter().filter(|n| is_safe_component(n)).collect();
    v.sort_by(|a, b| natural_cmp(a, b));
    v
}

/// mlx5_2 before mlx5_10: device names are compared by their digit runs.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(cb.iter()) {
        let o = match (x, y) {
            ((true, p), (true, q)) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                p.len().cmp(&q.len()).then(p.cmp(q))
            }
            ((_, p), (_, q)) => p.cmp(q),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then(a.cmp(b))
}

/// The PCI function of an RDMA device: the `device` link of its class entry
/// (real sysfs), else the PCI device whose `infiniband/` holds it (the only
/// link a test tree has). `pci_dirs` is the list of PCI devices, read once.
fn pci_of(view: &View, dev: &str, pci_dirs: &mut Option<Vec<String>>) -> Option<String> {
    if let Some(name) = link_basename(
        view,
        &Path::new("class/infiniband").join(dev).join("device"),
    ) {
        return Some(name);
    }
    let devices = Path::new("bus/pci/devices");
    let all = pci_dirs.get_or_insert_with(|| dir_names(view, devices));
    all.iter()
        .find(|pci| view.exists(&devices.join(pci).join("infiniband").join(dev)))
        .cloned()
}

fn read_tc(view: &View, port: &RdmaPort) -> TcState {
    if !view.exists(&port.traffic_class_path()) {
        return TcState::NoFile;
    }
    match traffic_class::read(view, port) {
        Ok(v) => TcState::Value(v),
        Err(e) => TcState::Unreadable(e.msg),
    }
}

fn port_state(view: &View, port: &RdmaPort) -> Option<String> {
    read_short(
        view,
        &Path::new("class/infiniband")
            .join(&port.device)
            .join(format!("ports/{}/state", port.port)),
    )
}

fn rdma_devices(view: &View) -> Vec<String> {
    dir_names(view, Path::new("class/infiniband"))
}

fn plain_port(device: &str, port: u32) -> RdmaPort {
    RdmaPort {
        device: device.to_owned(),
        port,
        pci: None,
        guid: None,
    }
}

pub fn collect_node(opts: &Options) -> NodeReport {
    let root = &opts.sysfs_root;
    let view = match View::open(root) {
        Ok(v) => v,
        Err(_) => {
            return NodeReport {
                sysfs_root: root.clone(),
                mode: NetnsMode::Shared,
                devices: Vec::new(),
                missing: opts.device.clone(),
                idle: Vec::new(),
            }
        }
    };
    let mut names = rdma_devices(&view);
    let mut missing = None;
    if let Some(want) = &opts.device {
        names.retain(|n| n == want);
        if names.is_empty() {
            missing = Some(want.clone());
        }
    }
    let mut pci_dirs = None;
    let devices = names
        .into_iter()
        .map(|name| {
            let port = plain_port(&name, opts.port);
            let pci = pci_of(&view, &name, &mut pci_dirs);
            let pci_dir = pci.as_ref().map(|p| Path::new("bus/pci/devices").join(p));
            let pf = pci_dir
                .as_ref()
                .and_then(|d| link_basename(&view, &d.join("physfn")));
            let mut netdevs = pci_dir
                .as_ref()
                .map(|d| dir_names(&view, &d.join("net")))
                .unwrap_or_default();
            if netdevs.is_empty() {
                netdevs.extend(
                    read_short(&view, &port.gid_ndev_path(0)).filter(|n| is_safe_component(n)),
                );
            }
            NodeDevice {
                pci,
                pf,
                netdevs,
                port: opts.port,
                port_state: port_state(&view, &port),
                tc: read_tc(&view, &port),
                tc_path: PathBuf::from(view.show(&port.traffic_class_path())),
                name,
            }
        })
        .collect();
    NodeReport {
        sysfs_root: root.clone(),
        mode: NetnsMode::read(&view),
        devices,
        missing,
        idle: crate::idle::find(
            &view,
            &crate::node::NodeConfig::load()
                .map(|n| crate::idle::node_entries(&n))
                .unwrap_or_default(),
        ),
    }
}

pub fn node_checks(node: &NodeReport, opts: &Options) -> Vec<Check> {
    let mut checks = Vec::new();
    if let Some(dev) = &node.missing {
        let mut reason = format!(
            "{dev} is not under {}",
            node.sysfs_root.join("class/infiniband").display()
        );
        if node.mode == NetnsMode::Exclusive {
            reason.push_str(
                " (exclusive mode: a device moved into a pod is visible only from that pod)",
            );
        }
        checks.push(Check::fail(
            "rdma-device",
            Some(dev),
            None,
            reason,
            "list the node's devices with `roce-tune inspect`, or inspect the pod with --netns/--pid".into(),
        ));
    } else if node.devices.is_empty() && opts.traffic_class.is_some() {
        checks.push(Check::fail(
            "rdma-device",
            None,
            None,
            format!(
                "no RDMA device under {}",
                node.sysfs_root.join("class/infiniband").display()
            ),
            "check that the mlx5 driver is loaded".into(),
        ));
    }
    if let Some(want) = opts.traffic_class {
        for d in &node.devices {
            checks.push(tc_check(&d.name, d.port, None, &d.tc, want, &d.tc_path));
        }
    }
    for i in &node.idle {
        checks.push(Check::fail(
            "idle-vf",
            Some(&i.port.device),
            None,
            format!(
                "VF {} (netdev {} on the host, no pod uses it) holds traffic class {} on port {}: likely {}",
                i.pci, i.netdev, i.class, i.port.port, i.likely_writer()
            ),
            "roce-tune reset-idle (see --dry-run first); keep rdmaQoS out of the rdma CNI's config".into(),
        ));
    }
    checks
}

fn dash(v: Option<&str>) -> String {
    v.unwrap_or("-").to_string()
}

fn mode_line(mode: NetnsMode) -> String {
    format!(
        "RDMA netns mode: {} (Y = shared, N = exclusive)",
        mode.letter()
    )
}

fn mode_word(mode: NetnsMode) -> &'static str {
    match mode {
        NetnsMode::Shared => "shared",
        NetnsMode::Exclusive => "exclusive",
    }
}

fn is_test_tree(root: &Path) -> bool {
    root != Path::new("/sys")
}

pub fn node_text(node: &NodeReport, checks: &[Check]) -> String {
    let mut out = String::new();
    out.push_str(&mode_line(node.mode));
    out.push('\n');
    out.push_str(&format!("sysfs: {}", node.sysfs_root.display()));
    if is_test_tree(&node.sysfs_root) {
        out.push_str(" (a test tree)");
    } else if node.mode == NetnsMode::Exclusive {
        out.push_str(" (exclusive mode: devices moved into pods are not listed)");
    }
    out.push('\n');
    out.push_str(&format!("RDMA devices: {}\n", node.devices.len()));
    if !node.devices.is_empty() {
        let rows: Vec<Vec<String>> = node
            .devices
            .iter()
            .map(|d| {
                vec![
                    d.name.clone(),
                    dash(d.pci.as_deref()),
                    dash(d.pf.as_deref()),
                    if d.netdevs.is_empty() {
                        "-".into()
                    } else {
                        d.netdevs.join(",")
                    },
                    d.port.to_string(),
                    dash(d.port_state.as_deref()),
                    d.tc.show(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            "",
            &[
                "DEVICE",
                "PCI",
                "PF",
                "NETDEV",
                "PORT",
                "STATE",
                "TRAFFIC CLASS",
            ],
            &rows,
        ));
    }
    out.push('\n');
    if checks.is_empty() {
        out.push_str("No checks: give --traffic-class N to check each device's class, or --netns PATH / --pid PID for a pod's rails.\n");
    } else {
        out.push_str(&checks_text(checks));
    }
    out
}

pub fn node_json(node: &NodeReport, checks: &[Check]) -> Value {
    let devices: Vec<Value> = node
        .devices
        .iter()
        .map(|d| {
            json!({
                "device": d.name,
                "pci": d.pci,
                "pf": d.pf,
                "netdevs": d.netdevs,
                "port": d.port,
                "port_state": d.port_state,
                "traffic_class": d.tc.to_json(),
            })
        })
        .collect();
    json!({
        "view": "node",
        "mode": mode_word(node.mode),
        "netns_mode": node.mode.letter().to_string(),
        "sysfs_root": node.sysfs_root,
        "devices": devices,
        "checks": checks.iter().map(Check::to_json).collect::<Vec<_>>(),
        "pass": exit_code(checks) == 0,
    })
}

// ---------------------------------------------------------------------------
// Pod view

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSource {
    /// netlink's parent device (`bus/dev`) led to it.
    Parent(String),
    /// `--device`.
    Forced,
}

/// The interface's RDMA device and how it was found, or why none was.
pub type DeviceLookup = Result<(String, DeviceSource), String>;

/// One rail interface of the pod, as read from inside its netns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub ifname: String,
    pub device: DeviceLookup,
    pub port: u32,
    pub port_state: Option<String>,
    pub addrs: Vec<(IpAddr, u8)>,
    /// The whole table, unused entries included.
    pub gids: Vec<(u32, GidEntry)>,
    pub tc: TcState,
    pub tc_path: PathBuf,
    pub sysctls: Vec<SysctlObs>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysfsView {
    /// A test tree: both the host and the pod view, nothing mounted.
    TestTree,
    /// Shared mode: the host's /sys, GIDs read by a thread in the pod netns.
    Host,
    /// Exclusive mode: a sysfs mounted by a thread inside the pod netns.
    PodMount,
}

impl SysfsView {
    fn describe(self) -> &'static str {
        match self {
            SysfsView::TestTree => "a test tree: both views, nothing mounted",
            SysfsView::Host => "the host's /sys, read from a thread inside the pod netns",
            SysfsView::PodMount => "a private sysfs mounted inside the pod netns",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodReport {
    pub netns: PathBuf,
    pub pid: Option<u32>,
    pub sysfs_root: PathBuf,
    pub mode: NetnsMode,
    pub view: SysfsView,
    pub visible_devices: Vec<String>,
    /// `/dev/infiniband` of the pod (`--pid` only; `None` when unreadable).
    pub char_devices: Option<Vec<String>>,
    pub interfaces: Vec<Iface>,
    /// Interfaces that are not rails, with why (or a missing `--ifname`).
    pub not_rails: Vec<(String, String)>,
}

fn collect_pod(opts: &Options) -> Result<PodReport, String> {
    let path = opts.netns_path().expect("pod view has a netns");
    let ns = match NetNs::lookup(&path) {
        Ok(Lookup::Netns(ns)) => ns,
        Ok(Lookup::Missing) => {
            return Err(match opts.pid {
                Some(p) => format!("no process {p} ({} does not exist)", path.display()),
                None => format!("netns {} does not exist", path.display()),
            })
        }
        Ok(Lookup::NotNetns) => {
            return Err(format!("{} is not a network namespace", path.display()))
        }
        Err(e) => return Err(e.msg),
    };
    let root = &opts.sysfs_root;
    let host = View::open(root).map_err(|e| format!("sysfs root {}: {e}", root.display()))?;
    let mode = NetnsMode::read(&host);
    let mount = needs_pod_sysfs(&host);
    let view = if is_test_tree(root) {
        SysfsView::TestTree
    } else if mount {
        SysfsView::PodMount
    } else {
        SysfsView::Host
    };
    let (interfaces, not_rails, visible_devices) = ns
        .run(|| {
            let view = if mount {
                View::fresh_sysfs("<pod sysfs>")
                    .map_err(|e| CniError::io("make the pod's sysfs", e))?
            } else {
                host.try_clone().map_err(|e| CniError::io("sysfs", e))?
            };
            collect_in_pod(opts, &view)
        })
        .map_err(|e| format!("inside netns {}: {}", path.display(), e.msg))?;
    let char_devices = opts.pid.and_then(|p| {
        let dir = PathBuf::from(format!("/proc/{p}/root/dev/infiniband"));
        std::fs::read_dir(&dir).ok().map(|rd| {
            sorted_names(
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect(),
            )
        })
    });
    Ok(PodReport {
        netns: path,
        pid: opts.pid,
        sysfs_root: root.clone(),
        mode,
        view,
        visible_devices,
        char_devices,
        interfaces,
        not_rails,
    })
}

type InPod = (Vec<Iface>, Vec<(String, String)>, Vec<String>);

/// Runs on the thread inside the pod netns: netlink, /proc/sys/net and the
/// GID files all answer for the netns of the reading thread.
fn collect_in_pod(opts: &Options, view: &View) -> CniResult<InPod> {
    let mut nl = Netlink::open()?;
    let mut not_rails = Vec::new();
    let mut rails: Vec<(Link, DeviceLookup)> = Vec::new();
    match &opts.ifname {
        Some(name) => match nl.link_by_name(name)? {
            Some(link) => {
                let dev = match &opts.device {
                    Some(d) if view.exists(&Path::new("class/infiniband").join(d)) => {
                        Ok((d.clone(), DeviceSource::Forced))
                    }
                    Some(d) => Err(format!(
                        "RDMA device {d} (--device) is not under {}",
                        view.show(Path::new("class/infiniband"))
                    )),
                    None => by_parent(view, &link),
                };
                rails.push((link, dev));
            }
            None => not_rails.push((
                name.clone(),
                format!("there is no interface {name} in the pod"),
            )),
        },
        None => {
            for link in nl.links()? {
                if link.name == "lo" {
                    continue;
                }
                match by_parent(view, &link) {
                    Ok((dev, _)) if opts.device.as_ref().is_some_and(|want| *want != dev) => {
                        not_rails.push((link.name.clone(), format!("its RDMA device is {dev}")));
                    }
                    Ok(found) => rails.push((link, Ok(found))),
                    Err(why) => not_rails.push((link.name.clone(), why)),
                }
            }
        }
    }
    let settings: Vec<SysctlSetting> = DEFAULT_SYSCTLS
        .iter()
        .map(|(k, v)| SysctlSetting {
            key: k.to_string(),
            value: v.to_string(),
        })
        .collect();
    let mut interfaces = Vec::new();
    for (link, device) in rails {
        let addrs = nl.addresses(link.index)?;
        let sysctls = sysctl::resolve(&settings, &link.name)
            .into_iter()
            .map(|s| SysctlObs {
                value: sysctl::read(&s).map_err(|e| e.msg),
                recommended: s.value.clone(),
                key: s.key,
            })
            .collect();
        let port = match &device {
            Ok((dev, _)) => Some(plain_port(dev, opts.port)),
            Err(_) => None,
        };
        interfaces.push(Iface {
            ifname: link.name.clone(),
            port: opts.port,
            port_state: port.as_ref().and_then(|p| port_state(view, p)),
            gids: port
                .as_ref()
                .map(|p| gid::table(view, p))
                .unwrap_or_default(),
            tc: port.as_ref().map_or(TcState::NoFile, |p| read_tc(view, p)),
            tc_path: port
                .as_ref()
                .map(|p| PathBuf::from(view.show(&p.traffic_class_path())))
                .unwrap_or_default(),
            addrs,
            sysctls,
            device,
        });
    }
    Ok((interfaces, not_rails, rdma_devices(view)))
}

fn by_parent(view: &View, link: &Link) -> DeviceLookup {
    // device::by_link's own message for this case points at the CNI config
    // (deviceID); here the operator's lever is --device.
    if link.parent_dev.is_none() || link.parent_bus.is_none() {
        return Err(
            "netlink reports no parent device (a veth, or a kernel before 5.14): give --device DEV"
                .into(),
        );
    }
    device::by_link(view, link)
        .map(|f| {
            (
                f.device,
                DeviceSource::Parent(format!("{} {}", f.bus, f.parent)),
            )
        })
        .map_err(|e| e.msg)
}

pub fn pod_checks(pod: &PodReport, opts: &Options) -> Vec<Check> {
    let mut checks = Vec::new();
    if pod.interfaces.is_empty() {
        let why = if pod.not_rails.is_empty() {
            "the pod has no interface but lo".to_string()
        } else {
            pod.not_rails
                .iter()
                .map(|(n, w)| format!("{n}: {w}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        checks.push(Check::fail(
            "rdma-device",
            opts.device.as_deref(),
            opts.ifname.as_deref(),
            format!("no RDMA interface in the pod ({why})"),
            "give --ifname NAME, and --device DEV when the interface reports no parent device"
                .into(),
        ));
    }
    for i in &pod.interfaces {
        match &i.device {
            Ok((dev, _)) => {
                checks.push(gid_check(dev, &i.ifname, &i.addrs, &i.gids, opts.gid_index));
                if let Some(want) = opts.traffic_class {
                    checks.push(tc_check(dev, i.port, Some(&i.ifname), &i.tc, want, &i.tc_path));
                }
            }
            Err(why) => checks.push(Check::fail(
                "rdma-device",
                None,
                Some(&i.ifname),
                why.clone(),
                "give --device DEV (the VF's RDMA device); check that the VF is bound to mlx5_core, and in exclusive mode that the rdma plugin ran".into(),
            )),
        }
        checks.extend(sysctl_checks(&i.ifname, &i.sysctls, &pod.netns));
    }
    checks
}

/// Used entries and the checked index: a real port has 255 slots, mostly
/// empty, and an empty checked index is the news.
fn shown_gids(gids: &[(u32, GidEntry)], index: u32) -> Vec<&(u32, GidEntry)> {
    gids.iter()
        .filter(|(i, e)| !e.is_unused() || *i == index)
        .collect()
}

fn gid_text(e: &GidEntry) -> String {
    e.gid
        .as_ref()
        .map_or("unreadable".to_string(), gid::format_gid)
}

fn show_list(names: &[String], max: usize) -> String {
    if names.is_empty() {
        return "-".into();
    }
    let mut s = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    if names.len() > max {
        s.push_str(&format!(" ... ({} more)", names.len() - max));
    }
    s
}

pub fn pod_text(pod: &PodReport, opts: &Options, checks: &[Check]) -> String {
    let mut out = String::new();
    out.push_str(&mode_line(pod.mode));
    out.push('\n');
    out.push_str(&format!(
        "sysfs: {} ({})\n",
        pod.sysfs_root.display(),
        pod.view.describe()
    ));
    out.push_str(&format!("Pod netns: {}\n", pod.netns.display()));
    out.push_str(&format!(
        "RDMA devices visible in the pod: {} ({})\n",
        pod.visible_devices.len(),
        show_list(&pod.visible_devices, 8)
    ));
    if pod.pid.is_some() {
        out.push_str(&format!(
            "Character devices: {}\n",
            pod.char_devices
                .as_deref()
                .map_or("- (no /dev/infiniband in the pod)".to_string(), |c| {
                    show_list(c, 16)
                })
        ));
    }
    for (name, why) in &pod.not_rails {
        out.push_str(&format!("Not a rail: {name}: {why}\n"));
    }
    let checked_gid = |i: &Iface| checked_address(&i.addrs).map(|(g, _)| g);
    for i in &pod.interfaces {
        out.push('\n');
        let ips: Vec<String> = i
            .addrs
            .iter()
            .filter(|(ip, _)| !is_link_local(ip))
            .map(|(ip, _)| ip.to_string())
            .collect();
        let device = match &i.device {
            Ok((d, DeviceSource::Forced)) => format!("{d} (from --device)"),
            Ok((d, DeviceSource::Parent(p))) => format!("{d} (parent {p})"),
            Err(_) => "- (not found)".into(),
        };
        out.push_str(&format!(
            "Interface {}: ip={} rdma_device={device} port={} state={} traffic_class={}\n",
            i.ifname,
            if ips.is_empty() {
                "-".into()
            } else {
                ips.join(",")
            },
            i.port,
            dash(i.port_state.as_deref()),
            if i.device.is_ok() {
                i.tc.show()
            } else {
                "-".into()
            },
        ));
        let want = checked_gid(i);
        let rows: Vec<Vec<String>> = i
            .addrs
            .iter()
            .map(|(ip, p)| {
                let g = gid_of(ip);
                vec![
                    format!("{ip}/{p}"),
                    gid::format_gid(&g),
                    locate_in(&i.gids, &g).map_or("-".into(), |x| x.to_string()),
                    if want == Some(g) {
                        "checked".into()
                    } else {
                        String::new()
                    },
                ]
            })
            .collect();
        if !rows.is_empty() {
            out.push_str(&table(
                "  ",
                &["ADDRESS", "ROCE V2 GID", "AT INDEX", ""],
                &rows,
            ));
        }
        if i.device.is_ok() {
            let shown = shown_gids(&i.gids, opts.gid_index);
            let rows: Vec<Vec<String>> = shown
                .iter()
                .map(|(idx, e)| {
                    vec![
                        idx.to_string(),
                        gid_text(e),
                        e.gid_type.clone().unwrap_or_else(|| "-".into()),
                        dash(e.ndev.as_deref()),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                out.push_str(&table("  ", &["GID", "VALUE", "TYPE", "NETDEV"], &rows));
            }
            let hidden = i.gids.len() - shown.len();
            if hidden > 0 {
                out.push_str(&format!("  ({hidden} unused GID entries not shown)\n"));
            }
        }
        let rows: Vec<Vec<String>> = i
            .sysctls
            .iter()
            .map(|s| {
                vec![
                    s.key.clone(),
                    match &s.value {
                        Ok(v) => v.clone(),
                        Err(_) => "unreadable".into(),
                    },
                    s.recommended.clone(),
                    if s.ok() {
                        "ok".into()
                    } else {
                        "DIFFERS".into()
                    },
                ]
            })
            .collect();
        out.push_str(&table("  ", &["SYSCTL", "VALUE", "RECOMMENDED", ""], &rows));
    }
    out.push('\n');
    out.push_str(&checks_text(checks));
    out
}

fn checks_text(checks: &[Check]) -> String {
    let mut out: String = checks.iter().map(|c| c.line() + "\n").collect();
    let failed = checks.iter().filter(|c| !c.pass).count();
    let n = checks.len();
    let checks_word = if n == 1 { "check" } else { "checks" };
    if failed == 0 {
        out.push_str(&format!("Result: PASS ({n} {checks_word})\n"));
    } else {
        out.push_str(&format!(
            "Result: FAIL ({failed} of {n} {checks_word} failed)\n"
        ));
    }
    out
}

pub fn pod_json(pod: &PodReport, opts: &Options, checks: &[Check]) -> Value {
    let interfaces: Vec<Value> = pod
        .interfaces
        .iter()
        .map(|i| {
            let want = checked_address(&i.addrs).map(|(g, _)| g);
            let (device, source, error) = match &i.device {
                Ok((d, DeviceSource::Forced)) => {
                    (Some(d.clone()), Some("--device".to_string()), None)
                }
                Ok((d, DeviceSource::Parent(p))) => {
                    (Some(d.clone()), Some(format!("parent {p}")), None)
                }
                Err(e) => (None, None, Some(e.clone())),
            };
            json!({
                "ifname": i.ifname,
                "device": device,
                "device_source": source,
                "device_error": error,
                "port": i.port,
                "port_state": i.port_state,
                "addresses": i.addrs.iter().map(|(ip, p)| {
                    let g = gid_of(ip);
                    json!({
                        "address": format!("{ip}/{p}"),
                        "gid": gid::format_gid(&g),
                        "roce_v2_index": locate_in(&i.gids, &g),
                        "checked": want == Some(g),
                    })
                }).collect::<Vec<_>>(),
                "gids": shown_gids(&i.gids, opts.gid_index).iter().map(|(idx, e)| json!({
                    "index": idx,
                    "gid": e.gid.as_ref().map(gid::format_gid),
                    "type": e.gid_type,
                    "netdev": e.ndev,
                })).collect::<Vec<_>>(),
                "traffic_class": if i.device.is_ok() { i.tc.to_json() } else { Value::Null },
                "sysctls": i.sysctls.iter().map(|s| json!({
                    "key": s.key,
                    "value": s.value.as_ref().ok(),
                    "recommended": s.recommended,
                    "ok": s.ok(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "view": "pod",
        "mode": mode_word(pod.mode),
        "netns_mode": pod.mode.letter().to_string(),
        "sysfs_root": pod.sysfs_root,
        "sysfs_view": pod.view.describe(),
        "netns": pod.netns,
        "gid_index": opts.gid_index,
        "rdma_devices_visible": pod.visible_devices,
        "char_devices": pod.char_devices,
        "interfaces": interfaces,
        "not_rails": pod.not_rails.iter().map(|(n, w)| json!({"ifname": n, "why": w})).collect::<Vec<_>>(),
        "checks": checks.iter().map(Check::to_json).collect::<Vec<_>>(),
        "pass": exit_code(checks) == 0,
    })
}

// ---------------------------------------------------------------------------
// Tables

/// Columns padded to their widest cell (in characters), two spaces apart,
/// no trailing blanks: what `column -t` would give, stable for diffs.
pub fn table(indent: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (c, cell) in r.iter().enumerate().take(cols) {
            width[c] = width[c].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::from(indent);
        for (c, cell) in cells.enumerate().take(cols) {
            if c > 0 {
                s.push_str("  ");
            }
            // `{:<w$}` pads by chars, the unit the widths were measured in.
            s.push_str(&format!("{cell:<w$}", w = width[c]));
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(&mut header.iter().copied());
    for r in rows {
        out.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn opts(s: &str) -> Options {
        match parse_args(&args(s)).unwrap() {
            Parsed::Run(o) => o,
            Parsed::Help => panic!("help"),
        }
    }

    #[test]
    fn options_parse_both_forms_and_defaults() {
        let o = opts("--pid 42 --ifname=net1 --traffic-class 41 --json");
        assert_eq!(o.netns_path(), Some(PathBuf::from("/proc/42/ns/net")));
        assert_eq!(o.ifname.as_deref(), Some("net1"));
        assert_eq!(o.traffic_class, Some(41));
        assert_eq!(o.gid_index, 3);
        assert_eq!(o.port, 1);
        assert_eq!(o.sysfs_root, PathBuf::from("/sys"));
        assert!(o.json);
        let o = opts("--device mlx5_2 --sysfs-root /tmp/t");
        assert_eq!(o.netns_path(), None);
        assert_eq!(o.device.as_deref(), Some("mlx5_2"));
        assert_eq!(
            parse_args(&args("x --help")),
            Err("unexpected argument \"x\"".into())
        );
        assert_eq!(parse_args(&args("--json -h")), Ok(Parsed::Help));
    }

    #[test]
    fn bad_options_say_what_is_wrong() {
        for (line, says) in [
            ("--netns /a --pid 3", "not both"),
            ("--pid 0", "--pid"),
            ("--pid -3", "--pid"),
            ("--pid +3", "--pid"),
            ("--netns relative", "absolute"),
            ("--traffic-class 256", "0 to 255"),
            ("--traffic-class", "needs a value"),
            ("--netns /a --ifname --json", "needs a value"),
            ("--netns /a --gid-index 1024", "0 to 1023"),
            ("--port 0", "1 to 255"),
            ("--ifname net1", "needs --netns"),
            ("--gid-index 5", "needs --netns"),
            ("--netns /a --ifname a/b", "interface name"),
            ("--device ../x", "RDMA device name"),
            ("--frobnicate", "unknown option"),
            ("--json=1", "no value"),
            ("--device a --device b", "twice"),
            ("--sysfs-root tree", "absolute"),
        ] {
            let e = parse_args(&args(line)).unwrap_err();
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn table_columns_align_without_trailing_blanks() {
        let t = table(
            "  ",
            &["A", "LONG HEADER", "C"],
            &[
                vec!["wide cell".into(), "x".into(), "1".into()],
                vec!["y".into(), "".into(), "".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "  A          LONG HEADER  C");
        assert_eq!(lines[1], "  wide cell  x            1");
        assert_eq!(lines[2], "  y");
        for l in &lines {
            assert_eq!(l.trim_end(), *l);
        }
        // Every column starts at the same offset on every line.
        let col = lines[0].find("LONG").unwrap();
        assert_eq!(&lines[1][col..col + 1], "x");
    }

    fn entry(gid: &str, typ: Option<&str>) -> GidEntry {
        GidEntry {
            gid: gid::parse_gid(gid),
            gid_type: typ.map(str::to_owned),
            ndev: None,
        }
    }

    const LL: &str = "fe80:0000:0000:0000:8cca:d1ff:fed4:647d";
    const V4: &str = "0000:0000:0000:0000:0000:ffff:c0a8:0022";
    const ZERO: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

    fn table_with(at: &[(u32, &str, Option<&str>)]) -> Vec<(u32, GidEntry)> {
        let mut t: Vec<(u32, GidEntry)> = (0..8).map(|i| (i, entry(ZERO, None))).collect();
        t[0].1 = entry(LL, Some("IB/RoCE v1"));
        t[1].1 = entry(LL, Some("RoCE v2"));
        for (i, g, ty) in at {
            t[*i as usize].1 = entry(g, *ty);
        }
        t
    }

    fn addrs() -> Vec<(IpAddr, u8)> {
        vec![
            ("fe80::1".parse().unwrap(), 64),
            ("192.168.0.34".parse().unwrap(), 24),
        ]
    }

    #[test]
    fn gid_index_pass_is_the_seed_verdict() {
        let t = table_with(&[(2, V4, Some("IB/RoCE v1")), (3, V4, Some("RoCE v2"))]);
        let c = gid_check("mlx5_26", "net1", &addrs(), &t, 3);
        assert!(c.pass, "{c:?}");
        assert_eq!(
            c.line(),
            "PASS gid-index: GID index 3 of mlx5_26 is the RoCE v2 GID of 192.168.0.34"
        );
    }

    #[test]
    fn gid_elsewhere_names_the_index_and_the_nccl_setting() {
        let t = table_with(&[(4, V4, Some("IB/RoCE v1")), (5, V4, Some("RoCE v2"))]);
        let c = gid_check("mlx5_2", "net1", &addrs(), &t, 3);
        assert!(!c.pass);
        assert_eq!(
            c.reason,
            format!("index 3 of mlx5_2 holds {ZERO} (unused); the RoCE v2 GID of 192.168.0.34 is at index 5")
        );
        assert!(c
            .fix
            .as_deref()
            .unwrap()
            .starts_with("set NCCL_IB_GID_INDEX=5"));
        assert!(c.line().contains("is at index 5: set NCCL_IB_GID_INDEX=5"));
    }

    #[test]
    fn gid_of_wrong_type_names_the_type() {
        let t = table_with(&[(3, V4, Some("IB/RoCE v1"))]);
        let c = gid_check("mlx5_2", "net1", &addrs(), &t, 3);
        assert!(!c.pass);
        assert!(
            c.reason.contains("type IB/RoCE v1, not RoCE v2"),
            "{}",
            c.reason
        );
        assert!(c.reason.contains("at no index"), "{}", c.reason);
        assert!(c.fix.unwrap().contains("run again"));
    }

    #[test]
    fn gid_check_without_address_or_index() {
        let t = table_with(&[]);
        let ll_only = vec![("fe80::1".parse().unwrap(), 64)];
        let c = gid_check("mlx5_2", "net1", &ll_only, &t, 3);
        assert!(
            !c.pass && c.reason.contains("no IPv4 or global IPv6"),
            "{c:?}"
        );
        let c = gid_check("mlx5_2", "net1", &addrs(), &t, 9);
        assert!(!c.pass && c.reason.contains("indexes 0 to 7"), "{c:?}");
        let c = gid_check("mlx5_2", "net1", &addrs(), &[], 3);
        assert!(!c.pass && c.reason.contains("empty"), "{c:?}");
    }

    #[test]
    fn traffic_class_verdicts() {
        let p = Path::new("/s/tc/1/traffic_class");
        let c = tc_check("mlx5_2", 1, Some("net1"), &TcState::Value(Some(0)), 41, p);
        assert_eq!(
            c.reason,
            "mlx5_2 is 0, expected 41 (class 0 falls to the lossy priority)"
        );
        assert!(c
            .fix
            .unwrap()
            .contains("echo tclass=41 > /s/tc/1/traffic_class"));
        assert!(tc_check("mlx5_2", 1, None, &TcState::Value(Some(41)), 41, p).pass);
        let c = tc_check("mlx5_2", 1, None, &TcState::Value(None), 41, p);
        assert!(!c.pass && c.reason.contains("unset"));
        let c = tc_check("mlx5_2", 1, None, &TcState::Value(Some(106)), 41, p);
        assert!(!c.pass && c.reason == "mlx5_2 is 106, expected 41");
        assert!(!tc_check("mlx5_2", 1, None, &TcState::NoFile, 41, p).pass);
        assert_eq!(TcState::NoFile.show(), "n/a");
        assert_eq!(TcState::Value(None).show(), "unset");
    }

    #[test]
    fn sysctl_verdicts_name_each_key_that_is_off() {
        let obs = |v: &str| SysctlObs {
            key: "net.ipv4.conf.net1.arp_ignore".into(),
            value: Ok(v.into()),
            recommended: "1".into(),
        };
        let ns = Path::new("/var/run/netns/p");
        let ok = sysctl_checks("net1", &[obs("1")], ns);
        assert_eq!(ok.len(), 1);
        assert!(ok[0].pass);
        let bad = sysctl_checks("net1", &[obs("1"), obs("0")], ns);
        assert_eq!(bad.len(), 1);
        assert_eq!(
            bad[0].reason,
            "net.ipv4.conf.net1.arp_ignore is 0, recommended 1"
        );
        assert!(bad[0].fix.as_deref().unwrap().starts_with(
            "nsenter --net=/var/run/netns/p sysctl -w net.ipv4.conf.net1.arp_ignore=1"
        ));
        let unreadable = SysctlObs {
            value: Err("no such file".into()),
            ..obs("1")
        };
        assert!(!sysctl_checks("net1", &[unreadable], ns)[0].pass);
    }

    #[test]
    fn exit_code_is_one_on_any_failure() {
        let p = Check::pass("x", None, None, "ok".into());
        let f = Check::fail("x", None, None, "bad".into(), "fix".into());
        assert_eq!(exit_code(&[]), 0);
        assert_eq!(exit_code(std::slice::from_ref(&p)), 0);
        assert_eq!(exit_code(&[p, f.clone()]), 1);
        assert_eq!(f.line(), "FAIL x: bad: fix");
        assert_eq!(f.to_json()["pass"], json!(false));
    }

    #[test]
    fn natural_order_of_device_names() {
        let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_1", "ib0", "mlx5_02x"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["ib0", "mlx5_1", "mlx5_2", "mlx5_02x", "mlx5_10"]);
    }

    #[test]
    fn node_text_shows_dashes_for_absent_files() {
        let node = NodeReport {
            sysfs_root: PathBuf::from("/t"),
            mode: NetnsMode::Shared,
            devices: vec![NodeDevice {
                name: "mlx5_2".into(),
                pci: Some("0000:0c:00.2".into()),
                pf: None,
                netdevs: vec![],
                port: 1,
                port_state: None,
                tc: TcState::Value(Some(41)),
                tc_path: PathBuf::from("/t/x"),
            }],
            missing: None,
            idle: vec![],
        };
        let text = node_text(&node, &[]);
        let row = text.lines().find(|l| l.starts_with("mlx5_2")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells, ["mlx5_2", "0000:0c:00.2", "-", "-", "1", "-", "41"]);
        assert!(text.starts_with("RDMA netns mode: Y"));
    }

    #[test]
    fn shown_gids_keep_the_checked_index_even_when_unused() {
        let t = table_with(&[]);
        let shown: Vec<u32> = shown_gids(&t, 3).iter().map(|(i, _)| *i).collect();
        assert_eq!(shown, [0, 1, 3]);
    }
}
