//! The verdicts: pure functions from the collected views to `Check`s, one
//! PASS/FAIL line each with its reason and fix. No I/O here, so every verdict
//! is unit-tested from plain structs (`tests.rs` of this folder).

use super::args::Options;
use super::collect::{setting, Iface, NodeView, Placement, PodView, SettingState, SysctlObs};
use crate::rdma::gid::{self, GidEntry};
use crate::rdma::setting::Setting;
use crate::rdma::traffic_class::CLASS;
use crate::rdma::NetnsMode;
use crate::sysctl;
use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;

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
    pub fn pass(
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

    pub fn fail(
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
}

/// 0 when every check passed (or there was none), 1 otherwise.
pub fn exit_code(checks: &[Check]) -> i32 {
    i32::from(checks.iter().any(|c| !c.pass))
}

// ---------------------------------------------------------------------------
// Node view

/// What a node without an RDMA device should look for: the kernel lists a
/// device under `class/infiniband` only once the NIC's RDMA driver, a
/// module of its own beside the Ethernet one, has registered it with
/// ib_core (docs/design.md, "RDMA drivers").
pub const NO_DEVICE_FIX: &str = "load the NIC's RDMA driver: mlx5_ib for NVIDIA ConnectX (mlx5_core alone makes only the netdev), bnxt_re for Broadcom, irdma for Intel E810, rdma_rxe for soft-RoCE (then `rdma link add`); each needs ib_core. `lsmod | grep -E 'mlx5_ib|bnxt_re|irdma|rdma_rxe|ib_core'` shows which are loaded; a pod's verbs also need ib_uverbs (/dev/infiniband), and rdmaCmTos needs rdma_cm";

pub fn node_checks(node: &NodeView, opts: &Options) -> Vec<Check> {
    let mut checks = Vec::new();
    let class_dir = node.sysfs_root.join("class/infiniband");
    if let Some(dev) = &node.missing {
        let mut reason = format!("{dev} is not under {}", class_dir.display());
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
            format!("no RDMA device under {}", class_dir.display()),
            NO_DEVICE_FIX.into(),
        ));
    }
    if let Some(want) = opts.traffic_class {
        for d in &node.devices {
            if let Some(tc) = setting(&d.settings, CLASS.key()) {
                checks.push(tc_check(&d.name, d.port, None, &tc.state, want, &tc.path));
            }
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

// ---------------------------------------------------------------------------
// Pod view

pub fn pod_checks(pod: &PodView, opts: &Options) -> Vec<Check> {
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
            "give --ifname NAME, and --device DEV when neither RDMA netlink nor the interface's parent device leads to its RDMA device".into(),
        ));
    }
    for i in &pod.interfaces {
        checks.extend(iface_checks(i, opts));
        checks.extend(sysctl_checks(&i.ifname, &i.sysctls, &pod.netns));
    }
    checks.extend(pod.placement.as_ref().and_then(placement_check));
    checks
}

/// PASS when every GPU of the pod has its share of near rails, FAIL when a
/// pool of them is starved; none when the pod could not be judged (no GPUs,
/// no kubelet: the view says why, and it is no fault of the rails).
pub fn placement_check(p: &Placement) -> Option<Check> {
    let j = p.judged.as_ref().ok()?;
    let reason = format!(
        "pod {}/{}: {}",
        p.pod.namespace,
        p.pod.name,
        crate::topology::render::summary(&j.verdict).trim_end_matches('.')
    );
    Some(if j.verdict.starved {
        Check::fail(
            "placement",
            None,
            None,
            reason,
            crate::placement::FIX.into(),
        )
    } else {
        Check::pass("placement", None, None, reason)
    })
}

fn iface_checks(i: &Iface, opts: &Options) -> Vec<Check> {
    match &i.device {
        Ok((dev, _)) => {
            let mut checks = vec![gid_check(dev, &i.ifname, &i.addrs, &i.gids, opts.gid_index)];
            if let (Some(want), Some(tc)) = (opts.traffic_class, setting(&i.settings, CLASS.key())) {
                let ifname = Some(i.ifname.as_str());
                checks.push(tc_check(dev, i.port, ifname, &tc.state, want, &tc.path));
            }
            checks
        }
        Err(why) => vec![Check::fail(
            "rdma-device",
            None,
            Some(&i.ifname),
            why.clone(),
            "give --device DEV (the VF's RDMA device); check that the VF is bound to mlx5_core, and in exclusive mode that the rdma plugin ran".into(),
        )],
    }
}

// ---------------------------------------------------------------------------
// Traffic class

pub fn tc_check(
    device: &str,
    port: u32,
    ifname: Option<&str>,
    state: &SettingState,
    want: u8,
    path: &Path,
) -> Check {
    let fix = format!(
        "set trafficClass: {want} in roce-tune's config (written on ADD, restored on DEL), or by hand: echo tclass={want} > {}",
        path.display()
    );
    let dev = Some(device);
    let fail = |reason: String, fix: String| Check::fail("traffic-class", dev, ifname, reason, fix);
    match state {
        SettingState::Value(Some(n)) if *n == u32::from(want) => Check::pass(
            "traffic-class",
            dev,
            ifname,
            format!("{device} port {port} is {n}"),
        ),
        SettingState::Value(Some(0)) => fail(
            format!("{device} is 0, expected {want} (class 0 falls to the lossy priority)"),
            fix,
        ),
        SettingState::Value(Some(n)) => fail(format!("{device} is {n}, expected {want}"), fix),
        SettingState::Value(None) => fail(
            format!("{device} is unset, expected {want} (the class each application asks for applies)"),
            fix,
        ),
        SettingState::NoFile => fail(
            format!("{device} has no traffic class file {}", path.display()),
            "the file comes with the MLNX_OFED/DOCA-OFED mlx5 driver; without it, set the class in the application (NCCL_IB_TC)".into(),
        ),
        SettingState::Unreadable(e) => fail(
            format!("{device}: {e}"),
            format!("read {} by hand to see what the driver shows", path.display()),
        ),
    }
}

// ---------------------------------------------------------------------------
// Sysctls

/// Whether the pod holds the recommended value (compared as the kernel
/// prints multi-value sysctls: by words).
pub fn sysctl_ok(s: &SysctlObs) -> bool {
    matches!(&s.value, Ok(v) if sysctl::same_value(v, &s.recommended))
}

/// One PASS for the whole set, or one FAIL per key that is off: a failure
/// must name its key, a success need not list six.
pub fn sysctl_checks(ifname: &str, obs: &[SysctlObs], netns: &Path) -> Vec<Check> {
    let failed: Vec<Check> = obs
        .iter()
        .filter(|s| !sysctl_ok(s))
        .map(|s| {
            let fail = |reason, fix| Check::fail("sysctl", None, Some(ifname), reason, fix);
            match &s.value {
                Ok(v) => fail(
                    format!("{} is {v}, recommended {}", s.key, s.recommended),
                    format!(
                        "nsenter --net={} sysctl -w {}={} (roce-tune's default sysctl config sets it on ADD)",
                        netns.display(),
                        s.key,
                        s.recommended
                    ),
                ),
                Err(e) => fail(
                    format!("{} cannot be read in the pod: {e}", s.key),
                    "check that the interface exists in the pod netns".into(),
                ),
            }
        })
        .collect();
    if !failed.is_empty() {
        return failed;
    }
    vec![Check::pass(
        "sysctl",
        None,
        Some(ifname),
        format!(
            "the {} rail sysctls of {ifname} hold the recommended values",
            obs.len()
        ),
    )]
}

// ---------------------------------------------------------------------------
// GID index

/// The kernel adds a link-local GID of its own; prevResult never holds that
/// address, so ADD never checks it, and neither does inspect.
pub fn is_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
}

/// The address whose RoCE v2 GID NCCL must find at the index, chosen as ADD
/// chooses it from prevResult: the first IPv4, else the first global IPv6.
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

/// Read once, no waiting: inspect reports the table as it is, and a GID
/// still on its way reads as zeros, which the fix covers ("run again").
pub fn gid_check(
    device: &str,
    ifname: &str,
    addrs: &[(IpAddr, u8)],
    gids: &[(u32, GidEntry)],
    index: u32,
) -> Check {
    let fail = |reason: String, fix: String| {
        Check::fail("gid-index", Some(device), Some(ifname), reason, fix)
    };
    let Some((want, addr)) = checked_address(addrs) else {
        return fail(
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
        return fail(
            reason,
            "check the device and --port; in exclusive mode the table is only visible from the pod"
                .into(),
        );
    };
    if found.is_roce_v2_of(&want) {
        return Check::pass(
            "gid-index",
            Some(device),
            Some(ifname),
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
    let reason = format!("index {index} of {device} {held}");
    match locate_in(gids, &want) {
        Some(at) => fail(
            format!("{reason}; the RoCE v2 GID of {addr} is at index {at}"),
            format!(
                "set NCCL_IB_GID_INDEX={at} (and gidIndex: {at} in roce-tune's config), or give the pod its IPv4 address first so it takes index {index}"
            ),
        ),
        None => fail(
            format!(
                "{reason}; the RoCE v2 GID of {addr} ({}) is at no index",
                gid::format_gid(&want)
            ),
            format!(
                "check that {addr} is on {ifname} and RoCE is enabled on the VF; the kernel adds GIDs shortly after the address, so run again"
            ),
        ),
    }
}
