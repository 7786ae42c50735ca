//! One connection to the runtime's NRI socket, and the loop that keeps one
//! up. Order (containerd/nri `pkg/adaptation/plugin.go`, v0.12.2; ../shared/nri
//! PROTOCOL.md, section 4): connect; RegisterPlugin on conn 2; the runtime
//! answers, then sends Configure and Synchronize on conn 1; then events.
//! Every request is answered on the thread that reads it, from what the
//! plugin holds: nothing here waits on the node.

use super::answer::Plugin;
use super::messages::{self as msg, PodEvent};
use super::mux::{self, MuxError, PLUGIN_CONN, RUNTIME_CONN};
use super::ttrpc::{self, code, Assembler, Item};
use super::{Method, Outcome, Stats};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub const PLUGIN_NAME: &str = "roce-tune";
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";
/// The NRI version whose protocol this plugin speaks, sent at registration
/// (a v0.12 runtime logs it; a v0.11 one skips the field).
pub const NRI_VERSION: &str = "v0.12.2";
/// The longest this plugin waits for the runtime between connecting and
/// Configure: the runtime's own registration timeout is 5 s by default
/// (`api.DefaultPluginRegistrationTimeout`).
const REGISTRATION_WAIT: Duration = Duration::from_secs(10);
/// A write the runtime does not take within this is a dead runtime.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// The answer of every request of issue 26 is bounded by this; one that
/// takes longer is logged (the runtime's own bound is 2 s by default).
pub const ANSWER_BOUND: Duration = Duration::from_millis(100);
/// Reconnect delays: the first attempt at once, then doubling from the
/// first step up to the cap, so a restarted runtime has its plugin back
/// within the cap of its socket coming back.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(25);
pub const BACKOFF_CAP: Duration = Duration::from_millis(400);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub socket: PathBuf,
    /// Two digits: the plugin's place among the node's plugins.
    pub index: String,
}

/// Why a connection ended.
#[derive(Debug)]
pub enum Ended {
    /// The runtime closed it (a restart, or a drop after a timeout).
    Closed,
    Broken(MuxError),
    /// The runtime answered RegisterPlugin with an error.
    Refused(String),
    /// Writing an answer failed.
    Write(std::io::Error),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Closed => f.write_str("the runtime closed the connection"),
            Ended::Broken(e) => write!(f, "{e}"),
            Ended::Refused(m) => write!(f, "the runtime refused the registration: {m}"),
            Ended::Write(e) => write!(f, "writing to the runtime: {e}"),
        }
    }
}

/// Connect, and prove the other end is root: whoever holds that end sends
/// the pods and netns paths the plugin acts on (issue 27 tunes what they
/// name). The uid is the kernel's (SO_PEERCRED, taken at connect), not
/// anything the peer says.
pub fn connect(settings: &Settings) -> Result<UnixStream, String> {
    let s = UnixStream::connect(&settings.socket)
        .map_err(|e| format!("cannot connect to {}: {e}", settings.socket.display()))?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| {
            format!(
                "cannot ask {} who serves it: {e}",
                settings.socket.display()
            )
        })?;
    if cred.uid() != 0 {
        return Err(format!(
            "{} is served by uid {} (pid {}), not root: not registering (only the runtime, as root, may send the pods it tunes)",
            settings.socket.display(),
            cred.uid(),
            cred.pid()
        ));
    }
    Ok(s)
}

/// The session over one connected stream: register, then answer until it
/// ends. `on_registered` runs once the runtime accepted the registration.
pub fn serve(
    mut stream: UnixStream,
    settings: &Settings,
    plugin: &mut Plugin,
    stats: &Stats,
    mut on_registered: impl FnMut(),
) -> Ended {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_read_timeout(Some(REGISTRATION_WAIT));
    let register = ttrpc::Request {
        service: RUNTIME_SERVICE,
        method: "RegisterPlugin",
        payload: &msg::register_plugin(PLUGIN_NAME, &settings.index, NRI_VERSION),
        timeout_nano: 5_000_000_000,
    };
    let wire = ttrpc::encode(1, ttrpc::TYPE_REQUEST, &register.encode());
    if let Err(e) = mux::write_frames(&mut stream, RUNTIME_CONN, &wire) {
        return Ended::Write(e);
    }
    let mut conn = Conn {
        plugin,
        stats,
        last_stream: 0,
        configured: false,
        synced: None,
        sync_parts: Vec::new(),
        sync_done: None,
    };
    let (mut served, mut runtime) = (Assembler::default(), Assembler::default());
    let mut said_other_conn = false;
    let mut reader = match stream.try_clone() {
        Ok(r) => r,
        Err(e) => return Ended::Write(e),
    };
    loop {
        let (id, payload) = match mux::read_frame(&mut reader) {
            Ok(Some(f)) => f,
            Ok(None) => return Ended::Closed,
            Err(MuxError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ended::Broken(MuxError::Io(std::io::Error::new(
                    e.kind(),
                    format!(
                        "no Configure within {} s of connecting",
                        REGISTRATION_WAIT.as_secs()
                    ),
                )))
            }
            Err(e) => return Ended::Broken(e),
        };
        match id {
            RUNTIME_CONN => {
                runtime.push(&payload);
                while let Some(item) = runtime.next_item() {
                    match item {
                        Item::Message(h, body)
                            if h.kind == ttrpc::TYPE_RESPONSE && h.stream == 1 =>
                        {
                            match ttrpc::Response::decode(&body) {
                                Ok(r) if r.code == code::OK => on_registered(),
                                Ok(r) => {
                                    return Ended::Refused(format!(
                                        "code {}: {}",
                                        r.code,
                                        crate::quote::input(r.message)
                                    ))
                                }
                                Err(e) => {
                                    return Ended::Refused(format!(
                                        "an answer that does not decode ({e})"
                                    ))
                                }
                            }
                        }
                        // Nothing else is asked on this conn: said by its
                        // header, never its bytes (up to 4 MiB of a peer's).
                        Item::Message(h, _) | Item::Oversized(h) => {
                            crate::debug!("ignored on the runtime conn: {h:?}")
                        }
                    }
                }
            }
            PLUGIN_CONN => {
                served.push(&payload);
                while let Some(item) = served.next_item() {
                    if let Some((stream_id, answer)) = conn.answer(item) {
                        let wire = ttrpc::encode(stream_id, ttrpc::TYPE_RESPONSE, &answer);
                        if let Err(e) = mux::write_frames(&mut stream, PLUGIN_CONN, &wire) {
                            return Ended::Write(e);
                        }
                        // Its last part answered: the DRA rails' catch-up
                        // starts, on its own thread (`dra::CatchUp`).
                        if let Some(parts) = conn.sync_done.take() {
                            conn.plugin.synchronized_pods(parts);
                        }
                        if conn.configured {
                            // Registered and configured: the runtime may be
                            // quiet for hours now.
                            let _ = reader.set_read_timeout(None);
                        }
                    }
                }
            }
            other => {
                // The runtime's mux drops a frame for a conn it has not
                // opened without a word (mux.go:345-356); so does this one,
                // saying so once per connection.
                if !said_other_conn {
                    crate::warn!("dropped a frame for conn {other}: NRI uses conns 1 and 2");
                    said_other_conn = true;
                }
            }
        }
    }
}

/// What one connection's answers need beside the plugin.
struct Conn<'a> {
    plugin: &'a mut Plugin,
    stats: &'a Stats,
    /// The last request's stream id: ids are odd and increase (ttrpc
    /// server.go:402, 444).
    last_stream: u32,
    configured: bool,
    /// The Synchronize just answered, logged with its time.
    synced: Option<msg::Synchronize>,
    /// The parts of a Synchronize so far, as the runtime sent them (a copy
    /// of the bytes, decoded on the catch-up thread, never here), when the
    /// plugin wants its pods.
    sync_parts: Vec<Vec<u8>>,
    /// Every part, once the last one (`more` unset) is answered.
    sync_done: Option<Vec<Vec<u8>>>,
}

impl Conn<'_> {
    /// The answer to one item of the Plugin conn: its stream id and the
    /// Response bytes; `None` for what gets no answer.
    fn answer(&mut self, item: Item) -> Option<(u32, Vec<u8>)> {
        let (h, body) = match item {
            Item::Message(h, body) => (h, body),
            Item::Oversized(h) => {
                crate::warn!(
                    "a request of {} bytes on stream {}, more than ttrpc's {}: answered RESOURCE_EXHAUSTED",
                    h.length,
                    h.stream,
                    ttrpc::MAX_MESSAGE
                );
                self.stats.count(Method::Unknown, Outcome::Error);
                return Some((
                    h.stream,
                    ttrpc::error_response(code::RESOURCE_EXHAUSTED, "message too large"),
                ));
            }
        };
        if h.kind != ttrpc::TYPE_REQUEST {
            // ttrpc's server ignores other types on a server conn (a
            // unary-only service has no streams).
            crate::debug!(
                "ignored a ttrpc message of type {} on stream {}",
                h.kind,
                h.stream
            );
            return None;
        }
        if h.stream % 2 == 0 || h.stream <= self.last_stream {
            crate::warn!(
                "request on stream {} after {}: ttrpc's ids are odd and increasing; answered INVALID_ARGUMENT",
                h.stream,
                self.last_stream
            );
            self.stats.count(Method::Unknown, Outcome::Error);
            return Some((
                h.stream,
                ttrpc::error_response(
                    code::INVALID_ARGUMENT,
                    "stream id must be odd and increasing",
                ),
            ));
        }
        self.last_stream = h.stream;
        let started = Instant::now();
        let (method, reply) = match ttrpc::Request::decode(&body) {
            Ok(req) => {
                let m = if req.service == PLUGIN_SERVICE {
                    Method::parse(req.method)
                } else {
                    Method::Unknown
                };
                (m, self.dispatch(m, &req))
            }
            Err(e) => (
                Method::Unknown,
                Err((
                    code::INVALID_ARGUMENT,
                    format!("the request does not decode: {e}"),
                )),
            ),
        };
        let took = started.elapsed();
        if let Some(s) = self.synced.take() {
            self.plugin.synchronize(&s, took);
        }
        // A pod event tunes or gives back DRA rails: its bound is the
        // budget it is given (3/4 of the request timeout), not 100 ms.
        let bound = match method {
            Method::RunPodSandbox
            | Method::StopPodSandbox
            | Method::RemovePodSandbox
            | Method::StateChange => self.plugin.pod_event_budget(),
            _ => ANSWER_BOUND,
        };
        if took > bound {
            crate::warn!(
                "{} took {} ms, more than {} ms",
                method.as_str(),
                took.as_millis(),
                bound.as_millis()
            );
        }
        Some(match reply {
            Ok(payload) => {
                self.stats.count(method, Outcome::Ok);
                (h.stream, ttrpc::response(&payload))
            }
            Err((c, message)) => {
                let outcome = if c == code::UNIMPLEMENTED {
                    Outcome::Unimplemented
                } else {
                    Outcome::Error
                };
                crate::warn!("{}: answered code {c}: {message}", method.as_str());
                self.stats.count(method, outcome);
                (h.stream, ttrpc::error_response(c, &message))
            }
        })
    }

    /// A request's answer payload, or the status it gets.
    fn dispatch(&mut self, m: Method, req: &ttrpc::Request<'_>) -> Result<Vec<u8>, (u32, String)> {
        let bad = |e: crate::protowire::WireError| {
            (
                code::INVALID_ARGUMENT,
                format!("{} does not decode: {e}", req.method),
            )
        };
        let p = req.payload;
        match m {
            Method::Configure => {
                let c = msg::configure(p).map_err(bad)?;
                self.plugin.configure(&c);
                self.configured = true;
                Ok(msg::configure_response(self.plugin.events()))
            }
            Method::Synchronize => {
                let s = msg::synchronize(p).map_err(bad)?;
                self.synced = Some(s);
                if self.plugin.wants_synchronized_pods() {
                    if s.pods > 0 {
                        self.sync_parts.push(p.to_vec());
                    }
                    if !s.more && !self.sync_parts.is_empty() {
                        self.sync_done = Some(std::mem::take(&mut self.sync_parts));
                    }
                }
                Ok(msg::synchronize_response(s.more))
            }
            Method::CreateContainer => {
                let (pod, ctr) = msg::create_container(p).map_err(bad)?;
                let env = self.plugin.create_container(&pod, &ctr, self.stats);
                Ok(msg::create_container_response(&env))
            }
            Method::RunPodSandbox | Method::StopPodSandbox | Method::RemovePodSandbox => {
                let e = match m {
                    Method::RunPodSandbox => PodEvent::Run,
                    Method::StopPodSandbox => PodEvent::Stop,
                    _ => PodEvent::Remove,
                };
                let pod = msg::pod_request(p).map_err(bad)?;
                self.plugin
                    .pod_event(e, &pod)
                    .map_err(|e| (code::UNKNOWN, e))?;
                Ok(Vec::new())
            }
            Method::StateChange => {
                let (event, pod) = msg::state_change(p).map_err(bad)?;
                let e = match event {
                    1 => PodEvent::Run,
                    2 => PodEvent::Stop,
                    3 => PodEvent::Remove,
                    // A container event this plugin did not ask for.
                    _ => return Ok(Vec::new()),
                };
                self.plugin
                    .pod_event(e, &pod)
                    .map_err(|e| (code::UNKNOWN, e))?;
                Ok(Vec::new())
            }
            Method::Unknown => Err((
                code::UNIMPLEMENTED,
                format!(
                    "{}/{} is not a method of this plugin",
                    crate::quote::input(req.service),
                    crate::quote::input(req.method)
                ),
            )),
        }
    }
}

/// How another thread stops [`run`]: it asks, and the connection being
/// served is shut down, so the blocked read returns at once.
#[derive(Debug, Default)]
pub struct Quit {
    asked: std::sync::atomic::AtomicBool,
    serving: std::sync::Mutex<Option<UnixStream>>,
}

impl Quit {
    pub fn ask(&self) {
        self.asked.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(s) = self
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn asked(&self) -> bool {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The connection about to be served; shut down at once if a stop was
    /// asked meanwhile.
    fn hold(&self, s: &UnixStream) {
        *self.serving.lock().unwrap_or_else(|e| e.into_inner()) = s.try_clone().ok();
        if self.asked() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Keep a session up until `quit` is asked: connect, serve, and when it
/// ends reconnect at once, then with a delay doubling from
/// [`BACKOFF_FIRST`] to [`BACKOFF_CAP`] (so a stop is seen within the cap).
/// Each change (connected, lost, waiting for a runtime that is not up) is
/// logged once, not every attempt.
pub fn run(settings: &Settings, plugin: &mut Plugin, stats: &Stats, quit: &Quit) {
    let mut delay = Duration::ZERO;
    let mut last_failure = String::new();
    while !quit.asked() {
        if !delay.is_zero() {
            std::thread::sleep(delay);
            if quit.asked() {
                break;
            }
        }
        match connect(settings) {
            Ok(stream) => {
                quit.hold(&stream);
                last_failure.clear();
                let mut registered = false;
                let ended = serve(stream, settings, plugin, stats, || {
                    registered = true;
                    stats.set_connected(true);
                    crate::info!(
                        "registered as {}-{PLUGIN_NAME} on {}",
                        settings.index,
                        settings.socket.display()
                    );
                });
                stats.set_connected(false);
                if quit.asked() {
                    break;
                }
                if registered {
                    crate::warn!("disconnected: {ended}; reconnecting at once");
                    delay = Duration::ZERO;
                    continue;
                }
                crate::warn!("not registered: {ended}; retrying");
            }
            Err(why) => {
                if why != last_failure {
                    crate::info!(
                        "{why}; retrying every {} ms until the runtime is there (containers start without the environment meanwhile)",
                        BACKOFF_CAP.as_millis()
                    );
                    last_failure = why;
                }
            }
        }
        delay = (delay * 2).clamp(BACKOFF_FIRST, BACKOFF_CAP);
    }
    crate::info!("the NRI plugin stops");
}
