//! Netlink, as roce-tune speaks it: a small synchronous socket and one
//! exchange loop shared by rtnetlink (links and addresses, here) and RDMA
//! netlink (`nldev`). The bytes are `crate::wire`'s: the
//! framing every family shares (`wire::netlink`), rtnetlink's messages
//! (`wire::rtnetlink`) and DCB's (`wire::dcb`), pure and fuzzed.
//!
//! Three parts:
//! - `socket`: [`Socket`], one request and its whole answer per exchange,
//!   against one deadline ([`TIMEOUT`]);
//! - `route`: [`Netlink`], rtnetlink's requests on that socket;
//! - `dcb_socket`: a netdev's IEEE DCB state, its one exchange ([`ask_dcb`]);
//! - `nldev`: RDMA netlink's requests on that socket ([`nldev::RdmaNetlink`]).
//!
//! It replaces netlink-packet-route, which decoded every attribute of every
//! family into types roce-tune never read: 330 KiB of an 883 KiB `.text`
//! (`cargo bloat --release --crates`), for three names and an address.

mod dcb_socket;
pub mod nldev;
mod route;
mod socket;

pub use dcb_socket::{ask_dcb, dcb_state, dcb_state_within, DcbQueryError};

/// What [`Netlink`] hands back, as `wire::rtnetlink` decodes it.
pub use crate::wire::rtnetlink::{Address, Link};
pub use route::{Netlink, OddLink};
pub use socket::{Protocol, Socket};

use crate::wire::netlink::DecodeError;
use nix::errno::Errno;
use std::fmt;
use std::io;
use std::time::Duration;

/// The kernel answers in the sender's context, within `sendmsg` for a doit
/// and `recvmsg` for a dump; a socket silent this long will not answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Why a netlink exchange failed. Callers branch on the variant (and on the
/// errno), never on the text.
#[derive(Debug)]
pub enum Error {
    /// A socket call failed; `what` says which.
    Io { what: &'static str, err: io::Error },
    /// The kernel answered with this errno.
    Kernel(Errno),
    /// No complete answer within [`TIMEOUT`].
    Timeout,
    /// The answer was malformed, or larger than an answer can be.
    Decode(DecodeError),
}

impl Error {
    /// The errno behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Io { err, .. } => err.raw_os_error().map(Errno::from_raw),
            Error::Kernel(e) => Some(*e),
            Error::Timeout => Some(Errno::ETIMEDOUT),
            Error::Decode(_) => None,
        }
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Error {
        Error::Decode(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, err } => write!(f, "netlink: {what}: {err}"),
            Error::Kernel(e) => write!(
                f,
                "the kernel refused the netlink request: {} (errno {})",
                e.desc(),
                *e as i32
            ),
            Error::Timeout => write!(
                f,
                "no complete netlink answer within {} s",
                TIMEOUT.as_secs()
            ),
            Error::Decode(e) => write!(f, "malformed netlink answer: {e}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests;
