//! Each live rail's RDMA counters, as the agent exports them:
//! `roce_tune_rail_hw_counter_total{<rail labels>, port, counter}`, read every
//! pass through the view the rail's device is reached by (`rdma::counters`),
//! so a changed file shows at the next pass and a rail gone takes its series
//! with it (a snapshot holds the live rails only).
//!
//! What is wrong with a port's counters (none at all, a file skipped, more
//! picked than `railCountersMax`) is said once per rail and thing, not once a
//! period: a file that never parses would otherwise fill the log. What was
//! said is forgotten with the rail, so a new pod's rail is told again.

use super::metrics::HwCounter;
use crate::node::RailCounters;
use crate::rdma::counters;
use crate::rdma::RdmaPort;
use crate::sysfs::View;

/// What was said about which rail: (container ID, ifname, what).
#[derive(Debug, Default)]
pub struct Said(Vec<(String, String, String)>);

impl Said {
    /// True the first time `what` is told of the rail.
    fn first(&mut self, cid: &str, ifname: &str, what: &str) -> bool {
        if self
            .0
            .iter()
            .any(|(c, i, w)| c == cid && i == ifname && w == what)
        {
            return false;
        }
        self.0.push((cid.into(), ifname.into(), what.into()));
        true
    }

    /// Forget the rails `live` does not hold.
    pub fn keep(&mut self, live: impl Fn(&str, &str) -> bool) {
        self.0.retain(|(c, i, _)| live(c, i));
    }
}

/// The rail's counters, its troubles said once (`cid`/`ifname` name the rail).
pub fn sample(
    view: &View,
    port: &RdmaPort,
    pick: &RailCounters,
    (cid, ifname): (&str, &str),
    said: &mut Said,
) -> Vec<HwCounter> {
    let got = counters::read(view, port, pick);
    let rail = format!(
        "{} port {} ({ifname} of container {cid})",
        port.device, port.port
    );
    if !got.has_counters {
        if said.first(cid, ifname, "none") {
            crate::info!(
                "{rail} has no counters in {}: none exported (the driver keeps none, or the view is not the device's: shared mode reads the host's sysfs, exclusive mode the pod's)",
                view.show(std::path::Path::new("class/infiniband"))
            );
        }
    } else if got.over_cap > 0 && said.first(cid, ifname, "cap") {
        crate::warn!(
            "{rail}: {} counters picked, railCountersMax is {}: the first {} by name are exported, {} left out; raise railCountersMax or list fewer in railCounters",
            got.values.len() + got.skipped.len() + got.over_cap,
            pick.max,
            pick.max,
            got.over_cap
        );
    }
    for s in &got.skipped {
        if said.first(cid, ifname, &format!("skip {}", s.name)) {
            crate::warn!(
                "{rail}: counter {} is skipped: {}; said once for this rail",
                s.path,
                s.why
            );
        }
    }
    got.values
        .into_iter()
        .map(|(name, value)| HwCounter {
            port: port.port,
            name,
            value,
        })
        .collect()
}
