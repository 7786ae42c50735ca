//! `roce-tune-agent agent`: the DaemonSet's long-running container, the node's
//! agent. A CNI plugin speaks once, at ADD; the agent keeps a rail right for
//! the pod's whole life. Every period it repairs orphans (`crate::orphans`:
//! pods gone without a DEL reaching roce-tune, which is what a DEL behind the
//! reference sbr is once the netns is gone), repairs or reports drift (a live
//! rail whose owned file no longer holds what roce-tune wrote: a driver
//! reset, NVIDIA's rdma CNI fork writing 0, an admin's script), and reads
//! each rail's state; it serves that as Prometheus metrics all the time.
//!
//! - `pass`: one period's work, into a `metrics::Snapshot`;
//! - `metrics`: the catalogue and the snapshot's text (the format is
//!   `crate::wire::exposition`); `http` the server a scrape reaches (it
//!   never waits on a pass: a scrape reads the last published text);
//! - `counters`: each live rail's RDMA counters (`rdma::counters`), their
//!   family and the lines said once per rail;
//! - `health`: what `/healthz` answers the kubelet's liveness probe: stale
//!   passes or an ended NRI plugin thread are 503;
//! - `stop`: SIGTERM, as the one stop every thread of the agent heeds.
//!
//! With `--nri` the agent is also the node's NRI plugin (`crate::nri`), on a
//! thread of its own that stops with the rest: its counters join the
//! exposition, republished within a second of a change (docs/design.md,
//! "NRI").

pub mod counters;
pub mod health;
pub mod http;
pub mod metrics;
mod pass;
mod qos;
pub mod samples;
pub mod stop;

use crate::node::NodeConfig;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Run until SIGTERM or SIGINT; returns the exit code. The signals become a
/// [`stop::Stop`] that the passes heed between two steps (a rail, an
/// orphan) and that ends the wait between passes, so a signal never
/// interrupts a repair halfway and the agent is gone within a second: no
/// step waits longer than `LockWait::REPAIR` for a device's lock. Each
/// thread beside the passes (the metrics server; any added later) is
/// started after the signals are blocked, and stopped and joined below.
pub fn run(node: &NodeConfig, every: Duration, with_nri: bool) -> i32 {
    let stop = stop::Stop::new();
    if let Err(e) = stop::on_signals(&stop) {
        crate::error!("cannot wait for SIGTERM: {e}");
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
    // After the signals are blocked: the plugin's thread inherits the block.
    let nri_stats = with_nri.then(|| Arc::new(crate::nri::Stats::default()));
    let nri = nri_stats
        .as_ref()
        .and_then(|stats| match crate::nri::spawn(node, stats.clone()) {
            Ok(running) => Some(running),
            Err(e) => {
                crate::error!("the NRI plugin is not started: {e}; the repair goes on");
                None
            }
        });
    // With --nri, a plugin that could not even start is as unhealthy as one
    // whose thread ended: a restart is what may mend either.
    let nri_ended = with_nri.then(|| match &nri {
        Some(running) => running.ended(),
        None => Arc::new(std::sync::atomic::AtomicBool::new(true)),
    });
    let health = Arc::new(health::Health::new(every, nri_ended));
    let published = Arc::new(http::Published::new(metrics::render(&metrics::Snapshot {
        agent: totals.agent,
        nri: nri_stats.as_deref().map(nri_sample),
        ..metrics::Snapshot::default()
    })));
    // Without its port the agent still repairs: that is what keeps rails
    // right; the failure is said once, loudly.
    let server = match http::Server::bind(node.metrics_address, http::Limits::default())
        .and_then(|s| s.spawn(http::routes(published.clone(), health.clone())))
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
    while !stop.requested() {
        let started = Instant::now();
        let mut snapshot = pass::run(&crate::syscall::KERNEL, node, &mut totals, &stop);
        health.pass_done();
        totals.agent.last_pass_duration = Some(started.elapsed());
        snapshot.agent = totals.agent;
        let mut seen = nri_stats.as_deref().map(crate::nri::Stats::generation);
        snapshot.nri = nri_stats.as_deref().map(nri_sample);
        published.publish(metrics::render(&snapshot));
        // Until the next pass; with the NRI plugin, in slices of a second,
        // its counters republished when they moved.
        loop {
            let left = every.saturating_sub(started.elapsed());
            let slice = match nri_stats {
                Some(_) => left.min(Duration::from_secs(1)),
                None => left,
            };
            if slice.is_zero() || stop.wait(slice) {
                break;
            }
            if let Some(stats) = nri_stats.as_deref() {
                if seen != Some(stats.generation()) {
                    seen = Some(stats.generation());
                    snapshot.nri = Some(nri_sample(stats));
                    published.publish(metrics::render(&snapshot));
                }
            }
        }
    }
    if let Some(running) = nri {
        running.stop();
    }
    if let Some(h) = server {
        if let Err(e) = h.shutdown() {
            crate::warn!("the metrics server did not stop cleanly: {e}");
        }
    }
    0
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
