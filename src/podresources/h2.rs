//! The kubelet's end of a gRPC unary call: a unix socket opened with a
//! bounded, non-blocking connect, its peer checked to be root, and the
//! HTTP/2 connection of `crate::wire::h2_connection` run over it. Every
//! wait is a `poll` against the one deadline of the whole call.

use super::Error;
use crate::wire::grpc;
use crate::wire::h2_connection::{self, Transport};
use nix::errno::Errno;
use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

impl From<grpc::Error> for Error {
    fn from(e: grpc::Error) -> Error {
        match e {
            grpc::Error::Timeout { timeout, stage } => Error::Timeout { timeout, stage },
            grpc::Error::Protocol(m) => Error::Protocol(m),
            grpc::Error::Status { code, message } => Error::Status { code, message },
            grpc::Error::TooLarge { size, limit } => Error::TooLarge { size, limit },
            grpc::Error::Io { op, err } => Error::Io { op, err },
        }
    }
}

/// A connected, non-blocking unix stream.
pub struct Socket(OwnedFd);

impl Transport for Socket {
    fn recv(&mut self, buf: &mut Vec<u8>, want: usize) -> io::Result<Option<usize>> {
        buf.reserve(want);
        let spare = buf.spare_capacity_mut();
        // SAFETY: recv writes at most spare.len() bytes into the spare
        // capacity, and the length is advanced by what it wrote.
        let r = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                spare.len(),
                0,
            )
        };
        if r >= 0 {
            // SAFETY: the kernel initialised r bytes of the spare capacity.
            unsafe { buf.set_len(buf.len() + r as usize) };
            return Ok(Some(r as usize));
        }
        match Errno::last() {
            Errno::EAGAIN | Errno::EINTR => Ok(None),
            e => Err(e.into()),
        }
    }

    fn send(&mut self, data: &[u8]) -> io::Result<Option<usize>> {
        // MSG_NOSIGNAL: a closed peer is an EPIPE, not a SIGPIPE.
        // SAFETY: send reads at most data.len() bytes from data.
        let r = unsafe {
            libc::send(
                self.0.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if r >= 0 {
            return Ok(Some(r as usize));
        }
        match Errno::last() {
            Errno::EAGAIN | Errno::EINTR => Ok(None),
            e => Err(e.into()),
        }
    }

    fn wait(&mut self, write: bool, deadline: Instant) -> io::Result<bool> {
        let flags = if write {
            PollFlags::POLLOUT
        } else {
            PollFlags::POLLIN
        };
        match wait(&self.0, flags, Duration::ZERO, deadline, "") {
            Ok(()) => Ok(true),
            Err(Error::Timeout { .. }) => Ok(false),
            Err(Error::Io { err, .. }) => Err(err),
            Err(other) => Err(io::Error::other(other.to_string())),
        }
    }

    fn send_now(&mut self, data: &[u8]) {
        // SAFETY: as in send; MSG_DONTWAIT never blocks.
        unsafe {
            libc::send(
                self.0.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }
}

/// One HTTP/2 connection to the kubelet's gRPC server.
pub struct Conn(h2_connection::Conn<Socket>);

impl Conn {
    /// Connect to `path` and send the preface. The server's preface is read
    /// with the first answer.
    pub fn open(
        path: &Path,
        timeout: Duration,
        deadline: Instant,
        max_message: usize,
    ) -> Result<Conn, Error> {
        let fd = connect(path, timeout, deadline)?;
        peer_is_root(&fd, path)?;
        Ok(Conn(h2_connection::Conn::over(
            Socket(fd),
            timeout,
            deadline,
            max_message,
        )?))
    }

    /// [`h2_connection::Conn::unary`].
    pub fn unary(
        &mut self,
        path: &str,
        message: &[u8],
        max_message: usize,
        deadline: Instant,
    ) -> Result<Vec<u8>, Error> {
        Ok(self.0.unary(path, message, max_message, deadline)?)
    }

    /// False once the server sent GOAWAY or a call ended mid-stream.
    pub fn reusable(&self) -> bool {
        self.0.reusable
    }
}

/// Wait until `fd` is ready for `what`, or the deadline passes.
fn wait(
    fd: &OwnedFd,
    flags: PollFlags,
    timeout: Duration,
    deadline: Instant,
    stage: &'static str,
) -> Result<(), Error> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Timeout { timeout, stage });
        }
        // Rounded up: a poll of 0 ms would spin until the deadline.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        let mut fds = [PollFd::new(fd.as_fd(), flags)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(e) => {
                return Err(Error::Io {
                    op: "poll",
                    err: e.into(),
                })
            }
        }
    }
}

/// The server must be root: the kubelet runs as root, and any other uid that
/// could bind the socket path first (or is handed its directory) would
/// decide the placement verdict. SO_PEERCRED gives the credentials the
/// server had when it called listen(2) (unix(7)), which no later setuid of
/// that process changes.
fn peer_is_root(fd: &OwnedFd, path: &Path) -> Result<(), Error> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for getsockopt to write.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(Error::Io {
            op: "ask who serves the socket (SO_PEERCRED)",
            err: io::Error::last_os_error(),
        });
    }
    if cred.uid != 0 {
        return Err(Error::Untrusted(format!(
            "the kubelet's PodResources socket {} is served by uid {}, not root (pid {})",
            path.display(),
            cred.uid,
            cred.pid
        )));
    }
    Ok(())
}

/// A non-blocking connect bounded by the deadline. ENOENT (no socket file)
/// and ECONNREFUSED (a file, nobody listening: a stopped kubelet leaves its
/// socket behind) mean there is no PodResources API here.
fn connect(path: &Path, timeout: Duration, deadline: Instant) -> Result<OwnedFd, Error> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(Error::Io {
            op: "connect",
            err: io::Error::from_raw_os_error(libc::ENAMETOOLONG),
        });
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: a plain syscall; the descriptor is owned right after.
    let raw = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if raw < 0 {
        return Err(Error::Io {
            op: "socket",
            err: io::Error::last_os_error(),
        });
    }
    // SAFETY: raw is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    loop {
        // SAFETY: addr is a valid sockaddr_un of the length given.
        let r = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(fd);
        }
        let e = io::Error::last_os_error();
        match Errno::last() {
            Errno::EINTR => continue,
            Errno::ENOENT | Errno::ENOTDIR | Errno::ECONNREFUSED => return Err(Error::NoSocket(e)),
            // A full listen backlog: Linux answers a non-blocking unix
            // connect with EAGAIN and queues nothing, so try again until
            // the deadline.
            Errno::EAGAIN => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::Timeout {
                        timeout,
                        stage: "connect",
                    });
                }
                std::thread::sleep(left.min(Duration::from_millis(2)));
            }
            Errno::EINPROGRESS => {
                wait(&fd, PollFlags::POLLOUT, timeout, deadline, "connect")?;
                let mut err: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: err and len are valid for getsockopt to write.
                let r = unsafe {
                    libc::getsockopt(
                        fd.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut libc::c_int).cast(),
                        &mut len,
                    )
                };
                return match (r, err) {
                    (0, 0) => Ok(fd),
                    (0, libc::ECONNREFUSED) => {
                        Err(Error::NoSocket(io::Error::from_raw_os_error(err)))
                    }
                    (0, e) => Err(Error::Io {
                        op: "connect",
                        err: io::Error::from_raw_os_error(e),
                    }),
                    _ => Err(Error::Io {
                        op: "connect",
                        err: io::Error::last_os_error(),
                    }),
                };
            }
            _ => {
                return Err(Error::Io {
                    op: "connect",
                    err: e,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::grpc::{UNAVAILABLE, UNIMPLEMENTED};
    use crate::wire::h2_connection::{HEADER_FRAMES_MAX, OTHER_FRAMES_MAX};
    use crate::wire::h2_frames::*;
    use crate::wire::hpack::{self, Decoder};
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::thread;

    /// A scripted server: reads the client's preface, SETTINGS, WINDOW_UPDATE
    /// and request, then writes `answer` and holds the connection until the
    /// client closes it. Returns the socket path and what the client sent.
    fn server(answer: Vec<u8>) -> (std::path::PathBuf, thread::JoinHandle<Vec<u8>>) {
        let dir = std::env::temp_dir().join(format!(
            "rt-h2-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let l = UnixListener::bind(&path).unwrap();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got = vec![0u8; 4096];
            let n = s.read(&mut got).unwrap();
            got.truncate(n);
            s.write_all(&answer).unwrap();
            // EOF after the answer: a client waiting for more fails at once.
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            got.extend(rest);
            let _ = std::fs::remove_dir_all(dir);
            got
        });
        (path, h)
    }

    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    fn f(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        frame(&mut v, ty, flags, stream, payload);
        v
    }

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in fields {
            hpack::put_literal(&mut b, Err(n), v);
        }
        b
    }

    fn grpc_message(m: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&(m.len() as u32).to_be_bytes());
        v.extend_from_slice(m);
        v
    }

    fn ok_headers() -> Vec<u8> {
        block(&[(":status", "200"), ("content-type", "application/grpc")])
    }

    fn call(answer: Vec<u8>) -> (Result<Vec<u8>, Error>, Vec<u8>) {
        let (path, h) = server(answer);
        let deadline = Instant::now() + Duration::from_secs(3);
        let r = Conn::open(&path, Duration::from_secs(3), deadline, 1 << 20)
            .and_then(|mut c| c.unary("/v1.PodResourcesLister/List", b"", 1 << 20, deadline));
        (r, h.join().unwrap())
    }

    #[test]
    fn unary_call_with_padding_continuation_ping_and_settings() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::unary_call_with_padding_continuation_ping_and_settings",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let hb = ok_headers();
        let (a, b) = hb.split_at(10);
        let mut padded_data = vec![3];
        padded_data.extend(grpc_message(b"hello"));
        padded_data.extend([0, 0, 0]);
        let mut answer = Vec::new();
        answer.extend(f(SETTINGS, 0, 0, &[0, 4, 0, 0, 0xff, 0xff]));
        answer.extend(f(SETTINGS, ACK, 0, &[]));
        answer.extend(f(PING, 0, 0, b"12345678"));
        answer.extend(f(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
        answer.extend(f(0xfe, 0, 0, b"an unknown type is ignored"));
        answer.extend(f(HEADERS, 0, 1, a));
        answer.extend(f(CONTINUATION, END_HEADERS, 1, b));
        answer.extend(f(DATA, PADDED, 1, &padded_data));
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[("grpc-status", "0")]),
        ));
        let (r, sent) = call(answer);
        assert_eq!(r.unwrap(), b"hello");
        assert!(sent.starts_with(PREFACE));
        // The client acked the server's SETTINGS and answered its PING.
        let has = |needle: &[u8]| sent.windows(needle.len()).any(|w| w == needle);
        assert!(has(&f(SETTINGS, ACK, 0, &[])));
        assert!(has(&f(PING, ACK, 0, b"12345678")));
        // and said goodbye.
        assert!(sent.ends_with(&f(GOAWAY, 0, 0, &[0; 8])));
    }

    #[test]
    fn trailers_only_status_is_returned() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::trailers_only_status_is_returned",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("grpc-status", "12"),
                (
                    "grpc-message",
                    "unknown method Get for service v1.PodResourcesLister",
                ),
            ]),
        ));
        match call(answer).0 {
            Err(Error::Status {
                code: 12,
                message: Some(m),
            }) => {
                assert_eq!(m, "unknown method Get for service v1.PodResourcesLister")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rst_stream_and_http_status_map_to_grpc_codes() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::rst_stream_and_http_status_map_to_grpc_codes",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(RST_STREAM, 0, 1, &7u32.to_be_bytes()));
        assert!(matches!(
            call(answer).0,
            Err(Error::Status {
                code: UNAVAILABLE,
                ..
            })
        ));
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[(":status", "404")]),
        ));
        assert!(matches!(
            call(answer).0,
            Err(Error::Status {
                code: UNIMPLEMENTED,
                ..
            })
        ));
        // A grpc-status beside a non-200 status wins; 1xx blocks are skipped.
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(HEADERS, END_HEADERS, 1, &block(&[(":status", "100")])));
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[(":status", "503"), ("grpc-status", "9")]),
        ));
        assert!(matches!(call(answer).0, Err(Error::Status { code: 9, .. })));
    }

    #[test]
    fn broken_servers_are_protocol_errors() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::broken_servers_are_protocol_errors",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let settings = f(SETTINGS, 0, 0, &[]);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("first frame not SETTINGS", f(PING, 0, 0, b"12345678")),
            ("HTTP/1.1", b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec()),
            (
                "oversized frame",
                [settings.clone(), f(DATA, 0, 1, &vec![0; MAX_FRAME + 1])].concat(),
            ),
            (
                "DATA first",
                [settings.clone(), f(DATA, 0, 1, &grpc_message(b"x"))].concat(),
            ),
            (
                "not grpc",
                [
                    settings.clone(),
                    f(
                        HEADERS,
                        END_HEADERS,
                        1,
                        &block(&[(":status", "200"), ("content-type", "text/html")]),
                    ),
                ]
                .concat(),
            ),
            (
                "no trailers",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(DATA, END_STREAM, 1, &grpc_message(b"x")),
                ]
                .concat(),
            ),
            (
                "two messages",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(
                        DATA,
                        0,
                        1,
                        &[grpc_message(b"x"), grpc_message(b"y")].concat(),
                    ),
                ]
                .concat(),
            ),
            (
                "half a message",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(DATA, 0, 1, &grpc_message(b"xyz")[..6]),
                    f(
                        HEADERS,
                        END_STREAM | END_HEADERS,
                        1,
                        &block(&[("grpc-status", "0")]),
                    ),
                ]
                .concat(),
            ),
            (
                "bad padding",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(DATA, PADDED, 1, &[9, 0]),
                ]
                .concat(),
            ),
            (
                "interleaved header block",
                [
                    settings.clone(),
                    f(HEADERS, 0, 1, &ok_headers()),
                    f(PING, 0, 0, b"12345678"),
                ]
                .concat(),
            ),
            (
                "push",
                [
                    settings.clone(),
                    f(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]),
                ]
                .concat(),
            ),
            (
                "bad hpack",
                [settings.clone(), f(HEADERS, END_HEADERS, 1, &[0x80])].concat(),
            ),
            ("closed", settings.clone()),
        ];
        for (what, answer) in cases {
            match call(answer).0 {
                Err(Error::Protocol(m)) => assert!(!m.is_empty(), "{what}"),
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_call_taken_before_goaway_completes_and_the_connection_retires() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::a_call_taken_before_goaway_completes_and_the_connection_retires",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let answer = [
            f(SETTINGS, 0, 0, &[]),
            f(GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]),
            f(HEADERS, END_HEADERS, 1, &ok_headers()),
            f(DATA, 0, 1, &grpc_message(b"ok")),
            f(
                HEADERS,
                END_STREAM | END_HEADERS,
                1,
                &block(&[("grpc-status", "0")]),
            ),
        ]
        .concat();
        let (path, h) = server(answer);
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut c = Conn::open(&path, Duration::from_secs(3), deadline, 1 << 20).unwrap();
        assert_eq!(c.unary("/s/m", b"", 1 << 20, deadline).unwrap(), b"ok");
        assert!(!c.reusable());
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn an_answer_from_a_server_that_closed_at_once_is_read() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::an_answer_from_a_server_that_closed_at_once_is_read",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let dir = std::env::temp_dir().join(format!("rt-h2close-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let l = UnixListener::bind(&path).unwrap();
        let answer = [
            f(SETTINGS, 0, 0, &[]),
            f(PING, 0, 0, b"87654321"),
            f(
                HEADERS,
                END_STREAM | END_HEADERS,
                1,
                &block(&[
                    (":status", "200"),
                    ("content-type", "application/grpc"),
                    ("grpc-status", "5"),
                ]),
            ),
        ]
        .concat();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // Up to the request's last frame: DATA, END_STREAM, stream 1, an
            // empty message.
            let end = f(DATA, END_STREAM, 1, &[0; 5]);
            let mut got = Vec::new();
            while !got.ends_with(&end) {
                let mut b = [0u8; 4096];
                let n = s.read(&mut b).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&b[..n]);
            }
            s.write_all(&answer).unwrap();
            // Closed whole: the client's SETTINGS ACK and PING ACK may fail.
        });
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut c = Conn::open(&path, Duration::from_secs(3), deadline, 1 << 20).unwrap();
        let r = c.unary("/s/m", b"", 1 << 20, deadline);
        h.join().unwrap();
        // Whether the ACKs met EPIPE depends on who ran first; the status
        // must come through either way.
        assert!(matches!(r, Err(Error::Status { code: 5, .. })), "{r:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A whole answer after `others` (each counted once) and `before` bytes.
    fn answer_after(others: &[Vec<u8>]) -> Vec<u8> {
        let mut a = f(SETTINGS, 0, 0, &[]);
        for o in others {
            a.extend_from_slice(o);
        }
        a.extend(f(HEADERS, END_HEADERS, 1, &ok_headers()));
        a.extend(f(DATA, 0, 1, &grpc_message(b"ok")));
        a.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[("grpc-status", "0")]),
        ));
        a
    }

    #[test]
    fn frames_that_are_not_the_answer_are_bounded_in_count_and_bytes() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::frames_that_are_not_the_answer_are_bounded_in_count_and_bytes",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        // The server's SETTINGS is the first of them: 63 more are allowed.
        let wu = f(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]);
        let ok = vec![wu.clone(); OTHER_FRAMES_MAX as usize - 1];
        assert_eq!(call(answer_after(&ok)).0.unwrap(), b"ok");
        let mut over = ok.clone();
        over.push(f(0xfa, 0, 0, b""));
        match call(answer_after(&over)).0 {
            Err(Error::Protocol(m)) => assert!(
                m.contains("65 frames") && m.contains("a frame of an unknown type"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        // Every kind counts: 1xx blocks, PING, PRIORITY, frames of no bytes
        // of the message (all padding).
        let mut padded = vec![200u8];
        padded.extend([0u8; 200]);
        let headers = f(HEADERS, END_HEADERS, 1, &ok_headers());
        for (first, one) in [
            (
                vec![],
                f(HEADERS, END_HEADERS, 1, &block(&[(":status", "100")])),
            ),
            (vec![], f(PING, 0, 0, b"12345678")),
            (vec![], f(0x2, 0, 1, &[0, 0, 0, 0, 15])),
            (headers, f(DATA, PADDED, 1, &padded)),
        ] {
            let flood: Vec<u8> = one.repeat(OTHER_FRAMES_MAX as usize + 1);
            let (r, _) = call([f(SETTINGS, 0, 0, &[]), first, flood].concat());
            assert!(
                matches!(&r, Err(Error::Protocol(m)) if m.contains("not the answer")),
                "{r:?}"
            );
        }
        // Bytes: four unknown frames of 16 KiB pass the bound of 64 KiB.
        let big = f(0xfa, 0, 0, &vec![0; MAX_FRAME]);
        let (r, _) = call(answer_after(&vec![big; 5]));
        assert!(
            matches!(&r, Err(Error::Protocol(m)) if m.contains("payload bytes")),
            "{r:?}"
        );
    }

    #[test]
    fn a_header_block_of_endless_empty_continuations_is_refused() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::a_header_block_of_endless_empty_continuations_is_refused",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let mut a = f(SETTINGS, 0, 0, &[]);
        a.extend(f(HEADERS, 0, 1, &ok_headers()));
        for _ in 0..HEADER_FRAMES_MAX {
            a.extend(f(CONTINUATION, 0, 1, &[]));
        }
        match call(a).0 {
            Err(Error::Protocol(m)) => assert!(m.contains("more than 16 frames"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_deadline_ends_a_call_whose_answer_is_all_buffered() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::the_deadline_ends_a_call_whose_answer_is_all_buffered",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        // Everything the server says is in the socket before the call reads
        // it: the deadline is already past, so no frame is taken.
        let (path, h) = server(answer_after(&[]));
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut c = Conn::open(&path, Duration::from_millis(300), deadline, 1 << 20).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let r = c.unary("/s/m", b"", 1 << 20, deadline);
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn oversized_message_is_too_large_from_its_prefix() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::oversized_message_is_too_large_from_its_prefix",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let mut data = vec![0];
        data.extend_from_slice(&((1u32 << 20) + 1).to_be_bytes());
        let answer = [
            f(SETTINGS, 0, 0, &[]),
            f(HEADERS, END_HEADERS, 1, &ok_headers()),
            f(DATA, 0, 1, &data),
        ]
        .concat();
        match call(answer).0 {
            Err(Error::TooLarge { size, limit }) => {
                assert_eq!((size, limit), ((1 << 20) + 1, 1 << 20))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn request_frames() {
        if !crate::process::test_runs_as_root(
            "podresources::h2::request_frames",
            "the kubelet's socket is believed only when root serves it",
        ) {
            return;
        }
        let (r, sent) = call([f(SETTINGS, 0, 0, &[]), f(GOAWAY, 0, 0, &[0; 8])].concat());
        assert!(
            matches!(
                r,
                Err(Error::Status {
                    code: UNAVAILABLE,
                    ..
                })
            ),
            "{r:?}"
        );
        // Preface, SETTINGS (3 settings), WINDOW_UPDATE, HEADERS, DATA.
        let mut p = PREFACE.len();
        let mut frames = Vec::new();
        while p + 9 <= sent.len() {
            let len = (sent[p] as usize) << 16 | (sent[p + 1] as usize) << 8 | sent[p + 2] as usize;
            frames.push((sent[p + 3], sent[p + 4], sent[p + 9..p + 9 + len].to_vec()));
            p += 9 + len;
        }
        assert_eq!(frames[0].0, SETTINGS);
        assert_eq!(frames[0].2.len(), 18);
        assert_eq!(&frames[0].2[..6], &[0, 2, 0, 0, 0, 0], "ENABLE_PUSH 0");
        assert_eq!(frames[1].0, WINDOW_UPDATE);
        assert_eq!(frames[2].0, HEADERS);
        assert_eq!(frames[2].1, END_HEADERS);
        let mut d = Decoder::new(4096);
        let mut h = Vec::new();
        d.decode(&frames[2].2, 1 << 16, |n, v| {
            h.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })
        .unwrap();
        let names: Vec<&str> = h.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                ":method",
                ":scheme",
                ":path",
                ":authority",
                "grpc-timeout",
                "content-type",
                "te",
                "user-agent"
            ]
        );
        assert_eq!(h[0].1, "POST");
        assert_eq!(h[2].1, "/v1.PodResourcesLister/List");
        assert!(h[4].1.ends_with('m'));
        assert_eq!(
            (h[5].1.as_str(), h[6].1.as_str()),
            ("application/grpc", "trailers")
        );
        assert_eq!(frames[3], (DATA, END_STREAM, vec![0, 0, 0, 0, 0]));
    }

    #[test]
    fn connect_errors() {
        let dir = std::env::temp_dir().join(format!("rt-h2c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        let t = Duration::from_secs(1);
        assert!(matches!(
            connect(&dir.join("none"), t, deadline),
            Err(Error::NoSocket(_))
        ));
        // A socket file nobody listens on: what a stopped kubelet leaves.
        let stale = dir.join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert!(matches!(
            connect(&stale, t, deadline),
            Err(Error::NoSocket(_))
        ));
        let long = dir.join("x".repeat(120));
        assert!(matches!(connect(&long, t, deadline), Err(Error::Io { .. })));
        let _ = UnixStream::connect(&stale);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
