//! GC (spec 1.1.0): give back the class of every entry of THIS network that is
//! not a valid attachment, and drop it. Keeps going past failures, then
//! reports them all.

use crate::cni::config::NetConf;
use crate::cni::{code, CniError, CniResult};
use crate::node::NodeConfig;
use crate::ownership::{release_entry, Done};
use crate::state::{ReadError, StateDir};

pub fn run(conf: &NetConf, node: &NodeConfig) -> CniResult<()> {
    let valid = conf.valid_attachments.as_ref().ok_or_else(|| {
        // Without the list every entry would look stale: refuse rather than wipe.
        CniError::config(
            "GC needs cni.dev/valid-attachments (or cni.dev/attachments) in its config",
        )
    })?;
    let Some(state) = StateDir::existing(&node.state_dir)? else {
        return Ok(());
    };
    let sysfs = crate::rdma::reach::Sysfs::open(&node.sysfs_root)
        .map_err(|e| CniError::io(format!("sysfs root {}", node.sysfs_root.display()), e))?;
    let place = crate::rail::place(&state, &sysfs, node);
    let is_valid = |cid: &str, ifname: &str| {
        valid
            .iter()
            .any(|a| a.container_id == cid && a.ifname == ifname)
    };
    let mut failures = Vec::new();
    let mut corrupt = Vec::new();
    let entries = state.entries(|cid, ifname, err| {
        if !is_valid(cid, ifname) {
            if let ReadError::Corrupt(why) = err {
                corrupt.push((cid.to_owned(), ifname.to_owned(), why));
            }
        }
    })?;
    for (cid, ifname, why) in corrupt {
        crate::warn!(
            "GC: entry {cid}/{ifname} is corrupt ({why}); moved aside, class not restored"
        );
        if let Err(e) = state.quarantine(&cid, &ifname) {
            failures.push(e.to_string());
        }
    }
    for entry in entries
        .iter()
        .filter(|e| e.network == conf.name && !is_valid(&e.container_id, &e.ifname))
    {
        match release_entry(place, entry) {
            done @ Done::Released(_) => {
                crate::info!(
                    "GC: released {}/{} on {}: {done}",
                    entry.container_id,
                    entry.ifname,
                    entry.device
                );
                crate::pod_answer::release_if_last(&state, &entry.container_id);
            }
            Done::Kept(why) | Done::Busy(why) => {
                failures.push(format!("{}/{}: {why}", entry.container_id, entry.ifname))
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(CniError::new(
            code::IO_FAILURE,
            format!(
                "GC could not release {} entries: {}",
                failures.len(),
                failures.join("; ")
            ),
        ))
    }
}
