//! `roce-tune agent`: the DaemonSet's long-running container, the node's
//! agent. A CNI plugin speaks once, at ADD; the agent keeps a rail right for
//! the pod's whole life. Every period it repairs orphans (`crate::orphans`:
//! pods gone without a DEL reaching roce-tune, which is what a DEL behind the
//! reference sbr is once the netns is gone), repairs or reports drift (a live
//! rail whose owned file no longer holds what roce-tune wrote: a driver
//! reset, NVIDIA's rdma CNI fork writing 0, an admin's script), and reads
//! each rail's state; it serves that as Prometheus metrics all the time.
//!
//! - `pass`: one period's work, into a `metrics::Snapshot`;
//! - `metrics`: the catalogue and the snapshot's text; `exposition` the
//!   format; `http` the server a scrape reaches (it never waits on a pass:
//!   a scrape reads the last published text).
//!
//! With `--nri` the agent is also the node's NRI plugin (`crate::nri`), on a
//! thread of its own: its counters join the exposition, republished within
//! a second of a change (docs/design.md, "NRI").

pub mod exposition;
pub mod http;
pub mod metrics;
mod pass;

use crate::node::NodeConfig;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Run until SIGTERM or SIGINT; returns the exit code. The signals are
/// blocked and waited for between passes, so a signal never interrupts a
/// repair halfway, and the server's thread (which blocks them too) stops
/// within its poll interval.
pub fn run(node: &NodeConfig, every: Duration, with_nri: bool) -> i32 {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    if let Err(e) = set.thread_block() {
        crate::error!("cannot block SIGTERM: {e}");
        return 1;
    }
    let mut totals = pass::Totals {
        agent: metrics::AgentSample {
            start_time: SystemTime::now(),
            repair_interval: every,
            ..metrics::AgentSample::default()
        },
        ..pass::Totals::default()
    };
    let nri = with_nri.then(|| Arc::new(crate::nri::Stats::default()));
    if let Some(stats) = &nri {
        if let Err(e) = crate::nri::spawn(node, stats.clone()) {
            crate::error!("the NRI plugin is not started: {e}; the repair goes on");
        }
    }
    let published = Arc::new(http::Published::new(metrics::render(&metrics::Snapshot {
        agent: totals.agent,
        nri: nri.as_deref().map(nri_sample),
        ..metrics::Snapshot::default()
    })));
    // Without its port the agent still repairs: that is what keeps rails
    // right; the failure is said once, loudly.
    let server = match http::Server::bind(node.metrics_address, http::Limits::default())
        .and_then(|s| s.spawn(http::routes(published.clone())))
    {
        Ok(h) => {
            crate::info!("metrics on http://{}/metrics", h.local_addr());
            Some(h)
        }
        Err(e) => {
            crate::error!("metrics are not served: {e}; the repair goes on");
            None
        }
    };
    crate::info!(
        "repairs every {} s (state dir {}, drift policy {:?}); SIGTERM stops it",
        every.as_secs(),
        node.state_dir.display(),
        node.drift_policy
    );
    let code = 'passes: loop {
        let started = Instant::now();
        let mut snapshot = metrics::Snapshot {
            agent: totals.agent,
            ..pass::run(node, &mut totals)
        };
        totals.agent.last_pass_duration = Some(started.elapsed());
        snapshot.agent = totals.agent;
        let mut seen = nri.as_deref().map(|s| s.generation());
        snapshot.nri = nri.as_deref().map(nri_sample);
        published.publish(metrics::render(&snapshot));
        loop {
            let left = every.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            // Waits of at most a second while the NRI plugin runs: its
            // counters are republished when they moved.
            let wait = if nri.is_some() {
                left.min(Duration::from_secs(1))
            } else {
                left
            };
            let ts = nix::libc::timespec {
                tv_sec: wait.as_secs() as nix::libc::time_t,
                tv_nsec: wait.subsec_nanos() as nix::libc::c_long,
            };
            // SAFETY: a valid signal set and timespec; no siginfo wanted.
            let sig = unsafe { nix::libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
            if sig == Signal::SIGTERM as i32 || sig == Signal::SIGINT as i32 {
                crate::info!("signal {sig}: the agent stops");
                break 'passes 0;
            }
            if let Some(stats) = nri.as_deref() {
                if seen != Some(stats.generation()) {
                    seen = Some(stats.generation());
                    snapshot.nri = Some(nri_sample(stats));
                    published.publish(metrics::render(&snapshot));
                }
            }
        }
    };
    if let Some(h) = server {
        if let Err(e) = h.shutdown() {
            crate::warn!("the metrics server did not stop cleanly: {e}");
        }
    }
    code
}

/// The NRI plugin's counters as the exposition's plain data.
fn nri_sample(stats: &crate::nri::Stats) -> metrics::NriSample {
    use crate::nri::{Method, Outcome};
    let mut requests = Vec::new();
    for m in Method::ALL {
        for o in Outcome::ALL {
            requests.push((m.as_str(), o.as_str(), stats.requests(m, o)));
        }
    }
    metrics::NriSample {
        connected: stats.connected(),
        requests,
        env_injected: stats.injected(),
        env_kept: stats.kept(),
    }
}
