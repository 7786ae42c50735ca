//! The nldev wire format: requests encoded, answers decoded, an exchange
//! gathered over as many `recv`s as it takes. Pure functions, fuzzed
//! (`fuzz/fuzz_targets/nldev.rs`).

use super::*;
use netlink_packet_core::{
    DoneMessage, Emitable, ErrorMessage, NetlinkBuffer, NetlinkHeader, NetlinkMessage,
    NetlinkPayload, NetlinkSerializable, Nla, NlaBuffer, NlasIterator, NLMSG_DONE, NLMSG_ERROR,
    NLMSG_NOOP, NLMSG_OVERRUN, NLM_F_ACK, NLM_F_DUMP, NLM_F_MULTIPART, NLM_F_REQUEST,
};
use std::num::NonZeroI32;

/// Malformed input. Offsets are byte offsets in the buffer given to
/// [`decode_replies`]; nothing here quotes the bytes themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer than 16 bytes (a netlink header) left at `offset`.
    ShortHeader { offset: usize, have: usize },
    /// `nlmsg_len` below the header size (a zero-length header) or past the
    /// end of the buffer.
    BadMessageLength {
        offset: usize,
        len: u32,
        have: usize,
    },
    /// An NLMSG_ERROR without room for its errno.
    ShortError { offset: usize },
    /// An attribute whose header or length does not fit its message.
    BadAttribute { offset: usize },
    /// A known attribute with a value of the wrong size.
    AttributeSize { attr: u16, len: usize },
    /// A reply without an attribute the kernel always sends.
    MissingAttribute { op: u16, attr: u16 },
    /// A message type roce-tune never asks for (another client, another command).
    UnexpectedType { kind: u16 },
    /// A reply of another command than the one asked.
    WrongReply { asked: u16, got: u16 },
    /// SYS_NETNS_MODE other than 0 or 1.
    BadNetnsMode(u8),
    /// NLMSG_OVERRUN: the kernel dropped data.
    Overrun,
    /// A datagram larger than the receive buffer.
    Truncated { len: usize },
    /// More than [`MAX_MESSAGES`] messages in one exchange.
    TooManyMessages,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DecodeError::*;
        match self {
            ShortHeader { offset, have } => write!(
                f,
                "{have} bytes at offset {offset}, fewer than a netlink header"
            ),
            BadMessageLength { offset, len, have } => write!(
                f,
                "message at offset {offset} says {len} bytes, with {have} left"
            ),
            ShortError { offset } => write!(f, "NLMSG_ERROR at offset {offset} has no errno"),
            BadAttribute { offset } => {
                write!(f, "attribute at offset {offset} does not fit its message")
            }
            AttributeSize { attr, len } => write!(f, "attribute {attr} has {len} bytes"),
            MissingAttribute { op, attr } => {
                write!(f, "reply to command {op} lacks attribute {attr}")
            }
            UnexpectedType { kind } => write!(f, "unexpected message type {kind}"),
            WrongReply { asked, got } => {
                write!(f, "asked command {asked}, got a reply of command {got}")
            }
            BadNetnsMode(v) => write!(f, "netns mode {v} is neither 0 nor 1"),
            Overrun => write!(f, "the kernel reported an overrun"),
            Truncated { len } => write!(f, "a {len}-byte datagram did not fit the buffer"),
            TooManyMessages => write!(f, "more than {MAX_MESSAGES} messages"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// An attribute as the kernel lays it out (`nla_put_u8/u32/u64_64bit/string`):
/// host byte order, strings with their NUL.
#[derive(Debug, Clone)]
pub(super) enum Attr {
    U8(u16, u8),
    U32(u16, u32),
    U64(u16, u64),
    Str(u16, Vec<u8>),
}

impl Nla for Attr {
    fn value_len(&self) -> usize {
        match self {
            Attr::U8(..) => 1,
            Attr::U32(..) => 4,
            Attr::U64(..) => 8,
            Attr::Str(_, s) => s.len() + 1,
        }
    }

    fn kind(&self) -> u16 {
        match self {
            Attr::U8(k, _) | Attr::U32(k, _) | Attr::U64(k, _) | Attr::Str(k, _) => *k,
        }
    }

    fn emit_value(&self, buf: &mut [u8]) {
        match self {
            Attr::U8(_, v) => buf[0] = *v,
            Attr::U32(_, v) => buf.copy_from_slice(&v.to_ne_bytes()),
            Attr::U64(_, v) => buf.copy_from_slice(&v.to_ne_bytes()),
            Attr::Str(_, s) => {
                buf[..s.len()].copy_from_slice(s);
                buf[s.len()] = 0;
            }
        }
    }
}

/// An nldev message body: attributes right after the netlink header (nldev
/// has no family header: `nlmsg_parse(nlh, 0, ...)` in nldev.c).
pub(super) struct Body {
    op: u16,
    attrs: Vec<Attr>,
}

impl NetlinkSerializable for Body {
    fn message_type(&self) -> u16 {
        nl_type(self.op)
    }

    fn buffer_len(&self) -> usize {
        self.attrs.as_slice().buffer_len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        self.attrs.as_slice().emit(buffer)
    }
}

pub(super) fn message(payload: NetlinkPayload<Body>, seq: u32, flags: u16) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = seq;
    let mut msg = NetlinkMessage::new(header, payload);
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
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
    message(NetlinkPayload::InnerMessage(body), seq, flags)
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
        let payload = NetlinkPayload::InnerMessage(reply_body(r));
        out.extend(message(payload, seq, NLM_F_MULTIPART));
    }
    match batch.end {
        None => {}
        Some(End::Done) => {
            let payload = NetlinkPayload::Done(DoneMessage::default());
            out.extend(message(payload, seq, NLM_F_MULTIPART));
        }
        Some(End::Ack) | Some(End::Failed(_)) => {
            let mut e = ErrorMessage::default();
            if let Some(End::Failed(errno)) = batch.end {
                e.code = NonZeroI32::new(errno.wrapping_neg());
            }
            // The kernel echoes the request's header after the errno.
            e.header = vec![0u8; NLMSG_HDRLEN];
            out.extend(message(NetlinkPayload::Error(e), seq, 0));
        }
    }
    out
}

pub(super) fn read_i32(b: &[u8]) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    i32::from_ne_bytes(a)
}

/// A kernel errno field (negative on the wire) as a positive errno.
pub(super) fn errno_of(code: i32) -> i32 {
    if code < 0 {
        code.saturating_neg()
    } else {
        code
    }
}

/// Decode one received buffer: every message whose sequence number is `seq`,
/// up to the message that ends the answer (NLMSG_DONE or NLMSG_ERROR).
/// Messages of other sequence numbers (a late answer to an earlier request)
/// are skipped. Never panics, and always moves forward: a message shorter than
/// its header is an error, not a zero-length step.
pub fn decode_replies(buf: &[u8], seq: u32) -> Result<Batch, DecodeError> {
    let mut batch = Batch::default();
    let mut off = 0;
    while off < buf.len() {
        let rest = &buf[off..];
        if rest.len() < NLMSG_HDRLEN {
            return Err(DecodeError::ShortHeader {
                offset: off,
                have: rest.len(),
            });
        }
        let nb = NetlinkBuffer::new(rest);
        let len = nb.length();
        if (len as usize) < NLMSG_HDRLEN || len as usize > rest.len() {
            return Err(DecodeError::BadMessageLength {
                offset: off,
                len,
                have: rest.len(),
            });
        }
        let len = len as usize;
        let payload = &rest[NLMSG_HDRLEN..len];
        batch.messages += 1;
        if nb.sequence_number() == seq {
            match nb.message_type() {
                NLMSG_NOOP => {}
                NLMSG_OVERRUN => return Err(DecodeError::Overrun),
                NLMSG_ERROR => {
                    if payload.len() < 4 {
                        return Err(DecodeError::ShortError { offset: off });
                    }
                    batch.end = Some(match read_i32(payload) {
                        0 => End::Ack,
                        code => End::Failed(errno_of(code)),
                    });
                    return Ok(batch);
                }
                NLMSG_DONE => {
                    // DONE carries the dump's return value as an int (0, or
                    // a negative errno), ext-ack TLVs may follow. A DONE
                    // without it (Linux never sends one) is read as success.
                    let code = if payload.len() >= 4 {
                        read_i32(payload)
                    } else {
                        0
                    };
                    batch.end = Some(match code {
                        0 => End::Done,
                        code => End::Failed(errno_of(code)),
                    });
                    return Ok(batch);
                }
                kind => {
                    let reply = decode_reply(kind, payload, off + NLMSG_HDRLEN)?;
                    batch.replies.push(reply);
                }
            }
        }
        // NLMSG_ALIGN: the next message starts on a 4-byte boundary.
        off = off.saturating_add((len + 3) & !3);
    }
    Ok(batch)
}

pub(super) fn u8_of(a: u16, v: &[u8]) -> Result<u8, DecodeError> {
    match v {
        [b] => Ok(*b),
        _ => Err(DecodeError::AttributeSize {
            attr: a,
            len: v.len(),
        }),
    }
}

pub(super) fn u32_of(a: u16, v: &[u8]) -> Result<u32, DecodeError> {
    let arr: [u8; 4] = v.try_into().map_err(|_| DecodeError::AttributeSize {
        attr: a,
        len: v.len(),
    })?;
    Ok(u32::from_ne_bytes(arr))
}

pub(super) fn u64_of(a: u16, v: &[u8]) -> Result<u64, DecodeError> {
    let arr: [u8; 8] = v.try_into().map_err(|_| DecodeError::AttributeSize {
        attr: a,
        len: v.len(),
    })?;
    Ok(u64::from_ne_bytes(arr))
}

/// One nldev reply. `base` is the payload's offset in the received buffer,
/// for error messages. Unknown attributes (and PAD) are skipped: newer kernels
/// add attributes, and the kernel may nest tables (NLA_F_NESTED) we never read.
pub(super) fn decode_reply(kind: u16, payload: &[u8], base: usize) -> Result<Reply, DecodeError> {
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
    let mut at = 0usize;
    for nla in NlasIterator::new(payload) {
        let nla: NlaBuffer<&[u8]> =
            nla.map_err(|_| DecodeError::BadAttribute { offset: base + at })?;
        at += (nla.length() as usize + 3) & !3;
        // kind() masks NLA_F_NESTED and NLA_F_NET_BYTEORDER.
        let a = nla.kind();
        let v = nla.value();
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
/// returns the skb length).
#[derive(Debug)]
pub struct Exchange {
    request: Request,
    seq: u32,
    replies: Vec<Reply>,
    messages: usize,
}

impl Exchange {
    pub fn new(request: Request, seq: u32) -> Exchange {
        Exchange {
            request,
            seq,
            replies: Vec::new(),
            messages: 0,
        }
    }

    /// Take one received buffer. `Ok(true)` when the answer is complete.
    pub fn feed(&mut self, buf: &[u8]) -> Result<bool, Error> {
        let request = self.request;
        let decode = |err| Error::Decode { request, err };
        let batch = decode_replies(buf, self.seq).map_err(decode)?;
        // An empty datagram still counts, so a stream of them ends too.
        self.messages += batch.messages.max(1);
        if self.messages > MAX_MESSAGES {
            return Err(decode(DecodeError::TooManyMessages));
        }
        let asked = request.op();
        for r in batch.replies {
            let got = match &r {
                Reply::Device(_) => cmd::GET,
                Reply::Port(_) => cmd::PORT_GET,
                Reply::System(_) => cmd::SYS_GET,
            };
            if got != asked {
                return Err(decode(DecodeError::WrongReply { asked, got }));
            }
            self.replies.push(r);
        }
        match batch.end {
            None => Ok(false),
            Some(End::Done) | Some(End::Ack) => Ok(true),
            Some(End::Failed(errno)) => Err(Error::Kernel { request, errno }),
        }
    }

    pub fn into_replies(self) -> Vec<Reply> {
        self.replies
    }
}
