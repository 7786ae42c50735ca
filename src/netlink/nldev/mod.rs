//! RDMA netlink (`NETLINK_RDMA`, the "nldev" client): the kernel's own answer
//! to "which RDMA device and port sit on this netdev", for every RoCE driver
//! (mlx5 VF or SF, a bond, rxe), in both RDMA netns modes (docs/design.md, "RDMA netlink").
//!
//! Three parts:
//! - here, [`port_for_netdev`] and [`ask_port`], the question `rdma::lookup`
//!   asks (through `crate::syscall`);
//! - `crate::wire::nldev`: the nldev codec as pure functions
//!   ([`encode_request`], [`decode_replies`], [`Exchange`]) on netlink's
//!   framing, and the types of what the kernel answers; tested and fuzzed
//!   without a kernel;
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

use crate::netlink::Link;
use std::fmt;

/// The codec's types are what [`RdmaNetlink`] hands back.
pub use crate::wire::nldev::*;
pub use socket::*;

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

/// What RDMA netlink said about the netdev.
#[derive(Debug)]
pub enum Answer {
    /// The device and port carrying the netdev.
    Port(String, u32),
    /// It answered, and no port in this netns carries the netdev.
    NoPort { devices: usize },
    /// It could not be asked; why, for the message if the netdev has no parent.
    Unusable(String),
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Port(dev, port) => write!(f, "RDMA netlink reports {dev} port {port}"),
            Answer::NoPort { devices: 0 } => {
                f.write_str("RDMA netlink shows no RDMA device in the pod netns")
            }
            Answer::NoPort { devices } => write!(
                f,
                "RDMA netlink shows {devices} RDMA devices, none with it as its netdev"
            ),
            Answer::Unusable(why) => f.write_str(why),
        }
    }
}

/// Ask RDMA netlink from the calling thread's netns which port carries
/// `link` (`Err`: it answered something no port can be taken from). `hint` (the device of
/// the netdev's parent, when the pod's side shows it) is asked first: one
/// port dump instead of one per device on a node with dozens.
pub fn ask_port(link: &Link, hint: Option<&str>) -> Result<Answer, String> {
    let mut nl = match RdmaNetlink::open() {
        Ok(nl) => nl,
        Err(e) => return Ok(Answer::Unusable(e.to_string())),
    };
    let devices = match nl.devices() {
        Ok(d) => d,
        Err(e) => return Ok(Answer::Unusable(e.to_string())),
    };
    if let Some(d) = hint.and_then(|h| devices.iter().find(|d| d.name.as_str() == Some(h))) {
        if let Ok(ports) = nl.ports_of(d.index) {
            if let PortMatch::One(p) = port_for_netdev(&ports, link.index, &link.name) {
                if let Some(name) = p.dev_name.as_str() {
                    return Ok(Answer::Port(name.to_owned(), p.port));
                }
            }
        }
    }
    let ports = match nl.ports() {
        Ok(p) => p,
        Err(e) => return Ok(Answer::Unusable(e.to_string())),
    };
    match port_for_netdev(&ports, link.index, &link.name) {
        PortMatch::One(p) => match p.dev_name.as_str() {
            Some(name) => Ok(Answer::Port(name.to_owned(), p.port)),
            None => Err(format!("RDMA netlink names its device with {}", p.dev_name)),
        },
        PortMatch::None => Ok(Answer::NoPort {
            devices: devices.len(),
        }),
        PortMatch::Ambiguous(list) => Err(format!(
            "ambiguous: RDMA netlink reports {}",
            list.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests;
