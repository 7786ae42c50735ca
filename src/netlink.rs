//! A small synchronous rtnetlink socket. A CNI plugin is a one-shot process:
//! an async runtime (rtnetlink + tokio) would cost startup time and binary size
//! for no concurrency we use. The socket is opened by the thread that entered
//! the pod netns, so it speaks to that netns.

use crate::cni::{CniError, CniResult};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use nix::errno::Errno;
use std::net::IpAddr;

/// What roce-tune needs to know of a netdev.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// IFLA_PARENT_DEV_NAME: the VF's PCI address, or an auxiliary device (SF).
    pub parent_dev: Option<String>,
    /// IFLA_PARENT_DEV_BUS_NAME: `pci`, `auxiliary`, `virtio`, ...
    pub parent_bus: Option<String>,
}

pub struct Netlink {
    sock: Socket,
    seq: u32,
}

impl Netlink {
    pub fn open() -> CniResult<Netlink> {
        let mut sock =
            Socket::new(NETLINK_ROUTE).map_err(|e| CniError::io("open a netlink socket", e))?;
        sock.bind_auto()
            .map_err(|e| CniError::io("bind the netlink socket", e))?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(|e| CniError::io("connect the netlink socket", e))?;
        Ok(Netlink { sock, seq: 0 })
    }

    /// Send one request and collect the replies until DONE (dumps) or the ACK.
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        self.seq += 1;
        let mut header = NetlinkHeader::default();
        header.flags = flags | NLM_F_REQUEST;
        header.sequence_number = self.seq;
        let mut req = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        req.finalize();
        let mut buf = vec![0u8; req.buffer_len()];
        req.serialize(&mut buf);
        self.sock
            .send(&buf, 0)
            .map_err(|e| NlError::io("send a netlink request", e))?;

        let mut out = Vec::new();
        let mut rx = Vec::with_capacity(32 * 1024);
        loop {
            rx.clear();
            self.sock
                .recv(&mut rx, 0)
                .map_err(|e| NlError::io("read a netlink reply", e))?;
            let mut off = 0;
            while off < rx.len() {
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..])
                    .map_err(|e| NlError::Decode(e.to_string()))?;
                // Messages sit at 4-byte boundaries (NLMSG_ALIGN).
                let len = (msg.header.length as usize + 3) & !3;
                if msg.header.sequence_number != self.seq {
                    off += len.max(4);
                    continue;
                }
                match msg.payload {
                    NetlinkPayload::InnerMessage(m) => out.push(m),
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => match e.code {
                        None => return Ok(out),
                        Some(code) => return Err(NlError::Kernel(Errno::from_raw(-code.get()))),
                    },
                    _ => {}
                }
                if len == 0 {
                    break;
                }
                off += len;
            }
            if flags & NLM_F_DUMP != NLM_F_DUMP && !out.is_empty() {
                return Ok(out);
            }
        }
    }

    /// The link named `name`, or `None` when there is no such link.
    pub fn link_by_name(&mut self, name: &str) -> CniResult<Option<Link>> {
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(name.to_owned()));
        match self.request(RouteNetlinkMessage::GetLink(m), NLM_F_ACK) {
            Ok(replies) => Ok(replies.into_iter().find_map(|r| match r {
                RouteNetlinkMessage::NewLink(l) => Some(link_of(l)),
                _ => None,
            })),
            Err(NlError::Kernel(Errno::ENODEV)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Every link of this netns.
    pub fn links(&mut self) -> CniResult<Vec<Link>> {
        let replies = self.request(
            RouteNetlinkMessage::GetLink(LinkMessage::default()),
            NLM_F_DUMP,
        )?;
        Ok(replies
            .into_iter()
            .filter_map(|r| match r {
                RouteNetlinkMessage::NewLink(l) => Some(link_of(l)),
                _ => None,
            })
            .collect())
    }

    /// Addresses (with prefix length) of the link with index `index`.
    pub fn addresses(&mut self, index: u32) -> CniResult<Vec<(IpAddr, u8)>> {
        let replies = self.request(
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            NLM_F_DUMP,
        )?;
        let mut out = Vec::new();
        for r in replies {
            if let RouteNetlinkMessage::NewAddress(a) = r {
                if a.header.index != index {
                    continue;
                }
                // IFA_ADDRESS is the peer on point-to-point links; IFA_LOCAL is ours when present.
                let local = a.attributes.iter().find_map(|x| match x {
                    AddressAttribute::Local(ip) => Some(*ip),
                    _ => None,
                });
                let addr = local.or_else(|| {
                    a.attributes.iter().find_map(|x| match x {
                        AddressAttribute::Address(ip) => Some(*ip),
                        _ => None,
                    })
                });
                if let Some(ip) = addr {
                    out.push((ip, a.header.prefix_len));
                }
            }
        }
        Ok(out)
    }
}

fn link_of(l: LinkMessage) -> Link {
    let mut link = Link {
        index: l.header.index,
        name: String::new(),
        parent_dev: None,
        parent_bus: None,
    };
    for a in l.attributes {
        match a {
            LinkAttribute::IfName(n) => link.name = n,
            LinkAttribute::ParentDevName(n) => link.parent_dev = Some(n),
            LinkAttribute::ParentDevBusName(n) => link.parent_bus = Some(n),
            _ => {}
        }
    }
    link
}

/// Why a request failed, with its cause kept for callers to branch on (no
/// such link is ENODEV, not an error).
#[derive(Debug)]
enum NlError {
    /// A socket call failed.
    Io(&'static str, std::io::Error),
    /// The kernel answered with an errno.
    Kernel(Errno),
    /// The answer did not decode.
    Decode(String),
}

impl NlError {
    fn io(what: &'static str, e: std::io::Error) -> NlError {
        NlError::Io(what, e)
    }
}

impl From<NlError> for CniError {
    fn from(e: NlError) -> CniError {
        match e {
            NlError::Io(what, e) => CniError::io(what, e),
            NlError::Kernel(errno) => {
                CniError::io("netlink request", format!("{} ({errno})", errno.desc()))
            }
            NlError::Decode(why) => CniError::io("decode a netlink reply", why),
        }
    }
}
