//! Asking a netdev for its DCB state: one `RTM_GETDCB` exchange on an
//! rtnetlink socket, the codec of `wire::dcb` over the bounded exchange loop every
//! netlink request here shares. The socket answers for the netns of the
//! thread that opened it: a PF is asked from the host's.

use super::{Error, Protocol, Socket};
use crate::wire::dcb::{encode_request, Answer, DcbError, Replies};
use crate::wire::netlink::End;
use std::fmt;
use std::time::Duration;

/// Why asking failed. "No DCB" is an answer ([`Answer::NoDcb`]), not this.
#[derive(Debug)]
pub enum DcbQueryError {
    /// The request could not be made, or the answer was not one.
    Dcb(DcbError),
    /// The socket failed, or no answer came in time.
    Netlink(Error),
}

impl fmt::Display for DcbQueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DcbQueryError::Dcb(e) => e.fmt(f),
            DcbQueryError::Netlink(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DcbQueryError {}

/// `ifname`'s IEEE DCB state, asked on `sock` (an rtnetlink socket): one
/// request, its reply and the ACK, within the exchange's deadline.
pub fn dcb_state(sock: &mut Socket, ifname: &str) -> Result<Answer, DcbQueryError> {
    dcb_state_within(sock, ifname, super::TIMEOUT)
}

/// [`dcb_state`] with the whole answer due within `timeout`: a CNI ADD or
/// a pod event has a deadline of its own to keep.
pub fn dcb_state_within(
    sock: &mut Socket,
    ifname: &str,
    timeout: Duration,
) -> Result<Answer, DcbQueryError> {
    let mut request = encode_request(ifname, 0).map_err(DcbQueryError::Dcb)?;
    let mut replies = Replies::default();
    let end = match sock.exchange_within(
        timeout,
        |seq| {
            // nlmsg_seq sits at bytes 8..12 of the header.
            request[8..12].copy_from_slice(&seq.to_ne_bytes());
            request
        },
        |m| {
            replies.take(m);
            Ok(())
        },
    ) {
        Ok(()) => End::Ack,
        Err(Error::Kernel(errno)) => End::Failed(errno as i32),
        Err(Error::Decode(e)) => return Err(DcbQueryError::Dcb(e.into())),
        Err(e) => return Err(DcbQueryError::Netlink(e)),
    };
    replies.finish(end).map_err(DcbQueryError::Dcb)
}

/// [`dcb_state`] on a socket of its own, opened in the calling thread's
/// netns and closed after.
pub fn ask_dcb(ifname: &str) -> Result<Answer, DcbQueryError> {
    let mut sock = Socket::open(Protocol::Route).map_err(DcbQueryError::Netlink)?;
    dcb_state(&mut sock, ifname)
}
