//! The agent's HTTP/1.1 server: `GET /metrics` and `GET /healthz` on the node
//! config's `metricsAddress` (loopback by default, behind kube-rbac-proxy),
//! std and poll(2) only; the request and response bytes are
//! `crate::wire::http1`'s.
//!
//! One thread serves every connection from one poll loop on non-blocking
//! sockets, so a client costs a buffer and a descriptor, never a thread, and
//! a slow one cannot hold up another:
//! - connections are bounded by what they cost. At most `max_waiting` that
//!   have sent nothing yet (a descriptor each, no buffer): beyond that, the
//!   one that has waited longest is closed. At most `max_connections` that
//!   hold bytes (part of a request head, a response being sent): beyond
//!   that, a finished exchange is closed first, then the oldest partial
//!   head, and when every one is sending a response, the newest. So a crowd
//!   of idle or slow clients cannot keep a fresh scrape out, and churn
//!   (clients opening and dropping connections as fast as they can) cannot
//!   close a scrape that has connected and not yet sent its request unless
//!   `max_waiting` newer connections are open at once (docs/reliability.md,
//!   "Scrapes under connection churn");
//! - a request head (request line and headers) over `max_head_bytes` gets 431,
//!   one that is not HTTP/1.x gets 400, any method but GET and HEAD 405, any
//!   path but the two 404;
//! - a total deadline from accept to the end of the head (`read_deadline`: a
//!   client sending one byte a second is cut off), and another from there to
//!   the response's last byte (`write_deadline`);
//! - every response is `Connection: close`. After it the server shuts down
//!   its side and discards what the client still sends, for a short while, so
//!   that closing with unread bytes does not turn into a reset that destroys
//!   the response before the client has read it (RFC 9112, section 9.6).
//!
//! The body is never computed here: the handler returns what the repair loop
//! last published ([`Published`]), so a scrape never waits on a device lock or
//! on the loop. [`Server::spawn`] runs the loop on its own thread with SIGTERM,
//! SIGINT and SIGHUP blocked, so those reach the thread that waits for them.

use super::health::{Health, Verdict};
use crate::wire::http1::{feed, parse_head, Body, Fed, Response, Status};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Loopback on the host netns (the DaemonSet is hostNetwork). Port 9662:
/// the Prometheus wiki's "Default port allocations" list is full from 9100
/// to 9999; 9662 is allocated there to a particulate-matter sensor exporter
/// that no GPU node runs, and is none of the ports a GPU or RDMA node
/// already uses (node_exporter 9100, the SR-IOV metrics exporter 9110,
/// DCGM exporter 9400, the kubelet and kube-proxy 10249-10256).
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:9662";

/// How long, after a response, the server keeps reading what the client
/// still sends before it closes (see the module comment).
const LINGER: Duration = Duration::from_millis(500);
/// What a lingering connection may still send before it is closed anyway.
const LINGER_BYTES: usize = 1 << 20;
/// Connections accepted per loop turn: between two turns the server reads
/// those it has, so a burst of new connections cannot evict one whose
/// request is already there before it is read.
const ACCEPT_BATCH: usize = 16;
/// After EMFILE/ENFILE the pending connection stays in the backlog and the
/// listener stays readable: pause accepting rather than spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections holding bytes: part of a request head (up to
    /// `max_head_bytes` each) or a response being sent (the socket's send
    /// buffer, when the client does not read).
    pub max_connections: usize,
    /// Connections that have sent nothing yet: a descriptor and a few dozen
    /// bytes each. [`Server::bind`] keeps it to half the process's
    /// descriptor limit, so that the repair always has descriptors of its own.
    pub max_waiting: usize,
    pub max_head_bytes: usize,
    /// From accept to the end of the request head.
    pub read_deadline: Duration,
    /// From the end of the head to the last byte of the response.
    pub write_deadline: Duration,
    /// The longest the loop sleeps: how soon it sees the shutdown flag.
    pub poll_interval: Duration,
}

impl Default for Limits {
    /// A scrape through kube-rbac-proxy is one connection at a time, and its
    /// request head is a few hundred bytes. Prometheus's default scrape
    /// timeout is 10 s: a response that takes longer is useless. 512 waiting
    /// connections: more than the churn test keeps open at once (4 clients,
    /// 2 of them opening 64 before dropping them), within the 1024
    /// descriptors a process gets by default.
    fn default() -> Self {
        Limits {
            max_connections: 32,
            max_waiting: 512,
            max_head_bytes: 8 * 1024,
            read_deadline: Duration::from_secs(5),
            write_deadline: Duration::from_secs(10),
            poll_interval: Duration::from_millis(200),
        }
    }
}

#[derive(Debug)]
pub enum Error {
    /// `metricsAddress` is not an IP address and port (its length, not its
    /// text: it is the node config's).
    Address {
        len: usize,
    },
    Bind {
        addr: SocketAddr,
        source: io::Error,
    },
    /// Making the listener non-blocking, or reading its address.
    Listener(io::Error),
    Spawn(io::Error),
    Poll(io::Error),
    /// The server thread panicked.
    Panicked,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Address { len } => write!(
                f,
                "metrics address ({len} bytes) is not an IP address and port such as {DEFAULT_ADDRESS} or [::1]:9662"
            ),
            Error::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            Error::Listener(e) => write!(f, "cannot set up the metrics listener: {e}"),
            Error::Spawn(e) => write!(f, "cannot start the metrics server thread: {e}"),
            Error::Poll(e) => write!(f, "the metrics server cannot wait for connections: {e}"),
            Error::Panicked => write!(f, "the metrics server thread panicked"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Bind { source: e, .. }
            | Error::Listener(e)
            | Error::Spawn(e)
            | Error::Poll(e) => Some(e),
            _ => None,
        }
    }
}

/// `metricsAddress`: an IP literal and a port, never a name (no resolver
/// runs in the agent, and a name could resolve off the node).
pub fn parse_address(s: &str) -> Result<SocketAddr, Error> {
    s.parse().map_err(|_| Error::Address { len: s.len() })
}

/// The exposition the repair loop last published. A scrape takes the lock
/// only to clone an `Arc`, the loop only to swap one: neither waits on the
/// other's work.
#[derive(Debug)]
pub struct Published {
    current: Mutex<Arc<String>>,
}

impl Published {
    pub fn new(initial: String) -> Published {
        Published {
            current: Mutex::new(Arc::new(initial)),
        }
    }

    pub fn publish(&self, body: String) {
        let body = Arc::new(body);
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = body;
    }

    pub fn current(&self) -> Arc<String> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The agent's two paths: `/metrics` (the last published exposition) and
/// `/healthz` (200 while the passes go on and the NRI plugin's thread runs,
/// 503 saying which stopped: `super::health`).
pub fn routes(
    published: Arc<Published>,
    health: Arc<Health>,
) -> impl Fn(&str) -> Option<Response> + Send + 'static {
    move |path| match path {
        "/metrics" => Some(Response::metrics(published.current())),
        "/healthz" => Some(match health.verdict() {
            Verdict::Live => Response::text(Status::Ok, "ok\n"),
            v => Response {
                status: Status::ServiceUnavailable,
                content_type: "text/plain; charset=utf-8",
                body: Body::Shared(Arc::new(v.say())),
            },
        }),
        _ => None,
    }
}

pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    limits: Limits,
}

/// The process's soft limit on open descriptors (RLIMIT_NOFILE).
fn descriptor_limit() -> usize {
    let mut lim = nix::libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { nix::libc::getrlimit(nix::libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
}

impl Server {
    pub fn bind(addr: SocketAddr, limits: Limits) -> Result<Server, Error> {
        let limits = Limits {
            max_waiting: limits.max_waiting.min(descriptor_limit() / 2).max(1),
            ..limits
        };
        let listener = TcpListener::bind(addr).map_err(|source| Error::Bind { addr, source })?;
        listener.set_nonblocking(true).map_err(Error::Listener)?;
        let addr = listener.local_addr().map_err(Error::Listener)?;
        Ok(Server {
            listener,
            addr,
            limits,
        })
    }

    /// The bound address (the port, when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve on this thread until `shutdown` is set (seen within
    /// `poll_interval`). `handler` maps a path (without its query) to a
    /// response, `None` for 404; it runs on this thread, so it must not block.
    pub fn run<H>(&self, shutdown: &AtomicBool, handler: H) -> Result<(), Error>
    where
        H: Fn(&str) -> Option<Response>,
    {
        self.serve(shutdown, None, handler)
    }

    /// [`Server::run`], also woken by `wake` becoming readable (its writer
    /// closed), so a shutdown is seen at once rather than after a poll.
    fn serve<H>(
        &self,
        shutdown: &AtomicBool,
        wake: Option<&OwnedFd>,
        handler: H,
    ) -> Result<(), Error>
    where
        H: Fn(&str) -> Option<Response>,
    {
        let mut conns: Vec<Conn> = Vec::new();
        let mut accept_paused_until: Option<Instant> = None;
        while !shutdown.load(Ordering::Acquire) {
            let now = Instant::now();
            let accepting = accept_paused_until.is_none_or(|t| now >= t);
            let mut wait = self.limits.poll_interval;
            for c in &conns {
                wait = wait.min(c.deadline.saturating_duration_since(now));
            }
            let ready = {
                let mut fds = Vec::with_capacity(conns.len() + 1);
                fds.push(PollFd::new(
                    self.listener.as_fd(),
                    if accepting {
                        PollFlags::POLLIN
                    } else {
                        PollFlags::empty()
                    },
                ));
                for c in &conns {
                    fds.push(PollFd::new(c.stream.as_fd(), c.interest()));
                }
                if let Some(w) = wake {
                    fds.push(PollFd::new(w.as_fd(), PollFlags::POLLIN));
                }
                // Round up: a timeout of 0 ms before a deadline would spin.
                let ms = u32::try_from(wait.as_millis() + 1).unwrap_or(u32::MAX);
                match nix::poll::poll(
                    &mut fds,
                    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
                ) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(Error::Poll(e.into())),
                }
                fds.iter()
                    .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                    .collect::<Vec<bool>>()
            };
            let now = Instant::now();
            for (c, r) in conns.iter_mut().zip(&ready[1..]) {
                if *r {
                    c.step(&self.limits, &handler, now);
                }
            }
            for c in conns.iter_mut() {
                if now >= c.deadline {
                    c.expire();
                }
            }
            conns.retain(|c| !matches!(c.phase, Phase::Closed));
            trim(&mut conns, self.limits.max_connections);
            if ready[0] {
                accept_paused_until = self.accept(&mut conns, &handler);
            }
        }
        Ok(())
    }

    /// Accept up to [`ACCEPT_BATCH`] connections; the time to resume when
    /// the process is out of descriptors.
    fn accept<H>(&self, conns: &mut Vec<Conn>, handler: &H) -> Option<Instant>
    where
        H: Fn(&str) -> Option<Response>,
    {
        for _ in 0..ACCEPT_BATCH {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    return match e.raw_os_error() {
                        Some(
                            nix::libc::EMFILE
                            | nix::libc::ENFILE
                            | nix::libc::ENOBUFS
                            | nix::libc::ENOMEM,
                        ) => Some(Instant::now() + ACCEPT_PAUSE),
                        // ECONNABORTED and the like: that one connection.
                        _ => None,
                    };
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if conns.iter().filter(|c| c.waiting()).count() >= self.limits.max_waiting {
                if let Some(i) = oldest(conns, Conn::waiting) {
                    conns.swap_remove(i);
                }
            }
            let now = Instant::now();
            let mut c = Conn {
                stream,
                deadline: now + self.limits.read_deadline,
                accepted: now,
                head: Vec::new(),
                phase: Phase::Reading,
            };
            // The request often arrives with the connection: answer it now.
            c.step(&self.limits, handler, now);
            if !matches!(c.phase, Phase::Closed) {
                conns.push(c);
                trim(conns, self.limits.max_connections);
            }
        }
        None
    }

    /// Serve on a new thread (named `roce-tune-http`) until
    /// [`Handle::shutdown`], or until the handle is dropped.
    pub fn spawn<H>(self, handler: H) -> Result<Handle, Error>
    where
        H: Fn(&str) -> Option<Response> + Send + 'static,
    {
        use nix::sys::signal::{SigSet, SigmaskHow, Signal};
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let addr = self.addr;
        // Process-directed signals go to a thread that does not block them:
        // the new thread inherits this mask, so the agent's signal wait sees
        // SIGTERM even if it blocked it only in the main thread.
        let mut set = SigSet::empty();
        for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            set.add(s);
        }
        let (woken, wake) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::Spawn(e.into()))?;
        let old = set.thread_swap_mask(SigmaskHow::SIG_BLOCK).ok();
        let spawned = std::thread::Builder::new()
            .name("roce-tune-http".into())
            .spawn(move || self.serve(&flag, Some(&woken), handler));
        if let Some(old) = old {
            let _ = old.thread_set_mask();
        }
        let thread = spawned.map_err(Error::Spawn)?;
        Ok(Handle {
            stop,
            wake: Some(wake),
            thread: Some(thread),
            addr,
        })
    }
}

/// A server running on its own thread.
pub struct Handle {
    stop: Arc<AtomicBool>,
    /// Closed to wake the thread's poll: SIGTERM's second is the agent's.
    wake: Option<OwnedFd>,
    thread: Option<JoinHandle<Result<(), Error>>>,
    addr: SocketAddr,
}

impl Handle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop the server and wait for its thread, which is woken at once (it
    /// finishes the turn it is in); open connections are closed.
    pub fn shutdown(mut self) -> Result<(), Error> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), Error> {
        self.stop.store(true, Ordering::Release);
        self.wake = None;
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| Error::Panicked)?,
            None => Ok(()),
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

enum Phase {
    Reading,
    Writing {
        head: Vec<u8>,
        body: Option<Body>,
        sent: usize,
    },
    Lingering {
        discarded: usize,
    },
    Closed,
}

struct Conn {
    stream: TcpStream,
    accepted: Instant,
    deadline: Instant,
    head: Vec<u8>,
    phase: Phase,
}

/// The index of the connection accepted first among those `which` picks.
fn oldest(conns: &[Conn], which: impl Fn(&Conn) -> bool) -> Option<usize> {
    conns
        .iter()
        .enumerate()
        .filter(|(_, c)| which(c))
        .min_by_key(|(_, c)| c.accepted)
        .map(|(i, _)| i)
}

/// Close connections holding bytes beyond `max`: a lingering one first (its
/// exchange is over), then the one that has waited longest for the rest of
/// its head; when every one is sending a response, the newest (the others
/// have the older claim). A connection that has sent nothing is not counted.
fn trim(conns: &mut Vec<Conn>, max: usize) {
    while conns.iter().filter(|c| !c.waiting()).count() > max {
        let victim = oldest(conns, |c| matches!(c.phase, Phase::Lingering { .. }))
            .or_else(|| oldest(conns, |c| matches!(c.phase, Phase::Reading) && !c.waiting()))
            .or_else(|| {
                conns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| matches!(c.phase, Phase::Writing { .. }))
                    .max_by_key(|(_, c)| c.accepted)
                    .map(|(i, _)| i)
            });
        match victim {
            Some(i) => {
                conns.swap_remove(i);
            }
            None => return,
        }
    }
}

impl Conn {
    /// Connected, nothing received yet: it costs a descriptor, no buffer.
    fn waiting(&self) -> bool {
        matches!(self.phase, Phase::Reading) && self.head.is_empty()
    }

    fn interest(&self) -> PollFlags {
        match self.phase {
            Phase::Writing { .. } => PollFlags::POLLOUT,
            _ => PollFlags::POLLIN,
        }
    }

    fn step<H>(&mut self, limits: &Limits, handler: &H, now: Instant)
    where
        H: Fn(&str) -> Option<Response>,
    {
        match self.phase {
            Phase::Reading => self.read_head(limits, handler, now),
            Phase::Writing { .. } => self.write(now),
            Phase::Lingering { .. } => self.linger(),
            Phase::Closed => {}
        }
    }

    fn read_head<H>(&mut self, limits: &Limits, handler: &H, now: Instant)
    where
        H: Fn(&str) -> Option<Response>,
    {
        let mut buf = [0u8; 4096];
        loop {
            // One byte past the cap tells "too large" from "exactly full".
            let room = (limits.max_head_bytes + 1).saturating_sub(self.head.len());
            let n = buf.len().min(room);
            match self.stream.read(&mut buf[..n]) {
                Ok(0) => {
                    // EOF before a whole head: nobody to answer.
                    self.phase = Phase::Closed;
                    return;
                }
                Ok(got) => match feed(&mut self.head, &buf[..got], limits.max_head_bytes) {
                    Fed::More => {}
                    Fed::Head(end) => {
                        let response = respond(&self.head[..end], handler);
                        self.start_response(response, limits, now);
                        return;
                    }
                    Fed::TooLarge => {
                        let r = Response::text(
                            Status::HeaderFieldsTooLarge,
                            "request head too large\n",
                        );
                        self.start_response((r, true), limits, now);
                        return;
                    }
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.phase = Phase::Closed;
                    return;
                }
            }
        }
    }

    /// `(response, with_body)`: HEAD gets the headers of GET alone.
    fn start_response(&mut self, (r, with_body): (Response, bool), limits: &Limits, now: Instant) {
        let head = r.head();
        self.head = Vec::new();
        self.deadline = now + limits.write_deadline;
        self.phase = Phase::Writing {
            head,
            body: with_body.then_some(r.body),
            sent: 0,
        };
        self.write(now);
    }

    fn write(&mut self, now: Instant) {
        let Phase::Writing { head, body, sent } = &mut self.phase else {
            return;
        };
        let body_bytes = body.as_ref().map_or(&[][..], |b| b.as_bytes());
        let total = head.len() + body_bytes.len();
        while *sent < total {
            let chunk = if *sent < head.len() {
                &head[*sent..]
            } else {
                &body_bytes[*sent - head.len()..]
            };
            match self.stream.write(chunk) {
                Ok(0) => {
                    self.phase = Phase::Closed;
                    return;
                }
                Ok(n) => *sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.phase = Phase::Closed;
                    return;
                }
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        self.deadline = now + LINGER;
        self.phase = Phase::Lingering { discarded: 0 };
        self.linger();
    }

    fn linger(&mut self) {
        let Phase::Lingering { discarded } = &mut self.phase else {
            return;
        };
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    *discarded += n;
                    if *discarded > LINGER_BYTES {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.phase = Phase::Closed;
    }

    /// The deadline of the current phase has passed.
    fn expire(&mut self) {
        if matches!(self.phase, Phase::Reading) && !self.head.is_empty() {
            // Best effort, one non-blocking write: the client is too slow to
            // wait for.
            let _ = self.stream.write(
                b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
        self.phase = Phase::Closed;
    }
}

/// The response to a complete head, and whether it carries its body.
fn respond<H>(head: &[u8], handler: &H) -> (Response, bool)
where
    H: Fn(&str) -> Option<Response>,
{
    match parse_head(head) {
        Ok(r) => match handler(r.path) {
            Some(response) => (response, r.with_body),
            None => (Response::text(Status::NotFound, "not found\n"), r.with_body),
        },
        Err(Status::MethodNotAllowed) => (
            Response::text(Status::MethodNotAllowed, "only GET and HEAD\n"),
            true,
        ),
        Err(_) => (Response::text(Status::BadRequest, "bad request\n"), true),
    }
}

#[cfg(test)]
mod tests;
