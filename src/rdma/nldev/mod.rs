//! RDMA netlink (`NETLINK_RDMA`, the "nldev" client): the kernel's own answer
//! to "which RDMA device and port sit on this netdev", for every RoCE driver
//! (mlx5 VF or SF, a bond, rxe), in both RDMA netns modes (docs/design.md, "RDMA netlink").
//!
//! Three parts:
//! - here, what the kernel answers, as plain types, and [`port_for_netdev`];
//! - `wire`: the nldev codec as pure functions ([`encode_request`],
//!   [`decode_replies`], [`Exchange`]) on the framing of `crate::netlink`,
//!   tested and fuzzed without a kernel;
//! - `socket`: [`RdmaNetlink`], on the exchange loop rtnetlink uses too
//!   (`crate::netlink::Socket`).
//!
//! Sources of every fact below (Linux, read for facts only):
//! - `include/uapi/rdma/rdma_netlink.h`: the client, command and attribute
//!   numbers (`RDMA_NL_NLDEV`, `enum rdma_nldev_command`, `enum rdma_nldev_attr`).
//! - `drivers/infiniband/core/nldev.c`: what each command answers
//!   (`fill_nldev_handle`, `fill_dev_info`, `fill_port_info`,
//!   `nldev_get_dumpit`, `nldev_port_get_dumpit`, `nldev_sys_get_doit`).
//! - `drivers/infiniband/core/netlink.c`: dispatch (`rdma_nl_rcv_msg`,
//!   `rdma_nl_rcv_skb`, `get_cb_table`).
//! - `net/netlink/af_netlink.c`: how a dump ends (`netlink_dump`,
//!   `netlink_dump_done`: NLMSG_DONE carries the dump's errno).

mod socket;
mod wire;

pub use socket::*;
pub use wire::*;

use super::{is_safe_component, NetnsMode};
use std::fmt;

/// `RDMA_NL_NLDEV` (rdma_netlink.h): the nldev client, 5th in the client enum.
const RDMA_NL_NLDEV: u16 = 5;

/// `enum rdma_nldev_command` (rdma_netlink.h). Only GET and PORT_GET can dump.
pub mod cmd {
    /// `RDMA_NLDEV_CMD_GET`: one message per device (`fill_dev_info`).
    pub const GET: u16 = 1;
    /// `RDMA_NLDEV_CMD_PORT_GET`: one message per port of ONE device; the dump
    /// needs `DEV_INDEX` (`nldev_port_get_dumpit` returns -EINVAL without it).
    pub const PORT_GET: u16 = 5;
    /// `RDMA_NLDEV_CMD_SYS_GET` (kernel 5.2+): a doit, no dump (`nldev_sys_get_doit`).
    pub const SYS_GET: u16 = 6;
}

/// `enum rdma_nldev_attr` (rdma_netlink.h; "don't change the order, this is
/// ABI"). Values checked against Debian 12's linux-libc-dev 6.1 header, except
/// PARENT_NAME, which is newer than 6.1 (counted from the upstream enum).
pub mod attr {
    /// `RDMA_NLDEV_ATTR_PAD` (= UNSPEC): 64-bit alignment padding, skipped.
    pub const PAD: u16 = 0;
    /// u32, `fill_nldev_handle`.
    pub const DEV_INDEX: u16 = 1;
    /// NUL-terminated string, `fill_nldev_handle` (`dev_name(&device->dev)`).
    pub const DEV_NAME: u16 = 2;
    /// u32: the port in PORT_GET; the NUMBER of ports (`rdma_end_port`) in GET.
    pub const PORT_INDEX: u16 = 3;
    /// u64, host byte order (`fill_dev_info`: `be64_to_cpu(device->node_guid)`).
    pub const NODE_GUID: u16 = 6;
    /// u8, `enum ib_port_state` (`fill_port_info`).
    pub const PORT_STATE: u16 = 12;
    /// u8, IB phys state (`fill_port_info`).
    pub const PORT_PHYS_STATE: u16 = 13;
    /// u32, `fill_port_info`: only when the netdev is in the socket's netns.
    pub const NDEV_INDEX: u16 = 50;
    /// NUL-terminated string, with NDEV_INDEX.
    pub const NDEV_NAME: u16 = 51;
    /// u8, `nldev_sys_get_doit`: `(u8)ib_devices_shared_netns`, 1 shared, 0 exclusive.
    pub const SYS_NETNS_MODE: u16 = 66;
    /// NUL-terminated string, `fill_dev_info`: "ib", "iw", "roce", "opa", "usnic".
    pub const DEV_PROTOCOL: u16 = 67;
    /// NUL-terminated string, `fill_dev_info`: the parent IB device of a
    /// sub-device (`device->parent`, SMI devices); not a PCI address.
    pub const PARENT_NAME: u16 = 100;
}

/// `RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)` = `(client << 10) + op` (rdma_netlink.h).
pub const fn nl_type(op: u16) -> u16 {
    (RDMA_NL_NLDEV << 10) + op
}

/// `RDMA_NL_GET_CLIENT` / `RDMA_NL_GET_OP` (rdma_netlink.h).
const fn split_type(kind: u16) -> (u16, u16) {
    ((kind >> 10) & 0x3f, kind & 0x3ff)
}

/// What roce-tune asks the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// GET dump: every device this netns may see (`nldev_get_dumpit` via
    /// `ib_enum_all_devs`, which skips devices `rdma_dev_access_netns` denies).
    Devices,
    /// PORT_GET dump of one device.
    Ports { dev_index: u32 },
    /// SYS_GET, with NLM_F_ACK so the exchange ends on the ACK.
    System,
}

impl Request {
    fn op(self) -> u16 {
        match self {
            Request::Devices => cmd::GET,
            Request::Ports { .. } => cmd::PORT_GET,
            Request::System => cmd::SYS_GET,
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Devices => write!(f, "the RDMA device dump"),
            Request::Ports { dev_index } => {
                write!(f, "the port dump of RDMA device index {dev_index}")
            }
            Request::System => write!(f, "the RDMA system query"),
        }
    }
}

/// A name the kernel sent: kept only if it is a device name (ASCII
/// alphanumerics and `_-.:`, at most 64 bytes, not `.`/`..`); otherwise only
/// its length, so no message ever quotes unvalidated kernel bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    Valid(String),
    Invalid { len: usize },
}

impl Name {
    /// A NLA_NUL_STRING value: the bytes before the first NUL (all of them if
    /// the kernel sent none).
    fn parse(value: &[u8]) -> Name {
        let bytes = value.split(|&b| b == 0).next().unwrap_or(&[]);
        match std::str::from_utf8(bytes) {
            Ok(s) if is_safe_component(s) => Name::Valid(s.to_owned()),
            _ => Name::Invalid { len: bytes.len() },
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Name::Valid(s) => Some(s),
            Name::Invalid { .. } => None,
        }
    }

    /// Bytes that decode back to this same `Name` (for the kernel side of tests).
    fn wire(&self) -> Vec<u8> {
        match self {
            Name::Valid(s) => s.as_bytes().to_vec(),
            // '/' is never part of a device name, so any length stays invalid.
            Name::Invalid { len } => vec![b'/'; *len],
        }
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Name::Valid(s) => f.write_str(s),
            Name::Invalid { len } => write!(f, "a name of {len} bytes that is not a device name"),
        }
    }
}

/// One RDMA device (`fill_dev_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub index: u32,
    pub name: Name,
    /// How many ports the device has (PORT_INDEX in a GET reply).
    pub ports: Option<u32>,
    pub node_guid: Option<u64>,
    /// "roce", "ib", "iw", ... (kernel 5.2+).
    pub protocol: Option<Name>,
    /// The parent IB device of a sub-device (recent kernels only).
    pub parent: Option<Name>,
}

/// One port of one RDMA device (`fill_port_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub dev_index: u32,
    pub dev_name: Name,
    pub port: u32,
    pub state: Option<u8>,
    pub phys_state: Option<u8>,
    /// The port's netdev: present only when that netdev lives in the socket's
    /// netns (`fill_port_info`: `net_eq(dev_net(netdev), net)`).
    pub ndev_index: Option<u32>,
    pub ndev_name: Option<Name>,
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} port {}", self.dev_name, self.port)?;
        match (&self.ndev_name, self.ndev_index) {
            (Some(n), Some(i)) => write!(f, " (netdev {n}, ifindex {i})"),
            _ => write!(f, " (no netdev in this netns)"),
        }
    }
}

/// The SYS_GET answer (`nldev_sys_get_doit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System {
    pub netns_mode: Option<NetnsMode>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Device(Device),
    Port(Port),
    System(System),
}

/// What one received buffer held for our sequence number.
pub type Batch = crate::wire::netlink::Batch<Reply>;

/// Which port a netdev belongs to.
#[derive(Debug, PartialEq, Eq)]
pub enum PortMatch<'a> {
    One(&'a Port),
    None,
    /// Several ports claim the netdev; listed for the message.
    Ambiguous(Vec<&'a Port>),
}

/// The (device, port) whose netdev is `ifindex` AND named `ifname`: the index
/// alone could be a netdev of another netns that reused it, the name alone a
/// renamed one. Ports with no netdev in this netns never match.
pub fn port_for_netdev<'a>(ports: &'a [Port], ifindex: u32, ifname: &str) -> PortMatch<'a> {
    let found: Vec<&Port> = ports
        .iter()
        .filter(|p| {
            p.ndev_index == Some(ifindex)
                && p.ndev_name.as_ref().and_then(Name::as_str) == Some(ifname)
        })
        .collect();
    match found.as_slice() {
        [] => PortMatch::None,
        [one] => PortMatch::One(one),
        _ => PortMatch::Ambiguous(found),
    }
}

#[cfg(test)]
mod tests;
