//! Orphan repair. Multus never sends GC to secondary networks and a node can
//! lose a DEL (kubelet restart, crashed runtime), which would leave a device
//! with a pod's class forever. An entry whose pod netns no longer exists is an
//! orphan: its class is given back using only what the entry recorded.

use crate::commands::release_entry;
use crate::state::StateDir;
use std::path::Path;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub examined: usize,
    pub released: Vec<String>,
    pub failed: Vec<String>,
}

/// Release up to `max_release` orphans, looking at no more than `max_examine`
/// entries (an ADD must stay cheap on a node with hundreds of entries).
pub fn sweep(state_dir: &Path, max_examine: usize, max_release: usize) -> Report {
    let mut report = Report::default();
    let Ok(Some(state)) = StateDir::open(state_dir, false) else {
        return report;
    };
    let Ok(names) = state.attachments() else {
        return report;
    };
    for (cid, ifname) in names.into_iter().take(max_examine) {
        if report.released.len() + report.failed.len() >= max_release {
            break;
        }
        report.examined += 1;
        let Ok(entry) = state.read(&cid, &ifname) else {
            continue;
        };
        if Path::new(&entry.netns).exists() {
            continue;
        }
        match release_entry(&state, &entry) {
            Ok(r) => {
                crate::info!("orphan {cid}/{ifname} (netns {} gone): {r:?}", entry.netns);
                report.released.push(format!("{cid}/{ifname}"));
            }
            Err(e) => {
                crate::warn!("orphan {cid}/{ifname}: could not release: {e}");
                report.failed.push(format!("{cid}/{ifname}: {}", e.msg));
            }
        }
    }
    report
}

/// The share of orphan repair each ADD does before its own work.
pub fn sweep_bounded(state_dir: &Path) {
    sweep(state_dir, 64, 4);
}
