//! One connection to the runtime's NRI socket. Order (containerd/nri
//! `pkg/adaptation/plugin.go`, v0.12.2; ../shared/nri PROTOCOL.md, section
//! 4): connect; RegisterPlugin on conn 2; the runtime answers, then sends
//! Configure and Synchronize on conn 1; then events. Every request is
//! answered on the thread that reads it, from what the plugin holds:
//! nothing here waits on the node.
//!
//! The connection's logic is [`Session`], with no socket of its own (the
//! "sans-IO" shape of quinn-proto and rustls): the bytes the runtime sent go
//! in, the bytes to send back and what happened come out, in order. So the
//! fuzz target (fuzz/fuzz_targets/nri_session.rs) and the unit tests drive
//! whole conversations without a socket; [`serve`] drives it over one, and
//! `super::reconnect` keeps one up.

use super::answer::Plugin;
use super::{Method, Outcome, Stats};
use crate::wire::nri_messages::{self as msg, Container, Pod, PodEvent};
use crate::wire::nri_mux::{self as mux, Deframer, MuxError, PLUGIN_CONN, RUNTIME_CONN};
use crate::wire::ttrpc::{self, code, Assembler, Item};
use std::io::{Read, Write};
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
/// The answer of every request the plugin serves is bounded by this; one that
/// takes longer is logged (the runtime's own bound is 2 s by default).
pub const ANSWER_BOUND: Duration = Duration::from_millis(100);
/// The most a Synchronize may hold in the parts kept for the DRA rails'
/// catch-up (the requests' payloads, in all): past it the connection is
/// closed (docs/design.md, "NRI", says why this figure). A node's real
/// state is far below it (10,000 pods with their containers: 2 MB); the
/// bound is for a runtime, or a tenant's pods, that would make it grow
/// with the process's memory (100 parts of 4 MiB took it to 401 MiB).
pub const SYNC_BUDGET: usize = 64 << 20;
/// What one read of the socket takes at most: a runtime's frame can be 4
/// MiB, but it goes on to its conn in pieces (`mux::Deframer`).
const READ_CHUNK: usize = 128 << 10;

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
    /// A Synchronize's parts kept for the catch-up would pass their
    /// `budget` ([`SYNC_BUDGET`]): `kept` bytes in `parts`, and `next` more.
    OverBudget {
        budget: usize,
        kept: usize,
        parts: usize,
        next: usize,
    },
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Closed => f.write_str("the runtime closed the connection"),
            Ended::Broken(e) => write!(f, "{e}"),
            Ended::Refused(m) => write!(f, "the runtime refused the registration: {m}"),
            Ended::Write(e) => write!(f, "writing to the runtime: {e}"),
            Ended::OverBudget {
                budget,
                kept,
                parts,
                next,
            } => {
                if budget % (1 << 20) == 0 {
                    write!(f, "a Synchronize of more than {} MiB", budget >> 20)?;
                } else {
                    write!(f, "a Synchronize of more than {budget} bytes")?;
                }
                write!(f, " to keep for the DRA rails' catch-up ({kept} bytes in {parts} parts, and a part of {next} more): its parts dropped and the connection closed; the next connection starts afresh")
            }
        }
    }
}

/// What the session asks of the plugin: the answers themselves, from what
/// it holds (`answer::Plugin` in the process; a stand-in in the fuzz target
/// and the unit tests).
pub trait Answers {
    /// The event mask for Configure's answer.
    fn events(&self) -> u32;
    fn configure(&mut self, c: &msg::Configure<'_>);
    /// One part of a Synchronize answered, in `took`.
    fn synchronized(&mut self, s: &msg::Synchronize, took: Duration);
    /// Whether a Synchronize's parts are wanted, as bytes, once its last
    /// part is answered.
    fn wants_synchronized_pods(&self) -> bool;
    /// Every part of a Synchronize, its answers sent.
    fn synchronized_pods(&mut self, parts: Vec<Vec<u8>>);
    fn create_container(
        &mut self,
        pod: &Pod<'_>,
        ctr: &Container<'_>,
        stats: &Stats,
    ) -> Vec<(String, String)>;
    /// `Err` fails the sandbox.
    fn pod_event(&mut self, e: PodEvent, pod: &Pod<'_>) -> Result<(), String>;
    /// How long a pod event may take.
    fn pod_event_budget(&self) -> Duration;
}

impl Answers for Plugin {
    fn events(&self) -> u32 {
        Plugin::events(self)
    }
    fn configure(&mut self, c: &msg::Configure<'_>) {
        Plugin::configure(self, c)
    }
    fn synchronized(&mut self, s: &msg::Synchronize, took: Duration) {
        Plugin::synchronize(self, s, took)
    }
    fn wants_synchronized_pods(&self) -> bool {
        Plugin::wants_synchronized_pods(self)
    }
    fn synchronized_pods(&mut self, parts: Vec<Vec<u8>>) {
        Plugin::synchronized_pods(self, parts)
    }
    fn create_container(
        &mut self,
        pod: &Pod<'_>,
        ctr: &Container<'_>,
        stats: &Stats,
    ) -> Vec<(String, String)> {
        Plugin::create_container(self, pod, ctr, stats)
    }
    fn pod_event(&mut self, e: PodEvent, pod: &Pod<'_>) -> Result<(), String> {
        Plugin::pod_event(self, e, pod)
    }
    fn pod_event_budget(&self) -> Duration {
        Plugin::pod_event_budget(self)
    }
}

/// What a session's bytes led to, in the order it happened.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    /// Bytes for the runtime: whole frames of at most `mux::MAX_SEND`.
    Send(Vec<u8>),
    /// The runtime accepted the registration.
    Registered,
    /// Configure answered: the runtime may be quiet for hours now.
    Configured,
    /// A Synchronize's last part answered (after its `Send`): every part,
    /// for `Answers::synchronized_pods`.
    Synchronized(Vec<Vec<u8>>),
}

/// One connection's state: the trunk's frames, each conn's messages, the
/// ttrpc streams, and a Synchronize under way.
#[derive(Debug)]
pub struct Session {
    frames: Deframer,
    /// The Plugin service's conn (requests in) and the Runtime's (the
    /// registration's answer in).
    served: Assembler,
    runtime: Assembler,
    said_other_conn: bool,
    registered: bool,
    configured: bool,
    /// The last request's stream id: ids are odd and increase (ttrpc
    /// server.go:402, 444).
    last_stream: u32,
    /// The Synchronize just answered, logged with its time.
    synced: Option<msg::Synchronize>,
    /// The parts of a Synchronize so far, as the runtime sent them (the
    /// request's payload, decoded on the catch-up thread, never here),
    /// when the plugin wants its pods.
    sync_parts: Vec<Vec<u8>>,
    /// The bytes `sync_parts` holds, and the most it may.
    sync_bytes: usize,
    sync_budget: usize,
    /// What to keep of the request just dispatched, a Synchronize part.
    keep: Keep,
    /// Why the connection ends after the request just dispatched.
    ending: Option<Ended>,
    /// Every part, once the last one (`more` unset) is answered.
    sync_done: Option<Vec<Vec<u8>>>,
}

impl Default for Session {
    fn default() -> Session {
        Session::with_sync_budget(SYNC_BUDGET)
    }
}

/// What a Synchronize part leaves for the catch-up, which reads its pods
/// alone (`messages::synchronize_pods`).
#[derive(Debug)]
enum Keep {
    Nothing,
    /// The payload, cut out of the request's bytes in place (not copied):
    /// a part of pods only, as a runtime splits a large state.
    Payload,
    /// A copy of its pods: the part held containers too, which are not
    /// kept.
    Pods(Vec<u8>),
}

/// A `SynchronizeRequest` of `p`'s pods alone (field 1, in order).
fn pods_only(p: &[u8]) -> Result<Vec<u8>, crate::wire::protobuf::WireError> {
    let mut w = crate::wire::protobuf::Writer::new();
    let mut f = crate::wire::protobuf::Fields::new(p);
    while let Some((n, v)) = f.next()? {
        if n == 1 {
            w.bytes(
                1,
                crate::wire::protobuf::bytes(n, v, "SynchronizeRequest.pods")?,
            );
        }
    }
    Ok(w.into_bytes())
}

/// `bytes` on `conn` as frames.
fn framed(conn: u32, bytes: &[u8]) -> Vec<u8> {
    let mut wire =
        Vec::with_capacity(bytes.len() + mux::HEADER * bytes.len().div_ceil(mux::MAX_SEND));
    mux::write_frames(&mut wire, conn, bytes).expect("a Vec takes every write");
    wire
}

impl Session {
    /// A session whose Synchronize may keep `bytes` (the fuzz target's and
    /// the tests' small budgets; [`SYNC_BUDGET`] otherwise).
    pub fn with_sync_budget(bytes: usize) -> Session {
        Session {
            frames: Deframer::default(),
            served: Assembler::default(),
            runtime: Assembler::default(),
            said_other_conn: false,
            registered: false,
            configured: false,
            last_stream: 0,
            synced: None,
            sync_parts: Vec::new(),
            sync_bytes: 0,
            sync_budget: bytes,
            keep: Keep::Nothing,
            ending: None,
            sync_done: None,
        }
    }

    /// The bytes a Synchronize under way holds.
    pub fn sync_bytes(&self) -> usize {
        self.sync_bytes
    }

    /// What the plugin sends first: RegisterPlugin, on the Runtime's conn.
    pub fn hello(settings: &Settings) -> Vec<u8> {
        let register = ttrpc::Request {
            service: RUNTIME_SERVICE,
            method: "RegisterPlugin",
            payload: &msg::register_plugin(PLUGIN_NAME, &settings.index, NRI_VERSION),
            timeout_nano: 5_000_000_000,
        };
        framed(
            RUNTIME_CONN,
            &ttrpc::encode(1, ttrpc::TYPE_REQUEST, &register.encode()),
        )
    }

    /// The runtime's next bytes: what they lead to goes to `out`, in order;
    /// `Err` ends the connection (after what `out` holds is done).
    pub fn receive(
        &mut self,
        mut bytes: &[u8],
        answers: &mut impl Answers,
        stats: &Stats,
        out: &mut Vec<Output>,
    ) -> Result<(), Ended> {
        while let Some((conn, piece)) = self.frames.next(&mut bytes).map_err(Ended::Broken)? {
            match conn {
                RUNTIME_CONN => {
                    self.runtime.push(piece);
                    while let Some(item) = self.runtime.next_item() {
                        self.runtime_item(item, out)?;
                    }
                }
                PLUGIN_CONN => {
                    self.served.push(piece);
                    while let Some(item) = self.served.next_item() {
                        self.answer(item, answers, stats, out)?;
                    }
                }
                other => {
                    // The runtime's mux drops a frame for a conn it has not
                    // opened without a word (mux.go:345-356); so does this
                    // one, saying so once per connection.
                    if !self.said_other_conn {
                        crate::warn!("dropped a frame for conn {other}: NRI uses conns 1 and 2");
                        self.said_other_conn = true;
                    }
                }
            }
        }
        Ok(())
    }

    /// The stream ended: cleanly between frames, or inside one.
    pub fn end(&self) -> Ended {
        match self.frames.cut_short() {
            Some(e) => Ended::Broken(e),
            None => Ended::Closed,
        }
    }

    fn runtime_item(&mut self, item: Item, out: &mut Vec<Output>) -> Result<(), Ended> {
        match item {
            Item::Message(h, body) if h.kind == ttrpc::TYPE_RESPONSE && h.stream == 1 => {
                match ttrpc::Response::decode(&body) {
                    Ok(r) if r.code == code::OK => {
                        if !self.registered {
                            self.registered = true;
                            out.push(Output::Registered);
                        }
                        Ok(())
                    }
                    Ok(r) => Err(Ended::Refused(format!(
                        "code {}: {}",
                        r.code,
                        crate::quote::input(r.message)
                    ))),
                    Err(e) => Err(Ended::Refused(format!(
                        "an answer that does not decode ({e})"
                    ))),
                }
            }
            // Nothing else is asked on this conn: said by its header, never
            // its bytes (up to 4 MiB of a peer's).
            Item::Message(h, _) | Item::Oversized(h) => {
                crate::debug!("ignored on the runtime conn: {h:?}");
                Ok(())
            }
        }
    }

    /// The answer to one item of the Plugin conn, if it gets one, and what
    /// follows it; `Err` ends the connection instead.
    fn answer(
        &mut self,
        item: Item,
        answers: &mut impl Answers,
        stats: &Stats,
        out: &mut Vec<Output>,
    ) -> Result<(), Ended> {
        let (h, body) = match item {
            Item::Message(h, body) => (h, body),
            Item::Oversized(h) => {
                crate::warn!(
                    "a request of {} bytes on stream {}, more than ttrpc's {}: answered RESOURCE_EXHAUSTED",
                    h.length,
                    h.stream,
                    ttrpc::MAX_MESSAGE
                );
                stats.count(Method::Unknown, Outcome::Error);
                let answer = ttrpc::error_response(code::RESOURCE_EXHAUSTED, "message too large");
                self.send(h.stream, &answer, out);
                return Ok(());
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
            return Ok(());
        }
        if h.stream % 2 == 0 || h.stream <= self.last_stream {
            crate::warn!(
                "request on stream {} after {}: ttrpc's ids are odd and increasing; answered INVALID_ARGUMENT",
                h.stream,
                self.last_stream
            );
            stats.count(Method::Unknown, Outcome::Error);
            let answer = ttrpc::error_response(
                code::INVALID_ARGUMENT,
                "stream id must be odd and increasing",
            );
            self.send(h.stream, &answer, out);
            return Ok(());
        }
        self.last_stream = h.stream;
        let started = Instant::now();
        let was_configured = self.configured;
        let mut payload_at = 0..0;
        let (method, reply) = match ttrpc::Request::decode(&body) {
            Ok(req) => {
                let m = if req.service == PLUGIN_SERVICE {
                    Method::parse(req.method)
                } else {
                    Method::Unknown
                };
                // Where the payload sits in the request's bytes (a field
                // decoded is a slice of them; an empty one may point
                // anywhere, and is never kept).
                if !req.payload.is_empty() {
                    let at = req.payload.as_ptr() as usize - body.as_ptr() as usize;
                    payload_at = at..at + req.payload.len();
                }
                (m, self.dispatch(m, &req, answers, stats))
            }
            Err(e) => (
                Method::Unknown,
                Err((
                    code::INVALID_ARGUMENT,
                    format!("the request does not decode: {e}"),
                )),
            ),
        };
        if let Some(end) = self.ending.take() {
            stats.count(method, Outcome::Error);
            // Nothing kept of it; the next connection starts afresh.
            self.sync_parts = Vec::new();
            self.sync_bytes = 0;
            return Err(end);
        }
        let kept = match std::mem::replace(&mut self.keep, Keep::Nothing) {
            Keep::Nothing => None,
            Keep::Payload => {
                let mut part = body;
                part.truncate(payload_at.end);
                part.drain(..payload_at.start);
                part.shrink_to_fit();
                Some(part)
            }
            Keep::Pods(pods) => Some(pods),
        };
        if let Some(part) = kept {
            self.sync_bytes += part.len();
            self.sync_parts.push(part);
        }
        let took = started.elapsed();
        if let Some(s) = self.synced.take() {
            answers.synchronized(&s, took);
            if !s.more && !self.sync_parts.is_empty() {
                self.sync_done = Some(std::mem::take(&mut self.sync_parts));
                self.sync_bytes = 0;
            }
        }
        // A pod event tunes or gives back DRA rails: its bound is the
        // budget it is given (3/4 of the request timeout), not 100 ms.
        let bound = match method {
            Method::RunPodSandbox
            | Method::StopPodSandbox
            | Method::RemovePodSandbox
            | Method::StateChange => answers.pod_event_budget(),
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
        let answer = match reply {
            Ok(payload) => {
                stats.count(method, Outcome::Ok);
                ttrpc::response(&payload)
            }
            Err((c, message)) => {
                let outcome = if c == code::UNIMPLEMENTED {
                    Outcome::Unimplemented
                } else {
                    Outcome::Error
                };
                crate::warn!("{}: answered code {c}: {message}", method.as_str());
                stats.count(method, outcome);
                ttrpc::error_response(c, &message)
            }
        };
        self.send(h.stream, &answer, out);
        if self.configured && !was_configured {
            out.push(Output::Configured);
        }
        // Its last part answered: the DRA rails' catch-up may start.
        if let Some(parts) = self.sync_done.take() {
            out.push(Output::Synchronized(parts));
        }
        Ok(())
    }

    fn send(&self, stream: u32, answer: &[u8], out: &mut Vec<Output>) {
        out.push(Output::Send(framed(
            PLUGIN_CONN,
            &ttrpc::encode(stream, ttrpc::TYPE_RESPONSE, answer),
        )));
    }

    /// A request's answer payload, or the status it gets.
    fn dispatch(
        &mut self,
        m: Method,
        req: &ttrpc::Request<'_>,
        answers: &mut impl Answers,
        stats: &Stats,
    ) -> Result<Vec<u8>, (u32, String)> {
        let bad = |e: crate::wire::protobuf::WireError| {
            (
                code::INVALID_ARGUMENT,
                format!("{} does not decode: {e}", req.method),
            )
        };
        let p = req.payload;
        match m {
            Method::Configure => {
                let c = msg::configure(p).map_err(bad)?;
                answers.configure(&c);
                self.configured = true;
                Ok(msg::configure_response(answers.events()))
            }
            Method::Synchronize => {
                let s = msg::synchronize(p).map_err(bad)?;
                if answers.wants_synchronized_pods() && s.pods > 0 {
                    let keep = if s.containers == 0 {
                        Keep::Payload
                    } else {
                        Keep::Pods(pods_only(p).map_err(bad)?)
                    };
                    let size = match &keep {
                        Keep::Pods(pods) => pods.len(),
                        _ => p.len(),
                    };
                    if self.sync_bytes + size > self.sync_budget {
                        self.ending = Some(Ended::OverBudget {
                            budget: self.sync_budget,
                            kept: self.sync_bytes,
                            parts: self.sync_parts.len(),
                            next: size,
                        });
                        return Ok(Vec::new());
                    }
                    self.keep = keep;
                }
                self.synced = Some(s);
                Ok(msg::synchronize_response(s.more))
            }
            Method::CreateContainer => {
                let (pod, ctr) = msg::create_container(p).map_err(bad)?;
                let env = answers.create_container(&pod, &ctr, stats);
                Ok(msg::create_container_response(&env))
            }
            Method::RunPodSandbox | Method::StopPodSandbox | Method::RemovePodSandbox => {
                let e = match m {
                    Method::RunPodSandbox => PodEvent::Run,
                    Method::StopPodSandbox => PodEvent::Stop,
                    _ => PodEvent::Remove,
                };
                let pod = msg::pod_request(p).map_err(bad)?;
                answers.pod_event(e, &pod).map_err(|e| (code::UNKNOWN, e))?;
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
                answers.pod_event(e, &pod).map_err(|e| (code::UNKNOWN, e))?;
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

/// Connect, and prove the other end is root: whoever holds that end sends
/// the pods and netns paths the plugin acts on (a DRA rail is
/// tuned where they point). The uid is the kernel's (SO_PEERCRED, taken at connect), not
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
    answers: &mut impl Answers,
    stats: &Stats,
    mut on_registered: impl FnMut(),
) -> Ended {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_read_timeout(Some(REGISTRATION_WAIT));
    if let Err(e) = stream.write_all(&Session::hello(settings)) {
        return Ended::Write(e);
    }
    let mut session = Session::default();
    let mut buf = vec![0u8; READ_CHUNK];
    let mut out = Vec::new();
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) => return session.end(),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
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
            Err(e) => return Ended::Broken(MuxError::Io(e)),
        };
        let received = session.receive(&buf[..n], answers, stats, &mut out);
        for o in out.drain(..) {
            match o {
                Output::Send(wire) => {
                    if let Err(e) = stream.write_all(&wire) {
                        return Ended::Write(e);
                    }
                }
                Output::Registered => on_registered(),
                Output::Configured => {
                    let _ = stream.set_read_timeout(None);
                }
                Output::Synchronized(parts) => answers.synchronized_pods(parts),
            }
        }
        if let Err(e) = received {
            return e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::protobuf::Writer;

    /// A plugin that wants a Synchronize's pods and answers nothing else.
    #[derive(Default)]
    struct Wants {
        configured: usize,
        synchronized: usize,
    }

    impl Answers for Wants {
        fn events(&self) -> u32 {
            0xf
        }
        fn configure(&mut self, _: &msg::Configure<'_>) {
            self.configured += 1;
        }
        fn synchronized(&mut self, _: &msg::Synchronize, _: Duration) {
            self.synchronized += 1;
        }
        fn wants_synchronized_pods(&self) -> bool {
            true
        }
        fn synchronized_pods(&mut self, _: Vec<Vec<u8>>) {}
        fn create_container(
            &mut self,
            _: &Pod<'_>,
            _: &Container<'_>,
            _: &Stats,
        ) -> Vec<(String, String)> {
            Vec::new()
        }
        fn pod_event(&mut self, _: PodEvent, _: &Pod<'_>) -> Result<(), String> {
            Ok(())
        }
        fn pod_event_budget(&self) -> Duration {
            Duration::from_millis(1500)
        }
    }

    /// A request to the Plugin service on `stream`, framed as the runtime
    /// sends it (one frame).
    fn request(stream: u32, method: &str, payload: &[u8]) -> Vec<u8> {
        let req = ttrpc::Request {
            service: PLUGIN_SERVICE,
            method,
            payload,
            timeout_nano: 2_000_000_000,
        };
        let msg = ttrpc::encode(stream, ttrpc::TYPE_REQUEST, &req.encode());
        let mut frame = PLUGIN_CONN.to_be_bytes().to_vec();
        frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        frame.extend(msg);
        frame
    }

    /// A Synchronize part with one pod named `id`.
    fn part(id: &str, more: bool) -> Vec<u8> {
        let mut pod = Writer::new();
        pod.text(1, id);
        let mut w = Writer::new();
        w.message(1, &pod).varint(3, u64::from(more));
        w.into_bytes()
    }

    /// The runtime's side of a registration, a Configure and a Synchronize
    /// in two parts.
    fn conversation() -> Vec<u8> {
        let mut wire = framed(
            RUNTIME_CONN,
            &ttrpc::encode(1, ttrpc::TYPE_RESPONSE, &ttrpc::response(b"")),
        );
        let mut configure = Writer::new();
        configure.text(2, "containerd").varint(5, 2000);
        wire.extend(request(1, "Configure", configure.as_bytes()));
        wire.extend(request(3, "Synchronize", &part("a", true)));
        wire.extend(request(5, "Synchronize", &part("b", false)));
        wire
    }

    /// What the session made of `wire` given in pieces of `cut` bytes, with
    /// each Send as the stream of its answers (stream id, status code).
    fn run(wire: &[u8], cut: usize) -> (Vec<String>, Wants) {
        let mut s = Session::default();
        let mut a = Wants::default();
        let stats = Stats::default();
        let mut out = Vec::new();
        for piece in wire.chunks(cut) {
            s.receive(piece, &mut a, &stats, &mut out).unwrap();
        }
        let mut said = Vec::new();
        let mut back = Assembler::default();
        for o in out {
            match o {
                Output::Send(bytes) => {
                    let mut r = &bytes[..];
                    while let Some((conn, p)) = mux::read_frame(&mut r).unwrap() {
                        assert_eq!(conn, PLUGIN_CONN);
                        assert!(p.len() <= mux::MAX_SEND);
                        back.push(&p);
                    }
                    while let Some(Item::Message(h, body)) = back.next_item() {
                        let code = ttrpc::Response::decode(&body).unwrap().code;
                        said.push(format!("answer {} code {code}", h.stream));
                    }
                }
                Output::Registered => said.push("registered".into()),
                Output::Configured => said.push("configured".into()),
                Output::Synchronized(parts) => said.push(format!("{} parts", parts.len())),
            }
        }
        (said, a)
    }

    #[test]
    fn a_conversation_gives_the_same_outputs_however_its_bytes_are_cut() {
        let hello = Session::hello(&Settings {
            socket: "/x".into(),
            index: "50".into(),
        });
        let mut r = &hello[..];
        let (conn, _) = mux::read_frame(&mut r).unwrap().unwrap();
        assert_eq!(conn, RUNTIME_CONN);
        let wire = conversation();
        let (whole, a) = run(&wire, wire.len());
        assert_eq!(
            whole,
            [
                "registered",
                "answer 1 code 0",
                "configured",
                "answer 3 code 0",
                "answer 5 code 0",
                "2 parts"
            ]
        );
        assert_eq!((a.configured, a.synchronized), (1, 2));
        for cut in [1, 7, 8, 13, 100] {
            assert_eq!(run(&wire, cut).0, whole, "cut {cut}");
        }
    }

    #[test]
    fn parts_past_the_budget_end_the_session_unanswered_and_keep_nothing() {
        let one = part("a", true).len();
        let mut s = Session::with_sync_budget(2 * one);
        let stats = Stats::default();
        let mut out = Vec::new();
        let mut wire = Vec::new();
        for (id, stream) in [("a", 1), ("b", 3), ("c", 5)] {
            wire.extend(request(stream, "Synchronize", &part(id, true)));
        }
        let e = s
            .receive(&wire, &mut Wants::default(), &stats, &mut out)
            .unwrap_err();
        assert!(
            matches!(e, Ended::OverBudget { kept, parts: 2, next, .. } if kept == 2 * one && next == one),
            "{e}"
        );
        let said = format!("a Synchronize of more than {} bytes", 2 * one);
        assert!(e.to_string().starts_with(&said), "{e}");
        assert_eq!(
            out.len(),
            2,
            "the first two answered, the third not: {out:?}"
        );
        assert_eq!(s.sync_bytes(), 0);
        assert_eq!(stats.requests(Method::Synchronize, Outcome::Error), 1);
        // Parts without a pod are not kept, so not counted.
        let mut s = Session::with_sync_budget(one);
        let mut wire = request(1, "Synchronize", &part("a", true));
        for stream in [3, 5, 7] {
            wire.extend(request(stream, "Synchronize", b"\x18\x01"));
        }
        wire.extend(request(9, "Synchronize", b""));
        let mut out = Vec::new();
        s.receive(&wire, &mut Wants::default(), &stats, &mut out)
            .unwrap();
        assert!(matches!(out.last(), Some(Output::Synchronized(p)) if p.len() == 1));
        // A part's containers are not kept: its pods alone, in order.
        let mut s = Session::with_sync_budget(3 * one);
        let mut mixed = Writer::new();
        let (mut a, mut c, mut b) = (Writer::new(), Writer::new(), Writer::new());
        a.text(1, "a");
        c.text(1, &"c".repeat(4 * one));
        b.text(1, "b");
        mixed.message(1, &a).message(2, &c).message(1, &b);
        let mut out = Vec::new();
        s.receive(
            &request(1, "Synchronize", mixed.as_bytes()),
            &mut Wants::default(),
            &stats,
            &mut out,
        )
        .unwrap();
        let mut pods = Writer::new();
        pods.message(1, &a).message(1, &b);
        assert_eq!(
            out.last(),
            Some(&Output::Synchronized(vec![pods.into_bytes()]))
        );
    }

    #[test]
    fn a_stream_ended_inside_a_frame_is_broken_and_between_frames_closed() {
        let mut s = Session::default();
        let stats = Stats::default();
        let wire = conversation();
        let mut out = Vec::new();
        s.receive(
            &wire[..wire.len() - 3],
            &mut Wants::default(),
            &stats,
            &mut out,
        )
        .unwrap();
        assert!(matches!(
            s.end(),
            Ended::Broken(MuxError::Truncated {
                part: "payload",
                ..
            })
        ));
        s.receive(
            &wire[wire.len() - 3..],
            &mut Wants::default(),
            &stats,
            &mut out,
        )
        .unwrap();
        assert!(matches!(s.end(), Ended::Closed));
    }
}
