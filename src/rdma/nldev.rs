//! RDMA netlink (`NETLINK_RDMA`, the "nldev" client): the kernel's own answer
//! to "which RDMA device and port sit on this netdev", for every RoCE driver
//! (mlx5 VF or SF, a bond, rxe), in both RDMA netns modes (docs/design.md, "RDMA netlink").
//!
//! Two layers:
//! - the wire format, as pure functions ([`encode_request`], [`decode_replies`],
//!   [`Exchange`], [`port_for_netdev`]), tested and fuzzed without a kernel;
//! - [`RdmaNetlink`], a small synchronous socket like `crate::netlink`.
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

use super::{is_safe_component, NetnsMode};
use netlink_packet_core::{
    DoneMessage, Emitable, ErrorMessage, NetlinkBuffer, NetlinkHeader, NetlinkMessage,
    NetlinkPayload, NetlinkSerializable, Nla, NlaBuffer, NlasIterator, NLMSG_DONE, NLMSG_ERROR,
    NLMSG_NOOP, NLMSG_OVERRUN, NLM_F_ACK, NLM_F_DUMP, NLM_F_MULTIPART, NLM_F_REQUEST,
};
use netlink_sys::{protocols::NETLINK_RDMA, Socket, SocketAddr};
use nix::errno::Errno;
use std::fmt;
use std::io;
use std::num::NonZeroI32;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

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

const NLMSG_HDRLEN: usize = 16;

/// A dump brings one message per device or port. No host has this many: past
/// it the socket is talking nonsense, and we stop instead of reading forever.
pub const MAX_MESSAGES: usize = 16 * 1024;

/// Netlink dumps fill at most about 32 KiB per datagram (`netlink_dump`);
/// a bigger datagram is reported as truncated, not silently cut.
const RECV_BUFFER: usize = 64 * 1024;

/// The kernel answers in the sender's context and in `recvmsg`; a socket
/// silent this long will not answer.
const RECV_TIMEOUT: Duration = Duration::from_secs(5);

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

/// How an answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// NLMSG_DONE with errno 0: the dump is complete.
    Done,
    /// NLMSG_ERROR with errno 0: the ACK of a doit request.
    Ack,
    /// NLMSG_ERROR, or NLMSG_DONE, carrying an errno (positive, e.g. 95 for
    /// EOPNOTSUPP). A dump whose callback fails ends with a DONE holding the
    /// errno (`netlink_dump_done`), not with an NLMSG_ERROR.
    Failed(i32),
}

/// What one received buffer held for our sequence number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    pub replies: Vec<Reply>,
    pub end: Option<End>,
    /// Messages read, ours or not (bounds the exchange).
    pub messages: usize,
}

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

/// Why an RDMA netlink call failed. Callers branch on [`Error::errno`] /
/// [`Error::is_unavailable`], never on the text.
#[derive(Debug)]
pub enum Error {
    /// No RDMA netlink for this netns: `socket()` failed with EPROTONOSUPPORT
    /// (no ib_core), or `send()` with ECONNREFUSED (a kernel without a
    /// per-netns RDMA netlink socket, which answers only in the initial
    /// netns). The caller falls back to the PCI lookup.
    Unavailable(io::Error),
    /// The kernel answered `request` with an errno.
    Kernel { request: Request, errno: i32 },
    /// A socket call failed.
    Io { what: &'static str, err: io::Error },
    /// No answer within the receive timeout.
    Timeout { request: Request },
    /// The answer was malformed.
    Decode { request: Request, err: DecodeError },
}

impl Error {
    /// The errno behind this error, if there is one (positive).
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Unavailable(e) | Error::Io { err: e, .. } => e.raw_os_error(),
            Error::Kernel { errno, .. } => Some(*errno),
            Error::Timeout { .. } => Some(Errno::ETIMEDOUT as i32),
            Error::Decode { .. } => None,
        }
    }

    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Error::Unavailable(e) | Error::Io { err: e, .. } => e.kind(),
            Error::Kernel { errno, .. } => io::Error::from_raw_os_error(*errno).kind(),
            Error::Timeout { .. } => io::ErrorKind::TimedOut,
            Error::Decode { .. } => io::ErrorKind::InvalidData,
        }
    }

    /// RDMA netlink cannot be used from this netns at all: fall back.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable(e) => write!(
                f,
                "RDMA netlink is unavailable in this netns (no ib_core, or a kernel that answers only in the initial netns): {e}"
            ),
            Error::Kernel { request, errno } => write!(
                f,
                "the kernel refused {request}: {} (errno {errno})",
                io::Error::from_raw_os_error(*errno)
            ),
            Error::Io { what, err } => write!(f, "RDMA netlink: {what}: {err}"),
            Error::Timeout { request } => write!(
                f,
                "no answer to {request} within {} s",
                RECV_TIMEOUT.as_secs()
            ),
            Error::Decode { request, err } => write!(f, "malformed answer to {request}: {err}"),
        }
    }
}

impl std::error::Error for Error {}

/// An attribute as the kernel lays it out (`nla_put_u8/u32/u64_64bit/string`):
/// host byte order, strings with their NUL.
#[derive(Debug, Clone)]
enum Attr {
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
struct Body {
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

fn message(payload: NetlinkPayload<Body>, seq: u32, flags: u16) -> Vec<u8> {
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

fn reply_body(reply: &Reply) -> Body {
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

fn read_i32(b: &[u8]) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    i32::from_ne_bytes(a)
}

/// A kernel errno field (negative on the wire) as a positive errno.
fn errno_of(code: i32) -> i32 {
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

fn u8_of(a: u16, v: &[u8]) -> Result<u8, DecodeError> {
    match v {
        [b] => Ok(*b),
        _ => Err(DecodeError::AttributeSize {
            attr: a,
            len: v.len(),
        }),
    }
}

fn u32_of(a: u16, v: &[u8]) -> Result<u32, DecodeError> {
    let arr: [u8; 4] = v.try_into().map_err(|_| DecodeError::AttributeSize {
        attr: a,
        len: v.len(),
    })?;
    Ok(u32::from_ne_bytes(arr))
}

fn u64_of(a: u16, v: &[u8]) -> Result<u64, DecodeError> {
    let arr: [u8; 8] = v.try_into().map_err(|_| DecodeError::AttributeSize {
        attr: a,
        len: v.len(),
    })?;
    Ok(u64::from_ne_bytes(arr))
}

/// One nldev reply. `base` is the payload's offset in the received buffer,
/// for error messages. Unknown attributes (and PAD) are skipped: newer kernels
/// add attributes, and the kernel may nest tables (NLA_F_NESTED) we never read.
fn decode_reply(kind: u16, payload: &[u8], base: usize) -> Result<Reply, DecodeError> {
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

/// A NETLINK_RDMA socket of the netns of the thread that opened it; kept
/// open, later calls need no setns.
pub struct RdmaNetlink {
    sock: Socket,
    seq: u32,
}

impl RdmaNetlink {
    /// Open the socket in the CALLING thread's netns.
    pub fn open() -> Result<RdmaNetlink, Error> {
        let mut sock = Socket::new(NETLINK_RDMA).map_err(|e| {
            if e.raw_os_error() == Some(Errno::EPROTONOSUPPORT as i32) {
                Error::Unavailable(e)
            } else {
                Error::Io {
                    what: "open a NETLINK_RDMA socket",
                    err: e,
                }
            }
        })?;
        sock.bind_auto().map_err(|err| Error::Io {
            what: "bind the NETLINK_RDMA socket",
            err,
        })?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(|err| Error::Io {
                what: "connect the NETLINK_RDMA socket",
                err,
            })?;
        Ok(RdmaNetlink { sock, seq: 0 })
    }

    fn exchange(&mut self, request: Request) -> Result<Vec<Reply>, Error> {
        self.seq = self.seq.wrapping_add(1);
        let req = encode_request(request, self.seq);
        if let Err(err) = self.sock.send(&req, 0) {
            // No kernel socket for this netns: an old kernel whose RDMA
            // netlink lives in the initial netns only.
            if err.raw_os_error() == Some(Errno::ECONNREFUSED as i32) {
                return Err(Error::Unavailable(err));
            }
            return Err(Error::Io {
                what: "send a request",
                err,
            });
        }
        let mut ex = Exchange::new(request, self.seq);
        let mut rx: Vec<u8> = Vec::with_capacity(RECV_BUFFER);
        let deadline = Instant::now() + RECV_TIMEOUT;
        loop {
            self.wait_readable(request, deadline)?;
            rx.clear();
            let n = self
                .sock
                .recv(&mut rx, nix::libc::MSG_TRUNC)
                .map_err(|err| Error::Io {
                    what: "receive an answer",
                    err,
                })?;
            if n > rx.len() {
                return Err(Error::Decode {
                    request,
                    err: DecodeError::Truncated { len: n },
                });
            }
            if ex.feed(&rx)? {
                return Ok(ex.into_replies());
            }
        }
    }

    fn wait_readable(&self, request: Request, deadline: Instant) -> Result<(), Error> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) => return Err(Error::Timeout { request }),
                Ok(_) => return Ok(()),
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    return Err(Error::Io {
                        what: "wait for an answer",
                        err: e.into(),
                    })
                }
            }
        }
    }

    /// Every RDMA device this netns may see: all of them in shared mode, its
    /// own in exclusive mode (`rdma_dev_access_netns`).
    pub fn devices(&mut self) -> Result<Vec<Device>, Error> {
        Ok(self
            .exchange(Request::Devices)?
            .into_iter()
            .filter_map(|r| match r {
                Reply::Device(d) => Some(d),
                _ => None,
            })
            .collect())
    }

    /// Every port of every visible device. The kernel has no "all ports" dump
    /// (`nldev_port_get_dumpit` needs DEV_INDEX), so this is the device dump
    /// then one port dump per device, as `rdma link show` does. A device that
    /// vanished in between answers EINVAL (`ib_device_get_by_index` found
    /// nothing) and is skipped: another pod's DEL must not fail this ADD.
    pub fn ports(&mut self) -> Result<Vec<Port>, Error> {
        let mut out = Vec::new();
        for d in self.devices()? {
            match self.ports_of(d.index) {
                Ok(ports) => out.extend(ports),
                Err(Error::Kernel { errno, .. })
                    if errno == Errno::EINVAL as i32 || errno == Errno::ENODEV as i32 =>
                {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The ports of the device with index `dev_index` (one PORT_GET dump).
    /// An index this netns cannot see answers EINVAL (`nldev_port_get_dumpit`).
    pub fn ports_of(&mut self, dev_index: u32) -> Result<Vec<Port>, Error> {
        Ok(self
            .exchange(Request::Ports { dev_index })?
            .into_iter()
            .filter_map(|r| match r {
                Reply::Port(p) => Some(p),
                _ => None,
            })
            .collect())
    }

    /// The RDMA netns mode, as ib_core holds it (`ib_devices_shared_netns`).
    /// Kernels before 5.2 have no SYS_GET and answer EINVAL: read
    /// `NetnsMode::read` (sysfs) then.
    pub fn netns_mode(&mut self) -> Result<NetnsMode, Error> {
        let request = Request::System;
        self.exchange(request)?
            .into_iter()
            .find_map(|r| match r {
                Reply::System(System {
                    netns_mode: Some(m),
                }) => Some(m),
                _ => None,
            })
            .ok_or(Error::Decode {
                request,
                err: DecodeError::MissingAttribute {
                    op: cmd::SYS_GET,
                    attr: attr::SYS_NETNS_MODE,
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fixtures are written out by hand, following the kernel's layout, not
    // produced by the encoder under test:
    // - `struct nlmsghdr` (include/uapi/linux/netlink.h): u32 nlmsg_len
    //   (header included, padding of the last attribute included), u16
    //   nlmsg_type, u16 nlmsg_flags, u32 nlmsg_seq, u32 nlmsg_pid; host order.
    // - `struct nlattr`: u16 nla_len (header + value, no padding), u16
    //   nla_type, the value, zero padding to 4 bytes (NLA_ALIGN).
    // - nldev puts attributes right after the header (no family header).

    const SEQ: u32 = 0x0102_0304;
    const MULTI: u16 = 0x2; // NLM_F_MULTI
    const GET_T: [u8; 2] = [0x01, 0x14]; // (5 << 10) + 1 = 0x1401, little-endian
    const PORT_GET_T: [u8; 2] = [0x05, 0x14]; // 0x1405
    const SYS_GET_T: [u8; 2] = [0x06, 0x14]; // 0x1406

    /// A header with an explicit nlmsg_len, so tests can lie about it.
    fn hdr(len: u32, ty: [u8; 2], flags: u16, seq: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(len.to_ne_bytes());
        b.extend(ty);
        b.extend(flags.to_ne_bytes());
        b.extend(seq.to_ne_bytes());
        b.extend(0x0000_1234u32.to_ne_bytes()); // nlmsg_pid: our port id
        b
    }

    /// A well-formed message: header with the right nlmsg_len, then `body`.
    fn msg(ty: [u8; 2], flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut b = hdr(16 + body.len() as u32, ty, flags, seq);
        b.extend(body);
        b
    }

    /// One attribute: nla_len = 4 + value length, then padding to 4.
    fn nla(ty: u16, value: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend((4 + value.len() as u16).to_ne_bytes());
        b.extend(ty.to_ne_bytes());
        b.extend(value);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b
    }

    fn u32a(ty: u16, v: u32) -> Vec<u8> {
        nla(ty, &v.to_ne_bytes())
    }

    /// nla_put_string: the string and its NUL.
    fn stra(ty: u16, s: &str) -> Vec<u8> {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        nla(ty, &v)
    }

    /// NLMSG_DONE (type 3) with the dump's errno, as `netlink_dump_done` sends it.
    fn done(seq: u32, errno: i32) -> Vec<u8> {
        msg([3, 0], MULTI, seq, &(-errno).to_ne_bytes())
    }

    /// NLMSG_ERROR (type 2): -errno, then the request's header echoed.
    fn nlerr(seq: u32, errno: i32) -> Vec<u8> {
        let mut body = (-errno).to_ne_bytes().to_vec();
        body.extend(hdr(16, PORT_GET_T, 0x301, seq));
        msg([2, 0], 0, seq, &body)
    }

    /// `fill_port_info` for rxe0 port 1 on net1 (ifindex 3), seen from the
    /// pod netns: handle, PORT_INDEX, CAP_FLAGS (u64, attr 4, not decoded:
    /// rxe is RoCE, so no IB-only LID attributes), PORT_STATE 4 (ACTIVE),
    /// PHYS_STATE 5 (LinkUp), NDEV_INDEX, NDEV_NAME.
    fn rxe_port_body(with_netdev: bool) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(u32a(1, 1)); // DEV_INDEX
        b.extend(stra(2, "rxe0")); // DEV_NAME: 5 bytes + 3 padding
        b.extend(u32a(3, 1)); // PORT_INDEX
        b.extend(nla(4, &0x0001_0000u64.to_ne_bytes())); // CAP_FLAGS
        b.extend(nla(12, &[4])); // PORT_STATE
        b.extend(nla(13, &[5])); // PORT_PHYS_STATE
        if with_netdev {
            b.extend(u32a(50, 3)); // NDEV_INDEX
            b.extend(stra(51, "net1")); // NDEV_NAME
        }
        b
    }

    fn rxe_port(with_netdev: bool) -> Port {
        Port {
            dev_index: 1,
            dev_name: Name::Valid("rxe0".into()),
            port: 1,
            state: Some(4),
            phys_state: Some(5),
            ndev_index: with_netdev.then_some(3),
            ndev_name: with_netdev.then(|| Name::Valid("net1".into())),
        }
    }

    /// `fill_dev_info` for a device: handle, PORT_INDEX (number of ports),
    /// CAP_FLAGS, NODE_GUID, SYS_IMAGE_GUID, NODE_TYPE, DEV_DIM (84),
    /// DEV_PROTOCOL; all u64 without PAD, as on x86 (efficient unaligned access).
    fn device_body(index: u32, name: &str, guid: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(u32a(1, index));
        b.extend(stra(2, name));
        b.extend(u32a(3, 1));
        b.extend(nla(4, &0u64.to_ne_bytes()));
        b.extend(nla(6, &guid.to_ne_bytes()));
        b.extend(nla(7, &guid.to_ne_bytes()));
        b.extend(nla(14, &[1])); // DEV_NODE_TYPE: RDMA_NODE_IB_CA
        b.extend(nla(84, &[0])); // DEV_DIM
        b.extend(stra(67, "roce"));
        b
    }

    fn device(index: u32, name: &str, guid: u64) -> Device {
        Device {
            index,
            name: Name::Valid(name.into()),
            ports: Some(1),
            node_guid: Some(guid),
            protocol: Some(Name::Valid("roce".into())),
            parent: None,
        }
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // Datagrams captured from Debian 12's kernel 6.1.0-57-amd64 under qemu:
    // rxe0 on net1, created inside netns "pod" (`rdma link add rxe0 type rxe
    // netdev net1`), shared mode; one line per recv().
    const REAL_GET: &str = "6c000000011402000b00000010010000080001000000000009000200727865300000000008000300010000000c000400763c2201000000000c000600d249bafeff1b28940c000700d249bafeff1b289405000e0001000000050054000000000009004300726f636500000000";
    const REAL_GET_DONE: &str = "14000000030002000b0000001001000000000000";
    const REAL_PORT_POD: &str = "50000000051402000c000000100100000800010000000000090002007278653000000000080003000100000005000c000400000005000d00050000000800320002000000090033006e65743100000000";
    const REAL_PORT_HOST: &str = "3c000000051402000c000000110100000800010000000000090002007278653000000000080003000100000005000c000400000005000d0005000000";
    const REAL_PORT_DONE: &str = "14000000030002000c0000001001000000000000";
    const REAL_PORT_999: &str = "14000000030002000d00000010010000eaffffff";
    const REAL_SYS: &str =
        "28000000061400000e000000100100000500420001000000050060000000000005005d0001000000";
    const REAL_SYS_ACK: &str =
        "24000000020000010e000000100100000000000010000000061405000e00000000000000";

    #[test]
    fn real_kernel_answers_decode() {
        let mut ex = Exchange::new(Request::Devices, 11);
        assert!(!ex.feed(&unhex(REAL_GET)).unwrap());
        assert!(ex.feed(&unhex(REAL_GET_DONE)).unwrap());
        assert_eq!(
            ex.into_replies(),
            vec![Reply::Device(Device {
                index: 0,
                name: Name::Valid("rxe0".into()),
                ports: Some(1),
                // `rdma dev show`: node_guid 9428:1bff:feba:49d2
                node_guid: Some(0x9428_1bff_feba_49d2),
                protocol: Some(Name::Valid("roce".into())),
                parent: None,
            })]
        );

        // In the pod: net1 is ifindex 2 there (`rdma -j link show`:
        // "netdev":"net1","netdev_index":2). From the host: no netdev.
        for (bytes, netdev) in [(REAL_PORT_POD, true), (REAL_PORT_HOST, false)] {
            let mut ex = Exchange::new(Request::Ports { dev_index: 0 }, 12);
            assert!(!ex.feed(&unhex(bytes)).unwrap());
            assert!(ex.feed(&unhex(REAL_PORT_DONE)).unwrap());
            let want = Port {
                dev_index: 0,
                ndev_index: netdev.then_some(2),
                ..rxe_port(netdev)
            };
            assert_eq!(ex.into_replies(), vec![Reply::Port(want)]);
        }

        // A port dump of an index this netns cannot see: NLMSG_DONE carrying
        // -EINVAL, not an NLMSG_ERROR.
        let mut ex = Exchange::new(Request::Ports { dev_index: 999 }, 13);
        let e = ex.feed(&unhex(REAL_PORT_999)).unwrap_err();
        assert!(matches!(e, Error::Kernel { errno: 22, .. }), "{e:?}");

        // SYS_GET: NETNS_MODE 1, PRIVILEGED_QKEY_MODE 0, COPY_ON_FORK 1; then
        // the ACK (flags NLM_F_CAPPED, our header echoed), in a second recv.
        let mut ex = Exchange::new(Request::System, 14);
        assert!(!ex.feed(&unhex(REAL_SYS)).unwrap());
        assert!(ex.feed(&unhex(REAL_SYS_ACK)).unwrap());
        assert_eq!(
            ex.into_replies(),
            vec![Reply::System(System {
                netns_mode: Some(NetnsMode::Shared)
            })]
        );
    }

    #[test]
    fn type_is_client_shifted_by_ten() {
        assert_eq!(nl_type(cmd::GET), 0x1401);
        assert_eq!(nl_type(cmd::PORT_GET), 0x1405);
        assert_eq!(nl_type(cmd::SYS_GET), 0x1406);
        assert_eq!(split_type(0x1405), (5, 5));
    }

    #[test]
    fn requests_match_the_kernel_layout() {
        // PORT_GET dump of device 1: 16-byte header + DEV_INDEX (8 bytes).
        let mut want = hdr(24, PORT_GET_T, 0x301, 7); // REQUEST | DUMP (ROOT|MATCH)
        want[12..16].copy_from_slice(&[0; 4]); // nlmsg_pid 0: the kernel fills it
        want.extend([8, 0, 1, 0, 1, 0, 0, 0]);
        assert_eq!(encode_request(Request::Ports { dev_index: 1 }, 7), want);

        let mut want = hdr(16, GET_T, 0x301, 8);
        want[12..16].copy_from_slice(&[0; 4]);
        assert_eq!(encode_request(Request::Devices, 8), want);

        let mut want = hdr(16, SYS_GET_T, 0x5, 9); // REQUEST | ACK
        want[12..16].copy_from_slice(&[0; 4]);
        assert_eq!(encode_request(Request::System, 9), want);
    }

    #[test]
    fn rxe_port_in_the_pod_netns() {
        let mut buf = msg(PORT_GET_T, MULTI, SEQ, &rxe_port_body(true));
        buf.extend(done(SEQ, 0));
        let b = decode_replies(&buf, SEQ).unwrap();
        assert_eq!(b.replies, vec![Reply::Port(rxe_port(true))]);
        assert_eq!(b.end, Some(End::Done));
        assert_eq!(b.messages, 2);
        // The encoder lays the same reply out as this fixture, minus the
        // attributes it does not know (CAP_FLAGS).
        let again = decode_replies(&encode_batch(&b, SEQ), SEQ).unwrap();
        assert_eq!(again.replies, b.replies);
        assert_eq!(again.end, b.end);
    }

    #[test]
    fn rxe_port_from_the_host_has_no_netdev() {
        let mut buf = msg(PORT_GET_T, MULTI, SEQ, &rxe_port_body(false));
        buf.extend(done(SEQ, 0));
        let b = decode_replies(&buf, SEQ).unwrap();
        assert_eq!(b.replies, vec![Reply::Port(rxe_port(false))]);
        let ports = [rxe_port(false)];
        assert_eq!(port_for_netdev(&ports, 3, "net1"), PortMatch::None);
    }

    #[test]
    fn two_devices_in_one_buffer() {
        let mut buf = msg(GET_T, MULTI, SEQ, &device_body(1, "mlx5_2", 0x1122));
        buf.extend(msg(GET_T, MULTI, SEQ, &device_body(2, "mlx5_3", 0x3344)));
        buf.extend(done(SEQ, 0));
        let mut ex = Exchange::new(Request::Devices, SEQ);
        assert!(ex.feed(&buf).unwrap());
        assert_eq!(
            ex.into_replies(),
            vec![
                Reply::Device(device(1, "mlx5_2", 0x1122)),
                Reply::Device(device(2, "mlx5_3", 0x3344)),
            ]
        );
    }

    #[test]
    fn a_dump_split_across_recvs() {
        // What ib_enum_all_devs does: one device per skb, then DONE alone.
        let parts = [
            msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1)),
            msg(GET_T, MULTI, SEQ, &device_body(2, "rxe1", 2)),
            done(SEQ, 0),
        ];
        let mut ex = Exchange::new(Request::Devices, SEQ);
        assert!(!ex.feed(&parts[0]).unwrap());
        assert!(!ex.feed(&parts[1]).unwrap());
        assert!(ex.feed(&parts[2]).unwrap());
        let names: Vec<_> = ex
            .into_replies()
            .into_iter()
            .map(|r| match r {
                Reply::Device(d) => d.name.to_string(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["rxe0", "rxe1"]);
    }

    #[test]
    fn nlmsg_error_eopnotsupp_is_a_typed_errno() {
        let buf = nlerr(SEQ, 95);
        assert_eq!(
            decode_replies(&buf, SEQ).unwrap().end,
            Some(End::Failed(95))
        );
        let mut ex = Exchange::new(Request::Ports { dev_index: 1 }, SEQ);
        let e = ex.feed(&buf).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::EOPNOTSUPP as i32));
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(!e.is_unavailable());
        assert!(matches!(e, Error::Kernel { errno: 95, .. }), "{e:?}");
        assert!(e.to_string().contains("errno 95"), "{e}");
    }

    #[test]
    fn a_failed_dump_ends_with_done_carrying_the_errno() {
        // nldev_port_get_dumpit without a known DEV_INDEX returns -EINVAL;
        // netlink_dump_done puts it in the DONE message.
        let mut ex = Exchange::new(Request::Ports { dev_index: 99 }, SEQ);
        let e = ex.feed(&done(SEQ, 22)).unwrap_err();
        assert!(matches!(e, Error::Kernel { errno: 22, .. }), "{e:?}");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_done_without_its_int_still_ends_the_dump() {
        let buf = msg([3, 0], MULTI, SEQ, &[]);
        assert_eq!(decode_replies(&buf, SEQ).unwrap().end, Some(End::Done));
    }

    #[test]
    fn a_truncated_attribute_is_an_error() {
        // DEV_INDEX complete, then an NDEV_NAME header saying 12 bytes with
        // only 6 left in the message.
        let mut body = u32a(1, 1);
        body.extend([12, 0, 51, 0, b'n', b'e']);
        let buf = msg(PORT_GET_T, MULTI, SEQ, &body);
        assert_eq!(
            decode_replies(&buf, SEQ),
            Err(DecodeError::BadAttribute { offset: 24 })
        );
        // An attribute header cut in half.
        let mut body = u32a(1, 1);
        body.extend([8, 0]);
        let buf = msg(PORT_GET_T, MULTI, SEQ, &body);
        assert_eq!(
            decode_replies(&buf, SEQ),
            Err(DecodeError::BadAttribute { offset: 24 })
        );
    }

    #[test]
    fn a_message_length_past_the_buffer_is_an_error() {
        let mut buf = hdr(64, PORT_GET_T, MULTI, SEQ);
        buf.extend(u32a(1, 1));
        assert_eq!(
            decode_replies(&buf, SEQ),
            Err(DecodeError::BadMessageLength {
                offset: 0,
                len: 64,
                have: 24
            })
        );
    }

    #[test]
    fn a_zero_length_header_is_an_error_not_a_loop() {
        let mut buf = msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1));
        let second = buf.len();
        buf.extend(hdr(0, GET_T, MULTI, SEQ));
        assert_eq!(
            decode_replies(&buf, SEQ),
            Err(DecodeError::BadMessageLength {
                offset: second,
                len: 0,
                have: 16
            })
        );
        // Below the header size, too.
        let buf = hdr(8, GET_T, MULTI, SEQ);
        assert!(matches!(
            decode_replies(&buf, SEQ),
            Err(DecodeError::BadMessageLength { len: 8, .. })
        ));
        // And fewer bytes than a header.
        assert_eq!(
            decode_replies(&buf[..10], SEQ),
            Err(DecodeError::ShortHeader {
                offset: 0,
                have: 10
            })
        );
    }

    #[test]
    fn unknown_and_nested_attributes_are_skipped() {
        let mut body = Vec::new();
        body.extend(nla(0, &[0; 4])); // RDMA_NLDEV_ATTR_PAD before a u64
        body.extend(u32a(1, 7));
        body.extend(stra(2, "mlx5_0"));
        body.extend(nla(300, b"from a kernel newer than us"));
        // RES_SUMMARY (15) with NLA_F_NESTED, holding one RES_SUMMARY_ENTRY
        // (16) with ENTRY_NAME (17) "qp" and ENTRY_CURR (18) u64 = 2; an
        // ENTRY_NAME inside must not be read as anything of ours.
        let mut entry = stra(17, "qp");
        entry.extend(nla(18, &2u64.to_ne_bytes()));
        let summary = nla(16 | 0x8000, &entry);
        body.extend(nla(15 | 0x8000, &summary));
        // Known attribute after the nest: still read.
        body.extend(u32a(3, 2));
        let mut buf = msg(GET_T, MULTI, SEQ, &body);
        buf.extend(done(SEQ, 0));
        let b = decode_replies(&buf, SEQ).unwrap();
        assert_eq!(
            b.replies,
            vec![Reply::Device(Device {
                index: 7,
                name: Name::Valid("mlx5_0".into()),
                ports: Some(2),
                node_guid: None,
                protocol: None,
                parent: None,
            })]
        );
    }

    #[test]
    fn another_requests_messages_are_skipped() {
        // A late answer to an earlier request (seq - 1) before ours.
        let mut buf = msg(GET_T, MULTI, SEQ - 1, &device_body(9, "old0", 9));
        buf.extend(done(SEQ - 1, 0));
        buf.extend(msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1)));
        buf.extend(done(SEQ, 0));
        let b = decode_replies(&buf, SEQ).unwrap();
        assert_eq!(b.replies, vec![Reply::Device(device(1, "rxe0", 1))]);
        assert_eq!(b.end, Some(End::Done));
        assert_eq!(b.messages, 4);
    }

    #[test]
    fn wrong_sizes_and_missing_attributes_are_errors() {
        let body = [nla(1, &[1, 0]), stra(2, "rxe0")].concat();
        assert_eq!(
            decode_replies(&msg(GET_T, MULTI, SEQ, &body), SEQ),
            Err(DecodeError::AttributeSize { attr: 1, len: 2 })
        );
        let body = u32a(1, 1);
        assert_eq!(
            decode_replies(&msg(GET_T, MULTI, SEQ, &body), SEQ),
            Err(DecodeError::MissingAttribute { op: 1, attr: 2 })
        );
        let body = [u32a(1, 1), stra(2, "rxe0")].concat();
        assert_eq!(
            decode_replies(&msg(PORT_GET_T, MULTI, SEQ, &body), SEQ),
            Err(DecodeError::MissingAttribute { op: 5, attr: 3 })
        );
        // A type of another client (RDMA_NL_LS = 4) or command (RES_GET = 9).
        for ty in [[0x00, 0x10], [0x09, 0x14]] {
            let kind = u16::from_le_bytes(ty);
            assert_eq!(
                decode_replies(&msg(ty, MULTI, SEQ, &body), SEQ),
                Err(DecodeError::UnexpectedType { kind })
            );
        }
        // NLMSG_ERROR with no room for the errno.
        assert_eq!(
            decode_replies(&msg([2, 0], 0, SEQ, &[0, 0]), SEQ),
            Err(DecodeError::ShortError { offset: 0 })
        );
        // NLMSG_OVERRUN.
        assert_eq!(
            decode_replies(&msg([4, 0], 0, SEQ, &[]), SEQ),
            Err(DecodeError::Overrun)
        );
    }

    #[test]
    fn names_that_are_not_device_names_are_kept_as_lengths() {
        let body = [u32a(1, 1), stra(2, "evil\n\x1b[31m"), u32a(3, 1)].concat();
        let b = decode_replies(&msg(PORT_GET_T, MULTI, SEQ, &body), SEQ).unwrap();
        let Reply::Port(p) = &b.replies[0] else {
            panic!("{:?}", b.replies)
        };
        assert_eq!(p.dev_name, Name::Invalid { len: 10 });
        assert_eq!(
            p.to_string(),
            "a name of 10 bytes that is not a device name port 1 (no netdev in this netns)"
        );
        // Not UTF-8, too long, empty, "..": all invalid.
        assert_eq!(Name::parse(&[0xff, 0xfe, 0]), Name::Invalid { len: 2 });
        assert_eq!(Name::parse(&[b'a'; 65]), Name::Invalid { len: 65 });
        assert_eq!(Name::parse(&[0]), Name::Invalid { len: 0 });
        assert_eq!(Name::parse(b"..\0"), Name::Invalid { len: 2 });
        // Bytes after the NUL are not part of the name; no NUL at all is accepted.
        assert_eq!(Name::parse(b"rxe0\0junk"), Name::Valid("rxe0".into()));
        assert_eq!(
            Name::parse(b"mlx5_core.sf.2"),
            Name::Valid("mlx5_core.sf.2".into())
        );
    }

    #[test]
    fn system_reports_the_netns_mode() {
        // nldev_sys_get_doit: NETNS_MODE, PRIVILEGED_QKEY_MODE (96, newer
        // kernels), COPY_ON_FORK (93); then the ACK we asked for.
        let body = [nla(66, &[1]), nla(96, &[0]), nla(93, &[1])].concat();
        let mut buf = msg(SYS_GET_T, 0, SEQ, &body);
        buf.extend(nlerr(SEQ, 0));
        let mut ex = Exchange::new(Request::System, SEQ);
        assert!(ex.feed(&buf).unwrap());
        assert_eq!(
            ex.into_replies(),
            vec![Reply::System(System {
                netns_mode: Some(NetnsMode::Shared)
            })]
        );
        let b = decode_replies(&msg(SYS_GET_T, 0, SEQ, &nla(66, &[0])), SEQ).unwrap();
        assert_eq!(
            b.replies,
            vec![Reply::System(System {
                netns_mode: Some(NetnsMode::Exclusive)
            })]
        );
        assert_eq!(b.end, None);
        assert_eq!(
            decode_replies(&msg(SYS_GET_T, 0, SEQ, &nla(66, &[2])), SEQ),
            Err(DecodeError::BadNetnsMode(2))
        );
    }

    #[test]
    fn a_reply_of_another_command_is_refused() {
        let mut buf = msg(GET_T, MULTI, SEQ, &device_body(1, "rxe0", 1));
        buf.extend(done(SEQ, 0));
        let mut ex = Exchange::new(Request::Ports { dev_index: 1 }, SEQ);
        let e = ex.feed(&buf).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Decode {
                    err: DecodeError::WrongReply { asked: 5, got: 1 },
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn an_endless_answer_is_cut_off() {
        // NLMSG_NOOPs of our seq never end an answer; the bound does.
        let noop = msg([1, 0], 0, SEQ, &[]);
        let buf: Vec<u8> = noop.repeat(1024);
        let mut ex = Exchange::new(Request::Devices, SEQ);
        let mut fed = 0;
        let err = loop {
            match ex.feed(&buf) {
                Ok(false) => fed += 1,
                Ok(true) => panic!("NOOPs ended the answer"),
                Err(e) => break e,
            }
        };
        assert_eq!(fed, MAX_MESSAGES / 1024);
        assert!(matches!(
            err,
            Error::Decode {
                err: DecodeError::TooManyMessages,
                ..
            }
        ));
        // Empty datagrams count too.
        let mut ex = Exchange::new(Request::Devices, SEQ);
        assert!((0..=MAX_MESSAGES).any(|_| ex.feed(&[]).is_err()));
    }

    #[test]
    fn encoded_batches_decode_to_the_same_values() {
        let batch = Batch {
            replies: vec![
                Reply::Port(rxe_port(true)),
                Reply::Port(Port {
                    dev_name: Name::Invalid { len: 3 },
                    ndev_name: Some(Name::Invalid { len: 0 }),
                    ..rxe_port(true)
                }),
            ],
            end: Some(End::Failed(95)),
            messages: 3,
        };
        assert_eq!(decode_replies(&encode_batch(&batch, 5), 5).unwrap(), batch);
        let batch = Batch {
            replies: vec![Reply::Device(Device {
                parent: Some(Name::Valid("mlx5_0".into())),
                ..device(4, "smi0", u64::MAX)
            })],
            end: Some(End::Done),
            messages: 2,
        };
        assert_eq!(decode_replies(&encode_batch(&batch, 5), 5).unwrap(), batch);
    }

    #[test]
    fn the_port_is_the_one_whose_netdev_has_both_index_and_name() {
        let ours = rxe_port(true);
        let other = Port {
            dev_index: 2,
            dev_name: Name::Valid("rxe1".into()),
            ndev_index: Some(4),
            ndev_name: Some(Name::Valid("net2".into())),
            ..rxe_port(true)
        };
        let host_view = Port {
            dev_index: 3,
            dev_name: Name::Valid("mlx5_0".into()),
            ..rxe_port(false)
        };
        let ports = [host_view.clone(), other.clone(), ours.clone()];
        assert_eq!(
            port_for_netdev(&ports, 3, "net1"),
            PortMatch::One(&ports[2])
        );
        assert_eq!(
            port_for_netdev(&ports, 4, "net2"),
            PortMatch::One(&ports[1])
        );
        // Index right, name wrong (renamed, or another netns's index): none.
        assert_eq!(port_for_netdev(&ports, 3, "net2"), PortMatch::None);
        assert_eq!(port_for_netdev(&ports, 9, "net1"), PortMatch::None);
        assert_eq!(port_for_netdev(&[], 3, "net1"), PortMatch::None);
        // A name that is not a device name never matches, even by length.
        let odd = Port {
            ndev_name: Some(Name::Invalid { len: 4 }),
            ..ours.clone()
        };
        assert_eq!(port_for_netdev(&[odd], 3, "net1"), PortMatch::None);
        // Two devices on one netdev (a bond's LAG device and a leftover).
        let twin = Port {
            dev_index: 5,
            dev_name: Name::Valid("mlx5_bond_0".into()),
            ..ours.clone()
        };
        let ports = [ours, twin];
        assert_eq!(
            port_for_netdev(&ports, 3, "net1"),
            PortMatch::Ambiguous(vec![&ports[0], &ports[1]])
        );
    }

    #[test]
    fn open_is_unavailable_without_ib_core_or_answers() {
        // This machine's kernel may or may not have ib_core: either the socket
        // is refused as "unavailable", or it opens and answers a device dump.
        match RdmaNetlink::open() {
            Err(e) => assert!(
                e.is_unavailable() && e.errno() == Some(Errno::EPROTONOSUPPORT as i32),
                "{e:?}"
            ),
            Ok(mut nl) => match nl.devices() {
                Ok(_) => {}
                Err(e) => assert!(e.is_unavailable(), "{e:?}"),
            },
        }
    }
}
