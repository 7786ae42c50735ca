//! Who owns a device file roce-tune writes (the traffic class; the rdma_cm
//! default ToS), and how it is given back. ADD records the original in the
//! state dir BEFORE writing (so a crash can never lose it); a release puts it
//! back only if the file still holds what roce-tune wrote. Everything here
//! runs under the device's lock, and through the `View` in which the device
//! is reachable now.
//!
//! Co-owners (two attachments on one device port, which a VF normally never
//! has) share the device's TRUE original: the second ADD takes the first's
//! original instead of reading the first's value; a release while another
//! LIVE owner remains hands the file to the newest live owner's value. A dead
//! owner (its pod gone without DEL) is never an heir: the orphan repair
//! releases it later, finding the file no longer holds its value.

use crate::cni::{code, CniError, CniResult};
use crate::netns::NetNs;
use crate::rdma::device::{self, Resolved};
use crate::rdma::reach::{Reach, Sysfs};
use crate::rdma::traffic_class::{self, describe};
use crate::rdma::{rdma_cm, RdmaPort};
use crate::state::{self, DeviceInfoFile, Entry, Owned, ReadError, StateDir, FORMAT};
use crate::sysfs::View;
use std::path::Path;

/// Where a device's files are reached: the device's own sysfs (the pod's
/// in exclusive mode) and the node's configfs (always the host's).
#[derive(Clone, Copy)]
pub struct Views<'a> {
    pub device: &'a View,
    pub host: &'a View,
}

/// A device file roce-tune owns while a pod lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    TrafficClass,
    RdmaCmTos,
}

impl Knob {
    pub const ALL: [Knob; 2] = [Knob::TrafficClass, Knob::RdmaCmTos];

    pub fn name(self) -> &'static str {
        match self {
            Knob::TrafficClass => "traffic class",
            Knob::RdmaCmTos => "rdma_cm default ToS",
        }
    }

    pub fn record(self, e: &Entry) -> Option<Owned> {
        match self {
            Knob::TrafficClass => e.traffic_class,
            Knob::RdmaCmTos => e.rdma_cm_tos,
        }
    }

    fn record_mut(self, e: &mut Entry) -> &mut Option<Owned> {
        match self {
            Knob::TrafficClass => &mut e.traffic_class,
            Knob::RdmaCmTos => &mut e.rdma_cm_tos,
        }
    }

    /// The live value; `None` = unset (the class only: a ToS always has one).
    pub fn read(self, v: Views, port: &RdmaPort) -> CniResult<Option<u8>> {
        match self {
            Knob::TrafficClass => traffic_class::read(v.device, port),
            Knob::RdmaCmTos => rdma_cm::read(v.host, port).map(Some),
        }
    }

    /// Whether the device has this file now. A class file that is gone went
    /// with the device (re-created or removed), and with it what was set.
    /// The rdma_cm directory is remade when missing: its value survives.
    fn present(self, v: Views, port: &RdmaPort) -> CniResult<bool> {
        match self {
            Knob::TrafficClass => Ok(v.device.exists(&port.traffic_class_path())),
            Knob::RdmaCmTos => rdma_cm::ensure_group(v.host, port).map(|()| true),
        }
    }

    fn write(self, v: Views, port: &RdmaPort, value: Option<u8>) -> CniResult<()> {
        match self {
            Knob::TrafficClass => traffic_class::write(v.device, port, value),
            Knob::RdmaCmTos => rdma_cm::write(v.host, port, value.unwrap_or(0)),
        }
    }

    fn verify(self, v: Views, port: &RdmaPort, value: Option<u8>) -> CniResult<()> {
        match self {
            Knob::TrafficClass => traffic_class::verify(v.device, port, value),
            Knob::RdmaCmTos => rdma_cm::verify(v.host, port, value.unwrap_or(0)),
        }
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
}

/// Record the originals, then write each wanted value and read it back. On
/// error the entry may exist: the caller rolls back with `release`.
pub fn take(
    state: &StateDir,
    view: Views,
    port: &RdmaPort,
    claim: &Claim,
    wants: &[(Knob, u8)],
) -> CniResult<Entry> {
    let _lock = state.lock(&port.lock_key())?;
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
        Err(ReadError::Newer(v)) => {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!(
                    "the state entry of {}/{} was written by a newer roce-tune (format {v}, this one writes {FORMAT}); it is left alone: run the newer version again, or DEL the pod",
                    claim.container_id, claim.ifname
                ),
            ))
        }
        Err(ReadError::Io(e)) => return Err(CniError::io("read state entry", e)),
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
        traffic_class: None,
        rdma_cm_tos: None,
        // A repeated ADD keeps the record of a file the first one made.
        device_info: claim
            .device_info
            .clone()
            .or_else(|| own.as_ref().and_then(|e| e.device_info.clone())),
        created_ns: state::now_ns(),
    };
    let own = own.filter(|e| e.same_device(&entry));
    let co = if wants.is_empty() {
        Vec::new()
    } else {
        co_owners(state, &entry)
    };
    for knob in Knob::ALL {
        let Some(&(_, value)) = wants.iter().find(|(k, _)| *k == knob) else {
            // Not wanted any more by a repeated ADD: keep what was recorded,
            // so the first original is never lost.
            *knob.record_mut(&mut entry) = own.as_ref().and_then(|e| knob.record(e));
            continue;
        };
        let original = match own.as_ref().and_then(|e| knob.record(e)) {
            // A repeated ADD keeps the FIRST original.
            Some(first) => {
                crate::info!(
                    "repeated ADD: keeping the first recorded original {} of the {}",
                    describe(first.original),
                    knob.name()
                );
                first.original
            }
            None => match co
                .iter()
                .filter(|e| knob.record(e).is_some())
                .min_by_key(|e| (e.created_ns, e.container_id.clone()))
            {
                Some(first) => {
                    crate::info!(
                        "{} port {} is already claimed by {}/{}: sharing its original {} of the {}",
                        port.device,
                        port.port,
                        first.container_id,
                        first.ifname,
                        describe(knob.record(first).and_then(|o| o.original)),
                        knob.name()
                    );
                    knob.record(first).and_then(|o| o.original)
                }
                None => {
                    if knob == Knob::RdmaCmTos {
                        rdma_cm::ensure_group(view.host, port)?;
                    }
                    knob.read(view, port)?
                }
            },
        };
        *knob.record_mut(&mut entry) = Some(Owned {
            original,
            written: value,
        });
    }
    state.write(&entry)?;
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-state-write");
    for &(knob, value) in wants {
        knob.write(view, port, Some(value))?;
        #[cfg(feature = "fault-injection")]
        if knob == Knob::TrafficClass {
            crate::fault::point("add-after-class-write");
        }
        knob.verify(view, port, Some(value))?;
        #[cfg(feature = "fault-injection")]
        if knob == Knob::TrafficClass {
            crate::fault::point("add-after-readback");
        }
        crate::info!(
            "{} of {} port {} set to {value} (original {}, recorded in {})",
            knob.name(),
            port.device,
            port.port,
            describe(knob.record(&entry).and_then(|o| o.original)),
            state.path().display()
        );
    }
    Ok(entry)
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

/// Whether an entry's pod still exists (same netns inode at the same path).
pub fn is_live(e: &Entry) -> bool {
    NetNs::still(Path::new(&e.netns), e.netns_id).is_ok_and(|ns| ns.is_some())
}

/// What a release did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The original was written back.
    Restored(Option<u8>),
    /// Another live owner remains: the file now holds its value.
    Handed { to: String, value: u8 },
    /// The file no longer held our value: left as found.
    LeftAlone { found: Option<u8> },
    /// The file is gone (device re-created or removed): nothing to restore.
    Gone,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Restored(v) => write!(f, "restored to {}", describe(*v)),
            Outcome::Handed { to, value } => write!(f, "handed to {to} ({value})"),
            Outcome::LeftAlone { found } => {
                write!(
                    f,
                    "left alone at {} (not what roce-tune wrote)",
                    describe(*found)
                )
            }
            Outcome::Gone => f.write_str("gone with the device"),
        }
    }
}

/// Give every recorded file back, under the device's lock (held by the
/// caller). `view` and `port` show the device where it is now (its identity
/// already checked). An error keeps the entry, so a later repair can finish.
fn release_locked(
    state: &StateDir,
    entry: &Entry,
    view: Views,
    port: &RdmaPort,
) -> CniResult<Vec<(Knob, Outcome)>> {
    let mut heirs: Option<Vec<Entry>> = None;
    let mut done = Vec::new();
    for knob in Knob::ALL {
        let Some(owned) = knob.record(entry) else {
            continue;
        };
        if !knob.present(view, port)? {
            crate::info!(
                "{} of {} is gone (device re-created or removed): nothing to restore",
                knob.name(),
                entry.device
            );
            done.push((knob, Outcome::Gone));
            continue;
        }
        let current = knob.read(view, port)?;
        if current != Some(owned.written) {
            crate::warn!(
                "{} of {} port {} is {}, not the {} roce-tune wrote: someone else set it or the device was re-created; leaving it",
                knob.name(), entry.device, entry.port, describe(current), owned.written
            );
            done.push((knob, Outcome::LeftAlone { found: current }));
            continue;
        }
        let heirs = heirs.get_or_insert_with(|| {
            co_owners(state, entry)
                .into_iter()
                .filter(is_live)
                .collect()
        });
        let heir = heirs
            .iter()
            .filter_map(|h| knob.record(h).map(|o| (h, o)))
            .max_by_key(|(h, _)| (h.created_ns, h.container_id.clone()));
        let target = heir.map_or(owned.original, |(_, o)| Some(o.written));
        knob.write(view, port, target)?;
        #[cfg(feature = "fault-injection")]
        crate::fault::point("del-after-restore-write");
        knob.verify(view, port, target)?;
        let outcome = match heir {
            Some((h, o)) => Outcome::Handed {
                to: format!("{}/{}", h.container_id, h.ifname),
                value: o.written,
            },
            None => Outcome::Restored(owned.original),
        };
        crate::info!(
            "{} of {} port {} {outcome}",
            knob.name(),
            entry.device,
            entry.port
        );
        done.push((knob, outcome));
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
}

/// What became of an entry.
#[derive(Debug)]
pub enum Done {
    /// Its files were given back (or were gone) and the entry dropped.
    Released(Vec<(Knob, Outcome)>),
    /// Nothing could be restored now; the entry stays for the orphan repair.
    Kept(String),
}

impl std::fmt::Display for Done {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Done::Released(list) if list.is_empty() => f.write_str("nothing left to restore"),
            Done::Released(list) => {
                let parts: Vec<String> = list
                    .iter()
                    .map(|(k, o)| format!("{} {o}", k.name()))
                    .collect();
                f.write_str(&parts.join(", "))
            }
            Done::Kept(why) => write!(f, "kept for the orphan repair: {why}"),
        }
    }
}

/// Give back an entry's files where its device is now: inside the pod (the
/// sysfs of its netns) for a device reached there whose pod still lives,
/// else the host's view (the kernel returns a device to the host netns when
/// its netns dies). Never fails: what cannot be done now is `Kept`. DEL, GC,
/// the orphan repair and a repeated ADD all release through here.
pub fn release_entry(place: Place, entry: &Entry) -> Done {
    let mut seen_invisible = false;
    if entry.reach == Reach::Pod {
        match NetNs::still(Path::new(&entry.netns), entry.netns_id) {
            Ok(Some(ns)) => match place.sysfs.pod_side_of(&ns) {
                Ok(Some(pod)) => match device::resolve(&pod, entry.identity()) {
                    Resolved::Here(port) => {
                        let views = Views {
                            device: &pod,
                            host: place.sysfs.host(),
                        };
                        return release_in(place, entry, views, &port);
                    }
                    Resolved::Invisible => seen_invisible = true,
                    Resolved::Gone => {}
                },
                Ok(None) => {}
                Err(e) => crate::warn!(
                    "the sysfs of netns {} could not be made ({e}); trying the host's view",
                    entry.netns
                ),
            },
            Ok(None) => {}
            Err(e) => crate::warn!("{e}; trying the host's view"),
        }
    }
    let host = place.sysfs.host();
    match device::resolve(host, entry.identity()) {
        Resolved::Here(port) => release_in(place, entry, Views { device: host, host }, &port),
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
            match place.state.remove(&entry.container_id, &entry.ifname) {
                Ok(()) => Done::Released(Vec::new()),
                Err(e) => Done::Kept(e.msg),
            }
        }
    }
}

fn release_in(place: Place, entry: &Entry, view: Views, port: &RdmaPort) -> Done {
    let _lock = match place.state.lock(&entry.lock_key()) {
        Ok(l) => l,
        Err(e) => return Done::Kept(e.msg),
    };
    match release_locked(place.state, entry, view, port) {
        Ok(list) => {
            forget_device_info(place, entry);
            match place.state.remove(&entry.container_id, &entry.ifname) {
                Ok(()) => Done::Released(list),
                Err(e) => Done::Kept(e.msg),
            }
        }
        Err(e) => Done::Kept(e.msg),
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
    views: Views,
    port: &RdmaPort,
    container_id: &str,
    ifname: &str,
) {
    let entry = match state.read(container_id, ifname) {
        Ok(e) => e,
        Err(ReadError::Missing) => return,
        Err(e) => {
            crate::error!("ADD failed and its state entry is unreadable: {e:?}");
            return;
        }
    };
    let undone = state.lock(&entry.lock_key()).and_then(|_lock| {
        let done = release_locked(state, &entry, views, port)?;
        state.remove(container_id, ifname)?;
        Ok(done)
    });
    match undone {
        Ok(r) => crate::info!("ADD failed: rolled back ({r:?})"),
        Err(e) => crate::error!(
            "ADD failed and its rollback failed too: {e}; the entry is kept for DEL and the orphan repair"
        ),
    }
}
