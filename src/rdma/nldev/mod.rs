//! RDMA netlink (`NETLINK_RDMA`, the "nldev" client): the kernel's own answer
//! to "which RDMA device and port sit on this netdev", for every RoCE driver
//! (mlx5 VF or SF, a bond, rxe), in both RDMA netns modes (docs/design.md, "RDMA netlink").
//!
//! Three parts:
//! - here, [`port_for_netdev`];
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

#[cfg(test)]
mod tests;
