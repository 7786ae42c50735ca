//! The GID table (drivers/infiniband/core: sysfs.c, cache.c, roce_gid_mgmt.c;
//! docs/design.md, "The GID table"). NCCL finds a rail's RoCE v2 GID by index
//! (NCCL_IB_GID_INDEX, 3 by convention); roce-tune proves the index holds the
//! RoCE v2 GID of the address the pod was given. GIDs are added from a kernel
//! workqueue after the address, so the check polls with a bound, and it must
//! run on a thread inside the pod netns (MLNX_OFED hides other netns' GIDs).

use super::{is_safe_component, RdmaPort};
use crate::sysfs::View;
use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

pub const ROCE_V2: &str = "RoCE v2";
pub const ROCE_V1: &str = "IB/RoCE v1";

/// The GID the kernel derives from one address of the netdev: the
/// v4-mapped form of an IPv4 address, an IPv6 address as it is
/// (include/rdma/ib_addr.h, `rdma_ip2gid`, called by roce_gid_mgmt.c).
pub fn of_address(ip: &IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => *v6,
    }
}

/// The GID the kernel derives from `addrs` (what prevResult gives the
/// interface): that of the first IPv4 address, or of the first IPv6 address
/// when there is no IPv4 one.
pub fn expected_gid(addrs: &[IpNetwork]) -> Option<(Ipv6Addr, IpAddr)> {
    let first = |v4: bool| {
        addrs
            .iter()
            .map(IpNetwork::ip)
            .find(|ip| ip.is_ipv4() == v4)
            .map(|ip| (of_address(&ip), ip))
    };
    first(true).or_else(|| first(false))
}

/// sysfs's form: eight groups of four lower-case hex digits.
pub fn format_gid(g: &Ipv6Addr) -> String {
    g.segments()
        .iter()
        .map(|s| format!("{s:04x}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub fn parse_gid(s: &str) -> Option<Ipv6Addr> {
    s.trim().parse().ok()
}

/// One row of the GID table as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// `None` when unreadable or malformed; all zeros is an unused entry.
    pub gid: Option<Ipv6Addr>,
    /// `None` when the read fails (EINVAL for unused entries) or is empty.
    pub gid_type: Option<String>,
    pub ndev: Option<String>,
}

impl GidEntry {
    pub fn is_unused(&self) -> bool {
        self.gid.is_none_or(|g| g.is_unspecified())
    }

    pub fn is_roce_v2_of(&self, want: &Ipv6Addr) -> bool {
        self.gid.as_ref() == Some(want) && self.gid_type.as_deref() == Some(ROCE_V2)
    }

    pub fn describe(&self) -> String {
        let gid = self
            .gid
            .as_ref()
            .map_or("unreadable".to_string(), format_gid);
        match &self.gid_type {
            Some(t) => format!("{gid} ({t})"),
            None if self.is_unused() => format!("{gid} (unused)"),
            None => format!("{gid} (no type)"),
        }
    }
}

pub fn read_entry(view: &View, port: &RdmaPort, index: u32) -> GidEntry {
    GidEntry {
        ndev: read_ndev(view, port, index),
        ..read_gid_and_type(view, port, index)
    }
}

/// The netdev of the entry at `index` (`gid_attrs/ndevs/<index>`), kept only
/// if it is a name; the kernel shows it only to a reader in its netns.
pub fn read_ndev(view: &View, port: &RdmaPort, index: u32) -> Option<String> {
    view.read_trimmed(&port.gid_ndev_path(index))
        .filter(|n| is_safe_component(n))
}

/// What the check compares; the poll skips `ndevs/` (a third of its reads).
/// Only what parses is kept: a GID, one of the two type names the kernel
/// prints, so nothing else a file holds can reach a message.
fn read_gid_and_type(view: &View, port: &RdmaPort, index: u32) -> GidEntry {
    GidEntry {
        gid: view
            .read_trimmed(&port.gid_path(index))
            .and_then(|s| parse_gid(&s)),
        gid_type: view
            .read_trimmed(&port.gid_type_path(index))
            .map(|t| match t.as_str() {
                ROCE_V2 | ROCE_V1 => t,
                _ => "an unknown type".to_string(),
            }),
        ndev: None,
    }
}

/// Every index in the port's table, in order (from the `gids/` directory).
pub fn indexes(view: &View, port: &RdmaPort) -> Vec<u32> {
    let mut v: Vec<u32> = view
        .list(&port.gids_dir())
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// The whole table, unused entries included.
pub fn table(view: &View, port: &RdmaPort) -> Vec<(u32, GidEntry)> {
    indexes(view, port)
        .into_iter()
        .map(|i| (i, read_entry(view, port, i)))
        .collect()
}

/// Where the RoCE v2 GID `want` sits, if anywhere.
pub fn locate(view: &View, port: &RdmaPort, want: &Ipv6Addr) -> Option<u32> {
    indexes(view, port)
        .into_iter()
        .find(|&i| read_gid_and_type(view, port, i).is_roce_v2_of(want))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The GID is at this index.
    Pass(u32),
    /// What the index held at the end (when one was asked for), and where the
    /// expected GID sits.
    Mismatch {
        found: Option<GidEntry>,
        located: Option<u32>,
    },
}

/// Which index must hold the GID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// `gidCheck: enforce`/`warn`: exactly this index.
    Index(u32),
    /// `gidCheck: present`: any index (NCCL 2.21+ picks the index itself).
    Any,
}

/// How often the index is re-read while waiting: one sysfs read costs a few
/// microseconds, and a late GID should be noticed within a few milliseconds.
const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// The whole table is scanned less often: once the expected GID has a slot
/// elsewhere, the kernel will not move it, and waiting longer is useless.
const SCAN_EVERY: u32 = 25;

/// Poll until the RoCE v2 GID `want` is where `at` says, or `timeout` passes.
/// Must run on a thread inside the pod netns (MLNX_OFED checks the reader's).
pub fn wait_for(
    view: &View,
    port: &RdmaPort,
    at: Want,
    want: &Ipv6Addr,
    timeout: Duration,
) -> Verdict {
    let deadline = Instant::now() + timeout;
    let mut round = 0u32;
    loop {
        let give_up = Instant::now() >= deadline;
        match at {
            Want::Index(index) => {
                if read_gid_and_type(view, port, index).is_roce_v2_of(want) {
                    return Verdict::Pass(index);
                }
                round += 1;
                if give_up || round % SCAN_EVERY == 0 {
                    let located = locate(view, port, want);
                    // The kernel may have added it between the two reads.
                    if located == Some(index) {
                        return Verdict::Pass(index);
                    }
                    if give_up || located.is_some() {
                        let found = Some(read_entry(view, port, index));
                        return Verdict::Mismatch { found, located };
                    }
                }
            }
            Want::Any => {
                if let Some(i) = locate(view, port, want) {
                    return Verdict::Pass(i);
                }
                if give_up {
                    return Verdict::Mismatch {
                        found: None,
                        located: None,
                    };
                }
            }
        }
        #[cfg(feature = "fault-injection")]
        crate::fault::point("add-gid-wait");
        std::thread::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now())));
    }
}

/// What error 101 says: device, index, expected GID, what was found, and
/// where the expected GID is, with the fix an operator can apply.
pub fn mismatch_message(
    port: &RdmaPort,
    at: Want,
    want: &Ipv6Addr,
    addr: &IpAddr,
    found: Option<&GidEntry>,
    located: Option<u32>,
) -> String {
    let mut msg = match (at, found) {
        (Want::Index(index), Some(found)) => format!(
            "GID check failed on {} port {}: index {index} should hold the RoCE v2 GID {} of {addr}, found {}",
            port.device,
            port.port,
            format_gid(want),
            found.describe()
        ),
        _ => format!(
            "GID check failed on {} port {}: no index holds the RoCE v2 GID {} of {addr}",
            port.device,
            port.port,
            format_gid(want)
        ),
    };
    match located {
        Some(i) => msg.push_str(&format!(
            "; the expected RoCE v2 GID is at index {i}: set NCCL_IB_GID_INDEX={i} (and gidIndex: {i}), use gidCheck \"present\", or give the pod's IPv4 address first"
        )),
        None => msg.push_str("; the expected RoCE v2 GID is at no index: is the address on the VF's netdev, and is the VF's RoCE enabled?"),
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_mapped_form_matches_the_seed() {
        let addrs: Vec<IpNetwork> = vec![
            "fd00::5/64".parse().unwrap(),
            "192.168.0.34/16".parse().unwrap(),
        ];
        let (g, a) = expected_gid(&addrs).unwrap();
        assert_eq!(format_gid(&g), "0000:0000:0000:0000:0000:ffff:c0a8:0022");
        assert_eq!(a.to_string(), "192.168.0.34");
        let v6: Vec<IpNetwork> = vec!["fd00::5/64".parse().unwrap()];
        assert_eq!(
            format_gid(&expected_gid(&v6).unwrap().0),
            "fd00:0000:0000:0000:0000:0000:0000:0005"
        );
        assert!(expected_gid(&[]).is_none());
        let v4: IpAddr = "192.168.0.34".parse().unwrap();
        assert_eq!(
            of_address(&v4),
            "::ffff:192.168.0.34".parse::<Ipv6Addr>().unwrap()
        );
        let ll: IpAddr = "fe80::1".parse().unwrap();
        assert_eq!(of_address(&ll), "fe80::1".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn parse_sysfs_forms() {
        assert_eq!(
            parse_gid("0000:0000:0000:0000:0000:ffff:c0a8:0022\n"),
            Some("::ffff:192.168.0.34".parse().unwrap())
        );
        assert_eq!(
            parse_gid("fe80:0000:0000:0000:8cca:d1ff:fed4:647d"),
            Some("fe80::8cca:d1ff:fed4:647d".parse().unwrap())
        );
        assert!(parse_gid("zz").is_none());
        let zero = GidEntry {
            gid: parse_gid("0000:0000:0000:0000:0000:0000:0000:0000"),
            gid_type: None,
            ndev: None,
        };
        assert!(zero.is_unused());
    }

    #[test]
    fn type_must_be_roce_v2() {
        let want: Ipv6Addr = "::ffff:192.168.0.34".parse().unwrap();
        let v1 = GidEntry {
            gid: Some(want),
            gid_type: Some("IB/RoCE v1".into()),
            ndev: None,
        };
        assert!(!v1.is_roce_v2_of(&want));
        let v2 = GidEntry {
            gid_type: Some("RoCE v2".into()),
            ..v1
        };
        assert!(v2.is_roce_v2_of(&want));
    }
}
