//! Orphan repair. Multus never sends GC to secondary networks and a node can
//! lose a DEL (kubelet restart, crashed runtime), and a DEL may have had to
//! keep an entry it could not restore then. An entry whose pod netns is gone
//! is an orphan: its files are given back using only what the entry recorded.
//! "Gone" is by identity: the path is missing, is not a network namespace, or
//! is another netns than the one recorded (a reused /proc/<pid> path).
//!
//! Three callers: each ADD repairs a few (`sweep_bounded`), `roce-tune gc
//! --orphans` repairs all once, and the agent (`crate::agent`) repairs all
//! every period, so a draining node with no ADDs still gets every class back.
//! None of them waits on a device lock without a bound: an orphan whose lock
//! another process holds is skipped (`Report::skipped`) and met again by the
//! next sweep.

use crate::netns::NsId;
use crate::node::NodeConfig;
use crate::ownership::{is_live, release_entry, Done, Place};
use crate::rdma::reach::Sysfs;
use crate::state::{Entry, LockWait, ReadError, StateDir, FORMAT, OWNER_INDEX_FORMAT};
use crate::syscall::Syscall;
use std::time::Duration;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub examined: usize,
    pub released: Vec<String>,
    /// Orphans that could not be restored yet (they stay for the next sweep),
    /// and sweeps that could not run.
    pub failed: Vec<String>,
    /// Of `failed`, the orphans whose device lock was held past
    /// `Place::lock_wait`.
    pub skipped: usize,
}

/// Release up to `max_release` orphans, looking at no more than `max_examine`
/// entries (an ADD must stay cheap on a node with hundreds of entries), each
/// device's lock waited for as `place.lock_wait` says, until `stopping` says
/// so (the agent's SIGTERM). Entries of `skip_container` (the pod being
/// added, whose netns exists) are passed over by name, without a read.
pub fn sweep(
    place: Place,
    skip_container: Option<&str>,
    max_examine: usize,
    max_release: usize,
    stopping: &dyn Fn() -> bool,
) -> Report {
    let mut report = Report::default();
    let state = place.state;
    let Ok(names) = state.attachments() else {
        return report;
    };
    // Start at a different place each time (the pid is as good as random
    // here), so a bounded sweep reaches orphans that sort after many live
    // entries instead of looking at the same first ones forever.
    let start = if names.is_empty() {
        0
    } else {
        std::process::id() as usize % names.len()
    };
    let rotated = names[start..].iter().chain(&names[..start]);
    let candidates = rotated.filter(|(cid, _)| Some(cid.as_str()) != skip_container);
    // The rails of one pod name one netns: it is proved live once a sweep,
    // not once per rail (seven system calls each; a 16-rail pod's entries
    // were most of a crowded ADD's, `make bench`). A netns that dies during
    // the sweep is found by the next one, as it would be a moment after a
    // check.
    let mut live: Vec<(String, Option<NsId>)> = Vec::new();
    for (cid, ifname) in candidates.take(max_examine) {
        if report.released.len() + report.failed.len() >= max_release || stopping() {
            break;
        }
        report.examined += 1;
        let entry = match state.read(cid, ifname) {
            Ok(e) => e,
            Err(ReadError::Newer(v)) => {
                crate::debug!("{cid}/{ifname}: written by a newer roce-tune ({v}): left alone");
                continue;
            }
            Err(_) => continue,
        };
        let seen_live = live
            .iter()
            .any(|(path, id)| *path == entry.netns && *id == entry.netns_id);
        if seen_live || is_live(&entry) {
            if !seen_live {
                live.push((entry.netns.clone(), entry.netns_id));
            }
            if entry.version < OWNER_INDEX_FORMAT {
                upgrade(state, place.lock_wait, cid, ifname);
            }
            continue;
        }
        match release_entry(place, &entry) {
            done @ Done::Released(_) => {
                crate::info!("orphan {cid}/{ifname} (netns {} gone): {done}", entry.netns);
                crate::pod_answer::release_if_last(state, cid);
                report.released.push(format!("{cid}/{ifname}"));
            }
            Done::Kept(why) => {
                crate::warn!("orphan {cid}/{ifname}: not restored yet: {why}");
                report.failed.push(format!("{cid}/{ifname}: {why}"));
            }
            Done::Busy(why) => {
                crate::warn!("orphan {cid}/{ifname}: {why}");
                report.failed.push(format!("{cid}/{ifname}: {why}"));
                report.skipped += 1;
            }
        }
    }
    report
}

/// A live entry of formats 1 and 2 is rewritten in this one, under its
/// device's lock: they have no mark in the owner index, so a co-owner would
/// not find them (`StateDir::owners_of`). The repair loop sweeps every entry
/// each period, so a node is upgraded within one. A format 3 entry is marked
/// and stays as it is (a rewrite would add no rail record: its ADD is past).
fn upgrade(state: &StateDir, wait: LockWait, cid: &str, ifname: &str) {
    let Ok(old) = state.read(cid, ifname) else {
        return;
    };
    let done =
        state
            .lock_waiting(&old.lock_key(), wait)
            .and_then(|_lock| match state.read(cid, ifname) {
                Ok(e) if e.version < OWNER_INDEX_FORMAT => state.write(&Entry {
                    version: FORMAT,
                    ..e
                }),
                _ => Ok(()),
            });
    match done {
        Ok(()) => crate::debug!("{cid}/{ifname}: entry rewritten in format {FORMAT}"),
        Err(e) => {
            crate::warn!("{cid}/{ifname}: the entry could not be rewritten in format {FORMAT}: {e}")
        }
    }
}

/// The share of orphan repair each ADD does before its own work: reading an
/// entry costs about 6 us (`make bench`), so 16 keep it under 0.1 ms. An
/// orphan whose device lock is held is left at once: the ADD waits for no
/// other pod's device.
pub fn sweep_bounded(place: Place, container_id: &str) {
    let place = Place {
        lock_wait: LockWait::Within(Duration::ZERO),
        ..place
    };
    sweep(place, Some(container_id), 16, 4, &|| false);
}

/// Every entry, each device's lock waited for at most `LockWait::REPAIR`,
/// until `stopping` says so. A refused dir (a link, open to others) must not
/// look like a clean node to the operator.
/// `sys` is asked the state dir's trust.
pub fn sweep_all(sys: &dyn Syscall, node: &NodeConfig, stopping: &dyn Fn() -> bool) -> Report {
    let failed = |why: String| Report {
        failed: vec![why],
        ..Report::default()
    };
    let state = match StateDir::existing_on(sys, &node.state_dir) {
        Ok(Some(state)) => state,
        Ok(None) => return Report::default(),
        Err(e) => return failed(format!("state dir: {e}")),
    };
    match Sysfs::open(&node.sysfs_root) {
        Ok(sysfs) => {
            let place = Place {
                state: &state,
                sysfs: &sysfs,
                device_info_dir: &node.device_info_dir,
                lock_wait: LockWait::REPAIR,
            };
            sweep(place, None, usize::MAX, usize::MAX, stopping)
        }
        Err(e) => failed(format!("sysfs root {}: {e}", node.sysfs_root.display())),
    }
}
