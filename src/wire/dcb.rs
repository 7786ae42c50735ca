//! DCB netlink, the IEEE 802.1Qaz part: the request that asks a netdev for
//! its DCB state (`RTM_GETDCB` with `DCB_CMD_IEEE_GET`) and the decoder of the
//! answer, as pure functions over bytes. What roce-tune reads of it: the APP
//! table (which DSCP lands on which priority), `ieee_pfc`'s per-priority PFC
//! bitmap and its per-priority pause counts, and the DCBX mode. No IO here:
//! `dcb_socket` runs the exchange; tests and the fuzzer
//! (`fuzz/fuzz_targets/dcb.rs`) feed bytes.
//!
//! Sources (Debian 12's linux-source-6.1 6.1.192-3, the lane's kernel, and
//! its linux-libc-dev headers; read for facts only):
//! - `include/uapi/linux/rtnetlink.h:119`: RTM_GETDCB 78.
//! - `include/uapi/linux/dcbnl.h`: `struct ieee_pfc` (157: u8 pfc_cap, u8
//!   pfc_en, u8 mbc, u16 delay, u64 requests[8], u64 indications[8]; 136
//!   bytes, requests at 8, indications at 72), `IEEE_8021QAZ_APP_SEL_DSCP` 5
//!   (219), `struct dcb_app` (244: u8 selector, u8 priority, u16 protocol),
//!   `struct dcbmsg` (264: u8 dcb_family, u8 cmd, u16 pad), DCB_CMD_IEEE_GET
//!   21 (334), DCB_ATTR_IFNAME 1 (372), DCB_ATTR_IEEE 13 (386), DCB_ATTR_DCBX
//!   14 (388), DCB_ATTR_IEEE_PFC 2 and DCB_ATTR_IEEE_APP_TABLE 3 (412-413),
//!   DCB_ATTR_IEEE_APP 1 (427). Sizes and offsets checked with a C program
//!   against that header.
//! - `net/dcb/dcbnl.c`: `dcb_doit` (1740) answers -ENODEV when no netdev of
//!   that name is in the socket's netns (1774-1776) and -EOPNOTSUPP when the
//!   netdev has no `dcbnl_ops` (1778-1779: veth, e1000e, an mlx5 VF, the
//!   netdev under rxe); else one reply (`dcbnl_newmsg`, 182: a `struct
//!   dcbmsg` with AF_UNSPEC and the command, the REQUEST's flags copied)
//!   filled by `dcbnl_ieee_fill` (1031): IFNAME, then the IEEE nest (ETS,
//!   MAXRATE, QCN, QCN_STATS, PFC, BUFFER as the driver has them; the APP
//!   table, always; the peer's), then DCBX when the driver reports it. The
//!   ACK follows only when asked (NLM_F_ACK), after the reply.
//! - `dcbnl_ieee_policy` (dcbnl.c:161): PFC is at least `sizeof(struct
//!   ieee_pfc)`, the APP table NLA_NESTED; `dcbnl_ieee_set` (1498-1504)
//!   skips table entries of other types and refuses an APP entry shorter
//!   than `struct dcb_app` (ERANGE). The decoder holds the answer to the
//!   same rules.
//! - The answer is one skb of `NLMSG_DEFAULT_SIZE` (`dcbnl_newmsg`:
//!   `nlmsg_new(NLMSG_DEFAULT_SIZE)`), and `NLMSG_GOODSIZE` is at most 8192
//!   bytes on any page size (`include/linux/netlink.h:207-213`): a bigger
//!   DCB answer is not the kernel's ([`MAX_REPLY_BYTES`]).
//!
//! The APP table is the kernel's one list of APP entries for the netdev
//! (`dcb_app_list`, dcbnl.c:179), CEE ones included, so entries of other
//! selectors (and CEE's priority bitmaps) come along: the decoder keeps them
//! as they are and the QoS rules read only the DSCP ones.

use super::netlink::{
    attrs, fixed, name, Builder, DecodeError, End, Gather, Message, NLM_F_ACK, NLM_F_REQUEST,
};
use std::fmt;

/// `RTM_GETDCB` (rtnetlink.h): the request and its reply share the type.
pub const RTM_GETDCB: u16 = 78;
/// `DCB_CMD_IEEE_GET` (`enum dcbnl_commands`).
pub const DCB_CMD_IEEE_GET: u8 = 21;
/// `struct dcbmsg`: family, command, two bytes of padding.
const DCBMSG_LEN: usize = 4;
const AF_UNSPEC: u8 = 0;

/// `enum dcbnl_attrs`: the top level of the answer.
pub mod attr {
    /// NUL-terminated string; the request's only attribute.
    pub const IFNAME: u16 = 1;
    /// The nest `dcbnl_ieee_fill` puts everything IEEE in.
    pub const IEEE: u16 = 13;
    /// u8: `DCB_CAP_DCBX_*` bits, when the driver has `getdcbx`.
    pub const DCBX: u16 = 14;
}

/// `enum ieee_attrs`: inside [`attr::IEEE`].
pub mod ieee {
    pub const ETS: u16 = 1;
    /// `struct ieee_pfc`.
    pub const PFC: u16 = 2;
    /// A nest of [`APP`] entries.
    pub const APP_TABLE: u16 = 3;
    /// `DCB_ATTR_IEEE_APP` (`enum ieee_attrs_app`): one `struct dcb_app`.
    /// Kernels from 6.3 also put `DCB_ATTR_DCB_APP` (2) entries here, for
    /// selectors outside IEEE's (PCP): skipped, as unknown entries are.
    pub const APP: u16 = 1;
}

/// `IEEE_8021QAZ_APP_SEL_DSCP`: an APP entry whose protocol is a DSCP.
pub const SEL_DSCP: u8 = 5;
/// `IEEE_8021QAZ_MAX_TCS`: the PFC bitmap and the pause counts have a slot
/// per priority.
pub const PRIORITIES: usize = 8;
/// `sizeof(struct ieee_pfc)` on every ABI: 3 u8, a u16 at 4, two u64[8] at
/// 8 and 72.
const IEEE_PFC_LEN: usize = 136;
/// `sizeof(struct dcb_app)`.
const DCB_APP_LEN: usize = 4;
/// An APP entry on the wire: its attribute header and a `struct dcb_app`.
const APP_ATTR_LEN: usize = 4 + DCB_APP_LEN;
/// `IFNAMSIZ - 1`: the policy's bound on DCB_ATTR_IFNAME
/// (`dcbnl_rtnl_policy`, dcbnl.c:45).
const IFNAME_MAX: usize = 15;

/// The largest DCB answer the kernel can send: one `NLMSG_DEFAULT_SIZE`
/// skb, below `NLMSG_GOODSIZE`'s 8192 bytes. Checked before any attribute
/// is read.
pub const MAX_REPLY_BYTES: usize = 8192;
/// The most APP entries a table may have: an mlx5 PF in DSCP trust lists
/// 64, one per DSCP; this is room for each DSCP four times over, or for the
/// other selectors' entries beside them. An answer's 8192 bytes could hold
/// about a thousand, which no PF has. Checked against what the table's size
/// has room for, before its entries are read or stored.
pub const MAX_APP_ENTRIES: usize = 256;

/// One APP entry, as `struct dcb_app` holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct App {
    pub selector: u8,
    /// An IEEE entry's priority (0 to 7); a CEE entry's is a bitmap.
    pub priority: u8,
    /// The DSCP for [`SEL_DSCP`], an ethertype or a port for the others.
    pub protocol: u16,
}

/// `struct ieee_pfc`: which priorities have PFC, and the pause frames per
/// priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pfc {
    /// How many priorities may have PFC at once.
    pub cap: u8,
    /// Bit `p` set: priority `p` has PFC.
    pub enabled: u8,
    pub mbc: u8,
    pub delay: u16,
    /// Pause frames sent, per priority.
    pub requests: [u64; PRIORITIES],
    /// Pause frames received, per priority.
    pub indications: [u64; PRIORITIES],
}

impl Pfc {
    /// Whether priority `p` has PFC (false past 7).
    pub fn enabled_on(&self, p: u8) -> bool {
        p < 8 && self.enabled & (1 << p) != 0
    }
}

/// What the answer says of one netdev.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcbState {
    /// The netdev's name as the kernel gives it (its real name, also when
    /// asked by an alternative name).
    pub ifname: String,
    /// The APP table, in the kernel's order.
    pub apps: Vec<App>,
    /// `None`: the driver reports no PFC (no `ieee_getpfc`, or it failed).
    pub pfc: Option<Pfc>,
    /// `None`: the driver has no `getdcbx`.
    pub dcbx: Option<u8>,
}

impl DcbState {
    /// The APP entries that map a DSCP to a priority.
    pub fn dscp_entries(&self) -> impl Iterator<Item = &App> {
        self.apps.iter().filter(|a| a.selector == SEL_DSCP)
    }
}

/// Why a netdev has no DCB state to read. Both are ordinary answers, not
/// failures: the QoS verdict is then "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoDcb {
    /// EOPNOTSUPP: the netdev's driver implements no DCB (`dcbnl_ops`).
    NotSupported,
    /// ENODEV: no netdev of that name in the socket's netns.
    NoDevice,
}

impl NoDcb {
    /// The "no DCB" answers among the errnos `dcb_doit` returns.
    pub fn from_errno(errno: i32) -> Option<NoDcb> {
        match errno {
            nix::libc::EOPNOTSUPP => Some(NoDcb::NotSupported),
            nix::libc::ENODEV => Some(NoDcb::NoDevice),
            _ => None,
        }
    }
}

impl fmt::Display for NoDcb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoDcb::NotSupported => "its driver implements no DCB (EOPNOTSUPP)",
            NoDcb::NoDevice => "no netdev of that name in this netns (ENODEV)",
        })
    }
}

/// The kernel's answer to one `DCB_CMD_IEEE_GET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    State(DcbState),
    NoDcb(NoDcb),
}

/// A request that cannot be made, or an answer that is not one. Messages
/// give sizes, numbers and offsets, never the bytes themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DcbError {
    /// The name to ask for is not a netdev name (empty, over 15 bytes, or
    /// characters a netdev name never has).
    BadIfname { len: usize },
    /// Malformed framing or attributes (the shared netlink decoder's).
    Decode(DecodeError),
    /// A reply larger than the kernel's DCB answer can be.
    Oversized { len: usize },
    /// An APP table larger than any answer can hold; `room` is how many
    /// entries its size has room for.
    TooManyApps { room: usize },
    /// More than one reply to one request.
    SecondReply,
    /// The ACK came without a reply.
    NoReply,
    /// The kernel refused with another errno than the "no DCB" ones.
    Kernel(i32),
}

impl From<DecodeError> for DcbError {
    fn from(e: DecodeError) -> DcbError {
        DcbError::Decode(e)
    }
}

impl fmt::Display for DcbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DcbError::BadIfname { len } => {
                write!(f, "a name of {len} bytes that is not a netdev name")
            }
            DcbError::Decode(e) => write!(f, "malformed DCB answer: {e}"),
            DcbError::Oversized { len } => write!(
                f,
                "a DCB answer of {len} bytes: the kernel's are at most {MAX_REPLY_BYTES}"
            ),
            DcbError::TooManyApps { room } => write!(
                f,
                "an APP table with room for {room} entries: an answer holds at most {MAX_APP_ENTRIES}"
            ),
            DcbError::SecondReply => write!(f, "more than one reply to one DCB request"),
            DcbError::NoReply => write!(f, "the DCB request was acknowledged without a reply"),
            DcbError::Kernel(errno) => write!(
                f,
                "the kernel refused the DCB request: {} (errno {errno})",
                nix::errno::Errno::from_raw(*errno).desc()
            ),
        }
    }
}

impl std::error::Error for DcbError {}

/// The request for `ifname`'s IEEE DCB state: a `struct dcbmsg` (AF_UNSPEC,
/// DCB_CMD_IEEE_GET) and DCB_ATTR_IFNAME, with NLM_F_ACK so the exchange
/// ends on the ACK that follows the reply.
pub fn encode_request(ifname: &str, seq: u32) -> Result<Vec<u8>, DcbError> {
    let bytes = ifname.as_bytes();
    // A NUL inside would cut the name the kernel reads.
    if bytes.contains(&0) || name(attr::IFNAME, bytes, IFNAME_MAX).is_err() {
        return Err(DcbError::BadIfname { len: bytes.len() });
    }
    Ok(Builder::new(RTM_GETDCB, NLM_F_REQUEST | NLM_F_ACK, seq)
        .bytes(&[AF_UNSPEC, DCB_CMD_IEEE_GET, 0, 0])
        .str_attr(attr::IFNAME, ifname)
        .finish())
}

/// One reply, decoded. Unknown attributes are skipped at every level: newer
/// kernels add some (the APP trust table, rewrite tables) and drivers send
/// the optional ones they have.
pub fn decode_reply(m: Message<'_>) -> Result<DcbState, DcbError> {
    if m.kind != RTM_GETDCB {
        return Err(DecodeError::UnexpectedType { kind: m.kind }.into());
    }
    let len = m.payload.len();
    if len > MAX_REPLY_BYTES {
        return Err(DcbError::Oversized { len });
    }
    if len < DCBMSG_LEN {
        return Err(DecodeError::ShortFamilyHeader { kind: m.kind, len }.into());
    }
    let cmd = m.payload[1];
    if cmd != DCB_CMD_IEEE_GET {
        return Err(DecodeError::WrongReply {
            asked: DCB_CMD_IEEE_GET.into(),
            got: cmd.into(),
        }
        .into());
    }
    let base = m.offset + DCBMSG_LEN;
    let mut ifname = None;
    let mut ieee_nest = None;
    let mut dcbx = None;
    // A repeated attribute: the last one counts, as `nla_parse` has it.
    for nla in attrs(&m.payload[DCBMSG_LEN..], base) {
        let (a, v) = nla?;
        match a {
            attr::IFNAME => ifname = Some(name(a, v, IFNAME_MAX)?),
            attr::IEEE => ieee_nest = Some(decode_ieee(v, base)?),
            attr::DCBX => dcbx = Some(u8::from_ne_bytes(fixed(a, v)?)),
            _ => {}
        }
    }
    let missing = |attr| DecodeError::MissingAttribute {
        op: RTM_GETDCB,
        attr,
    };
    let (apps, pfc) = ieee_nest.ok_or(missing(attr::IEEE))?;
    Ok(DcbState {
        ifname: ifname.ok_or(missing(attr::IFNAME))?,
        apps,
        pfc,
        dcbx,
    })
}

/// The IEEE nest: the APP table and PFC. `base` is an offset for messages
/// only (attributes report where they sit relative to it).
fn decode_ieee(v: &[u8], base: usize) -> Result<(Vec<App>, Option<Pfc>), DcbError> {
    let mut apps = Vec::new();
    let mut pfc = None;
    for nla in attrs(v, base) {
        let (a, v) = nla?;
        match a {
            ieee::PFC => pfc = Some(decode_pfc(v)?),
            ieee::APP_TABLE => apps = decode_apps(v, base)?,
            _ => {}
        }
    }
    Ok((apps, pfc))
}

fn decode_pfc(v: &[u8]) -> Result<Pfc, DcbError> {
    // At least the struct, as the policy says; the kernel sends exactly it.
    let v = v.get(..IEEE_PFC_LEN).ok_or(DecodeError::AttributeSize {
        attr: ieee::PFC,
        len: v.len(),
    })?;
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&v[at..at + 8]);
        u64::from_ne_bytes(b)
    };
    Ok(Pfc {
        cap: v[0],
        enabled: v[1],
        mbc: v[2],
        delay: u16::from_ne_bytes([v[4], v[5]]),
        requests: std::array::from_fn(|p| u64_at(8 + 8 * p)),
        indications: std::array::from_fn(|p| u64_at(72 + 8 * p)),
    })
}

fn decode_apps(v: &[u8], base: usize) -> Result<Vec<App>, DcbError> {
    // The bound comes first: what the table's size has room for, before
    // anything is stored.
    let room = v.len() / APP_ATTR_LEN;
    if room > MAX_APP_ENTRIES {
        return Err(DcbError::TooManyApps { room });
    }
    let mut apps = Vec::with_capacity(room);
    for nla in attrs(v, base) {
        let (a, v) = nla?;
        if a != ieee::APP {
            continue;
        }
        let v = v.get(..DCB_APP_LEN).ok_or(DecodeError::AttributeSize {
            attr: ieee::APP,
            len: v.len(),
        })?;
        apps.push(App {
            selector: v[0],
            priority: v[1],
            protocol: u16::from_ne_bytes([v[2], v[3]]),
        });
    }
    Ok(apps)
}

/// What one exchange has seen of its replies: the first one decoded, and
/// whether more came. The socket and [`Exchange`] both fill it.
#[derive(Debug, Default)]
pub struct Replies {
    first: Option<Result<DcbState, DcbError>>,
    more: bool,
}

impl Replies {
    /// Take one reply of our sequence number. Never fails: a bad reply is
    /// kept as its error and reported by [`Replies::finish`], so the
    /// exchange still reads its answer to the end.
    pub fn take(&mut self, m: Message<'_>) {
        if self.first.is_none() {
            self.first = Some(decode_reply(m));
        } else {
            self.more = true;
        }
    }

    /// The answer, once the exchange ended with `end`. A failed request
    /// brings no reply (`dcb_doit` unicasts one only on success).
    pub fn finish(self, end: End) -> Result<Answer, DcbError> {
        if let End::Failed(errno) = end {
            return NoDcb::from_errno(errno)
                .map(Answer::NoDcb)
                .ok_or(DcbError::Kernel(errno));
        }
        if self.more {
            return Err(DcbError::SecondReply);
        }
        match self.first {
            Some(reply) => reply.map(Answer::State),
            None => Err(DcbError::NoReply),
        }
    }
}

/// One request's answer over as many datagrams as it takes, without a
/// socket: for tests and the fuzzer (the socket runs the same [`Gather`]
/// and [`Replies`]).
#[derive(Debug)]
pub struct Exchange {
    gather: Gather,
    replies: Replies,
}

impl Exchange {
    pub fn new(seq: u32) -> Exchange {
        Exchange {
            gather: Gather::new(seq),
            replies: Replies::default(),
        }
    }

    /// Take one datagram. `Ok(Some(answer))` once the answer is complete.
    pub fn feed(&mut self, datagram: &[u8]) -> Result<Option<Answer>, DcbError> {
        let replies = &mut self.replies;
        let end = self.gather.feed(datagram, |m| {
            replies.take(m);
            Ok(())
        })?;
        match end {
            None => Ok(None),
            Some(end) => std::mem::take(&mut self.replies).finish(end).map(Some),
        }
    }
}

/// The kernel's side of a successful exchange: the reply `dcbnl_ieee_fill`
/// would build for `state` (IFNAME, the IEEE nest with PFC and the APP
/// table, DCBX), then the ACK. For the fuzzer's round trip and tests of
/// what reads this module's answers.
pub fn encode_answer(state: &DcbState, seq: u32) -> Vec<u8> {
    let mut ieee = Vec::new();
    if let Some(p) = &state.pfc {
        let mut v = vec![p.cap, p.enabled, p.mbc, 0];
        v.extend(p.delay.to_ne_bytes());
        v.extend([0, 0]);
        for n in p.requests.iter().chain(&p.indications) {
            v.extend(n.to_ne_bytes());
        }
        ieee.extend(nla(ieee::PFC, &v));
    }
    let mut table = Vec::new();
    for a in &state.apps {
        let mut v = vec![a.selector, a.priority];
        v.extend(a.protocol.to_ne_bytes());
        table.extend(nla(ieee::APP, &v));
    }
    ieee.extend(nla(ieee::APP_TABLE, &table));
    let mut b = Builder::new(RTM_GETDCB, NLM_F_REQUEST | NLM_F_ACK, seq)
        .bytes(&[AF_UNSPEC, DCB_CMD_IEEE_GET, 0, 0])
        .str_attr(attr::IFNAME, &state.ifname)
        .attr(attr::IEEE, &ieee);
    if let Some(d) = state.dcbx {
        b = b.attr(attr::DCBX, &[d]);
    }
    let mut out = b.finish();
    out.extend(super::netlink::encode_end(End::Ack, seq));
    out
}

/// An attribute with its padding, for a nest's contents.
fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
    let mut b = Vec::with_capacity(8 + value.len());
    b.extend(len.to_ne_bytes());
    b.extend(kind.to_ne_bytes());
    b.extend(value);
    b.resize((b.len() + 3) & !3, 0);
    b
}

#[cfg(test)]
pub(crate) mod tests {
    //! Fixtures are written out by hand from the kernel's layouts
    //! (dcbnl.h's structs, `dcbnl_newmsg` and `dcbnl_ieee_fill`'s order),
    //! not made by this module's encoder.

    use super::*;
    use crate::wire::unhex;

    const SEQ: u32 = 0x0a0b_0c0d;
    /// The reply carries the request's flags (`dcbnl_newmsg` is handed
    /// `nlh->nlmsg_flags`): NLM_F_REQUEST | NLM_F_ACK.
    const REPLY_FLAGS: u16 = 0x5;

    pub(crate) fn nla(ty: u16, value: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend((4 + value.len() as u16).to_ne_bytes());
        b.extend(ty.to_ne_bytes());
        b.extend(value);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b
    }

    fn header(len: u32, ty: u16, flags: u16, seq: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(len.to_ne_bytes());
        b.extend(ty.to_ne_bytes());
        b.extend(flags.to_ne_bytes());
        b.extend(seq.to_ne_bytes());
        b.extend(0x0000_4321u32.to_ne_bytes()); // nlmsg_pid: our port
        b
    }

    /// An RTM_GETDCB reply: header, `struct dcbmsg` {AF_UNSPEC, cmd, pad},
    /// then `attrs`.
    pub(crate) fn reply_with(cmd: u8, attrs: &[u8]) -> Vec<u8> {
        let mut body = vec![0, cmd, 0, 0];
        body.extend(attrs);
        let mut m = header(16 + body.len() as u32, 78, REPLY_FLAGS, SEQ);
        m.extend(body);
        m
    }

    /// The ACK after the reply: NLMSG_ERROR with 0 and our header echoed
    /// (NLM_F_CAPPED: only the header, `netlink_ack`).
    pub(crate) fn ack() -> Vec<u8> {
        let mut m = header(36, 2, 0x100, SEQ);
        m.extend(0i32.to_ne_bytes());
        m.extend(header(32, 78, 0x5, SEQ));
        m
    }

    /// NLMSG_ERROR with -errno and the request echoed whole (28 + 4 + 16
    /// bytes of `ifname` "veth0" request: header, dcbmsg, IFNAME).
    pub(crate) fn refusal(errno: i32) -> Vec<u8> {
        let mut request = header(32, 78, 0x5, SEQ);
        request.extend([0, 21, 0, 0]);
        request.extend(nla(1, b"veth0\0"));
        let mut m = header(16 + 4 + request.len() as u32, 2, 0, SEQ);
        m.extend((-errno).to_ne_bytes());
        m.extend(request);
        m
    }

    /// `struct ieee_pfc`: pfc_cap, pfc_en, mbc, a byte of padding, delay,
    /// two bytes of padding, requests[8] at 8, indications[8] at 72.
    pub(crate) fn ieee_pfc(en: u8, requests: [u64; 8], indications: [u64; 8]) -> Vec<u8> {
        let mut v = vec![8, en, 0, 0];
        v.extend(7u16.to_ne_bytes()); // delay: mlx5's cable length
        v.extend([0, 0]);
        for n in requests.iter().chain(&indications) {
            v.extend(n.to_ne_bytes());
        }
        assert_eq!(v.len(), 136);
        v
    }

    /// `struct dcb_app` as DCB_ATTR_IEEE_APP.
    pub(crate) fn app(selector: u8, priority: u8, protocol: u16) -> Vec<u8> {
        let mut v = vec![selector, priority];
        v.extend(protocol.to_ne_bytes());
        nla(1, &v)
    }

    /// An mlx5 PF's answer, in `dcbnl_ieee_fill`'s order for mlx5's ops:
    /// IFNAME; the IEEE nest with ETS (59 bytes), MAXRATE (64), PFC (136),
    /// BUFFER (44) and the APP table; DCBX (host mode: HOST | VER_CEE |
    /// VER_IEEE = 0x0d). `table` is the APP table's contents.
    pub(crate) fn mlx5_answer(pfc_en: u8, table: &[u8]) -> Vec<u8> {
        let mut ieee = Vec::new();
        ieee.extend(nla(1, &[0u8; 59]));
        ieee.extend(nla(7, &[0u8; 64]));
        let requests = std::array::from_fn(|p| 1000 + p as u64);
        let indications = std::array::from_fn(|p| 2000 + p as u64);
        ieee.extend(nla(2, &ieee_pfc(pfc_en, requests, indications)));
        ieee.extend(nla(10, &[0u8; 44]));
        ieee.extend(nla(3, table));
        let mut attrs = nla(1, b"enp1s0f0np0\0");
        attrs.extend(nla(13, &ieee));
        attrs.extend(nla(14, &[0x0d]));
        reply_with(21, &attrs)
    }

    /// mlx5 in DSCP trust publishes its whole map, one entry per DSCP
    /// (`mlx5e_dcbnl_dscp_app`), and `dcb_ieee_setapp` puts each new entry
    /// at the head of the list: the table comes newest first, DSCP 63
    /// first. `prio` is the map.
    pub(crate) fn dscp_table(prio: impl Fn(u16) -> Option<u8>) -> Vec<u8> {
        (0..64u16)
            .rev()
            .filter_map(|d| prio(d).map(|p| app(5, p, d)))
            .flatten()
            .collect()
    }

    pub(crate) fn answer_of(bytes: &[u8]) -> Result<Answer, DcbError> {
        let mut ex = Exchange::new(SEQ);
        match ex.feed(bytes)? {
            Some(a) => Ok(a),
            None => panic!("the answer did not end"),
        }
    }

    fn state_of(bytes: &[u8]) -> DcbState {
        match answer_of(bytes).unwrap() {
            Answer::State(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_request_is_the_layout_the_kernel_parses() {
        // nlmsghdr (32 bytes in all, RTM_GETDCB, REQUEST|ACK, seq, pid 0),
        // dcbmsg {AF_UNSPEC, DCB_CMD_IEEE_GET, 0}, IFNAME "eth0\0" (nla_len
        // 9, padded to 12).
        let mut want = Vec::new();
        want.extend(32u32.to_ne_bytes());
        want.extend(78u16.to_ne_bytes());
        want.extend(5u16.to_ne_bytes());
        want.extend(7u32.to_ne_bytes());
        want.extend(0u32.to_ne_bytes());
        want.extend([0, 21, 0, 0]);
        want.extend(9u16.to_ne_bytes());
        want.extend(1u16.to_ne_bytes());
        want.extend(b"eth0\0\0\0\0");
        assert_eq!(encode_request("eth0", 7).unwrap(), want);
        // IFNAMSIZ - 1 is the policy's bound (`dcbnl_rtnl_policy`).
        assert!(encode_request("a23456789012345", 1).is_ok());
        for bad in ["", "a234567890123456", "a/b", "a\0b", "..", "eth 0"] {
            assert_eq!(
                encode_request(bad, 1),
                Err(DcbError::BadIfname { len: bad.len() }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_mlx5_answer_decodes_to_its_table_pfc_and_counts() {
        let bytes = [
            mlx5_answer(0x08, &dscp_table(|d| Some((d >> 3) as u8))),
            ack(),
        ]
        .concat();
        let s = state_of(&bytes);
        assert_eq!(s.ifname, "enp1s0f0np0");
        assert_eq!(s.apps.len(), 64);
        assert_eq!(
            s.apps[0],
            App {
                selector: 5,
                priority: 7,
                protocol: 63
            }
        );
        assert_eq!(s.dscp_entries().count(), 64);
        let pfc = s.pfc.unwrap();
        assert_eq!((pfc.cap, pfc.enabled, pfc.delay), (8, 0x08, 7));
        assert!(pfc.enabled_on(3) && !pfc.enabled_on(0) && !pfc.enabled_on(9));
        assert_eq!((pfc.requests[3], pfc.indications[7]), (1003, 2007));
        assert_eq!(s.dcbx, Some(0x0d));
    }

    #[test]
    fn the_answer_may_come_in_two_datagrams() {
        let mut ex = Exchange::new(SEQ);
        assert_eq!(ex.feed(&mlx5_answer(0, &[])), Ok(None));
        let Some(Answer::State(s)) = ex.feed(&ack()).unwrap() else {
            panic!("no state")
        };
        assert!(s.apps.is_empty());
    }

    #[test]
    fn eopnotsupp_and_enodev_are_no_dcb_other_errnos_are_errors() {
        assert_eq!(
            answer_of(&refusal(95)),
            Ok(Answer::NoDcb(NoDcb::NotSupported))
        );
        assert_eq!(answer_of(&refusal(19)), Ok(Answer::NoDcb(NoDcb::NoDevice)));
        // EINVAL: no IFNAME (dcb_doit), or a command it does not know.
        assert_eq!(answer_of(&refusal(22)), Err(DcbError::Kernel(22)));
        assert!(DcbError::Kernel(22).to_string().contains("errno 22"));
    }

    /// `dcb_doit`'s refusals as real kernels sent them (`examples/dcb_probe.rs`,
    /// seq 0x5eed), this machine's 6.18 first: NLMSG_ERROR with -errno and
    /// the request echoed whole.
    const REAL_LO_EOPNOTSUPP: &str = "3000000002000000ed5e00003a1f0000a1ffffff1c0000004e000500ed5e00000000000000150000070001006c6f0000";
    const REAL_MISSING_ENODEV: &str = "3800000002000000ed5e00003b1f0000edffffff240000004e000500ed5e000000000000001500000f0001006e6f73756368646576300000";
    /// The lane's 6.1 (scenario rxe-counters): a veth under rxe, an e1000e.
    const LANE_VETH_EOPNOTSUPP: &str = "3400000002000000ed5e0000be010000a1ffffff200000004e000500ed5e000000000000001500000a0001006b76313361000000";
    const LANE_E1000E_EOPNOTSUPP: &str = "3400000002000000ed5e0000be010000a1ffffff200000004e000500ed5e000000000000001500000c000100656e703073313600";

    #[test]
    fn real_kernel_refusals_decode_as_no_dcb() {
        for (hex, why) in [
            (REAL_LO_EOPNOTSUPP, NoDcb::NotSupported),
            (REAL_MISSING_ENODEV, NoDcb::NoDevice),
            (LANE_VETH_EOPNOTSUPP, NoDcb::NotSupported),
            (LANE_E1000E_EOPNOTSUPP, NoDcb::NotSupported),
        ] {
            let mut ex = Exchange::new(0x5eed);
            assert_eq!(ex.feed(&unhex(hex)), Ok(Some(Answer::NoDcb(why))));
        }
        // The echoed request is the one this module encodes.
        let echoed = &unhex(REAL_LO_EOPNOTSUPP)[20..];
        assert_eq!(echoed, &encode_request("lo", 0x5eed).unwrap()[..]);
    }

    #[test]
    fn unknown_attributes_are_skipped_at_every_level() {
        // A top-level attribute 99, an IEEE attribute 11 (6.3's APP trust
        // table, a nest), a DCB_ATTR_DCB_APP (2) entry for PCP (255) and an
        // entry type 7 in the table; NLA_F_NESTED set on the nests.
        let mut table = app(5, 3, 26);
        table.extend(nla(2, &[255, 4, 3, 0]));
        table.extend(nla(7, &[1, 2, 3, 4, 5, 6, 7, 8]));
        let mut ieee = nla(11, &nla(1, &[5]));
        ieee.extend(nla(3 | 0x8000, &table));
        let mut attrs = nla(99, b"future");
        attrs.extend(nla(1, b"eth0\0"));
        attrs.extend(nla(13 | 0x8000, &ieee));
        let s = state_of(&[reply_with(21, &attrs), ack()].concat());
        assert_eq!(
            s.apps,
            [App {
                selector: 5,
                priority: 3,
                protocol: 26
            }]
        );
        assert_eq!((s.pfc, s.dcbx), (None, None));
    }

    #[test]
    fn a_truncated_answer_is_an_error_at_every_length() {
        let whole = [
            mlx5_answer(0x08, &dscp_table(|d| Some((d >> 3) as u8))),
            ack(),
        ]
        .concat();
        for cut in 1..whole.len() {
            let mut ex = Exchange::new(SEQ);
            match ex.feed(&whole[..cut]) {
                Err(_) => {}
                // Cut between the reply and the ACK: the answer goes on.
                Ok(None) => assert_eq!(cut, whole.len() - ack().len(), "cut {cut}"),
                Ok(Some(a)) => panic!("cut at {cut} gave {a:?}"),
            }
        }
        // A reply whose nlmsg_len is honest but whose PFC is short.
        let mut ieee = nla(2, &[0u8; 100]);
        ieee.extend(nla(3, &[]));
        let mut attrs = nla(1, b"eth0\0");
        attrs.extend(nla(13, &ieee));
        assert_eq!(
            answer_of(&[reply_with(21, &attrs), ack()].concat()),
            Err(DcbError::Decode(DecodeError::AttributeSize {
                attr: 2,
                len: 100
            }))
        );
        // An APP entry shorter than `struct dcb_app` (the kernel's ERANGE).
        let mut attrs = nla(1, b"eth0\0");
        attrs.extend(nla(13, &nla(3, &nla(1, &[5, 3]))));
        assert!(matches!(
            answer_of(&[reply_with(21, &attrs), ack()].concat()),
            Err(DcbError::Decode(DecodeError::AttributeSize {
                attr: 1,
                len: 2
            }))
        ));
        // No dcbmsg at all.
        assert!(matches!(
            answer_of(&[reply_with(21, &[])[..18].to_vec(), ack()].concat()),
            Err(DcbError::Decode(_))
        ));
    }

    #[test]
    fn a_reply_of_another_command_or_without_its_attributes_is_refused() {
        let attrs = [nla(1, b"eth0\0"), nla(13, &nla(3, &[]))].concat();
        assert_eq!(
            answer_of(&[reply_with(1, &attrs), ack()].concat()),
            Err(DcbError::Decode(DecodeError::WrongReply {
                asked: 21,
                got: 1
            }))
        );
        assert_eq!(
            answer_of(&[reply_with(21, &nla(1, b"eth0\0")), ack()].concat()),
            Err(DcbError::Decode(DecodeError::MissingAttribute {
                op: 78,
                attr: 13
            }))
        );
        assert_eq!(
            answer_of(&[reply_with(21, &nla(13, &[])), ack()].concat()),
            Err(DcbError::Decode(DecodeError::MissingAttribute {
                op: 78,
                attr: 1
            }))
        );
        // An RTM_NEWLINK where the DCB reply belongs.
        let mut link = reply_with(21, &attrs);
        link[4..6].copy_from_slice(&16u16.to_ne_bytes());
        assert_eq!(
            answer_of(&[link, ack()].concat()),
            Err(DcbError::Decode(DecodeError::UnexpectedType { kind: 16 }))
        );
        // Two replies, and an ACK with none.
        let one = reply_with(21, &attrs);
        assert_eq!(
            answer_of(&[one.clone(), one, ack()].concat()),
            Err(DcbError::SecondReply)
        );
        assert_eq!(answer_of(&ack()), Err(DcbError::NoReply));
        // A name that is no netdev's is described by its size only.
        let bad = [nla(1, b"e\x1b[0m\0"), nla(13, &nla(3, &[]))].concat();
        let e = answer_of(&[reply_with(21, &bad), ack()].concat()).unwrap_err();
        assert!(!e.to_string().contains('\x1b'), "{e}");
    }

    #[test]
    fn an_oversized_answer_or_table_is_refused_before_it_is_read() {
        // 10,000 APP entries: more than one u16-long attribute can hold, so
        // as the most an answer could try, five nests of 2,000 entries.
        let mut attrs = nla(1, b"eth0\0");
        for _ in 0..5 {
            let table: Vec<u8> = (0..2000u16).flat_map(|i| app(5, 3, i % 64)).collect();
            attrs.extend(nla(13, &nla(3, &table)));
        }
        let big = reply_with(21, &attrs);
        assert!(big.len() > 80_000);
        assert_eq!(
            answer_of(&[big.clone(), ack()].concat()),
            Err(DcbError::Oversized {
                len: big.len() - 16
            })
        );
        // A table of 1,000 entries fits an answer's 8192 bytes, and is
        // still more than any PF lists.
        let table: Vec<u8> = (0..1000u16).flat_map(|i| app(1, 3, i)).collect();
        let attrs = [nla(1, b"eth0\0"), nla(13, &nla(3, &table))].concat();
        let e = answer_of(&[reply_with(21, &attrs), ack()].concat()).unwrap_err();
        assert_eq!(e, DcbError::TooManyApps { room: 1000 });
        assert!(e.to_string().contains("256"), "{e}");
        // 256 entries are taken.
        let table: Vec<u8> = (0..256u16).flat_map(|i| app(1, 3, i)).collect();
        let attrs = [nla(1, b"eth0\0"), nla(13, &nla(3, &table))].concat();
        assert_eq!(
            state_of(&[reply_with(21, &attrs), ack()].concat())
                .apps
                .len(),
            256
        );
    }

    #[test]
    fn what_encode_answer_writes_decodes_to_the_same_state() {
        let s = state_of(
            &[
                mlx5_answer(0x18, &dscp_table(|d| Some((d % 8) as u8))),
                ack(),
            ]
            .concat(),
        );
        assert_eq!(state_of(&encode_answer(&s, SEQ)), s);
        let bare = DcbState {
            ifname: "eth0".into(),
            apps: vec![],
            pfc: None,
            dcbx: None,
        };
        assert_eq!(state_of(&encode_answer(&bare, SEQ)), bare);
    }
}
