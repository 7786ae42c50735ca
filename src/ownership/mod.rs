//! Who owns a device file roce-tune writes (every `crate::settings`: the
//! traffic class, the rdma_cm default ToS), and how it is given back. ADD
//! records the original in the state dir BEFORE writing (so a crash can never
//! lose it); a release puts it back only if the file still holds what
//! roce-tune wrote. Everything here runs under the device's lock, and through
//! the views in which the device is reachable now.
//!
//! Co-owners (two attachments on one device port) share the device's TRUE
//! original; which owner's value the file takes is `heirs`'s.

pub mod heirs;

use crate::netns::NetNs;
use crate::rdma::device::{self, Resolved};
use crate::rdma::reach::{Reach, Sysfs};
use crate::rdma::setting::{self, PodIface, Setting, SettingError, Views};
use crate::rdma::RdmaPort;
use crate::settings::SETTINGS;
use crate::state::{
    self, DeviceInfoFile, Entry, LockWait, Owned, PlacementRecord, PodRecord, RailRecord,
    ReadError, StateDir, StateError, FORMAT,
};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Why a take or a release could not be done. The CNI edge gives each its
/// code: a setting's own, 5 for the state dir.
#[derive(Debug)]
pub enum OwnError {
    State(StateError),
    Setting(SettingError),
    /// The attachment's entry is a newer roce-tune's: left alone.
    Newer {
        attachment: String,
        what: String,
    },
}

impl fmt::Display for OwnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OwnError::State(e) => e.fmt(f),
            OwnError::Setting(e) => e.fmt(f),
            OwnError::Newer { attachment, what } => write!(
                f,
                "the state entry of {attachment} was written by a newer roce-tune ({what}; this one writes format {FORMAT}); it is left alone: run the newer version again, or DEL the pod"
            ),
        }
    }
}

impl std::error::Error for OwnError {}

impl From<StateError> for OwnError {
    fn from(e: StateError) -> OwnError {
        OwnError::State(e)
    }
}

impl From<SettingError> for OwnError {
    fn from(e: SettingError) -> OwnError {
        OwnError::Setting(e)
    }
}

/// The attachment taking a device's files.
pub struct Claim<'a> {
    pub network: &'a str,
    pub container_id: &'a str,
    pub ifname: &'a str,
    pub netns: &'a NetNs,
    pub reach: Reach,
    /// The device-info file this ADD is about to make, recorded first.
    pub device_info: Option<DeviceInfoFile>,
    pub pod: Option<PodRecord>,
    pub placement: Option<PlacementRecord>,
    /// The RoCE v2 GID the check proved, sysfs's form.
    pub gid: Option<String>,
    /// What the job environment needs of the rail.
    pub rail: RailRecord,
    /// How long the device's lock is waited for: a CNI ADD as long as it
    /// takes (its runtime bounds it), a DRA rail until its answer's budget
    /// ends (`nri::dra`).
    pub lock_wait: LockWait,
}

/// A setting ADD writes, and its value.
pub type Wanted = (&'static dyn Setting, u32);

/// Record the rail and the originals, then write each wanted value and read
/// it back; with nothing wanted, the record is the whole take (one write).
/// On error the entry may exist: the caller gives back with `undo_take`.
pub fn take(
    state: &StateDir,
    at: Views,
    port: &RdmaPort,
    claim: &Claim,
    wants: &[Wanted],
) -> Result<Entry, OwnError> {
    let _lock = state.lock_waiting(&port.lock_key(), claim.lock_wait)?;
    let own = match state.read(claim.container_id, claim.ifname) {
        Ok(e) => Some(e),
        Err(ReadError::Missing) => None,
        Err(ReadError::Corrupt(why)) => {
            let to = state.quarantine(claim.container_id, claim.ifname)?;
            crate::warn!(
                "state entry was corrupt ({why}); moved it to {} and took the live values as the originals",
                to.display()
            );
            None
        }
        Err(ReadError::Newer(what)) => {
            return Err(OwnError::Newer {
                attachment: format!("{}/{}", claim.container_id, claim.ifname),
                what,
            })
        }
        Err(ReadError::Io(err)) => {
            return Err(OwnError::State(StateError::Io {
                what: "read state entry".into(),
                path: state.path().to_owned(),
                err,
            }))
        }
    };
    let mut entry = Entry {
        version: FORMAT,
        network: claim.network.to_owned(),
        container_id: claim.container_id.to_owned(),
        ifname: claim.ifname.to_owned(),
        netns: claim.netns.path().to_string_lossy().into_owned(),
        netns_id: Some(claim.netns.id()),
        reach: claim.reach,
        device: port.device.clone(),
        port: port.port,
        pci: port.pci.clone(),
        guid: port.guid.clone(),
        owned: BTreeMap::new(),
        // A repeated ADD keeps the record of a file the first one made.
        device_info: claim
            .device_info
            .clone()
            .or_else(|| own.as_ref().and_then(|e| e.device_info.clone())),
        pod: claim.pod.clone(),
        placement: claim.placement.clone(),
        gid: claim.gid.clone(),
        rail: Some(claim.rail),
        created_ns: state::now_ns(),
    };
    let own = own.filter(|e| e.same_device(&entry));
    let co = if wants.is_empty() {
        Vec::new()
    } else {
        co_owners(state, &entry)
    };
    for s in SETTINGS {
        let first = own.as_ref().and_then(|e| e.owned.get(s.key()).copied());
        let Some(&(_, value)) = wants.iter().find(|(w, _)| w.key() == s.key()) else {
            // Not wanted any more by a repeated ADD: keep what was recorded,
            // so the first original is never lost.
            if let Some(o) = first {
                entry.owned.insert(s.key().to_owned(), o);
            }
            continue;
        };
        let original = match (first, heirs::first_owner(s.key(), &co)) {
            // A repeated ADD keeps the FIRST original.
            (Some(first), _) => {
                crate::info!(
                    "repeated ADD: keeping the first recorded original {} of the {}",
                    setting::show(first.original),
                    s.title()
                );
                first.original
            }
            (None, Some((owner, o))) => {
                crate::info!(
                    "{} port {} is already claimed by {}/{}: sharing its original {} of the {}",
                    port.device,
                    port.port,
                    owner.container_id,
                    owner.ifname,
                    setting::show(o.original),
                    s.title()
                );
                o.original
            }
            (None, None) => {
                s.prepare(at, port)?;
                s.read(at, port)?
            }
        };
        entry.owned.insert(
            s.key().to_owned(),
            Owned {
                original,
                written: value,
            },
        );
    }
    state.write(&entry)?;
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-state-write");
    for &(s, value) in wants {
        s.write(at, port, Some(value))?;
        #[cfg(feature = "fault-injection")]
        if s.key() == "trafficClass" {
            crate::fault::point("add-after-class-write");
        }
        s.verify(at, port, Some(value))?;
        #[cfg(feature = "fault-injection")]
        if s.key() == "trafficClass" {
            crate::fault::point("add-after-readback");
        }
        crate::info!(
            "{} of {} port {} set to {value} (original {}, recorded in {})",
            s.title(),
            port.device,
            port.port,
            setting::show(entry.owned.get(s.key()).and_then(|o| o.original)),
            state.path().display()
        );
    }
    Ok(entry)
}

/// Other attachments' entries on the same device port, found through the
/// state dir's per-device index (one directory listing, not every entry).
fn co_owners(state: &StateDir, me: &Entry) -> Vec<Entry> {
    state
        .owners_of(&me.lock_key())
        .into_iter()
        .filter(|(cid, ifname)| *cid != me.container_id || *ifname != me.ifname)
        .filter_map(|(cid, ifname)| state.read(&cid, &ifname).ok())
        .filter(|e| e.same_device(me))
        .collect()
}

/// Whether an entry's pod still exists (same netns inode at the same path).
pub fn is_live(e: &Entry) -> bool {
    NetNs::still(Path::new(&e.netns), e.netns_id).is_ok_and(|ns| ns.is_some())
}

/// What a release did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The original was written back.
    Restored(setting::Value),
    /// Another live owner remains: the file now holds its value.
    Handed { to: String, value: u32 },
    /// The file no longer held our value: left as found.
    LeftAlone { found: setting::Value },
    /// The file is gone (device re-created or removed): nothing to restore.
    Gone,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Restored(v) => write!(f, "restored to {}", setting::show(*v)),
            Outcome::Handed { to, value } => write!(f, "handed to {to} ({value})"),
            Outcome::LeftAlone { found } => write!(
                f,
                "left alone at {} (not what roce-tune wrote)",
                setting::show(*found)
            ),
            Outcome::Gone => f.write_str("gone with the device"),
        }
    }
}

/// Give every recorded file back, under the device's lock (held by the
/// caller). `at` and `port` show the device where it is now (its identity
/// already checked). An error keeps the entry, so a later repair can finish.
fn release_locked(
    state: &StateDir,
    entry: &Entry,
    at: Views,
    port: &RdmaPort,
) -> Result<Vec<(&'static str, Outcome)>, OwnError> {
    let mut live_co: Option<Vec<Entry>> = None;
    let mut done = Vec::new();
    for s in SETTINGS {
        let Some(owned) = entry.owned.get(s.key()) else {
            continue;
        };
        let Some(current) = s.read_present(at, port)? else {
            crate::info!(
                "{} of {} is gone (device re-created or removed): nothing to restore",
                s.title(),
                entry.device
            );
            done.push((s.title(), Outcome::Gone));
            continue;
        };
        if !s.same(current, Some(owned.written)) {
            crate::warn!(
                "{} of {} port {} is {}, not the {} roce-tune wrote: someone else set it or the device was re-created; leaving it",
                s.title(), entry.device, entry.port, setting::show(current), owned.written
            );
            done.push((s.title(), Outcome::LeftAlone { found: current }));
            continue;
        }
        let live = live_co.get_or_insert_with(|| {
            co_owners(state, entry)
                .into_iter()
                .filter(is_live)
                .collect()
        });
        let heir = heirs::heir(s.key(), live);
        let target = heir.map_or(owned.original, |(_, o)| Some(o.written));
        s.write(at, port, target)?;
        #[cfg(feature = "fault-injection")]
        crate::fault::point("del-after-restore-write");
        s.verify(at, port, target)?;
        let outcome = match heir {
            Some((h, o)) => Outcome::Handed {
                to: format!("{}/{}", h.container_id, h.ifname),
                value: o.written,
            },
            None => Outcome::Restored(owned.original),
        };
        crate::info!(
            "{} of {} port {} {outcome}",
            s.title(),
            entry.device,
            entry.port
        );
        done.push((s.title(), outcome));
    }
    #[cfg(feature = "fault-injection")]
    crate::fault::point("del-before-state-remove");
    Ok(done)
}

/// Where an entry's device and files are given back: the state dir, the
/// node's sysfs, and the node's deviceInfoDir.
#[derive(Clone, Copy)]
pub struct Place<'a> {
    pub state: &'a StateDir,
    pub sysfs: &'a Sysfs,
    pub device_info_dir: &'a Path,
    /// How long a release waits for the device's lock: the CNI commands
    /// block (their runtime bounds them), the repair does not.
    pub lock_wait: LockWait,
}

/// What became of an entry.
#[derive(Debug)]
pub enum Done {
    /// Its files were given back (or were gone) and the entry dropped.
    Released(Vec<(&'static str, Outcome)>),
    /// Nothing could be restored now; the entry stays for the orphan repair.
    Kept(String),
    /// The device's lock was held past `Place::lock_wait`: nothing was
    /// tried, and the entry stays for the next repair.
    Busy(String),
}

impl fmt::Display for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Done::Released(list) if list.is_empty() => f.write_str("nothing left to restore"),
            Done::Released(list) => {
                let parts: Vec<String> = list.iter().map(|(t, o)| format!("{t} {o}")).collect();
                f.write_str(&parts.join(", "))
            }
            Done::Kept(why) => write!(f, "kept for the orphan repair: {why}"),
            Done::Busy(why) => write!(f, "not tried: {why}"),
        }
    }
}

/// Give back an entry's files where its device is now: inside the pod (the
/// sysfs of its netns) for a device reached there whose pod still lives,
/// else the host's view (the kernel returns a device to the host netns when
/// its netns dies). Never fails: what cannot be done now is `Kept`. DEL, GC,
/// the orphan repair and a repeated ADD all release through here.
pub fn release_entry(place: Place, entry: &Entry) -> Done {
    if entry.owned.is_empty() && entry.device_info.is_none() {
        // A rail record alone: no file to give back, wherever the device is
        // now (even one still invisible in an exiting netns), so no lock.
        #[cfg(feature = "fault-injection")]
        crate::fault::point("del-before-state-remove");
        return match place.state.remove(entry) {
            Ok(()) => Done::Released(Vec::new()),
            Err(e) => Done::Kept(e.to_string()),
        };
    }
    // The pod's netns while it lives (the recorded one, by its nsfs
    // identity): where a device reached inside it is, and where a setting
    // of the pod's interface is given back. Gone, a setting of the
    // interface has nothing left to restore. Looked up for a host-reach
    // entry too: 7 system calls, 0.6% of a DEL's instructions (80 to 87
    // calls, 272,272 to 274,002 instructions under callgrind).
    let ns = match NetNs::still(Path::new(&entry.netns), entry.netns_id) {
        Ok(ns) => ns,
        Err(e) => {
            crate::warn!("{e}; trying the host's view");
            None
        }
    };
    let pod = ns.as_ref().map(|netns| PodIface {
        netns,
        ifname: &entry.ifname,
    });
    let mut seen_invisible = false;
    if let (Reach::Pod, Some(ns)) = (entry.reach, &ns) {
        match place.sysfs.pod_side_of(ns) {
            Ok(Some(pod_view)) => match device::resolve(&pod_view, entry.identity()) {
                Resolved::Here(port) => {
                    let at = Views {
                        device: &pod_view,
                        host: place.sysfs.host(),
                        pod,
                    };
                    return release_in(place, entry, at, &port);
                }
                Resolved::Invisible => seen_invisible = true,
                Resolved::Gone => {}
            },
            Ok(None) => {}
            Err(e) => crate::warn!(
                "the sysfs of netns {} could not be made ({e}); trying the host's view",
                entry.netns
            ),
        }
    }
    let host = place.sysfs.host();
    match device::resolve(host, entry.identity()) {
        Resolved::Here(port) => {
            let at = Views {
                device: host,
                host,
                pod,
            };
            release_in(place, entry, at, &port)
        }
        Resolved::Invisible if entry.reach == Reach::Pod || seen_invisible => Done::Kept(format!(
            "{} (PCI {}) shows no RDMA device from here: in exclusive mode it is still in a netns that has not finished exiting",
            entry.device,
            entry.pci.as_deref().unwrap_or("?")
        )),
        Resolved::Invisible | Resolved::Gone => {
            crate::info!(
                "{} port {} is gone (removed, re-created or renamed away): nothing to restore",
                entry.device,
                entry.port
            );
            forget_device_info(place, entry);
            match place.state.remove(entry) {
                Ok(()) => Done::Released(Vec::new()),
                Err(e) => Done::Kept(e.to_string()),
            }
        }
    }
}

fn release_in(place: Place, entry: &Entry, at: Views, port: &RdmaPort) -> Done {
    let _lock = match place.state.lock_waiting(&entry.lock_key(), place.lock_wait) {
        Ok(l) => l,
        Err(e @ StateError::Busy { .. }) => return Done::Busy(e.to_string()),
        Err(e) => return Done::Kept(e.to_string()),
    };
    match release_locked(place.state, entry, at, port) {
        Ok(list) => {
            forget_device_info(place, entry);
            match place.state.remove(entry) {
                Ok(()) => Done::Released(list),
                Err(e) => Done::Kept(e.to_string()),
            }
        }
        Err(e) => Done::Kept(e.to_string()),
    }
}

/// The device-info file this attachment's ADD made goes with it (sriov-cni
/// removes the one it made itself, on its own DEL).
fn forget_device_info(place: Place, entry: &Entry) {
    if let Some(file) = &entry.device_info {
        crate::device_info::remove(place.device_info_dir, file);
    }
}

/// A failed ADD gives back what it wrote: the entry it recorded says what
/// (and its originals), so the device ends as ADD found it and no state stays.
pub fn undo_take(
    state: &StateDir,
    at: Views,
    port: &RdmaPort,
    container_id: &str,
    ifname: &str,
    wait: LockWait,
) {
    let entry = match state.read(container_id, ifname) {
        Ok(e) => e,
        Err(ReadError::Missing) => return,
        Err(e) => {
            crate::error!("ADD failed and its state entry is unreadable: {e:?}");
            return;
        }
    };
    let undone = state
        .lock_waiting(&entry.lock_key(), wait)
        .map_err(OwnError::from)
        .and_then(|_lock| {
            let done = release_locked(state, &entry, at, port)?;
            state.remove(&entry)?;
            Ok(done)
        });
    match undone {
        Ok(r) => crate::info!("ADD failed: rolled back ({r:?})"),
        Err(e) => crate::error!(
            "ADD failed and its rollback failed too: {e}; the entry is kept for DEL and the orphan repair"
        ),
    }
}
