//! `roce-tune inspect`'s options: the help text, and the parse that turns
//! the command line into `Options` or says what is wrong with it (a usage
//! error, exit 2). Everything is validated here, before anything is read.

use crate::cni::config::{DEFAULT_GID_INDEX, MAX_GID_INDEX};
use crate::cni::env::{is_k8s_name, validate_ifname, PodRef};
use crate::rdma::is_safe_component;
use crate::topology::PathType;
use std::path::PathBuf;

pub const HELP: &str = "\
roce-tune inspect [--netns PATH | --pid PID] [--ifname NAME] [--device DEV]
                  [--gid-index N] [--traffic-class N] [--port N]
                  [--pod NAMESPACE/NAME] [--gdr-level LEVEL]
                  [--sysfs-root DIR] [--node-config PATH] [--json]
roce-tune inspect (--netns PATH | --pid PID) --env [--node-config PATH] [--json]
roce-tune inspect [--netns PATH | --pid PID] --counters[=SECONDS] [--ifname NAME]
                  [--device DEV] [--port N] [--sysfs-root DIR]
                  [--node-config PATH] [--json]

Without --netns/--pid: the node view. Every RDMA device under
<sysfs-root>/class/infiniband with its PCI function, the PF of a VF, its
netdev, the port state, and every setting roce-tune can own, such as the
traffic class and the rdma_cm default ToS (the value, unset, or n/a when
there is no file to read: no traffic class file without MLNX_OFED/DOCA, no
rdma_cm configfs directory until one is made; inspect makes none). \"-\" means the
file is absent. Then, when the node has any, its GPUs and RDMA NICs grouped
by NUMA node and PCIe root.

With --netns/--pid: the pod view. Each RDMA interface of the pod with its RDMA
device, addresses, GID table (read from inside the pod netns, as MLNX_OFED
hides other netns' GIDs), the rail sysctls against the recommended values and
every setting, then one PASS/FAIL line per check with the reason and fix.
An interface's RDMA device is found as ADD finds it: RDMA netlink asked from
inside the pod netns, else the netdev's parent device. When the pod is known
(--pod, else the pod a state entry of this netns recorded) the kubelet's
PodResources API (the node config's podResourcesSocket) gives its GPUs and
VFs: a matrix of its rails against its GPUs with NCCL's path types, as
`nvidia-smi topo -m` shows them, and the placement check.

With --env: the pod's job environment, one KEY=VALUE line each, as the NRI
plugin injects it at CreateContainer: NCCL_IB_HCA (=<device>:<port> of each
rail, in the order of the pod's interfaces), NCCL_IB_GID_INDEX (or, when the
rails disagree, NCCL_IB_ROCE_VERSION_NUM and NCCL_IB_ADDR_FAMILY), NCCL_IB_TC,
and the UCX_* variables when the node config's jobEnvFamilies names \"ucx\",
computed from what each rail's ADD recorded in the state dir (the node
config's stateDir) for this netns. Why a variable is absent goes to stderr.
Exit 0 with the lines, 1 when the pod gets nothing (the reason on stderr).

With --counters: each rail's RDMA counters (the node config's railCounters:
the files of the port's hw_counters/ and counters/ the agent exports as
roce_tune_rail_hw_counter_total) read twice, SECONDS apart (default 1, at most
60; a decimal is fine), with their rate per second, beside the rail's pod and
class. Node view: every RDMA device's ports, a rail's marked with its pod. Pod
view: the rails the state dir records for that netns. A rail whose device lives
in its pod (exclusive mode) is read in the pod's sysfs. Exit 0.

Options:
  --netns PATH         the pod's network namespace (e.g. /var/run/netns/<id>)
  --pid PID            the netns of process PID (/proc/PID/ns/net); also lists
                       the pod's /dev/infiniband character devices
  --ifname NAME        pod view: check only this interface (default: every
                       interface that has an RDMA device)
  --device DEV         the RDMA device. Node view: show only DEV. Pod view:
                       use DEV for --ifname instead of looking it up (when
                       neither RDMA netlink nor the netdev's parent device
                       leads to it: a veth, a kernel before 5.14); without
                       --ifname, check only the interfaces whose device is DEV
  --gid-index N        pod view: the index that must hold the RoCE v2 GID of
                       the interface's address (NCCL_IB_GID_INDEX; default 3)
  --traffic-class N    check that each device's traffic class is N (0..255);
                       without it the class is shown, not checked
  --port N             port of the RDMA device (default: the port RDMA netlink
                       reports, else 1)
  --pod NAMESPACE/NAME pod view: the Kubernetes pod whose netns this is (default:
                       the pod a state entry of this netns recorded)
  --gdr-level LEVEL    pod view: NCCL_NET_GDR_LEVEL to judge the placement at
                       (PIX, PXB, PHB, SYS, or NCCL's old numbers; default: the
                       level ADD judged at, else PXB)
  --sysfs-root DIR     sysfs to read (default /sys); another directory is a
                       test tree, read as is for both views, nothing mounted
  --node-config PATH   the node config whose state dir, kubelet socket and
                       job environment settings to use (default:
                       ROCE_TUNE_NODE_CONFIG, else /etc/cni/roce-tune/node.json,
                       whose absence means the defaults); a file named here
                       or there must exist, and one refused stops inspect
  --env                pod view: only the job environment (above)
  --counters[=SECONDS] only the RDMA counters and their rates (above)
  --json               one JSON object on stdout instead of the tables:
                       {view, mode, netns_mode, devices | interfaces
                        (each with settings: {<config key>: {path, state,
                        value}}), topology (node) | placement (pod),
                        checks: [{name, device, ifname, pass, reason, fix}], pass}
  -h, --help           this text

Checks: gid-index and sysctl (pod view), traffic-class (with --traffic-class),
rdma-device (when an interface or device cannot be found), idle-vf (node view:
a VF no pod uses that holds a traffic class), placement (pod view, when the
pod's GPUs are known: whether each GPU has its share of the pod's rails near
it at the GDR level).

In exclusive RDMA netns mode (netns_mode N) on the real /sys, the pod view
mounts a private sysfs on a thread inside the pod netns to reach the device.

Exit codes: 0 every check passed (or there was nothing to check),
            1 at least one check failed,
            2 bad option, or an error that stopped the inspection.
";

/// The command line, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub netns: Option<PathBuf>,
    pub pid: Option<u32>,
    pub ifname: Option<String>,
    pub device: Option<String>,
    pub gid_index: u32,
    pub traffic_class: Option<u8>,
    /// `--port`. `None`: in the pod view the port RDMA netlink reports, and
    /// port 1 wherever nothing reports one.
    pub port: Option<u32>,
    pub sysfs_root: PathBuf,
    pub json: bool,
    /// `--pod`: the Kubernetes pod of the netns.
    pub pod: Option<PodRef>,
    /// `--gdr-level`.
    pub gdr_level: Option<PathType>,
    /// `--env`: the pod's job environment only.
    pub env: bool,
    /// `--node-config`; `None`: ROCE_TUNE_NODE_CONFIG, else the default.
    pub node_config: Option<PathBuf>,
    /// `--counters[=SECONDS]`: the interval between the two reads.
    pub counters: Option<std::time::Duration>,
}

/// The port when nothing says which: the first, and on a VF the only one.
pub const DEFAULT_PORT: u32 = 1;

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
    /// Boxed: `Options` is some 200 bytes, `Help` none.
    Run(Box<Options>),
}

/// `--name value` and `--name=value` alike; a value is never taken from the
/// next argument when that one is an option (a forgotten value).
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
    let mut pod = None;
    let mut gdr_level = None;
    let mut env = false;
    let mut node_config = None;
    let mut counters = None;

    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        match name {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--json" if inline.is_some() => return Err("--json takes no value".into()),
            "--json" => {
                json = true;
                continue;
            }
            "--env" if inline.is_some() => return Err("--env takes no value".into()),
            "--env" => {
                env = true;
                continue;
            }
            // Its value only after '=': `--counters --json` is two options.
            "--counters" => {
                if counters.is_some() {
                    return Err("--counters is given twice".into());
                }
                counters = Some(interval(inline.as_deref())?);
                continue;
            }
            "--netns" | "--pid" | "--ifname" | "--device" | "--gid-index" | "--traffic-class"
            | "--port" | "--sysfs-root" | "--pod" | "--gdr-level" | "--node-config" => {}
            other if other.starts_with('-') => return Err(format!("unknown option {other:?}")),
            other => return Err(format!("unexpected argument {other:?}")),
        }
        let value = match inline {
            Some(v) => v,
            None => match it.next() {
                Some(v) if !v.starts_with("--") => v.clone(),
                _ => return Err(format!("{name} needs a value")),
            },
        };
        let once = |already: bool| match already {
            true => Err(format!("{name} is given twice")),
            false => Ok(()),
        };
        let absolute = |what: &str| match value.starts_with('/') {
            true => Ok(PathBuf::from(&value)),
            false => Err(format!("{name} {value:?} must be an absolute path{what}")),
        };
        match name {
            "--netns" => {
                once(netns.is_some())?;
                netns = Some(absolute(
                    " to a network namespace (e.g. /var/run/netns/<id>)",
                )?);
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
                if validate_ifname(&value).is_err() {
                    return Err(format!("--ifname {value:?} is not an interface name (1 to 15 printable characters, no '/', ':' or spaces)"));
                }
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
                sysfs_root = Some(absolute("")?);
            }
            "--node-config" => {
                once(node_config.is_some())?;
                if value.is_empty() {
                    return Err("--node-config needs a file".into());
                }
                node_config = Some(PathBuf::from(&value));
            }
            "--pod" => {
                once(pod.is_some())?;
                pod = Some(pod_ref(&value)?);
            }
            "--gdr-level" => {
                once(gdr_level.is_some())?;
                // What NCCL reads from NCCL_NET_GDR_LEVEL (paths.cc:243-280),
                // up to SYS: NET and DIS are no level a GPU-NIC path meets.
                match PathType::parse_level(&value).filter(|l| *l <= PathType::Sys) {
                    Some(l) => gdr_level = Some(l),
                    None => {
                        return Err(format!(
                            "--gdr-level {value:?} is not an NCCL_NET_GDR_LEVEL (PIX, PXB, PHB, SYS, or 0 to 5)"
                        ))
                    }
                }
            }
            _ => unreachable!("every option with a value is matched above"),
        }
    }
    if netns.is_some() && pid.is_some() {
        return Err("give --netns or --pid, not both".into());
    }
    let in_pod = netns.is_some() || pid.is_some();
    if !in_pod && (pod.is_some() || gdr_level.is_some()) {
        return Err("--pod and --gdr-level need --netns or --pid: the placement is a pod's".into());
    }
    if !in_pod && ifname.is_some() && counters.is_none() {
        return Err("--ifname needs --netns or --pid: interfaces belong to a pod".into());
    }
    if !in_pod && gid_index.is_some() {
        return Err(
            "--gid-index needs --netns or --pid: the GID to expect comes from a pod's address"
                .into(),
        );
    }
    if counters.is_some() {
        let checks = [
            ("--env", env),
            ("--gid-index", gid_index.is_some()),
            ("--traffic-class", traffic_class.is_some()),
            ("--pod", pod.is_some()),
            ("--gdr-level", gdr_level.is_some()),
        ];
        if let Some((name, _)) = checks.iter().find(|(_, given)| *given) {
            return Err(format!(
                "--counters takes no {name}: it shows counters, no check"
            ));
        }
    }
    if env {
        if !in_pod {
            return Err("--env needs --netns or --pid: the environment is a pod's".into());
        }
        let checks = [
            ("--ifname", ifname.is_some()),
            ("--device", device.is_some()),
            ("--gid-index", gid_index.is_some()),
            ("--traffic-class", traffic_class.is_some()),
            ("--port", port.is_some()),
            ("--pod", pod.is_some()),
            ("--gdr-level", gdr_level.is_some()),
            ("--sysfs-root", sysfs_root.is_some()),
        ];
        if let Some((name, _)) = checks.iter().find(|(_, given)| *given) {
            return Err(format!(
                "--env takes no {name}: it prints what the pod's rails recorded at ADD"
            ));
        }
    }
    Ok(Parsed::Run(Box::new(Options {
        netns,
        pid,
        ifname,
        device,
        gid_index: gid_index.unwrap_or(DEFAULT_GID_INDEX),
        traffic_class,
        port,
        sysfs_root: sysfs_root.unwrap_or_else(|| PathBuf::from("/sys")),
        json,
        pod,
        gdr_level,
        env,
        node_config,
        counters,
    })))
}

/// `--counters`' interval: SECONDS after '=' (a decimal, more than 0 and at
/// most 60), 1 s without.
fn interval(value: Option<&str>) -> Result<std::time::Duration, String> {
    let Some(v) = value else {
        return Ok(std::time::Duration::from_secs(1));
    };
    match v.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 60.0 && v.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            Ok(std::time::Duration::from_secs_f64(s))
        }
        _ => Err(format!(
            "--counters={v:?}: the seconds between the two reads, more than 0 and at most 60 (e.g. --counters=2.5)"
        )),
    }
}

/// `NAMESPACE/NAME`, each a Kubernetes name (as CNI_ARGS' must be).
fn pod_ref(value: &str) -> Result<PodRef, String> {
    match value.split_once('/') {
        Some((ns, name)) if is_k8s_name(ns, 63) && is_k8s_name(name, 253) => Ok(PodRef {
            namespace: ns.to_owned(),
            name: name.to_owned(),
            uid: None,
        }),
        _ => Err(format!(
            "--pod {value:?} is not NAMESPACE/NAME (a namespace and a pod name as Kubernetes spells them)"
        )),
    }
}

/// Digits only: `parse` alone would take `+3`.
fn number(name: &str, value: &str, min: u64, max: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) && value.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(format!(
            "{name} {value:?} is not a number from {min} to {max}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn opts(s: &str) -> Options {
        match parse_args(&args(s)).unwrap() {
            Parsed::Run(o) => *o,
            Parsed::Help => panic!("help"),
        }
    }

    fn error(s: &str) -> String {
        parse_args(&args(s)).unwrap_err()
    }

    #[test]
    fn options_parse_both_forms_and_defaults() {
        let o = opts("--pid 42 --ifname=net1 --traffic-class 41 --json");
        assert_eq!(o.netns_path(), Some(PathBuf::from("/proc/42/ns/net")));
        assert_eq!(o.ifname.as_deref(), Some("net1"));
        assert_eq!(o.traffic_class, Some(41));
        assert_eq!(o.gid_index, DEFAULT_GID_INDEX);
        assert_eq!(o.gid_index, 3, "NCCL's convention");
        assert_eq!(o.port, None, "the port comes from RDMA netlink");
        assert_eq!(o.sysfs_root, PathBuf::from("/sys"));
        assert!(o.json);
        assert_eq!((o.pod.clone(), o.gdr_level), (None, None));
        assert!(!o.env);
        assert!(opts("--netns /var/run/netns/p --env --json").env);
        assert_eq!(
            o.node_config, None,
            "ROCE_TUNE_NODE_CONFIG, else the default"
        );
        let o = opts("--pid 3 --env --node-config /etc/n.json");
        assert_eq!(o.node_config, Some(PathBuf::from("/etc/n.json")));
        assert_eq!(
            opts("--node-config=n.json").node_config,
            Some(PathBuf::from("n.json")),
            "relative, as gc's and reset-idle's"
        );
        let o = opts("--netns /a --pod team-a/trainer-0 --gdr-level=2");
        let pod = o.pod.unwrap();
        assert_eq!(
            (pod.namespace.as_str(), pod.name.as_str()),
            ("team-a", "trainer-0")
        );
        assert_eq!(o.gdr_level, Some(PathType::Pxb), "NCCL's old 2 is PXB");
        assert_eq!(
            opts("--pid 1 --gdr-level SYS").gdr_level,
            Some(PathType::Sys)
        );
        let o = opts("--device mlx5_2 --sysfs-root /tmp/t --port 2");
        assert_eq!(o.netns_path(), None);
        assert_eq!(o.device.as_deref(), Some("mlx5_2"));
        assert_eq!(o.port, Some(2));
        assert_eq!(error("x --help"), "unexpected argument \"x\"");
        assert_eq!(parse_args(&args("--json -h")).unwrap(), Parsed::Help);
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
            ("--pod a/b", "need --netns"),
            ("--gdr-level PXB", "need --netns"),
            ("--netns /a --pod trainer", "NAMESPACE/NAME"),
            ("--netns /a --pod Team/x", "NAMESPACE/NAME"),
            ("--netns /a --pod a/b/c", "NAMESPACE/NAME"),
            ("--netns /a --gdr-level NET", "NCCL_NET_GDR_LEVEL"),
            ("--netns /a --gdr-level pxb", "NCCL_NET_GDR_LEVEL"),
            ("--netns /a --pod a/b --pod a/c", "twice"),
            ("--node-config", "needs a value"),
            ("--node-config=", "needs a file"),
            ("--node-config /a --node-config /b", "twice"),
            ("--env", "needs --netns"),
            ("--env=1 --pid 3", "no value"),
            ("--pid 3 --env --ifname net1", "--env takes no --ifname"),
            ("--pid 3 --env --gid-index 3", "--env takes no --gid-index"),
            (
                "--netns /a --env --sysfs-root /t",
                "--env takes no --sysfs-root",
            ),
        ] {
            let e = error(line);
            assert!(e.contains(says), "{line}: {e}");
        }
    }
}
