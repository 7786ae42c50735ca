//! The NETLINK_RDMA socket: opened in the calling thread's netns, one
//! exchange per request on the loop rtnetlink uses too
//! (`crate::netlink::Socket`), bounded in time and size.

use super::*;
use crate::netlink::{self as nl, Protocol, Socket};
use crate::wire::netlink::Gather;
use nix::errno::Errno;
use std::fmt;
use std::io;

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
                nl::TIMEOUT.as_secs()
            ),
            Error::Decode { request, err } => write!(f, "malformed answer to {request}: {err}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The shared exchange's error, with the request it answered. ECONNREFUSED
    /// can only come from `send()` on this connected socket: no kernel socket
    /// for this netns (`netlink_getsockbyportid` finds none).
    fn of(request: Request, e: nl::Error) -> Error {
        match e {
            nl::Error::Io { err, .. } if err.raw_os_error() == Some(Errno::ECONNREFUSED as i32) => {
                Error::Unavailable(err)
            }
            nl::Error::Io { what, err } => Error::Io { what, err },
            nl::Error::Kernel(errno) => Error::Kernel {
                request,
                errno: errno as i32,
            },
            nl::Error::Timeout => Error::Timeout { request },
            nl::Error::Decode(err) => Error::Decode { request, err },
        }
    }
}

/// A NETLINK_RDMA socket of the netns of the thread that opened it; kept
/// open, later calls need no setns.
pub struct RdmaNetlink {
    sock: Socket,
}

impl RdmaNetlink {
    /// Open the socket in the CALLING thread's netns.
    pub fn open() -> Result<RdmaNetlink, Error> {
        let sock = Socket::open(Protocol::Rdma).map_err(|e| match e {
            // No ib_core: the kernel knows no NETLINK_RDMA.
            nl::Error::Io { err, .. }
                if err.raw_os_error() == Some(Errno::EPROTONOSUPPORT as i32) =>
            {
                Error::Unavailable(err)
            }
            // Opening makes socket calls only, so this is an Io error.
            e => Error::of(Request::Devices, e),
        })?;
        Ok(RdmaNetlink { sock })
    }

    fn exchange(&mut self, request: Request) -> Result<Vec<Reply>, Error> {
        let mut replies = Vec::new();
        self.sock
            .exchange(
                |seq| encode_request(request, seq),
                |m| take(request, &mut replies, m),
            )
            .map_err(|e| Error::of(request, e))?;
        Ok(replies)
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
