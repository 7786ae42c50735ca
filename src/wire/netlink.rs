//! The netlink framing every family shares (`include/uapi/linux/netlink.h`):
//! message headers, attributes, how an answer ends, and the bounds of one
//! exchange. Pure functions over byte slices, fuzzed through both codecs
//! (`fuzz/fuzz_targets/rtnetlink.rs`, `fuzz/fuzz_targets/nldev.rs`).
//!
//! Layout, host byte order throughout:
//! - `struct nlmsghdr`: u32 nlmsg_len (header included, and the padding of
//!   the last attribute: `nlmsg_end` sets it from the tail), u16 nlmsg_type,
//!   u16 nlmsg_flags, u32 nlmsg_seq, u32 nlmsg_pid. Messages start on 4-byte
//!   boundaries (`NLMSG_ALIGN`).
//! - `struct nlattr`: u16 nla_len (header and value, no padding), u16
//!   nla_type (its top two bits are NLA_F_NESTED and NLA_F_NET_BYTEORDER),
//!   the value, zero padding to 4 bytes (`NLA_ALIGN`).
//! - NLMSG_ERROR: an int (0 for an ACK, else -errno), then the request's
//!   header echoed; NLMSG_DONE: an int, the dump's return value
//!   (`netlink_dump_done` in net/netlink/af_netlink.c).

use std::fmt;

pub const NLMSG_HDRLEN: usize = 16;
pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLMSG_OVERRUN: u16 = 4;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
/// NLM_F_ROOT | NLM_F_MATCH.
pub const NLM_F_DUMP: u16 = 0x300;

/// `NLA_TYPE_MASK`: nla_type without NLA_F_NESTED and NLA_F_NET_BYTEORDER.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A dump brings one message per link, address, device or port. No host has
/// this many: past it the socket is talking nonsense, and the exchange stops
/// instead of reading forever.
pub const MAX_MESSAGES: usize = 16 * 1024;

/// The same bound in bytes, over all datagrams of one exchange: a link
/// message is about 1.5 KiB (1512 bytes for a virtio NIC, captured in
/// `testdata/getlink_eth0.hex`), so this is room for about 20,000 links.
pub const MAX_BYTES: usize = 32 << 20;

/// Malformed input. Offsets are byte offsets in the datagram; nothing here
/// holds the bytes themselves, only sizes, numbers and offsets.
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
    /// A family header (`struct ifinfomsg`, `struct ifaddrmsg`) shorter than
    /// its struct.
    ShortFamilyHeader { kind: u16, len: usize },
    /// An attribute whose header or length does not fit its message.
    BadAttribute { offset: usize },
    /// A known attribute with a value of the wrong size.
    AttributeSize { attr: u16, len: usize },
    /// A name attribute that is not a name of safe characters (ASCII
    /// alphanumerics and `_-.:`, not `.` or `..`, within its size).
    BadName { attr: u16, len: usize },
    /// A reply without an attribute the kernel always sends; `op` is the
    /// nldev command or the rtnetlink message type.
    MissingAttribute { op: u16, attr: u16 },
    /// A message type the request never brings back.
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
    /// More than [`MAX_BYTES`] bytes in one exchange.
    TooManyBytes,
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
            ShortFamilyHeader { kind, len } => {
                write!(f, "message of type {kind} has a {len}-byte family header")
            }
            BadAttribute { offset } => {
                write!(f, "attribute at offset {offset} does not fit its message")
            }
            AttributeSize { attr, len } => write!(f, "attribute {attr} has {len} bytes"),
            BadName { attr, len } => {
                write!(
                    f,
                    "attribute {attr} is a name of {len} bytes that is not a device name"
                )
            }
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
            TooManyBytes => write!(f, "more than {} MiB", MAX_BYTES >> 20),
        }
    }
}

impl std::error::Error for DecodeError {}

/// How an answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// NLMSG_DONE with errno 0: the dump is complete.
    Done,
    /// NLMSG_ERROR with errno 0: the ACK of a doit request.
    Ack,
    /// NLMSG_ERROR, or NLMSG_DONE, carrying an errno (positive, e.g. 19 for
    /// ENODEV). A dump whose callback fails ends with a DONE holding the
    /// errno (`netlink_dump_done`), not with an NLMSG_ERROR.
    Failed(i32),
}

/// One message of our sequence number that does not end the answer.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub kind: u16,
    pub flags: u16,
    /// What follows the netlink header: the family header, if the family
    /// has one, then the attributes.
    pub payload: &'a [u8],
    /// Where `payload` starts in the datagram, for error messages.
    pub offset: usize,
}

/// What one datagram held for our sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<T> {
    pub replies: Vec<T>,
    pub end: Option<End>,
    /// Messages read, ours or not (bounds the exchange).
    pub messages: usize,
}

fn ne_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn ne_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A kernel errno field (negative on the wire) as a positive errno.
fn errno_of(code: i32) -> i32 {
    code.saturating_abs()
}

/// Decode one datagram: hand `reply` every message whose sequence number is
/// `seq`, up to the message that ends the answer (NLMSG_DONE or
/// NLMSG_ERROR). Messages of other sequence numbers (a late answer to an
/// earlier request) are skipped. Never panics, and always moves forward: a
/// message shorter than its header is an error, not a zero-length step.
pub fn decode<T>(
    buf: &[u8],
    seq: u32,
    mut reply: impl FnMut(Message<'_>) -> Result<T, DecodeError>,
) -> Result<Batch<T>, DecodeError> {
    let mut batch = Batch {
        replies: Vec::new(),
        end: None,
        messages: 0,
    };
    let mut off = 0;
    while off < buf.len() {
        let rest = &buf[off..];
        if rest.len() < NLMSG_HDRLEN {
            return Err(DecodeError::ShortHeader {
                offset: off,
                have: rest.len(),
            });
        }
        let len = ne_u32(rest, 0);
        if (len as usize) < NLMSG_HDRLEN || len as usize > rest.len() {
            return Err(DecodeError::BadMessageLength {
                offset: off,
                len,
                have: rest.len(),
            });
        }
        let len = len as usize;
        let kind = ne_u16(rest, 4);
        let payload = &rest[NLMSG_HDRLEN..len];
        batch.messages += 1;
        if ne_u32(rest, 8) == seq {
            match kind {
                NLMSG_NOOP => {}
                NLMSG_OVERRUN => return Err(DecodeError::Overrun),
                NLMSG_ERROR => {
                    if payload.len() < 4 {
                        return Err(DecodeError::ShortError { offset: off });
                    }
                    batch.end = Some(match ne_u32(payload, 0) as i32 {
                        0 => End::Ack,
                        code => End::Failed(errno_of(code)),
                    });
                    return Ok(batch);
                }
                NLMSG_DONE => {
                    // Ext-ack TLVs may follow the int. A DONE without it
                    // (Linux never sends one) is read as success.
                    let code = if payload.len() >= 4 {
                        ne_u32(payload, 0) as i32
                    } else {
                        0
                    };
                    batch.end = Some(match code {
                        0 => End::Done,
                        code => End::Failed(errno_of(code)),
                    });
                    return Ok(batch);
                }
                _ => batch.replies.push(reply(Message {
                    kind,
                    flags: ne_u16(rest, 6),
                    payload,
                    offset: off + NLMSG_HDRLEN,
                })?),
            }
        }
        off = off.saturating_add((len + 3) & !3);
    }
    Ok(batch)
}

/// The attributes of a message body, as (type, value). The type has the
/// NESTED and NET_BYTEORDER bits cleared. After the first malformed
/// attribute the iterator yields its error, then ends.
pub struct Attrs<'a> {
    buf: &'a [u8],
    at: usize,
    base: usize,
}

/// The attributes in `buf`, which starts at offset `base` of the datagram.
pub fn attrs(buf: &[u8], base: usize) -> Attrs<'_> {
    Attrs { buf, at: 0, base }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.buf.get(self.at..).filter(|r| !r.is_empty())?;
        let len = if rest.len() >= 4 {
            ne_u16(rest, 0) as usize
        } else {
            0
        };
        if len < 4 || len > rest.len() {
            let offset = self.base + self.at;
            self.at = self.buf.len();
            return Some(Err(DecodeError::BadAttribute { offset }));
        }
        let kind = ne_u16(rest, 2) & NLA_TYPE_MASK;
        self.at = self.at.saturating_add((len + 3) & !3);
        Some(Ok((kind, &rest[4..len])))
    }
}

/// An attribute value that must be exactly `N` bytes.
pub fn fixed<const N: usize>(attr: u16, v: &[u8]) -> Result<[u8; N], DecodeError> {
    v.try_into()
        .map_err(|_| DecodeError::AttributeSize { attr, len: v.len() })
}

/// A NUL-terminated string attribute (`nla_put_string`) that must be a name
/// of safe characters, at most `max` bytes: ASCII alphanumerics and `_-.:`,
/// not `.` or `..`. Anything else is refused by its size only, so no
/// message ever quotes bytes the kernel (or anything on the socket) sent.
pub fn name(attr: u16, v: &[u8], max: usize) -> Result<String, DecodeError> {
    let bytes = v.split(|&b| b == 0).next().unwrap_or_default();
    let safe = !bytes.is_empty()
        && bytes.len() <= max
        && bytes != b"."
        && bytes != b".."
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    match std::str::from_utf8(bytes) {
        Ok(s) if safe => Ok(s.to_owned()),
        _ => Err(DecodeError::BadName {
            attr,
            len: bytes.len(),
        }),
    }
}

/// A message being built. The port id stays 0: the kernel knows ours.
pub struct Builder(Vec<u8>);

impl Builder {
    pub fn new(kind: u16, flags: u16, seq: u32) -> Builder {
        let mut b = Vec::with_capacity(64);
        b.extend(0u32.to_ne_bytes()); // nlmsg_len, set by finish()
        b.extend(kind.to_ne_bytes());
        b.extend(flags.to_ne_bytes());
        b.extend(seq.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        Builder(b)
    }

    /// Raw bytes: a family header, or an errno. Padded to 4 bytes.
    pub fn bytes(mut self, b: &[u8]) -> Builder {
        self.0.extend(b);
        self.pad()
    }

    /// One attribute, as `nla_put` lays it out.
    pub fn attr(mut self, kind: u16, value: &[u8]) -> Builder {
        // Callers put a name or a number; a longer value would not fit nla_len.
        let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
        self.0.extend(len.to_ne_bytes());
        self.0.extend(kind.to_ne_bytes());
        self.0.extend(value);
        self.pad()
    }

    /// A string attribute with its NUL (`nla_put_string`).
    pub fn str_attr(self, kind: u16, s: &str) -> Builder {
        let mut v = Vec::with_capacity(s.len() + 1);
        v.extend(s.as_bytes());
        v.push(0);
        self.attr(kind, &v)
    }

    fn pad(mut self) -> Builder {
        while self.0.len() % 4 != 0 {
            self.0.push(0);
        }
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        let len = u32::try_from(self.0.len()).unwrap_or(u32::MAX);
        self.0[..4].copy_from_slice(&len.to_ne_bytes());
        self.0
    }
}

/// The kernel's end of an answer to `seq`: NLMSG_DONE for a dump, or
/// NLMSG_ERROR with 0 (ACK) or -errno and the request's header echoed (here
/// 16 zero bytes). For tests and the fuzzers' round trips.
pub fn encode_end(end: End, seq: u32) -> Vec<u8> {
    match end {
        End::Done => Builder::new(NLMSG_DONE, NLM_F_MULTI, seq)
            .bytes(&0i32.to_ne_bytes())
            .finish(),
        End::Ack | End::Failed(_) => {
            let code = match end {
                End::Failed(errno) => errno.wrapping_neg(),
                _ => 0,
            };
            Builder::new(NLMSG_ERROR, 0, seq)
                .bytes(&code.to_ne_bytes())
                .bytes(&[0; NLMSG_HDRLEN])
                .finish()
        }
    }
}

/// One exchange's bounds across all its datagrams: one sequence number, at
/// most [`MAX_MESSAGES`] messages and [`MAX_BYTES`] bytes. The socket feeds
/// it what it receives; tests and fuzzers feed it bytes.
#[derive(Debug)]
pub struct Gather {
    seq: u32,
    messages: usize,
    bytes: usize,
}

impl Gather {
    pub fn new(seq: u32) -> Gather {
        Gather {
            seq,
            messages: 0,
            bytes: 0,
        }
    }

    /// Take one datagram, handing our replies to `reply`. `Some(end)` once
    /// the answer is complete.
    pub fn feed(
        &mut self,
        datagram: &[u8],
        mut reply: impl FnMut(Message<'_>) -> Result<(), DecodeError>,
    ) -> Result<Option<End>, DecodeError> {
        self.bytes = self.bytes.saturating_add(datagram.len());
        if self.bytes > MAX_BYTES {
            return Err(DecodeError::TooManyBytes);
        }
        let batch = decode(datagram, self.seq, &mut reply)?;
        // An empty datagram still counts, so a stream of them ends too.
        self.messages = self.messages.saturating_add(batch.messages.max(1));
        if self.messages > MAX_MESSAGES {
            return Err(DecodeError::TooManyMessages);
        }
        Ok(batch.end)
    }
}
