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
pub fn run(node: &NodeConfig, every: Duration) -> i32 {
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
    let published = Arc::new(http::Published::new(metrics::render(&metrics::Snapshot {
        agent: totals.agent,
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
    let code = loop {
        let started = Instant::now();
        let snapshot = pass::run(node, &mut totals);
        totals.agent.last_pass_duration = Some(started.elapsed());
        published.publish(metrics::render(&metrics::Snapshot {
            agent: totals.agent,
            ..snapshot
        }));
        let left = every.saturating_sub(started.elapsed());
        let ts = nix::libc::timespec {
            tv_sec: left.as_secs() as nix::libc::time_t,
            tv_nsec: left.subsec_nanos() as nix::libc::c_long,
        };
        // SAFETY: a valid signal set and timespec; no siginfo wanted.
        let sig = unsafe { nix::libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
        if sig == Signal::SIGTERM as i32 || sig == Signal::SIGINT as i32 {
            crate::info!("signal {sig}: the agent stops");
            break 0;
        }
    };
    if let Some(h) = server {
        if let Err(e) = h.shutdown() {
            crate::warn!("the metrics server did not stop cleanly: {e}");
        }
    }
    code
}
