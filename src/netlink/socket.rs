//! One synchronous netlink socket, and the one exchange loop rtnetlink and
//! RDMA netlink share: send one request, gather the answer until it ends,
//! against one deadline, bounded in bytes and messages ([`Gather`]).
//!
//! A CNI plugin is a one-shot process: an async runtime would cost startup
//! time and binary size for no concurrency it uses. The socket speaks to the
//! netns of the thread that opened it, for as long as it stays open.

use super::{Error, TIMEOUT};
use crate::wire::netlink::{DecodeError, End, Gather, Message};
use nix::errno::Errno;
use nix::sys::socket::{
    connect, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Netlink dumps fill at most about 32 KiB per datagram (`netlink_dump` in
/// net/netlink/af_netlink.c caps its skb there); a bigger datagram is
/// reported as truncated (MSG_TRUNC gives its real size), not silently cut.
const RECV_BUFFER: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// NETLINK_ROUTE: links and addresses.
    Route,
    /// NETLINK_RDMA: RDMA devices and ports.
    Rdma,
}

/// An open netlink socket; kept open, later requests need no setns.
pub struct Socket {
    fd: OwnedFd,
    seq: u32,
    rx: Vec<u8>,
}

impl Socket {
    /// Open a socket in the CALLING thread's netns, bound to a port id the
    /// kernel picks and connected to the kernel (port 0). Connected, it
    /// takes unicasts from the kernel only: `netlink_getsockbyportid`
    /// refuses any other sender with ECONNREFUSED, so no local process can
    /// slip messages into an answer.
    pub fn open(protocol: Protocol) -> Result<Socket, Error> {
        let proto = match protocol {
            Protocol::Route => SockProtocol::NetlinkRoute,
            Protocol::Rdma => SockProtocol::NetlinkRDMA,
        };
        let io = |what| {
            move |e: Errno| Error::Io {
                what,
                err: e.into(),
            }
        };
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            proto,
        )
        .map_err(io("open the socket"))?;
        let kernel = NetlinkAddr::new(0, 0);
        // No bind: connect binds an unbound socket to a port id the kernel
        // picks (`netlink_connect` calls `netlink_autobind`), as bind with
        // port 0 did, in one call instead of two.
        connect(fd.as_raw_fd(), &kernel).map_err(io("connect the socket"))?;
        Ok(Socket {
            fd,
            seq: 0,
            // Not zeroed: the kernel writes what is read (64 KiB of memset
            // and its page faults were a tenth of an ADD's own work).
            rx: Vec::with_capacity(RECV_BUFFER),
        })
    }

    /// Send the request `encode` builds for a fresh sequence number, and
    /// hand every reply of that number to `reply` until the answer ends:
    /// NLMSG_DONE (a dump), the ACK (a request with NLM_F_ACK), or an errno
    /// ([`Error::Kernel`]). One deadline, [`TIMEOUT`] from now, bounds the
    /// whole answer however many datagrams it takes.
    pub fn exchange(
        &mut self,
        encode: impl FnOnce(u32) -> Vec<u8>,
        reply: impl FnMut(Message<'_>) -> Result<(), DecodeError>,
    ) -> Result<(), Error> {
        self.exchange_within(TIMEOUT, encode, reply)
    }

    /// [`Socket::exchange`] with another bound than [`TIMEOUT`] (tests).
    pub fn exchange_within(
        &mut self,
        timeout: Duration,
        encode: impl FnOnce(u32) -> Vec<u8>,
        mut reply: impl FnMut(Message<'_>) -> Result<(), DecodeError>,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        self.seq = self.seq.wrapping_add(1);
        let request = encode(self.seq);
        loop {
            match send(self.fd.as_raw_fd(), &request, MsgFlags::empty()) {
                Ok(_) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    return Err(Error::Io {
                        what: "send the request",
                        err: e.into(),
                    })
                }
            }
        }
        let mut gather = Gather::new(self.seq);
        loop {
            // Non-blocking, and poll only when nothing is there: the kernel
            // answers a request (and fills a dump's next part) within the
            // send and the previous receive, so the poll is rarely needed;
            // when it is, it counts against the deadline.
            let n = match self.receive() {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => {
                    self.wait_readable(deadline)?;
                    continue;
                }
                Err(e) => {
                    return Err(Error::Io {
                        what: "receive the answer",
                        err: e.into(),
                    })
                }
            };
            if n > self.rx.len() {
                return Err(Error::Decode(DecodeError::Truncated { len: n }));
            }
            match gather.feed(&self.rx[..n], &mut reply)? {
                None => continue,
                Some(End::Done | End::Ack) => return Ok(()),
                Some(End::Failed(errno)) => return Err(Error::Kernel(Errno::from_raw(errno))),
            }
        }
    }

    /// One datagram into `rx` (its length set to what the kernel wrote);
    /// the datagram's real size, larger than `rx` when it was cut
    /// (MSG_TRUNC).
    fn receive(&mut self) -> Result<usize, Errno> {
        let flags = MsgFlags::MSG_TRUNC | MsgFlags::MSG_DONTWAIT;
        self.rx.clear();
        // SAFETY: the pointer and capacity are the Vec's own spare room; the
        // kernel writes at most that many bytes, and the length is set only
        // to what it wrote (never past the capacity).
        let n = unsafe {
            nix::libc::recv(
                self.fd.as_raw_fd(),
                self.rx.as_mut_ptr().cast(),
                self.rx.capacity(),
                flags.bits(),
            )
        };
        let n = usize::try_from(n).map_err(|_| Errno::last())?;
        // SAFETY: as above: min(n, capacity) bytes are initialized.
        unsafe { self.rx.set_len(n.min(self.rx.capacity())) };
        Ok(n)
    }

    fn wait_readable(&self, deadline: Instant) -> Result<(), Error> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Whole milliseconds, rounded up: rounded down, poll would give
            // up before the deadline.
            let ms = left.as_micros().div_ceil(1000);
            let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) if Instant::now() < deadline => continue,
                Ok(0) => return Err(Error::Timeout),
                Ok(_) => return Ok(()),
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    return Err(Error::Io {
                        what: "wait for the answer",
                        err: e.into(),
                    })
                }
            }
        }
    }
}
