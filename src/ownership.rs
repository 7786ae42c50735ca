//! Who owns a device's traffic class, and how it is given back. ADD records
//! the original in the state dir BEFORE writing (so a crash can never lose
//! it); DEL puts it back only if the file still holds what roce-tune wrote.
//! Everything here runs under the device's lock.
//!
//! Co-owners (two attachments on one device port, which a VF normally never
//! has) share the device's TRUE original: the second ADD takes the first's
//! original instead of reading the first's class; a DEL while another owner
//! remains hands the device to the newest remaining owner's class.

use crate::cni::CniResult;
use crate::rdma::traffic_class::{self, describe, TrafficClass};
use crate::rdma::RdmaPort;
use crate::state::{self, Entry, ReadError, StateDir, STATE_VERSION};

/// The attachment taking a device's class.
pub struct Claim<'a> {
    pub network: &'a str,
    pub container_id: &'a str,
    pub ifname: &'a str,
    pub netns: &'a str,
    pub exclusive: bool,
}

/// Record the original and write `tc` (verified by reading back). On error the
/// entry may exist: the caller rolls back with `release`.
pub fn take(state: &StateDir, port: &RdmaPort, claim: &Claim, tc: u8) -> CniResult<Entry> {
    let _lock = state.lock_device(&port.device, port.port)?;
    let path = port.traffic_class_path();
    let own = match state.read(claim.container_id, claim.ifname) {
        Ok(e) => Some(e),
        Err(ReadError::Missing) => None,
        Err(ReadError::Corrupt(why)) => {
            let to = state.quarantine(claim.container_id, claim.ifname)?;
            crate::warn!("state entry was corrupt ({why}); moved it to {} and took the live class as the original", to.display());
            None
        }
        Err(ReadError::Io(e)) => return Err(crate::cni::CniError::io("read state entry", e)),
    };
    let probe = Entry {
        version: STATE_VERSION,
        network: claim.network.to_owned(),
        container_id: claim.container_id.to_owned(),
        ifname: claim.ifname.to_owned(),
        netns: claim.netns.to_owned(),
        sysfs_root: port.root.clone(),
        exclusive: claim.exclusive,
        device: port.device.clone(),
        port: port.port,
        original: None,
        written: tc,
        created: state::now(),
    };
    let original = match own.filter(|e| e.same_device(&probe)) {
        // A repeated ADD keeps the FIRST original (DESIGN 2.2).
        Some(first) => {
            crate::info!(
                "repeated ADD: keeping the first recorded original {}",
                describe(first.original)
            );
            first.original
        }
        None => match co_owners(state, &probe)
            .into_iter()
            .min_by_key(|e| age(state, e))
        {
            Some(co) => {
                crate::info!(
                    "{} port {} is already claimed by {}/{}: sharing its original {}",
                    port.device,
                    port.port,
                    co.container_id,
                    co.ifname,
                    describe(co.original)
                );
                co.original
            }
            None => traffic_class::read(&path)?,
        },
    };
    let entry = Entry { original, ..probe };
    state.write(&entry)?;
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-state-write");
    traffic_class::write(&path, Some(tc))?;
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-class-write");
    traffic_class::verify(&path, Some(tc))?;
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-readback");
    crate::info!(
        "traffic class of {} port {} set to {tc} (original {}, recorded in {})",
        port.device,
        port.port,
        describe(original),
        state.path().display()
    );
    Ok(entry)
}

/// Order of co-owners: `created` has whole seconds, so owners taken within
/// one second would tie and fall back to name order; the entry file's mtime
/// (written at the same moment, finer grained) breaks the tie.
fn age(state: &StateDir, e: &Entry) -> (u64, Option<std::time::SystemTime>) {
    let file = state
        .path()
        .join(state::entry_name(&e.container_id, &e.ifname));
    let mtime = std::fs::symlink_metadata(file).and_then(|m| m.modified());
    (e.created, mtime.ok())
}

/// Other attachments' entries on the same device port.
fn co_owners(state: &StateDir, me: &Entry) -> Vec<Entry> {
    state
        .entries(|_, _, _| {})
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.same_device(me) && (e.container_id != me.container_id || e.ifname != me.ifname)
        })
        .collect()
}

/// What `release` did to the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// The original (or a remaining co-owner's class) was written back.
    Restored(TrafficClass),
    /// The file no longer held our value: left as found.
    LeftAlone { found: TrafficClass },
    /// The device (or its file) is gone: nothing to restore.
    DeviceGone,
}

/// Give the class back and drop the entry. `port` is the view in which the
/// device is reachable now. An error keeps the entry, so a retry can finish.
pub fn release(state: &StateDir, entry: &Entry, port: &RdmaPort) -> CniResult<Released> {
    let _lock = state.lock_device(&entry.device, entry.port)?;
    let path = port.traffic_class_path();
    let outcome = if !path.exists() {
        crate::info!(
            "{} is gone (device re-created or removed): nothing to restore",
            path.display()
        );
        Released::DeviceGone
    } else {
        let current = traffic_class::read(&path)?;
        if current == Some(entry.written) {
            let heir = co_owners(state, entry)
                .into_iter()
                .max_by_key(|e| age(state, e));
            let target = heir.as_ref().map_or(entry.original, |h| Some(h.written));
            traffic_class::write_verified(&path, target)?;
            #[cfg(feature = "fault-injection")]
            crate::fault::point("del-after-restore-write");
            match heir {
                Some(h) => crate::info!(
                    "traffic class of {} port {} handed to {}/{} ({})",
                    entry.device,
                    entry.port,
                    h.container_id,
                    h.ifname,
                    h.written
                ),
                None => crate::info!(
                    "traffic class of {} port {} restored to {}",
                    entry.device,
                    entry.port,
                    describe(entry.original)
                ),
            }
            Released::Restored(target)
        } else {
            crate::warn!(
                "traffic class of {} port {} is {}, not the {} roce-tune wrote: someone else set it or the device was re-created; leaving it",
                entry.device, entry.port, describe(current), entry.written
            );
            Released::LeftAlone { found: current }
        }
    };
    #[cfg(feature = "fault-injection")]
    crate::fault::point("del-before-state-remove");
    state.remove(&entry.container_id, &entry.ifname)?;
    Ok(outcome)
}
