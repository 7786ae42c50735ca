//! The nldev wire format: requests encoded, answers decoded, an exchange
//! gathered over as many `recv`s as it takes, on the framing rtnetlink shares
//! (`crate::netlink`). Pure functions, fuzzed (`fuzz/fuzz_targets/nldev.rs`).

use super::*;
use crate::wire::netlink::{
    self as nl, attrs, fixed, Builder, Gather, Message, NLM_F_ACK, NLM_F_DUMP, NLM_F_MULTI,
    NLM_F_REQUEST,
};

pub use crate::wire::netlink::{DecodeError, End, MAX_MESSAGES};

/// An attribute as the kernel lays it out (`nla_put_u8/u32/u64_64bit/string`):
/// host byte order, strings with their NUL.
#[derive(Debug, Clone)]
pub(super) enum Attr {
    U8(u16, u8),
    U32(u16, u32),
    U64(u16, u64),
    Str(u16, Vec<u8>),
}

/// An nldev message body: attributes right after the netlink header (nldev
/// has no family header: `nlmsg_parse(nlh, 0, ...)` in nldev.c).
pub(super) struct Body {
    op: u16,
    attrs: Vec<Attr>,
}

pub(super) fn message(body: &Body, seq: u32, flags: u16) -> Vec<u8> {
    let mut b = Builder::new(nl_type(body.op), flags, seq);
    for a in &body.attrs {
        b = match a {
            Attr::U8(k, v) => b.attr(*k, &[*v]),
            Attr::U32(k, v) => b.attr(*k, &v.to_ne_bytes()),
            Attr::U64(k, v) => b.attr(*k, &v.to_ne_bytes()),
            Attr::Str(k, s) => {
                let mut v = s.clone();
                v.push(0);
                b.attr(*k, &v)
            }
        };
    }
    b.finish()
}

/// The request as the kernel expects it. Dumps get NLM_F_DUMP (a started dump
/// is never ACKed: `netlink_dump_start` returns -EINTR and `rdma_nl_rcv_skb`
/// skips the ACK), SYS_GET gets NLM_F_ACK so its answer has a definite end.
pub fn encode_request(request: Request, seq: u32) -> Vec<u8> {
    let (attrs, flags) = match request {
        Request::Devices => (vec![], NLM_F_REQUEST | NLM_F_DUMP),
        Request::Ports { dev_index } => (
            vec![Attr::U32(attr::DEV_INDEX, dev_index)],
            NLM_F_REQUEST | NLM_F_DUMP,
        ),
        Request::System => (vec![], NLM_F_REQUEST | NLM_F_ACK),
    };
    let body = Body {
        op: request.op(),
        attrs,
    };
    message(&body, seq, flags)
}

pub(super) fn reply_body(reply: &Reply) -> Body {
    let mut attrs = Vec::new();
    let op = match reply {
        Reply::Device(d) => {
            attrs.push(Attr::U32(attr::DEV_INDEX, d.index));
            attrs.push(Attr::Str(attr::DEV_NAME, d.name.wire()));
            if let Some(n) = d.ports {
                attrs.push(Attr::U32(attr::PORT_INDEX, n));
            }
            if let Some(g) = d.node_guid {
                attrs.push(Attr::U64(attr::NODE_GUID, g));
            }
            if let Some(p) = &d.parent {
                attrs.push(Attr::Str(attr::PARENT_NAME, p.wire()));
            }
            if let Some(p) = &d.protocol {
                attrs.push(Attr::Str(attr::DEV_PROTOCOL, p.wire()));
            }
            cmd::GET
        }
        Reply::Port(p) => {
            attrs.push(Attr::U32(attr::DEV_INDEX, p.dev_index));
            attrs.push(Attr::Str(attr::DEV_NAME, p.dev_name.wire()));
            attrs.push(Attr::U32(attr::PORT_INDEX, p.port));
            if let Some(s) = p.state {
                attrs.push(Attr::U8(attr::PORT_STATE, s));
            }
            if let Some(s) = p.phys_state {
                attrs.push(Attr::U8(attr::PORT_PHYS_STATE, s));
            }
            if let Some(i) = p.ndev_index {
                attrs.push(Attr::U32(attr::NDEV_INDEX, i));
            }
            if let Some(n) = &p.ndev_name {
                attrs.push(Attr::Str(attr::NDEV_NAME, n.wire()));
            }
            cmd::PORT_GET
        }
        Reply::System(s) => {
            if let Some(m) = s.netns_mode {
                let v = match m {
                    NetnsMode::Shared => 1,
                    NetnsMode::Exclusive => 0,
                };
                attrs.push(Attr::U8(attr::SYS_NETNS_MODE, v));
            }
            cmd::SYS_GET
        }
    };
    Body { op, attrs }
}

/// The kernel's side: `batch` as the kernel would send it for `seq` (replies
/// flagged NLM_F_MULTI, then the end). For tests and the fuzzer's round trip.
pub fn encode_batch(batch: &Batch, seq: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for r in &batch.replies {
        out.extend(message(&reply_body(r), seq, NLM_F_MULTI));
    }
    if let Some(end) = batch.end {
        out.extend(nl::encode_end(end, seq));
    }
    out
}

/// Decode one received buffer: every message whose sequence number is `seq`,
/// up to the message that ends the answer (the shared framing of
/// `crate::netlink::decode`: other sequence numbers skipped, never a panic).
pub fn decode_replies(buf: &[u8], seq: u32) -> Result<Batch, DecodeError> {
    nl::decode(buf, seq, decode_reply)
}

pub(super) fn u8_of(a: u16, v: &[u8]) -> Result<u8, DecodeError> {
    fixed(a, v).map(u8::from_ne_bytes)
}

pub(super) fn u32_of(a: u16, v: &[u8]) -> Result<u32, DecodeError> {
    fixed(a, v).map(u32::from_ne_bytes)
}

pub(super) fn u64_of(a: u16, v: &[u8]) -> Result<u64, DecodeError> {
    fixed(a, v).map(u64::from_ne_bytes)
}

/// One nldev reply. Unknown attributes (and PAD) are skipped: newer kernels
/// add attributes, and the kernel may nest tables (NLA_F_NESTED) we never read.
pub(super) fn decode_reply(m: Message<'_>) -> Result<Reply, DecodeError> {
    let kind = m.kind;
    let (client, op) = split_type(kind);
    if client != RDMA_NL_NLDEV || !matches!(op, cmd::GET | cmd::PORT_GET | cmd::SYS_GET) {
        return Err(DecodeError::UnexpectedType { kind });
    }
    let mut dev_index = None;
    let mut dev_name = None;
    let mut port_index = None;
    let mut node_guid = None;
    let mut state = None;
    let mut phys_state = None;
    let mut ndev_index = None;
    let mut ndev_name = None;
    let mut netns_mode = None;
    let mut protocol = None;
    let mut parent = None;
    for nla in attrs(m.payload, m.offset) {
        // The type comes with NLA_F_NESTED and NLA_F_NET_BYTEORDER masked.
        let (a, v) = nla?;
        match a {
            attr::DEV_INDEX => dev_index = Some(u32_of(a, v)?),
            attr::DEV_NAME => dev_name = Some(Name::parse(v)),
            attr::PORT_INDEX => port_index = Some(u32_of(a, v)?),
            attr::NODE_GUID if op == cmd::GET => node_guid = Some(u64_of(a, v)?),
            attr::PORT_STATE if op == cmd::PORT_GET => state = Some(u8_of(a, v)?),
            attr::PORT_PHYS_STATE if op == cmd::PORT_GET => phys_state = Some(u8_of(a, v)?),
            attr::NDEV_INDEX if op == cmd::PORT_GET => ndev_index = Some(u32_of(a, v)?),
            attr::NDEV_NAME if op == cmd::PORT_GET => ndev_name = Some(Name::parse(v)),
            attr::SYS_NETNS_MODE if op == cmd::SYS_GET => {
                netns_mode = Some(match u8_of(a, v)? {
                    1 => NetnsMode::Shared,
                    0 => NetnsMode::Exclusive,
                    other => return Err(DecodeError::BadNetnsMode(other)),
                })
            }
            attr::DEV_PROTOCOL if op == cmd::GET => protocol = Some(Name::parse(v)),
            attr::PARENT_NAME if op == cmd::GET => parent = Some(Name::parse(v)),
            _ => {}
        }
    }
    let missing = |a| DecodeError::MissingAttribute { op, attr: a };
    Ok(match op {
        cmd::GET => Reply::Device(Device {
            index: dev_index.ok_or(missing(attr::DEV_INDEX))?,
            name: dev_name.ok_or(missing(attr::DEV_NAME))?,
            ports: port_index,
            node_guid,
            protocol,
            parent,
        }),
        cmd::PORT_GET => Reply::Port(Port {
            dev_index: dev_index.ok_or(missing(attr::DEV_INDEX))?,
            dev_name: dev_name.ok_or(missing(attr::DEV_NAME))?,
            port: port_index.ok_or(missing(attr::PORT_INDEX))?,
            state,
            phys_state,
            ndev_index,
            ndev_name,
        }),
        _ => Reply::System(System { netns_mode }),
    })
}

/// One request's answer, gathered over as many `recv`s as it takes: the kernel
/// hands out a dump one skb per `recvmsg` (`netlink_dump`), and GET puts one
/// device in each (`ib_enum_all_devs` stops at the first callback that
/// returns the skb length). The socket runs the same [`Gather`] and
/// [`take`]; this is that exchange without a socket, for tests and the fuzzer.
#[derive(Debug)]
pub struct Exchange {
    request: Request,
    gather: Gather,
    replies: Vec<Reply>,
}

/// Decode one reply to `request` into `replies`: a reply of another command
/// is an error, not an answer.
pub(super) fn take(
    request: Request,
    replies: &mut Vec<Reply>,
    m: Message<'_>,
) -> Result<(), DecodeError> {
    let r = decode_reply(m)?;
    let got = match &r {
        Reply::Device(_) => cmd::GET,
        Reply::Port(_) => cmd::PORT_GET,
        Reply::System(_) => cmd::SYS_GET,
    };
    let asked = request.op();
    if got != asked {
        return Err(DecodeError::WrongReply { asked, got });
    }
    replies.push(r);
    Ok(())
}

impl Exchange {
    pub fn new(request: Request, seq: u32) -> Exchange {
        Exchange {
            request,
            gather: Gather::new(seq),
            replies: Vec::new(),
        }
    }

    /// Take one received buffer. `Ok(true)` when the answer is complete.
    pub fn feed(&mut self, buf: &[u8]) -> Result<bool, Error> {
        let request = self.request;
        let replies = &mut self.replies;
        let end = self
            .gather
            .feed(buf, |m| take(request, replies, m))
            .map_err(|err| Error::Decode { request, err })?;
        match end {
            None => Ok(false),
            Some(End::Done) | Some(End::Ack) => Ok(true),
            Some(End::Failed(errno)) => Err(Error::Kernel { request, errno }),
        }
    }

    pub fn into_replies(self) -> Vec<Reply> {
        self.replies
    }
}
