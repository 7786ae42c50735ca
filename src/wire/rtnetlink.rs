//! The four rtnetlink requests roce-tune makes and the little it reads of
//! their answers: RTM_GETLINK by name, the link dump, the address dump, the
//! route dump (which links hold a default route).
//!
//! Sources (Linux, read for facts only):
//! - `include/uapi/linux/rtnetlink.h`: RTM_NEWLINK 16, RTM_GETLINK 18,
//!   RTM_NEWADDR 20, RTM_GETADDR 22; `struct ifinfomsg` (16 bytes: u8
//!   family, u8 pad, u16 type, i32 index, u32 flags, u32 change).
//! - `include/uapi/linux/if_link.h`: IFLA_IFNAME 3, IFLA_PARENT_DEV_NAME 56,
//!   IFLA_PARENT_DEV_BUS_NAME 57 (values checked against Debian 12's
//!   linux-libc-dev 6.1 with a C program printing them).
//! - `include/uapi/linux/if_addr.h`: `struct ifaddrmsg` (8 bytes: u8 family,
//!   u8 prefixlen, u8 flags, u8 scope, u32 index); IFA_ADDRESS 1, IFA_LOCAL
//!   2, "for point-to-point IFA_ADDRESS is DESTINATION address, local
//!   address is supplied in IFA_LOCAL attribute".
//! - `net/core/rtnetlink.c` (NVIDIA/NV-Kernels@20faa862094f):
//!   `rtnl_valid_getlink_req` wants a whole ifinfomsg ("Invalid header for
//!   get link", EINVAL); `rtnl_getlink` looks the name up with
//!   `rtnl_dev_get` and answers -ENODEV when no link has it, else one
//!   RTM_NEWLINK (`rtnl_fill_ifinfo`), then the ACK we asked for. The
//!   lookup (`__dev_get_by_name`) also matches alternative names: asked for
//!   an altname, it answers the link under its real name (seen on this
//!   machine's 6.18 kernel with `ip link property add ... altname`).
//!   A name longer than IFNAMSIZ-1 fails the attribute policy (ERANGE).
//! - `include/uapi/linux/rtnetlink.h`: RTM_NEWROUTE 24, RTM_GETROUTE 26;
//!   `struct rtmsg` (12 bytes: u8 family, dst_len, src_len, tos, table,
//!   protocol, scope, type, u32 flags); RTA_OIF 4, RTA_MULTIPATH 9
//!   (`struct rtnexthop`: u16 len, u8 flags, u8 hops, i32 ifindex, then its
//!   attributes), RTA_TABLE 15; RT_TABLE_MAIN 254, RTN_UNICAST 1. A route
//!   dump of family AF_UNSPEC answers IPv4's and IPv6's.

use super::netlink::{
    self as nl, attrs, fixed, Batch, Builder, DecodeError, End, Message, NLM_F_ACK, NLM_F_DUMP,
    NLM_F_MULTI, NLM_F_REQUEST,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const RTM_NEWLINK: u16 = 16;
pub const RTM_GETLINK: u16 = 18;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_GETADDR: u16 = 22;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_GETROUTE: u16 = 26;
const RTMSG_LEN: usize = 12;
pub const RTA_OIF: u16 = 4;
pub const RTA_MULTIPATH: u16 = 9;
pub const RTA_TABLE: u16 = 15;
const RT_TABLE_MAIN: u32 = 254;
const RTN_UNICAST: u8 = 1;

pub const IFINFOMSG_LEN: usize = 16;
const IFADDRMSG_LEN: usize = 8;

pub const IFLA_IFNAME: u16 = 3;
pub const IFLA_PARENT_DEV_NAME: u16 = 56;
pub const IFLA_PARENT_DEV_BUS_NAME: u16 = 57;

pub const IFA_ADDRESS: u16 = 1;
pub const IFA_LOCAL: u16 = 2;

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// `IFNAMSIZ`: names are at most 15 bytes and a NUL.
pub const IFNAMSIZ: usize = 16;

/// Parent device and bus names are sysfs names (`dev_name()`): a PCI
/// address, `mlx5_core.sf.2`, `virtio2`; NAME_MAX bounds any of them.
const PARENT_NAME_MAX: usize = 255;

/// What roce-tune needs to know of a netdev. Every name in it passed
/// [`nl::name`]: safe to print and to use as one path component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// IFLA_PARENT_DEV_NAME: the VF's PCI address, or an auxiliary device (SF).
    pub parent_dev: Option<String>,
    /// IFLA_PARENT_DEV_BUS_NAME: `pci`, `auxiliary`, `virtio`, ...
    pub parent_bus: Option<String>,
}

/// One RTM_NEWADDR of the address dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// `ifa_index`: the link the address is on.
    pub index: u32,
    /// `ifa_family`: AF_INET, AF_INET6, or another family (MCTP, ...).
    pub family: u8,
    pub prefix_len: u8,
    /// IFA_LOCAL, else IFA_ADDRESS; `None` outside AF_INET and AF_INET6,
    /// whose addresses are not IP addresses.
    pub addr: Option<IpAddr>,
}

/// What roce-tune asks rtnetlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// RTM_GETLINK of one name, with NLM_F_ACK so the answer has a definite end.
    LinkByName(&'a str),
    /// RTM_GETLINK dump.
    Links,
    /// RTM_GETADDR dump of every family (`ifa_family` AF_UNSPEC).
    Addresses,
    /// RTM_GETROUTE dump of every family (`rtm_family` AF_UNSPEC).
    Routes,
}

/// The request as the kernel expects it: a zeroed family header (family
/// AF_UNSPEC, index 0: look up by name), then the name.
pub fn encode_request(request: Request<'_>, seq: u32) -> Vec<u8> {
    match request {
        Request::LinkByName(name) => Builder::new(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK, seq)
            .bytes(&[0; IFINFOMSG_LEN])
            .str_attr(IFLA_IFNAME, name)
            .finish(),
        Request::Links => Builder::new(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, seq)
            .bytes(&[0; IFINFOMSG_LEN])
            .finish(),
        Request::Addresses => Builder::new(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, seq)
            .bytes(&[0; IFADDRMSG_LEN])
            .finish(),
        Request::Routes => Builder::new(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, seq)
            .bytes(&[0; RTMSG_LEN])
            .finish(),
    }
}

fn family_header(m: &Message<'_>, len: usize) -> Result<(), DecodeError> {
    if m.payload.len() < len {
        return Err(DecodeError::ShortFamilyHeader {
            kind: m.kind,
            len: m.payload.len(),
        });
    }
    Ok(())
}

/// One RTM_NEWLINK. Attributes other than the three names are skipped: the
/// kernel sends some forty, nested ones included, and adds more.
pub fn decode_link(m: Message<'_>) -> Result<Link, DecodeError> {
    if m.kind != RTM_NEWLINK {
        return Err(DecodeError::UnexpectedType { kind: m.kind });
    }
    family_header(&m, IFINFOMSG_LEN)?;
    let p = m.payload;
    let mut link = Link {
        // ifi_index is an int; the kernel's are positive.
        index: u32::from_ne_bytes([p[4], p[5], p[6], p[7]]),
        name: String::new(),
        parent_dev: None,
        parent_bus: None,
    };
    let mut named = false;
    for a in attrs(&p[IFINFOMSG_LEN..], m.offset + IFINFOMSG_LEN) {
        let (kind, v) = a?;
        match kind {
            IFLA_IFNAME => {
                link.name = nl::name(kind, v, IFNAMSIZ - 1)?;
                named = true;
            }
            IFLA_PARENT_DEV_NAME => link.parent_dev = Some(nl::name(kind, v, PARENT_NAME_MAX)?),
            IFLA_PARENT_DEV_BUS_NAME => link.parent_bus = Some(nl::name(kind, v, PARENT_NAME_MAX)?),
            _ => {}
        }
    }
    if !named {
        return Err(DecodeError::MissingAttribute {
            op: RTM_NEWLINK,
            attr: IFLA_IFNAME,
        });
    }
    Ok(link)
}

/// One RTM_NEWADDR.
pub fn decode_address(m: Message<'_>) -> Result<Address, DecodeError> {
    if m.kind != RTM_NEWADDR {
        return Err(DecodeError::UnexpectedType { kind: m.kind });
    }
    family_header(&m, IFADDRMSG_LEN)?;
    let p = m.payload;
    let family = p[0];
    let mut local = None;
    let mut address = None;
    for a in attrs(&p[IFADDRMSG_LEN..], m.offset + IFADDRMSG_LEN) {
        let (kind, v) = a?;
        let slot = match kind {
            IFA_LOCAL => &mut local,
            IFA_ADDRESS => &mut address,
            _ => continue,
        };
        *slot = match family {
            AF_INET => Some(IpAddr::V4(Ipv4Addr::from(fixed::<4>(kind, v)?))),
            AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(fixed::<16>(kind, v)?))),
            _ => None,
        };
    }
    Ok(Address {
        index: u32::from_ne_bytes([p[4], p[5], p[6], p[7]]),
        family,
        prefix_len: p[1],
        addr: local.or(address),
    })
}

/// The links one RTM_NEWROUTE sends a default route out of: the main
/// table's unicast routes to `0.0.0.0/0` or `::/0`, by RTA_OIF or each
/// next hop of RTA_MULTIPATH; empty for any other route.
pub fn decode_default_route(m: Message<'_>) -> Result<Vec<u32>, DecodeError> {
    if m.kind != RTM_NEWROUTE {
        return Err(DecodeError::UnexpectedType { kind: m.kind });
    }
    family_header(&m, RTMSG_LEN)?;
    let p = m.payload;
    let (dst_len, mut table, kind) = (p[1], u32::from(p[4]), p[7]);
    let mut oifs = Vec::new();
    for a in attrs(&p[RTMSG_LEN..], m.offset + RTMSG_LEN) {
        let (attr, v) = a?;
        match attr {
            RTA_OIF => oifs.push(u32::from_ne_bytes(fixed::<4>(attr, v)?)),
            RTA_TABLE => table = u32::from_ne_bytes(fixed::<4>(attr, v)?),
            RTA_MULTIPATH => {
                let mut rest = v;
                while rest.len() >= 8 {
                    let len = usize::from(u16::from_ne_bytes([rest[0], rest[1]]));
                    oifs.push(u32::from_ne_bytes([rest[4], rest[5], rest[6], rest[7]]));
                    // RTNH_ALIGN: 4 bytes.
                    let step = len.div_ceil(4) * 4;
                    if len < 8 || step > rest.len() {
                        break;
                    }
                    rest = &rest[step..];
                }
            }
            _ => {}
        }
    }
    if dst_len != 0 || table != RT_TABLE_MAIN || kind != RTN_UNICAST {
        oifs.clear();
    }
    Ok(oifs)
}

/// Links in one datagram answering `seq` (tests and the fuzzer; the socket
/// hands the same decoder its messages).
pub fn decode_links(buf: &[u8], seq: u32) -> Result<Batch<Link>, DecodeError> {
    nl::decode(buf, seq, decode_link)
}

/// Addresses in one datagram answering `seq`.
pub fn decode_addresses(buf: &[u8], seq: u32) -> Result<Batch<Address>, DecodeError> {
    nl::decode(buf, seq, decode_address)
}

/// The kernel's side: `links` as `rtnl_fill_ifinfo` lays them out (name
/// first, then the parent), then `end`. For tests and the fuzzer's round trip.
pub fn encode_links(links: &[Link], end: Option<End>, seq: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for l in links {
        let mut ifi = [0u8; IFINFOMSG_LEN];
        ifi[4..8].copy_from_slice(&l.index.to_ne_bytes());
        let mut b = Builder::new(RTM_NEWLINK, NLM_F_MULTI, seq)
            .bytes(&ifi)
            .str_attr(IFLA_IFNAME, &l.name);
        if let Some(d) = &l.parent_bus {
            b = b.str_attr(IFLA_PARENT_DEV_BUS_NAME, d);
        }
        if let Some(d) = &l.parent_dev {
            b = b.str_attr(IFLA_PARENT_DEV_NAME, d);
        }
        out.extend(b.finish());
    }
    out.extend(end.map(|e| nl::encode_end(e, seq)).unwrap_or_default());
    out
}

/// The kernel's side of the address dump (`inet_fill_ifaddr`,
/// `inet6_fill_ifaddr`: IFA_ADDRESS, and IFA_LOCAL for IPv4).
pub fn encode_addresses(addrs: &[Address], end: Option<End>, seq: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for a in addrs {
        let mut ifa = [0u8; IFADDRMSG_LEN];
        ifa[0] = a.family;
        ifa[1] = a.prefix_len;
        ifa[4..8].copy_from_slice(&a.index.to_ne_bytes());
        let mut b = Builder::new(RTM_NEWADDR, NLM_F_MULTI, seq).bytes(&ifa);
        match a.addr {
            Some(IpAddr::V4(ip)) => {
                b = b
                    .attr(IFA_ADDRESS, &ip.octets())
                    .attr(IFA_LOCAL, &ip.octets())
            }
            Some(IpAddr::V6(ip)) => b = b.attr(IFA_ADDRESS, &ip.octets()),
            None => {}
        }
        out.extend(b.finish());
    }
    out.extend(end.map(|e| nl::encode_end(e, seq)).unwrap_or_default());
    out
}
