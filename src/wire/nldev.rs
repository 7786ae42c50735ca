//! The nldev wire format: requests encoded, answers decoded, an exchange
//! gathered over as many `recv`s as it takes, on the framing rtnetlink shares
//! (`netlink`). Pure functions, fuzzed (`fuzz/fuzz_targets/nldev.rs`); the
//! exchange over a socket is `netlink::nldev`'s.

use super::netlink::{
    self as nl, attrs, fixed, Builder, Message, NLM_F_ACK, NLM_F_DUMP, NLM_F_MULTI, NLM_F_REQUEST,
};

pub use super::netlink::{DecodeError, End, MAX_MESSAGES};
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
pub const fn split_type(kind: u16) -> (u16, u16) {
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
    pub fn op(self) -> u16 {
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
    pub fn parse(value: &[u8]) -> Name {
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
    pub fn wire(&self) -> Vec<u8> {
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
pub type Batch = nl::Batch<Reply>;

/// `/sys/module/ib_core/parameters/netns_mode` (drivers/infiniband/core/device.c):
/// `Y` shared (devices stay in the host netns), `N` exclusive (the RDMA CNI
/// moved the device into the pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetnsMode {
    Shared,
    Exclusive,
}

/// A name read from sysfs or a state file, used as one path component:
/// refuse anything that could climb or hide (`..`, `/`, control bytes).
pub fn is_safe_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// An attribute as the kernel lays it out (`nla_put_u8/u32/u64_64bit/string`):
/// host byte order, strings with their NUL.
#[derive(Debug, Clone)]
pub enum Attr {
    U8(u16, u8),
    U32(u16, u32),
    U64(u16, u64),
    Str(u16, Vec<u8>),
}

/// An nldev message body: attributes right after the netlink header (nldev
/// has no family header: `nlmsg_parse(nlh, 0, ...)` in nldev.c).
pub struct Body {
    op: u16,
    attrs: Vec<Attr>,
}

pub fn message(body: &Body, seq: u32, flags: u16) -> Vec<u8> {
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

pub fn reply_body(reply: &Reply) -> Body {
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

pub fn u8_of(a: u16, v: &[u8]) -> Result<u8, DecodeError> {
    fixed(a, v).map(u8::from_ne_bytes)
}

pub fn u32_of(a: u16, v: &[u8]) -> Result<u32, DecodeError> {
    fixed(a, v).map(u32::from_ne_bytes)
}

pub fn u64_of(a: u16, v: &[u8]) -> Result<u64, DecodeError> {
    fixed(a, v).map(u64::from_ne_bytes)
}

/// One nldev reply. Unknown attributes (and PAD) are skipped: newer kernels
/// add attributes, and the kernel may nest tables (NLA_F_NESTED) we never read.
pub fn decode_reply(m: Message<'_>) -> Result<Reply, DecodeError> {
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

/// Decode one reply to `request` into `replies`: a reply of another command
/// is an error, not an answer.
pub fn take(request: Request, replies: &mut Vec<Reply>, m: Message<'_>) -> Result<(), DecodeError> {
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
