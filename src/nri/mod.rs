//! `roce-tune-agent nri`: a Node Resource Interface plugin (containerd/nri), so
//! that every container of a pod that asks is told its verified rails
//! (`NCCL_IB_HCA`, the GID index, the class) in its environment at
//! CreateContainer, instead of lines a job writes by hand.
//!
//! - its wire (`crate::wire`): `nri_mux`, the frames of NRI's multiplexed
//!   socket; `ttrpc`, the RPC messages inside each conn; `nri_messages`, the
//!   NRI messages (protobuf);
//! - `session`: one connection (SO_PEERCRED, register, serve), its logic
//!   drivable without a socket (`Session`: bytes in, bytes out);
//! - `reconnect`: the loop that keeps a session up, and how it is stopped;
//! - `answer`: what the plugin answers (the event mask, the environment);
//! - `dra`: the rails a DRA driver moved into a pod, tuned at
//!   RunPodSandbox and given back at StopPodSandbox, every wait
//!   within one deadline;
//! - `catch_up`: the thread that does, after the answer, what an answer's
//!   deadline cut and the rails of the pods a Synchronize lists (a pod that
//!   started while the plugin was not connected);
//! - `rails`: where the environment comes from (`crate::job_env`).
//!
//! The wire is hand-written, not containerd's `ttrpc` crate: measured in
//! docs/design.md, "NRI".

pub mod answer;
pub mod catch_up;
pub mod dra;
pub mod rails;
pub mod reconnect;
pub mod session;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The methods a request is counted under (the label `method`): the
/// Plugin service's, and `unknown` for any other (bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Configure,
    Synchronize,
    CreateContainer,
    RunPodSandbox,
    StopPodSandbox,
    RemovePodSandbox,
    StateChange,
    Unknown,
}

impl Method {
    pub const ALL: [Method; 8] = [
        Method::Configure,
        Method::Synchronize,
        Method::CreateContainer,
        Method::RunPodSandbox,
        Method::StopPodSandbox,
        Method::RemovePodSandbox,
        Method::StateChange,
        Method::Unknown,
    ];

    pub fn parse(name: &str) -> Method {
        Method::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .unwrap_or(Method::Unknown)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Configure => "Configure",
            Method::Synchronize => "Synchronize",
            Method::CreateContainer => "CreateContainer",
            Method::RunPodSandbox => "RunPodSandbox",
            Method::StopPodSandbox => "StopPodSandbox",
            Method::RemovePodSandbox => "RemovePodSandbox",
            Method::StateChange => "StateChange",
            Method::Unknown => "unknown",
        }
    }
}

/// How a request was answered (the label `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A status other than OK (a request that does not decode, say).
    Error,
    /// UNIMPLEMENTED: a method the Plugin service does not have.
    Unimplemented,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Ok, Outcome::Error, Outcome::Unimplemented];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Unimplemented => "unimplemented",
        }
    }
}

/// The plugin's counters, shared with the agent that serves them
/// (`roce_tune_nri_*`, `crate::agent::metrics`). Atomics: the request path
/// never waits on a scrape.
#[derive(Debug, Default)]
pub struct Stats {
    connected: AtomicBool,
    requests: [[AtomicU64; 3]; 8],
    injected: AtomicU64,
    kept: AtomicU64,
    /// Moves with every change, so a reader knows when to render again.
    generation: AtomicU64,
}

impl Stats {
    fn touch(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Relaxed);
        self.touch();
    }

    pub fn count(&self, m: Method, o: Outcome) {
        self.requests[m as usize][o as usize].fetch_add(1, Ordering::Relaxed);
        self.touch();
    }

    pub fn count_injected(&self) {
        self.injected.fetch_add(1, Ordering::Relaxed);
        self.touch();
    }

    pub fn count_kept(&self) {
        self.kept.fetch_add(1, Ordering::Relaxed);
        self.touch();
    }

    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    pub fn requests(&self, m: Method, o: Outcome) -> u64 {
        self.requests[m as usize][o as usize].load(Ordering::Relaxed)
    }

    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    pub fn kept(&self) -> u64 {
        self.kept.load(Ordering::Relaxed)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }
}

/// The plugin's thread, and how to stop it.
pub struct Running {
    quit: std::sync::Arc<reconnect::Quit>,
    thread: std::thread::JoinHandle<()>,
    ended: std::sync::Arc<AtomicBool>,
}

/// Sets its flag when dropped: when the plugin's thread returns or unwinds.
struct SetOnDrop(std::sync::Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Running {
    /// A flag set once the plugin's thread has ended, for whoever watches
    /// it without owning it (the agent's `/healthz`). The thread reconnects
    /// until asked to stop, so before [`Running::stop`] an ended thread is a
    /// fault that a restart may mend.
    pub fn ended(&self) -> std::sync::Arc<AtomicBool> {
        self.ended.clone()
    }

    /// Stop the plugin and wait for its thread: the connection is shut
    /// down (the runtime sees a closed plugin, as on any restart) and a
    /// reconnect's wait ends at once (`reconnect::Quit`).
    pub fn stop(self) {
        self.quit.ask();
        let _ = self.thread.join();
    }
}

/// Start the plugin on a thread of its own, reconnecting until stopped: the
/// agent's duty (`roce-tune-agent agent --nri`) and `roce-tune-agent nri`'s whole job.
/// The thread holds no lock another thread takes, so the agent's repair
/// pass never delays an answer, nor an answer a pass. Start it after the
/// stop signals are blocked: it inherits the block.
pub fn spawn(
    node: &crate::node::NodeConfig,
    stats: std::sync::Arc<Stats>,
) -> std::io::Result<Running> {
    let settings = session::Settings {
        socket: node.nri_socket.clone(),
        index: node.nri_index.clone(),
    };
    let mut env = rails::JobEnv::new(node);
    let (nccl_env, dra) = (node.nccl_env, dra::DraRails::new(node));
    let quit = std::sync::Arc::new(reconnect::Quit::default());
    let asked = quit.clone();
    let ended = std::sync::Arc::new(AtomicBool::new(false));
    let on_end = SetOnDrop(ended.clone());
    let thread = std::thread::Builder::new()
        .name("nri".into())
        .spawn(move || {
            let _on_end = on_end;
            // Test-only: the thread ends at once, as a bug would end it.
            #[cfg(feature = "fault-injection")]
            if crate::fault::named("nri-thread-ends") {
                return;
            }
            // The picture of the node's rails is made before the runtime is
            // connected, so the first CreateContainer looks only at what
            // changed since (a node of 10,000 entries is a second of reads).
            env.prime();
            let mut plugin = answer::Plugin::new(nccl_env, Box::new(env)).with_dra(dra);
            reconnect::run(&settings, &mut plugin, &stats, &asked)
        })?;
    Ok(Running {
        quit,
        thread,
        ended,
    })
}

/// `roce-tune-agent nri`: the plugin alone, until SIGTERM or SIGINT (blocked
/// here, before the thread starts, so only this thread takes them).
pub fn run(node: &crate::node::NodeConfig) -> i32 {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    if let Err(e) = set.thread_block() {
        crate::error!("cannot block SIGTERM: {e}");
        return 1;
    }
    let running = match spawn(node, std::sync::Arc::new(Stats::default())) {
        Ok(r) => r,
        Err(e) => {
            crate::error!("cannot start the NRI plugin's thread: {e}");
            return 1;
        }
    };
    match set.wait() {
        Ok(sig) => crate::info!("{sig:?}: the NRI plugin stops"),
        Err(e) => crate::error!("waiting for SIGTERM: {e}"),
    }
    running.stop();
    0
}
