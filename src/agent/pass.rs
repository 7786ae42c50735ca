//! One period of the agent: repair the orphans, repair (or report) drift on
//! the live rails, read each rail's state, and gather what the CNI
//! processes counted, into a `metrics::Snapshot`.
//!
//! Drift: a live rail whose owned file no longer holds what roce-tune wrote.
//! It is judged under the device's lock (the one ADD and DEL take), so an
//! ADD between its record and its write is never taken for drift. That lock
//! is waited for at most `LockWait::REPAIR`: a rail whose lock another
//! process holds longer is skipped this pass and counted
//! (`Totals::repair_skipped`), as is an orphan the repair skips; on a port
//! with co-owners the file should hold the newest live owner's value, as
//! DEL hands it on (`ownership::heirs`). A rail whose device is gone, or
//! whose file is gone with a re-created device, is not drift: the entry's
//! identity rules decide, at DEL or in the orphan repair. The original
//! recorded at ADD stays the one DEL restores.

use super::metrics::{
    self, CniCounts, Histogram, PodSample, RailLabels, RailSample, Reading, SettingCounts,
    SettingSample, Snapshot,
};
use super::stop::Stop;
use crate::netns::NetNs;
use crate::node::{DriftPolicy, NodeConfig};
use crate::orphans;
use crate::ownership::{heirs, is_live, Place};
use crate::rdma::device::{self, Resolved};
use crate::rdma::gid;
use crate::rdma::reach::{Reach, Sysfs};
use crate::rdma::setting::{self, PodIface, Setting, Views};
use crate::rdma::RdmaPort;
use crate::settings::SETTINGS;
use crate::state::{Entry, LockWait, StateDir, StateError};
use crate::syscall::Syscall;
use crate::sysfs::View;
use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::path::Path;
use std::time::SystemTime;

/// What the agent counts across passes (the CNI processes count themselves
/// in the tally).
#[derive(Debug, Default)]
pub struct Totals {
    pub drift: SettingCounts,
    pub drift_repairs: SettingCounts,
    pub orphan_repairs: u64,
    /// Rails and orphans a pass skipped: their device's lock was held past
    /// `LockWait::REPAIR`.
    pub repair_skipped: u64,
    pub agent: metrics::AgentSample,
    /// The drifted value last counted, per (container ID, ifname, setting
    /// key): a drift left in place (driftPolicy report, or a repair the
    /// driver refuses) is found again by every pass, and is still one
    /// drift, counted and logged once, not once a period. Dropped when the
    /// file holds roce-tune's value again or the rail is gone. A list, not a
    /// map: a node has a few dozen rails, and another map type is code in
    /// the static binary.
    pub seen: Vec<Seen>,
    /// What was said once of each rail's counters.
    pub counters_said: super::counters::Said,
}

/// A drifted value counted: (container ID, ifname, setting key, value).
pub type Seen = (String, String, &'static str, setting::Value);

fn same_rail(x: &Seen, key: &(String, String, &'static str)) -> bool {
    x.0 == key.0 && x.1 == key.1 && x.2 == key.2
}

/// One pass. Every failure is logged and counted as a failed pass; the
/// snapshot holds what could be read. Once `stop` is asked, the pass ends
/// after the step it is in.
/// `sys`: the host (`syscall::KERNEL`; a unit test's own).
pub fn run(sys: &dyn Syscall, node: &NodeConfig, totals: &mut Totals, stop: &Stop) -> Snapshot {
    // Test-only: a pass stuck for as long as the test says (`/healthz`).
    #[cfg(feature = "fault-injection")]
    crate::fault::stall("agent-pass", &|| stop.requested());
    totals.agent.repair_passes += 1;
    let mut failed = false;
    let report = orphans::sweep_all(sys, node, &|| stop.requested());
    totals.orphan_repairs += report.released.len() as u64;
    totals.repair_skipped += report.skipped as u64;
    if !report.released.is_empty() || !report.failed.is_empty() {
        crate::info!(
            "orphan repair: examined {}, released {}, not yet {}",
            report.examined,
            report.released.len(),
            report.failed.len()
        );
    }
    let mut snap = Snapshot {
        orphans_pending: report.failed.len() as u64,
        ..Snapshot::default()
    };
    let state = match StateDir::existing_on(sys, &node.state_dir) {
        Ok(s) => s,
        Err(e) => {
            crate::error!("state dir: {e}");
            None
        }
    };
    match (&state, Sysfs::open(&node.sysfs_root)) {
        (Some(state), Ok(sysfs)) => {
            let place = Place {
                state,
                sysfs: &sysfs,
                device_info_dir: &node.device_info_dir,
                lock_wait: LockWait::REPAIR,
            };
            let entries = state.entries(|_, _, _| {}).unwrap_or_default();
            let live: Vec<&Entry> = entries.iter().filter(|e| is_live(e)).collect();
            totals.seen.retain(|(cid, ifname, _, _)| {
                live.iter()
                    .any(|e| &e.container_id == cid && &e.ifname == ifname)
            });
            totals.counters_said.keep(|cid, ifname| {
                live.iter()
                    .any(|e| e.container_id == cid && e.ifname == ifname)
            });
            snap.rails = rails(sys, place, &live, node, totals, stop);
            snap.pods = pods(&live);
            let labelled: Vec<_> = live.iter().map(|e| (*e, labels(e))).collect();
            snap.qos =
                super::qos::sample(node, sysfs.host(), &labelled, &crate::rail_qos::HOST_DCB);
            snap.idle_vfs_holding_class = crate::idle::find(sysfs.host(), &entries).len() as u64;
            snap.cni = cni_counts(state.path());
        }
        (None, Ok(_)) => {}
        (_, Err(e)) => {
            crate::error!("sysfs root {}: {e}", node.sysfs_root.display());
            failed = true;
        }
    }
    // A sweep that could not even run (a refused state dir) is a failed
    // pass; an orphan not restorable yet is pending, not a failure.
    failed |= !report.failed.is_empty() && report.examined == 0;
    if failed {
        totals.agent.repair_pass_failures += 1;
    } else {
        totals.agent.last_success = Some(SystemTime::now());
    }
    snap.drift = totals.drift.clone();
    snap.drift_repairs = totals.drift_repairs.clone();
    snap.orphan_repairs = totals.orphan_repairs;
    snap.repair_skipped = totals.repair_skipped;
    snap
}

/// The live rails of one netns (a pod's), and what is made once for all
/// of them: the netns opened, and in the exclusive mode the sysfs of its
/// side.
struct PodRails<'e> {
    ns: NetNs,
    pod_view: Option<View>,
    /// Each rail's place in the state dir's order, and its entry.
    entries: Vec<(usize, &'e Entry)>,
}

/// A rail's GID to find, from inside its pod's netns, once its drift is
/// judged.
struct GidAsk {
    rail: usize,
    port: RdmaPort,
    want: Ipv6Addr,
    in_pod_view: bool,
}

/// Every live rail, pod by pod: a rail's GID is read from a thread inside
/// its pod's netns, and one thread reads all the pod's rails (a thread a
/// rail was 128 threads a pass on a node of 128 rails), as the exclusive
/// mode's sysfs is made once a pod. The samples keep the state dir's order.
fn rails(
    sys: &dyn Syscall,
    place: Place,
    live: &[&Entry],
    node: &NodeConfig,
    totals: &mut Totals,
    stop: &Stop,
) -> Vec<RailSample> {
    let mut pods: Vec<PodRails> = Vec::new();
    for (i, e) in live.iter().enumerate() {
        let Some(ns) = NetNs::still(Path::new(&e.netns), e.netns_id).ok().flatten() else {
            continue;
        };
        match pods.iter_mut().find(|p| p.ns.id() == ns.id()) {
            Some(p) => p.entries.push((i, *e)),
            None => pods.push(PodRails {
                ns,
                pod_view: None,
                entries: vec![(i, *e)],
            }),
        }
    }
    let mut out: Vec<(usize, RailSample)> = Vec::new();
    for pod in &mut pods {
        if stop.requested() {
            break;
        }
        if pod.entries.iter().any(|(_, e)| e.reach == Reach::Pod) {
            pod.pod_view = place.sysfs.pod_side_of(&pod.ns).ok().flatten();
        }
        let pod = &*pod;
        let mut asks = Vec::new();
        for &(i, entry) in &pod.entries {
            if stop.requested() {
                break;
            }
            let in_pod_view = entry.reach == Reach::Pod && pod.pod_view.is_some();
            let device_view = match &pod.pod_view {
                Some(v) if in_pod_view => v,
                _ => place.sysfs.host(),
            };
            let Some((sample, ask)) = rail(place, entry, live, node, totals, &pod.ns, device_view)
            else {
                continue;
            };
            asks.extend(ask.map(|(port, want)| GidAsk {
                rail: out.len(),
                port,
                want,
                in_pod_view,
            }));
            out.push((i, sample));
        }
        if asks.is_empty() {
            continue;
        }
        // Where each pod's RoCE v2 GID is now, read from inside the pod
        // netns (MLNX_OFED shows zeros for a GID whose netdev is in
        // another netns).
        let host = place.sysfs.host();
        let mut found = None;
        let went = sys.run_there(&pod.ns, &mut || {
            let at = asks
                .iter()
                .map(|a| {
                    let view = match (&pod.pod_view, a.in_pod_view) {
                        (Some(v), true) => v,
                        _ => host,
                    };
                    gid::locate(view, &a.port, &a.want)
                })
                .collect::<Vec<_>>();
            found = Some(at);
        });
        // A trip that could not be made reads as no index found.
        let found = went.ok().and(found);
        for (k, a) in asks.iter().enumerate() {
            let at = found.as_ref().and_then(|f| f[k]);
            out[a.rail].1.gid_index = Some(at.map_or(Reading::Unset, Reading::Value));
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, s)| s).collect()
}

/// One live rail: its drift judged (and repaired), its state read, and the
/// GID to find for it in its pod. `None` when its device is not where the
/// entry says (gone or invisible: not drift, the identity rules decide at
/// release).
fn rail(
    place: Place,
    entry: &Entry,
    live: &[&Entry],
    node: &NodeConfig,
    totals: &mut Totals,
    ns: &NetNs,
    device_view: &View,
) -> Option<(RailSample, Option<(RdmaPort, Ipv6Addr)>)> {
    let policy = node.drift_policy;
    let Resolved::Here(port) = device::resolve(device_view, entry.identity()) else {
        return None;
    };
    let at = Views {
        device: device_view,
        host: place.sysfs.host(),
        pod: Some(PodIface {
            netns: ns,
            ifname: &entry.ifname,
        }),
    };
    let mut sample = RailSample {
        labels: labels(entry),
        placement_near: entry.placement.as_ref().map(|p| p.near),
        // Without the lock: the kernel's counters are no file roce-tune writes.
        hw_counters: super::counters::sample(
            device_view,
            &port,
            &node.rail_counters,
            (&entry.container_id, &entry.ifname),
            &mut totals.counters_said,
        ),
        ..RailSample::default()
    };
    // One lock for all the rail's settings. A rail whose lock is held is
    // skipped this pass, and counted: nothing of it is read (what a file
    // holds while another process writes it says nothing).
    let lock = match place.state.lock_waiting(&entry.lock_key(), place.lock_wait) {
        Ok(l) => l,
        Err(e) => {
            if let StateError::Busy { .. } = e {
                totals.repair_skipped += 1;
            }
            crate::warn!(
                "rail {}/{} ({} port {}) not checked this pass: {e}",
                entry.container_id,
                entry.ifname,
                port.device,
                port.port
            );
            return Some((sample, None));
        }
    };
    for s in SETTINGS {
        let Some(owned) = entry.owned.get(s.key()) else {
            continue;
        };
        let judged = judge_drift(place.state, entry, live, *s, at, &port, policy, totals);
        // What the file should hold: on a port with co-owners the newest
        // live owner's value, which need not be this rail's own.
        sample.settings.push(SettingSample {
            key: s.key(),
            now: judged.map(|(v, _)| v.map_or(Reading::Unset, Reading::Value)),
            wanted: judged.map_or(owned.written, |(_, w)| w),
        });
    }
    drop(lock);
    let ask = entry
        .gid
        .as_deref()
        .and_then(|g| g.parse().ok())
        .map(|want| (port, want));
    Some((sample, ask))
}

/// What the file holds now and what it should hold (`None`: unreadable),
/// after repairing drift when the policy says so; the caller holds the
/// device's lock.
#[allow(clippy::too_many_arguments)]
fn judge_drift(
    state: &StateDir,
    entry: &Entry,
    live: &[&Entry],
    s: &dyn Setting,
    at: Views,
    port: &RdmaPort,
    policy: DriftPolicy,
    totals: &mut Totals,
) -> Option<(setting::Value, u32)> {
    // Under the lock, from the entry as it is now: an ADD or DEL that ran
    // since the pass began has the last word.
    let now = state.read(&entry.container_id, &entry.ifname).ok()?;
    let co: Vec<Entry> = live
        .iter()
        .filter(|o| o.same_device(&now))
        .map(|o| (*o).clone())
        .collect();
    let (_, wanted) = heirs::heir(s.key(), &co)?;
    let current = s.read_present(at, port).ok()??;
    let key = (entry.container_id.clone(), entry.ifname.clone(), s.key());
    let w = wanted.written;
    if s.same(current, Some(w)) {
        totals.seen.retain(|x| !same_rail(x, &key));
        return Some((current, w));
    }
    let new = match totals.seen.iter_mut().find(|x| same_rail(x, &key)) {
        Some(x) if x.3 == current => false,
        Some(x) => {
            x.3 = current;
            true
        }
        None => {
            totals
                .seen
                .push((key.0.clone(), key.1.clone(), key.2, current));
            true
        }
    };
    if new {
        totals.drift.add(s.key(), 1);
    }
    let who = s
        .suspect(current)
        .unwrap_or("set by someone else: another plugin or an admin's script");
    let pod = entry.pod.as_ref().map_or_else(
        || "?".to_string(),
        |p| format!("{}/{}", p.namespace, p.name),
    );
    let what = format!(
        "drift: the {} of {} port {} (pod {pod}, {}) is {}, roce-tune wrote {}; likely {who}",
        s.title(),
        port.device,
        port.port,
        entry.ifname,
        setting::show(current),
        wanted.written
    );
    if policy == DriftPolicy::Report {
        if new {
            crate::warn!("{what}; driftPolicy is report: left as it is");
        }
        return Some((current, w));
    }
    match s
        .write(at, port, Some(wanted.written))
        .and_then(|()| s.verify(at, port, Some(wanted.written)))
    {
        Ok(()) => {
            totals.drift_repairs.add(s.key(), 1);
            totals.seen.retain(|x| !same_rail(x, &key));
            crate::warn!("{what}; repaired: it holds {} again", wanted.written);
            Some((Some(w), w))
        }
        // Retried every pass; said once per drifted value.
        Err(e) if new => {
            crate::error!("{what}; the repair failed: {e}");
            Some((current, w))
        }
        Err(e) => {
            crate::debug!("{what}; the repair failed again: {e}");
            Some((current, w))
        }
    }
}

fn labels(e: &Entry) -> RailLabels {
    let (namespace, pod) = e.pod.as_ref().map_or((String::new(), String::new()), |p| {
        (p.namespace.clone(), p.name.clone())
    });
    RailLabels {
        namespace,
        pod,
        interface: e.ifname.clone(),
        rdma_device: e.device.clone(),
        pci_address: e.pci.clone().unwrap_or_default(),
        network: e.network.clone(),
    }
}

/// Per pod, its starved GPUs as its rails' ADDs judged them (the newest).
fn pods(live: &[&Entry]) -> Vec<PodSample> {
    let mut by_pod: BTreeMap<(String, String), (u64, u32)> = BTreeMap::new();
    for e in live {
        let (Some(p), Some(pl)) = (&e.pod, &e.placement) else {
            continue;
        };
        let slot = by_pod
            .entry((p.namespace.clone(), p.name.clone()))
            .or_insert((0, 0));
        if e.created_ns >= slot.0 {
            *slot = (e.created_ns, pl.starved_gpus);
        }
    }
    by_pod
        .into_iter()
        .map(|((namespace, pod), (_, starved_gpus))| PodSample {
            namespace,
            pod,
            starved_gpus,
        })
        .collect()
}

/// The CNI processes' tally, as the metrics count it.
fn cni_counts(state_dir: &Path) -> CniCounts {
    let mut out = CniCounts::default();
    for (c, counts) in crate::tally::read(state_dir).unwrap_or_default() {
        for (code, n) in counts.by_code {
            out.requests.push((c, code, n));
        }
        let mut h = Histogram::default();
        for (i, n) in counts.buckets.iter().enumerate().take(h.counts.len()) {
            h.counts[i] = *n;
        }
        h.sum = counts.sum;
        if h.count() > 0 {
            out.durations.push((c, h));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rail::tests::{Rig, IFINDEX, IP};
    use crate::rdma::traffic_class;
    use serde_json::json;

    fn class(rig: &Rig) -> Option<u8> {
        traffic_class::parse(&rig.tc()).unwrap()
    }

    /// The agent's pass over a live rail, in each RDMA netns mode, on the
    /// unit tests' host: a drifted class and ToS are written back and each
    /// counted once, the rail's GID index is read from inside its pod, and
    /// under `driftPolicy: report` a drift is counted and left in place.
    /// The rail is tuned as a DRA rail is (`rail::tune`); ADD's own are
    /// `commands::tests`.
    #[test]
    fn a_pass_repairs_drift_and_reads_the_gid_index_of_a_live_rail() {
        for exclusive in [false, true] {
            let what = format!("exclusive {exclusive}");
            let mut rig = Rig::new(&format!("pass-{exclusive}"), "", "0\n", exclusive);
            rig.give_address();
            rig.host.addresses.push((IFINDEX, IP.parse().unwrap(), 16));
            rig.tune(json!({"trafficClass": 106, "rdmaCmTos": 104}))
                .unwrap();
            rig.set_tc("tclass=0");
            std::fs::write(rig.tos_path(), "0\n").unwrap();
            let mut totals = Totals::default();
            let stop = Stop::new();
            let snap = run(&rig.host, &rig.node, &mut totals, &stop);
            assert_eq!(class(&rig), Some(106), "{what}: the class written back");
            assert_eq!(rig.tos().trim(), "104", "{what}: the ToS written back");
            for key in ["trafficClass", "rdmaCmTos"] {
                assert_eq!(snap.drift.get(key), 1, "{what}: {key} drift counted");
                assert_eq!(
                    snap.drift_repairs.get(key),
                    1,
                    "{what}: {key} repair counted"
                );
            }
            assert_eq!(snap.rails.len(), 1, "{what}");
            assert_eq!(snap.rails[0].gid_index, Some(Reading::Value(3)), "{what}");
            let tc = snap.rails[0]
                .settings
                .iter()
                .find(|s| s.key == "trafficClass");
            assert_eq!(tc.map(|s| s.wanted), Some(106), "{what}");
            // Nothing drifted since: nothing more counted.
            let snap = run(&rig.host, &rig.node, &mut totals, &stop);
            assert_eq!(snap.drift.get("trafficClass"), 1, "{what}");
            // Report only: counted once, left as found.
            let mut node = rig.node.clone();
            node.drift_policy = DriftPolicy::Report;
            rig.set_tc("tclass=7");
            let snap = run(&rig.host, &node, &mut totals, &stop);
            let snap_again = run(&rig.host, &node, &mut totals, &stop);
            assert_eq!(class(&rig), Some(7), "{what}: report leaves the drift");
            assert_eq!(snap.drift.get("trafficClass"), 2, "{what}");
            assert_eq!(
                snap_again.drift.get("trafficClass"),
                2,
                "{what}: counted once"
            );
            assert_eq!(snap_again.drift_repairs.get("trafficClass"), 1, "{what}");
            // The rail's record dropped (its DEL): the pass has no rail
            // left to look at, and leaves the class as it is.
            let state = StateDir::existing_on(&rig.host, &rig.node.state_dir)
                .unwrap()
                .unwrap();
            let entry = state.entries(|_, _, _| {}).unwrap().remove(0);
            state.remove(&entry).unwrap();
            let snap = run(&rig.host, &rig.node, &mut totals, &stop);
            assert_eq!(class(&rig), Some(7), "{what}");
            assert!(snap.rails.is_empty(), "{what}");
        }
    }
}
