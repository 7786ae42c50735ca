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
/// Entries of `skip_container` (the pod being added, whose netns exists) are
/// passed over by name, without a read.
pub fn sweep(
    state: &StateDir,
    skip_container: Option<&str>,
    max_examine: usize,
    max_release: usize,
) -> Report {
    let mut report = Report::default();
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
    for (cid, ifname) in candidates.take(max_examine) {
        if report.released.len() + report.failed.len() >= max_release {
            break;
        }
        report.examined += 1;
        let Ok(entry) = state.read(cid, ifname) else {
            continue;
        };
        if Path::new(&entry.netns).exists() {
            continue;
        }
        match release_entry(state, &entry) {
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

/// The share of orphan repair each ADD does before its own work: reading an
/// entry costs about 6 us (`make bench`), so 16 keep it under 0.1 ms.
pub fn sweep_bounded(state: &StateDir, container_id: &str) {
    sweep(state, Some(container_id), 16, 4);
}

/// `roce-tune gc --orphans`: every entry. A refused dir (a link, open to
/// others) must not look like a clean node to the operator.
pub fn sweep_all(state_dir: &Path) -> Report {
    match StateDir::open(state_dir, false) {
        Ok(Some(state)) => sweep(&state, None, usize::MAX, usize::MAX),
        Ok(None) => Report::default(),
        Err(e) => Report {
            failed: vec![format!("state dir: {}", e.msg)],
            ..Report::default()
        },
    }
}
