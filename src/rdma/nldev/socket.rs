//! The NETLINK_RDMA socket: opened in the calling thread's netns, one
//! exchange per request, bounded in time and size.

use super::*;
use netlink_sys::{protocols::NETLINK_RDMA, Socket, SocketAddr};
use nix::errno::Errno;
use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

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
