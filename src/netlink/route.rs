//! rtnetlink over roce-tune's socket: [`Netlink`] asks the four requests of
//! `crate::wire::rtnetlink` on one bounded exchange (`super::Socket`) and
//! hands back what the codec decoded.

use super::socket::{Protocol, Socket};
use super::Error;
use crate::wire::netlink::DecodeError;
use crate::wire::netlink::{attrs, Message};
use crate::wire::rtnetlink::{
    decode_address, decode_default_route, decode_link, encode_request, Link, Request,
    IFINFOMSG_LEN, IFLA_IFNAME, IFNAMSIZ,
};
use nix::errno::Errno;
use std::net::IpAddr;

/// A link whose name is no usable interface name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OddLink {
    pub index: u32,
    /// The name with every control character escaped (`log::escape`).
    pub shown: String,
}

/// The index and the escaped name of a link `decode_link` refused for its
/// name (the header and attributes decoded already).
fn odd_link(m: Message<'_>) -> OddLink {
    let p = m.payload;
    let index = u32::from_ne_bytes([p[4], p[5], p[6], p[7]]);
    let shown = attrs(&p[IFINFOMSG_LEN..], m.offset + IFINFOMSG_LEN)
        .filter_map(Result::ok)
        .find(|(kind, _)| *kind == IFLA_IFNAME)
        .map(|(_, v)| {
            let bytes = v.split(|&b| b == 0).next().unwrap_or_default();
            crate::log::escape(&String::from_utf8_lossy(&bytes[..bytes.len().min(64)]))
        })
        .unwrap_or_default();
    OddLink { index, shown }
}

/// A NETLINK_ROUTE socket of the netns of the thread that opened it.
pub struct Netlink {
    sock: Socket,
}

impl Netlink {
    /// Open the socket in the CALLING thread's netns.
    pub fn open() -> Result<Netlink, Error> {
        Ok(Netlink {
            sock: Socket::open(Protocol::Route)?,
        })
    }

    /// The link named `name`, or `None` when no link has that name. A name
    /// no link can have (empty, over 15 bytes, with a NUL, which the kernel
    /// would cut the name at) is not asked. An alternative name is not the
    /// link's name (sysfs and /proc/sys/net know links by their real name
    /// only), so the answer to one is `None` too.
    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>, Error> {
        if name.is_empty() || name.len() >= IFNAMSIZ || name.contains('\0') {
            return Ok(None);
        }
        let mut links = Vec::new();
        let asked = self.sock.exchange(
            |seq| encode_request(Request::LinkByName(name), seq),
            |m| {
                links.push(decode_link(m)?);
                Ok(())
            },
        );
        match asked {
            Ok(()) => Ok(links.into_iter().find(|l| l.name == name)),
            Err(Error::Kernel(Errno::ENODEV)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every link of this netns.
    pub fn links(&mut self) -> Result<Vec<Link>, Error> {
        Ok(self.every_link()?.0)
    }

    /// Every link, and apart those whose name is no usable interface name
    /// (a pod names its interfaces itself: any byte but '/', ':', whitespace
    /// and NUL), by index with the name escaped for display only. `inspect`
    /// shows them; nothing uses such a name as a path.
    pub fn every_link(&mut self) -> Result<(Vec<Link>, Vec<OddLink>), Error> {
        let mut links = Vec::new();
        let mut odd = Vec::new();
        self.sock.exchange(
            |seq| encode_request(Request::Links, seq),
            |m| {
                match decode_link(m) {
                    Ok(l) => links.push(l),
                    Err(DecodeError::BadName {
                        attr: IFLA_IFNAME, ..
                    }) => odd.push(odd_link(m)),
                    Err(e) => return Err(e),
                }
                Ok(())
            },
        )?;
        Ok((links, odd))
    }

    /// The indexes of the links that hold a default route of the main
    /// table (IPv4 or IPv6): the pod's primary network's.
    pub fn default_route_links(&mut self) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.sock.exchange(
            |seq| encode_request(Request::Routes, seq),
            |m| {
                for i in decode_default_route(m)? {
                    if !out.contains(&i) {
                        out.push(i);
                    }
                }
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The IP addresses (with prefix length) of the link with index `index`.
    pub fn addresses(&mut self, index: u32) -> Result<Vec<(IpAddr, u8)>, Error> {
        let mut out = Vec::new();
        self.sock.exchange(
            |seq| encode_request(Request::Addresses, seq),
            |m| {
                let a = decode_address(m)?;
                if let (true, Some(ip)) = (a.index == index, a.addr) {
                    out.push((ip, a.prefix_len));
                }
                Ok(())
            },
        )?;
        Ok(out)
    }
}
