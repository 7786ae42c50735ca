//! A raw HTTP/2 peer on a unix socket, for the PodResources client's bounds
//! (issue 25, "Every bound real"): whatever listens on the kubelet's socket
//! may answer as no kubelet would. Each `Behaviour` is one thing RFC 9113
//! lets a peer send, sent without end, as fast as the socket takes it; the
//! client's bound must end the call all the same.
//!
//! The peer drains what the client writes (its ACKs included), so a client
//! that keeps answering never blocks on a full socket, where a poll would
//! end the call for the wrong reason. It serves every connection it is
//! offered (the client may open a second one for List) and counts the bytes
//! it sent, for docs/reliability.md.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// What the peer sends after its SETTINGS, over and over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// §8.1: "A response ... consists of ... zero or more HEADERS frames
    /// ... containing the message headers of informational (1xx) HTTP
    /// responses": no limit on how many. Endless `:status 100` blocks.
    Informational,
    /// §4.1, §5.5: "Implementations MUST ignore and discard frames of
    /// unknown types." Endless frames of type 0xfa.
    UnknownFrames,
    /// §6.9: WINDOW_UPDATE on the connection (stream 0); each is valid
    /// until the window would pass 2^31-1, so an increment of 1 is.
    WindowUpdates,
    /// §6.7: "Receivers of a PING frame that does not include an ACK flag
    /// MUST send a PING frame with the ACK flag set": each one makes the
    /// client write.
    Pings,
    /// §6.5.3: "Upon receiving a SETTINGS frame with the ACK flag not set,
    /// the receiver MUST ... emit a SETTINGS frame with the ACK flag set":
    /// endless empty SETTINGS.
    Settings,
    /// §5.3.2 and §6.3: PRIORITY (deprecated, still a frame a receiver must
    /// take) on the call's stream.
    Priority,
    /// §6.1: the response's HEADERS, then DATA frames whose payload is all
    /// padding ("Padding octets MUST be set to zero when sending"), each a
    /// valid frame that carries no byte of the message.
    PaddedData,
}

impl Behaviour {
    pub const ALL: [Behaviour; 7] = [
        Behaviour::Informational,
        Behaviour::UnknownFrames,
        Behaviour::WindowUpdates,
        Behaviour::Pings,
        Behaviour::Settings,
        Behaviour::Priority,
        Behaviour::PaddedData,
    ];

    /// The frames sent once, before the flood (after the server preface).
    fn once(self) -> Vec<u8> {
        match self {
            Behaviour::PaddedData => frame(HEADERS, END_HEADERS, 1, &response_headers()),
            _ => Vec::new(),
        }
    }

    /// One turn of the flood.
    fn chunk(self) -> Vec<u8> {
        match self {
            Behaviour::Informational => frame(HEADERS, END_HEADERS, 1, &status_100()),
            Behaviour::UnknownFrames => frame(0xfa, 0, 0, &[0; 32]),
            Behaviour::WindowUpdates => frame(WINDOW_UPDATE, 0, 0, &1u32.to_be_bytes()),
            Behaviour::Pings => frame(PING, 0, 0, b"hostile!"),
            Behaviour::Settings => frame(SETTINGS, 0, 0, &[]),
            // Stream 1 depends on stream 0, weight 16 (§6.3).
            Behaviour::Priority => frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 15]),
            Behaviour::PaddedData => {
                let mut p = vec![255u8];
                p.extend([0u8; 255]);
                frame(DATA, PADDED, 1, &p)
            }
        }
    }
}

// RFC 9113 §6: frame types and flags.
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const WINDOW_UPDATE: u8 = 0x8;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

/// §4.1: the 9-byte header and the payload.
pub fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + payload.len());
    v.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    v.push(ty);
    v.push(flags);
    v.extend_from_slice(&stream.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// RFC 7541 §6.2.2: `:status: 100` as a literal without indexing, its name
/// the static table's index 8.
fn status_100() -> Vec<u8> {
    vec![0x08, 3, b'1', b'0', b'0']
}

/// `:status: 200` (static index 8) and `content-type: application/grpc`
/// (name index 31), literals without indexing.
fn response_headers() -> Vec<u8> {
    let mut b = vec![0x08, 3, b'2', b'0', b'0', 0x0f, 0x10, 16];
    b.extend_from_slice(b"application/grpc");
    b
}

/// A listening hostile peer; stopped (and its socket removed) on drop.
pub struct HostilePeer {
    pub socket: PathBuf,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    acceptor: Option<thread::JoinHandle<()>>,
}

/// How long one connection is flooded at most: far past any bound a test
/// sets, so a client that never stops shows as a hung call, not as one the
/// peer let go.
const FLOOD_FOR: Duration = Duration::from_secs(30);

impl HostilePeer {
    pub fn start(dir: &Path, behaviour: Behaviour) -> HostilePeer {
        let socket = dir.join(format!("hostile-{behaviour:?}.sock"));
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).expect("bind the hostile peer");
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), sent.clone());
        let acceptor = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (s, n) = (s.clone(), n.clone());
                        thread::spawn(move || serve(conn, behaviour, &s, &n));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        HostilePeer {
            socket,
            stop,
            sent,
            acceptor: Some(acceptor),
        }
    }

    /// Bytes written to clients so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

impl Drop for HostilePeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The peer's send buffer: what the kernel queues for the client ahead of
/// its reads. With the default (208 KiB) a busy machine's scheduler lets the
/// queue run dry now and then, and a client that checks its bound only when
/// a read would block gets lucky; a kubelet-sized buffer keeps it fed.
const SEND_BUFFER: i32 = 64 << 20;

fn serve(mut conn: UnixStream, behaviour: Behaviour, stop: &AtomicBool, sent: &AtomicU64) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads an int of the size given; the fd is open.
    // SO_SNDBUFFORCE (root) passes net.core.wmem_max.
    unsafe {
        nix::libc::setsockopt(
            conn.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            nix::libc::SO_SNDBUFFORCE,
            (&SEND_BUFFER as *const i32).cast(),
            std::mem::size_of::<i32>() as nix::libc::socklen_t,
        );
    }
    let mut reader = conn.try_clone().unwrap();
    // Drain the client: its preface, its request, every ACK it writes.
    thread::spawn(move || {
        let mut sink = [0u8; 64 * 1024];
        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
    });
    // §3.4: the server's preface is a SETTINGS frame (here empty).
    let mut head = frame(SETTINGS, 0, 0, &[]);
    head.extend(behaviour.once());
    if conn.write_all(&head).is_err() {
        return;
    }
    let one = behaviour.chunk();
    let burst: Vec<u8> = one.iter().copied().cycle().take(one.len() * 4096).collect();
    let until = Instant::now() + FLOOD_FOR;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        // Ends when the client closes (EPIPE, ECONNRESET).
        if conn.write_all(&burst).is_err() {
            return;
        }
        sent.fetch_add(burst.len() as u64, Ordering::Relaxed);
    }
}
