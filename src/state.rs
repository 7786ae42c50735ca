//! The state dir: the only record of what a device's files held before a pod.
//! One file per attachment, `<containerID>:<ifname>.state` (':' is in neither,
//! so names never collide), written atomically (temp file, fsync, rename,
//! fsync dir) before anything on the device is changed. A per-device lock file
//! in `locks/` serialises everything that reads or writes a device's files.
//!
//! The dir is the node's own: it and every parent are owned by root, not
//! writable by group or others, and none is a symbolic link; the dir is 0700,
//! files 0600 and opened with O_NOFOLLOW, and only names built from validated
//! identifiers are ever opened. An entry records identities, not just names:
//! the pod's netns by its nsfs inode, the device by PCI function and node GUID.
//!
//! Entries carry a format version. This binary writes `FORMAT`, reads every
//! older one, and leaves a newer one alone (a rollback must not lose a
//! restore). Version 1 entries (`<cid>:<ifname>.json`, written by 0.1.0) are
//! read and replaced; 0.1.0 itself never opens a `.state` file, so a rollback
//! to it leaves newer entries untouched too.

use crate::cni::config::MAX_GID_INDEX;
use crate::cni::env::{is_k8s_name, validate_container_id, validate_ifname};
use crate::netns::NsId;
use crate::rdma::device::Identity;
use crate::rdma::reach::Reach;
use crate::rdma::{is_guid, is_safe_component};
use crate::safe_dir::DirError;
use crate::settings::by_key;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The entry format this binary writes: 4 records every RDMA ADD's rail
/// (`rail`), whether or not it owns a file; 3 recorded owned settings by
/// their key (`owned`), how the device is reached (`reach`, was
/// `exclusive`), and a device-info file roce-tune made.
pub const FORMAT: u32 = 4;

/// The `network` of a rail a DRA driver moved into a pod, tuned by the NRI
/// plugin at RunPodSandbox (`nri::dra`). A colon is in no CNI network's
/// name (`cni::config::validate_name`), so no CNI GC ever claims these
/// entries, and no network config can pose as one.
pub const DRA_NETWORK: &str = "nri:dra-rails";
/// The first format whose entries are marked in the owner index: older ones
/// are rewritten while their pod lives (`orphans::sweep`).
pub const OWNER_INDEX_FORMAT: u32 = 3;
/// A state entry is a few hundred bytes; anything larger is not ours.
const MAX_ENTRY_BYTES: u64 = 64 * 1024;
const SUFFIX: &str = ".state";
/// Version 1 (0.1.0) entries.
const LEGACY_SUFFIX: &str = ".json";

/// What roce-tune changed on one device file, and what was there before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Owned {
    /// The value before the first ADD; `None` = unset.
    pub original: Option<u32>,
    /// What roce-tune wrote; DEL restores only if the file still holds it.
    pub written: u32,
}

/// Formats 1 and 2 kept each setting in a field of its own, as a byte.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OwnedV2 {
    original: Option<u8>,
    written: u8,
}

impl From<OwnedV2> for Owned {
    fn from(v: OwnedV2) -> Owned {
        Owned {
            original: v.original.map(u32::from),
            written: u32::from(v.written),
        }
    }
}

/// The owned settings of a format 1 or 2 entry, by their keys.
fn owned_of(class: Option<OwnedV2>, tos: Option<OwnedV2>) -> BTreeMap<String, Owned> {
    [("trafficClass", class), ("rdmaCmTos", tos)]
        .into_iter()
        .filter_map(|(k, o)| o.map(|o| (k.to_owned(), Owned::from(o))))
        .collect()
}

/// What ADD recorded for one attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    pub version: u32,
    /// The network (config `name`): GC is per network and must not touch
    /// another network's entries in a shared state dir.
    pub network: String,
    pub container_id: String,
    pub ifname: String,
    /// The pod netns path at ADD, and the identity of its nsfs inode: the pod
    /// is gone when the path is missing, is no netns, or is another one.
    pub netns: String,
    /// `None` only for entries written by 0.1.0.
    pub netns_id: Option<NsId>,
    /// Where the device's files are: the host's sysfs, or (exclusive mode)
    /// the sysfs of the pod's netns while the pod lives.
    pub reach: Reach,
    pub device: String,
    pub port: u32,
    /// The device's PCI function and node GUID at ADD: a name can move to
    /// another device, these do not.
    pub pci: Option<String>,
    pub guid: Option<String>,
    /// Each setting roce-tune owns (`crate::settings`), by its key.
    pub owned: BTreeMap<String, Owned>,
    /// The device-info file roce-tune made for this attachment (it goes on
    /// release); `None` when it made none.
    pub device_info: Option<DeviceInfoFile>,
    /// The pod, when CNI_ARGS named one.
    #[serde(default)]
    pub pod: Option<PodRecord>,
    /// The placement verdict, when the check ran.
    #[serde(default)]
    pub placement: Option<PlacementRecord>,
    /// The RoCE v2 GID of the pod's address (sysfs's form), when the GID
    /// check ran: the agent reports where it sits now.
    #[serde(default)]
    pub gid: Option<String>,
    /// What the pod's jobs need of this rail (`job_env`); format 4 on.
    #[serde(default)]
    pub rail: Option<RailRecord>,
    /// Nanoseconds since the epoch: orders co-owners.
    pub created_ns: u64,
}

/// What an RDMA ADD verified of its rail and what the network asked of it,
/// recorded whether or not the ADD owns a file: the job environment's
/// source (`job_env`: NCCL_IB_GID_INDEX, NCCL_IB_TC), read by the NRI plugin
/// and `inspect --env`, never by a CNI command. The device and port are the
/// entry's own; the interface's place among the pod's is its name
/// (docs/design.md, "State entries").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RailRecord {
    /// The index holding the RoCE v2 GID of the pod's address: the one
    /// `gidCheck: enforce` verified, the one `present` or `warn` found;
    /// `None` when the check was off or found it nowhere.
    pub gid_index: Option<u32>,
    /// The class the network (or the pod's pick) asked for, owned or not.
    pub traffic_class: Option<u8>,
    /// The rdma_cm default ToS the network asked for.
    pub rdma_cm_tos: Option<u8>,
}

/// The Kubernetes pod of an attachment, from CNI_ARGS at ADD: what the
/// agent labels the rail's metrics with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

impl PodRecord {
    /// A Kubernetes namespace, name and (when known) UID: what an entry may
    /// record of its pod.
    pub fn is_valid(&self) -> bool {
        let uid_ok = self
            .uid
            .as_deref()
            .is_none_or(|u| u.len() == 36 && u.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        is_k8s_name(&self.namespace, 63) && is_k8s_name(&self.name, 253) && uid_ok
    }
}

/// The placement verdict at ADD (docs/placement.md), as it concerns this
/// rail: the agent exports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementRecord {
    /// This rail is near at least one of the pod's GPUs.
    pub near: bool,
    /// How many of the pod's GPUs are starved of near rails.
    pub starved_gpus: u32,
    /// The GDR level judged against.
    pub level: String,
}

/// A device-info file roce-tune created, by its name in the node's
/// deviceInfoDir (never a path: the dir is the node config's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceInfoFile {
    pub name: String,
    /// The PCI function it names: it is removed only while it still does.
    pub pci: String,
}

/// The version 2 layout (0.1.0's successor), read so an upgrade loses no
/// restore.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryV2 {
    #[allow(dead_code)]
    version: u32,
    network: String,
    container_id: String,
    ifname: String,
    netns: String,
    netns_id: Option<NsId>,
    exclusive: bool,
    device: String,
    port: u32,
    pci: Option<String>,
    guid: Option<String>,
    traffic_class: Option<OwnedV2>,
    rdma_cm_tos: Option<OwnedV2>,
    created_ns: u64,
}

impl From<EntryV2> for Entry {
    fn from(v: EntryV2) -> Entry {
        Entry {
            version: 2,
            network: v.network,
            container_id: v.container_id,
            ifname: v.ifname,
            netns: v.netns,
            netns_id: v.netns_id,
            reach: reach_of(v.exclusive),
            device: v.device,
            port: v.port,
            pci: v.pci,
            guid: v.guid,
            owned: owned_of(v.traffic_class, v.rdma_cm_tos),
            device_info: None,
            pod: None,
            placement: None,
            gid: None,
            rail: None,
            created_ns: v.created_ns,
        }
    }
}

/// Formats 1 and 2 said `exclusive` (recorded only on the real /sys).
fn reach_of(exclusive: bool) -> Reach {
    if exclusive {
        Reach::Pod
    } else {
        Reach::Host
    }
}

/// The version 1 layout (0.1.0), read so an upgrade loses no restore.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryV1 {
    #[allow(dead_code)]
    version: u32,
    network: String,
    container_id: String,
    ifname: String,
    netns: String,
    /// Ignored: where sysfs is comes from the node config, never an entry.
    #[allow(dead_code)]
    sysfs_root: PathBuf,
    exclusive: bool,
    device: String,
    port: u32,
    original: Option<u8>,
    written: u8,
    created: u64,
}

impl From<EntryV1> for Entry {
    fn from(v: EntryV1) -> Entry {
        Entry {
            version: 1,
            network: v.network,
            container_id: v.container_id,
            ifname: v.ifname,
            netns: v.netns,
            netns_id: None,
            reach: reach_of(v.exclusive),
            device: v.device,
            port: v.port,
            pci: None,
            guid: None,
            owned: owned_of(
                Some(OwnedV2 {
                    original: v.original,
                    written: v.written,
                }),
                None,
            ),
            device_info: None,
            pod: None,
            placement: None,
            gid: None,
            rail: None,
            created_ns: v.created.saturating_mul(1_000_000_000),
        }
    }
}

impl Entry {
    /// Refuse an entry whose fields could steer a write somewhere else.
    pub fn validate(&self) -> Result<(), String> {
        validate_container_id(&self.container_id).map_err(|e| e.msg)?;
        validate_ifname(&self.ifname).map_err(|e| e.msg)?;
        if self.network != DRA_NETWORK {
            crate::cni::config::validate_name(&self.network).map_err(|e| e.msg)?;
        }
        if !is_safe_component(&self.device) {
            return Err("its device is not a device name".into());
        }
        if self.port == 0 || self.port > 255 {
            return Err(format!("port {} is out of range", self.port));
        }
        if self
            .pci
            .as_deref()
            .is_some_and(|p| crate::cni::config::PciAddr::parse(p).is_none())
        {
            return Err("its pci is not a PCI address".into());
        }
        if self.guid.as_deref().is_some_and(|g| !is_guid(g)) {
            return Err("its guid is not a GUID".into());
        }
        let ns = Path::new(&self.netns);
        if !ns.is_absolute() || ns.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err("its netns is not a clean absolute path".into());
        }
        if let Some(d) = &self.device_info {
            let name_ok = d.name.len() <= 255
                && d.name != "."
                && d.name != ".."
                && d.name.bytes().all(|b| b.is_ascii_graphic() && b != b'/');
            if !name_ok || crate::cni::config::PciAddr::parse(&d.pci).is_none() {
                return Err("its device-info file is not a file name and a PCI address".into());
            }
        }
        if self.pod.as_ref().is_some_and(|p| !p.is_valid()) {
            return Err("its pod is not a Kubernetes namespace, name and UID".into());
        }
        if self
            .gid
            .as_deref()
            .is_some_and(|g| g.parse::<std::net::Ipv6Addr>().is_err())
        {
            return Err("its gid is not a GID".into());
        }
        if let Some(p) = &self.placement {
            if !matches!(p.level.as_str(), "PIX" | "PXB" | "PHB" | "SYS") {
                return Err("its placement level is not a GDR level".into());
            }
        }
        if self
            .rail
            .is_some_and(|r| r.gid_index.is_some_and(|i| i > MAX_GID_INDEX))
        {
            return Err("its GID index is out of range".into());
        }
        // Before format 4 an ADD recorded only what it had to give back.
        if self.owned.is_empty() && self.device_info.is_none() && self.rail.is_none() {
            return Err("it records no rail and nothing to restore".into());
        }
        Ok(())
    }

    /// What identifies the recorded device port.
    pub fn identity(&self) -> Identity<'_> {
        Identity {
            device: &self.device,
            port: self.port,
            pci: self.pci.as_deref(),
            guid: self.guid.as_deref(),
        }
    }

    /// The lock key and port (co-owners share one device file).
    pub fn lock_key(&self) -> String {
        format!(
            "{}.{}",
            self.pci.as_deref().unwrap_or(&self.device),
            self.port
        )
    }

    /// The same device port: by PCI function when both know it, else by name.
    pub fn same_device(&self, other: &Entry) -> bool {
        self.records(&other.device, other.port, other.pci.as_deref())
    }

    /// Whether this entry records the port `port` of `device` (on the PCI
    /// function `pci`), by `same_device`'s rule: never by the interface
    /// name, which a pod can change.
    pub fn records(&self, device: &str, port: u32, pci: Option<&str>) -> bool {
        self.port == port
            && match (self.pci.as_deref(), pci) {
                (Some(a), Some(b)) => a == b,
                _ => self.device == device,
            }
    }
}

/// Why an entry could not be read.
#[derive(Debug)]
pub enum ReadError {
    Missing,
    /// Present but not trustworthy: not a regular file, too large, or not an
    /// entry. The reason never quotes the file.
    Corrupt(String),
    /// Written by a newer roce-tune: left alone, never quarantined.
    /// What is newer: "format 4", or a setting this binary does not know.
    Newer(String),
    /// The OS error, kept so DEL can tell a passing failure from a lasting one.
    Io(std::io::Error),
}

/// What tells one version of an entry file from the next without reading
/// it: every write renames a new file into place (a new inode); the size and
/// the mtime catch a file changed in place (by hand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

pub struct StateDir {
    dir: PathBuf,
    /// `locks` was seen to be a directory, not a link, by this process: the
    /// lock and the owner mark of one command need not look again.
    locks_checked: std::sync::atomic::AtomicBool,
    /// The version 1 file `read` last found missing: `write` need not try to
    /// remove it (an unlink that fails costs every first ADD a call).
    legacy_missing: std::sync::Mutex<Option<String>>,
}

/// `<containerID>:<ifname>.state`, from identifiers validated by the caller.
pub fn entry_name(container_id: &str, ifname: &str) -> String {
    format!("{container_id}:{ifname}{SUFFIX}")
}

fn legacy_name(container_id: &str, ifname: &str) -> String {
    format!("{container_id}:{ifname}{LEGACY_SUFFIX}")
}

/// Whether `name` is named like an entry file, current or version 1 (not
/// validated: `parse_entry_name` does, before a read).
pub fn is_entry_file(name: &str) -> bool {
    name.ends_with(SUFFIX) || name.ends_with(LEGACY_SUFFIX)
}

/// Both names an entry file of `name`'s attachment may have: the current
/// one, and the version 1 one it shadows.
pub fn both_entry_names(name: &str) -> Option<(String, String)> {
    let stem = name
        .strip_suffix(SUFFIX)
        .or_else(|| name.strip_suffix(LEGACY_SUFFIX))?;
    Some((format!("{stem}{SUFFIX}"), format!("{stem}{LEGACY_SUFFIX}")))
}

/// The attachment a file name stands for, if it is one of ours.
pub fn parse_entry_name(name: &str) -> Option<(String, String)> {
    let stem = name
        .strip_suffix(SUFFIX)
        .or_else(|| name.strip_suffix(LEGACY_SUFFIX))?;
    let (cid, ifname) = stem.split_once(':')?;
    (validate_container_id(cid).is_ok() && validate_ifname(ifname).is_ok())
        .then(|| (cid.to_owned(), ifname.to_owned()))
}

/// Why the state dir, an entry or a lock could not be used. The CNI edge
/// turns every one into code 5 (an I/O failure), a bad lock name into 100,
/// a lock held past its bound into 11.
#[derive(Debug)]
pub enum StateError {
    /// The dir is not the node's own: a link, a parent others can write, not root's.
    Refused { dir: PathBuf, why: String },
    /// An OS error on `path`, with what was being done.
    Io {
        what: String,
        path: PathBuf,
        err: std::io::Error,
    },
    /// `locks` is not a directory (a planted link?).
    LocksNotADir(PathBuf),
    /// A device lock named from something that is not a file name.
    BadLockName,
    /// A device lock another process held past the taker's bound
    /// (`LockWait::Within`).
    Busy { path: PathBuf, waited: Duration },
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Refused { dir, why } => write!(
                f,
                "state dir {} is refused: {why}; the state dir and every parent must be owned by root, not writable by group or others, and not a symbolic link (set stateDir in the node config)",
                dir.display()
            ),
            StateError::Io { what, path, err } => write!(f, "{what} {}: {err}", path.display()),
            StateError::LocksNotADir(p) => {
                write!(f, "{} is not a directory (a link?): remove it", p.display())
            }
            StateError::BadLockName => f.write_str("the device's lock name is not a safe file name"),
            StateError::Busy { path, waited } => write!(
                f,
                "the device's lock {} was held by another process (an ADD, a DEL, or one that is stuck) for all of {} ms: skipped, tried again later",
                path.display(),
                waited.as_millis()
            ),
        }
    }
}

impl std::error::Error for StateError {}

pub type StateResult<T> = Result<T, StateError>;

fn io_err(what: &str, path: &Path, err: impl Into<std::io::Error>) -> StateError {
    StateError::Io {
        what: what.to_owned(),
        path: path.to_owned(),
        err: err.into(),
    }
}

fn refused(dir: &Path, why: String) -> StateError {
    StateError::Refused {
        dir: dir.to_owned(),
        why,
    }
}

/// Decode an entry, by its version first so a newer one is recognised even
/// when this binary cannot read the rest.
pub fn decode(bytes: &[u8]) -> Result<Entry, ReadError> {
    // This format straight into its type: the common case, and half the
    // work of a `Value` first (the orphan sweep reads up to 16 per ADD).
    let direct = serde_json::from_slice::<Entry>(bytes)
        .ok()
        .filter(|e| e.version == FORMAT);
    let entry = match direct {
        Some(e) => e,
        None => decode_any(bytes)?,
    };
    // A setting only a newer roce-tune knows: it alone can give it back.
    if let Some(k) = entry.owned.keys().find(|k| by_key(k).is_none()) {
        return Err(ReadError::Newer(if is_safe_component(k) {
            format!("the setting {k}")
        } else {
            "a setting this binary does not know".into()
        }));
    }
    entry.validate().map_err(ReadError::Corrupt)?;
    Ok(entry)
}

/// serde's message can quote the content: give only where it broke.
fn not_entry(e: serde_json::Error) -> ReadError {
    ReadError::Corrupt(format!(
        "it is not a state entry ({:?} error at line {}, column {})",
        e.classify(),
        e.line(),
        e.column()
    ))
}

/// Any format, by its version: the older ones converted, a newer one left.
fn decode_any(bytes: &[u8]) -> Result<Entry, ReadError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(not_entry)?;
    let version = v
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| ReadError::Corrupt("it has no format version".into()))?;
    Ok(match version {
        1 => Entry::from(serde_json::from_value::<EntryV1>(v).map_err(not_entry)?),
        2 => Entry::from(serde_json::from_value::<EntryV2>(v).map_err(not_entry)?),
        // Format 3 is format 4 without `rail`.
        3 => serde_json::from_value::<Entry>(v).map_err(not_entry)?,
        n if n == u64::from(FORMAT) => serde_json::from_value::<Entry>(v).map_err(not_entry)?,
        n if n > u64::from(FORMAT) => return Err(ReadError::Newer(format!("format {n}"))),
        _ => return Err(ReadError::Corrupt("its format version is 0".into())),
    })
}

/// The state dir this process last proved (`StateDir::open`).
static PROVED: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

impl StateDir {
    /// The state dir, made (0700) when missing: ADD, STATUS.
    pub fn create(dir: &Path) -> StateResult<StateDir> {
        Self::open(dir, true)?.ok_or_else(|| refused(dir, "it vanished as it was made".into()))
    }

    /// The state dir if it exists: `Ok(None)` when it does not (DEL without
    /// state: nothing to do).
    pub fn existing(dir: &Path) -> StateResult<Option<StateDir>> {
        Self::open(dir, false)
    }

    fn open(dir: &Path, create: bool) -> StateResult<Option<StateDir>> {
        // Every ancestor, from the root down, then the dir itself: a parent
        // that others can write lets them swap the dir for their own.
        let meta = match crate::safe_dir::check_chain(dir, create) {
            Ok(Some(meta)) => meta,
            Ok(None) => return Ok(None),
            Err(DirError::Io { what, path, err }) => {
                return Err(io_err(&format!("{what} state dir"), &path, err))
            }
            Err(e) => return Err(refused(dir, e.to_string())),
        };
        if create && meta.mode() & 0o077 != 0 {
            // Readable by others leaks which pods own which device; the dir
            // is ours (checked above), so make it 0700.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| io_err("chmod 700 state dir", dir, e))?;
        }
        let state = StateDir::at(dir);
        if create {
            // Only after the checks: nothing is created through a link.
            let locks = dir.join("locks");
            match std::fs::DirBuilder::new().mode(0o700).create(&locks) {
                Ok(()) => state.locks_checked.store(true, Ordering::Relaxed),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let _ = state.check_locks(&locks);
                }
                Err(e) => return Err(io_err("create state dir", &locks, e)),
            }
        }
        if let Ok(mut proved) = PROVED.lock() {
            *proved = Some(dir.to_owned());
        }
        Ok(Some(state))
    }

    fn at(dir: &Path) -> StateDir {
        StateDir {
            dir: dir.to_owned(),
            locks_checked: false.into(),
            legacy_missing: std::sync::Mutex::new(None),
        }
    }

    /// `<state dir>/locks`, made if missing, and refused when it is not a
    /// directory: O_NOFOLLOW guards only a path's last component, so a planted
    /// `locks` link would put lock files and owner marks wherever it points.
    fn locks_dir(&self) -> StateResult<PathBuf> {
        let locks = self.dir.join("locks");
        if !self.locks_checked.load(Ordering::Relaxed) {
            let _ = std::fs::DirBuilder::new().mode(0o700).create(&locks);
            self.check_locks(&locks)?;
        }
        Ok(locks)
    }

    fn check_locks(&self, locks: &Path) -> StateResult<()> {
        if !std::fs::symlink_metadata(locks).is_ok_and(|m| m.file_type().is_dir()) {
            return Err(StateError::LocksNotADir(locks.to_owned()));
        }
        self.locks_checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// `existing`, without proving the parent chain again when this process
    /// already proved this dir: the CNI edge's tally, a millisecond after
    /// the command proved it (five statx calls of a one-shot run). The agent
    /// proves its dir every period.
    pub fn proved_earlier_or_existing(dir: &Path) -> StateResult<Option<StateDir>> {
        let proved = PROVED.lock().ok().and_then(|p| p.clone());
        if proved.as_deref() == Some(dir) {
            return Ok(Some(StateDir::at(dir)));
        }
        Self::existing(dir)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Read the entry of an attachment (a version 1 file if there is no newer).
    pub fn read(&self, container_id: &str, ifname: &str) -> Result<Entry, ReadError> {
        match self.read_name(&entry_name(container_id, ifname), container_id, ifname) {
            Err(ReadError::Missing) => {
                let legacy = legacy_name(container_id, ifname);
                let read = self.read_name(&legacy, container_id, ifname);
                if matches!(read, Err(ReadError::Missing)) {
                    if let Ok(mut m) = self.legacy_missing.lock() {
                        *m = Some(legacy);
                    }
                }
                read
            }
            other => other,
        }
    }

    fn read_name(&self, name: &str, container_id: &str, ifname: &str) -> Result<Entry, ReadError> {
        let path = self.dir.join(name);
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
            .open(&path);
        let file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
                return Err(ReadError::Corrupt("it is a symbolic link".into()))
            }
            Err(e) => return Err(ReadError::Io(e)),
        };
        let meta = file.metadata().map_err(ReadError::Io)?;
        if !meta.file_type().is_file() {
            return Err(ReadError::Corrupt("it is not a regular file".into()));
        }
        if meta.len() > MAX_ENTRY_BYTES {
            return Err(ReadError::Corrupt(format!(
                "it is {} bytes, too large for an entry",
                meta.len()
            )));
        }
        let buf =
            crate::fs_read::whole(&file, meta.len(), MAX_ENTRY_BYTES).map_err(ReadError::Io)?;
        let entry = decode(&buf)?;
        if entry.container_id != container_id || entry.ifname != ifname {
            return Err(ReadError::Corrupt(
                "its content names another attachment".into(),
            ));
        }
        Ok(entry)
    }

    /// Write an entry atomically: a crash leaves either the old file or the
    /// new one, never half of one. A version 1 file of the attachment goes.
    /// The entry is first marked in its device's owner index (a mark without
    /// an entry is harmless; an entry without its mark would hide a co-owner).
    /// A rail that owns no setting is nobody's co-owner: it gets no mark.
    pub fn write(&self, entry: &Entry) -> StateResult<()> {
        if !entry.owned.is_empty() {
            self.mark_owner(&entry.lock_key(), &entry.container_id, &entry.ifname)?;
        }
        let name = entry_name(&entry.container_id, &entry.ifname);
        let path = self.dir.join(&name);
        let body = serde_json::to_vec_pretty(entry)
            .map_err(|e| io_err("encode state", &path, std::io::Error::other(e)))?;
        write_atomically(&self.dir, &name, &body, true)
            .map_err(|e| io_err("write state", &path, e))?;
        let legacy = legacy_name(&entry.container_id, &entry.ifname);
        let seen_missing = self
            .legacy_missing
            .lock()
            .ok()
            .and_then(|mut m| m.take())
            .is_some_and(|m| m == legacy);
        if !seen_missing {
            let _ = std::fs::remove_file(self.dir.join(legacy));
        }
        Ok(())
    }

    /// Remove an attachment's entry (both formats) and then its owner mark
    /// (a rail that owns nothing has none); a missing one is fine.
    pub fn remove(&self, entry: &Entry) -> StateResult<()> {
        let (container_id, ifname) = (&entry.container_id, &entry.ifname);
        for name in [
            entry_name(container_id, ifname),
            legacy_name(container_id, ifname),
        ] {
            let path = self.dir.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove state", &path, e)),
            }
        }
        let _ = File::open(&self.dir).and_then(|d| d.sync_all());
        if !entry.owned.is_empty() {
            self.unmark_owner(&entry.lock_key(), container_id, ifname);
        }
        Ok(())
    }

    /// The owner index of one device port, beside its lock:
    /// `locks/<lock key>.owners/<cid>:<ifname>`, empty files kept under that
    /// lock, so finding a device's co-owners lists one directory instead of
    /// reading every entry (128 live attachments cost a full ADD about 1 ms
    /// that way; `make bench`). Entries of formats 1 and 2 have no mark
    /// until the repair rewrites them (`orphans::sweep`).
    fn owners_dir(&self, lock_key: &str) -> Option<PathBuf> {
        is_safe_component(lock_key)
            .then(|| self.dir.join("locks").join(format!("{lock_key}.owners")))
    }

    fn mark_owner(&self, lock_key: &str, container_id: &str, ifname: &str) -> StateResult<()> {
        let dir = self.owners_dir(lock_key).ok_or(StateError::BadLockName)?;
        self.locks_dir()?;
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err("create owner index", &dir, e)),
        }
        let mark = dir.join(format!("{container_id}:{ifname}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&mark)
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(io_err("mark owner", &mark, e)),
        }
    }

    fn unmark_owner(&self, lock_key: &str, container_id: &str, ifname: &str) {
        if let Some(dir) = self.owners_dir(lock_key) {
            let _ = std::fs::remove_file(dir.join(format!("{container_id}:{ifname}")));
            // The last owner's leaves the device's directory empty: drop it
            // (a concurrent mark of another owner keeps it: rmdir fails).
            let _ = std::fs::remove_dir(&dir);
        }
    }

    /// The attachments marked as owners of a device port (`RdmaPort::lock_key`).
    pub fn owners_of(&self, lock_key: &str) -> Vec<(String, String)> {
        let Some(dir) = self.owners_dir(lock_key) else {
            return Vec::new();
        };
        let Ok(names) = crate::fs_read::names_at(&dir) else {
            return Vec::new();
        };
        names
            .into_iter()
            .filter_map(|name| {
                let name = name.into_string().ok()?;
                let (cid, ifname) = name.split_once(':')?;
                (validate_container_id(cid).is_ok() && validate_ifname(ifname).is_ok())
                    .then(|| (cid.to_owned(), ifname.to_owned()))
            })
            .collect()
    }

    /// Move an untrustworthy entry aside (kept for the operator, never used):
    /// the file `read` looked at, the current format's first.
    pub fn quarantine(&self, container_id: &str, ifname: &str) -> StateResult<PathBuf> {
        let mut name = entry_name(container_id, ifname);
        if std::fs::symlink_metadata(self.dir.join(&name)).is_err() {
            name = legacy_name(container_id, ifname);
        }
        let to = self.dir.join(format!("{name}.corrupt"));
        std::fs::rename(self.dir.join(&name), &to)
            .map_err(|e| io_err("move aside corrupt state", &to, e))?;
        Ok(to)
    }

    /// Every attachment with an entry file (names only; files that are not
    /// ours are skipped, never opened).
    pub fn attachments(&self) -> StateResult<Vec<(String, String)>> {
        let names = crate::fs_read::names_at(&self.dir)
            .map_err(|e| io_err("list state dir", &self.dir, e))?;
        let mut out: Vec<_> = names
            .iter()
            .filter_map(|n| n.to_str().and_then(parse_entry_name))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Every file named like an entry, and its stamp (a version 1 name only
    /// where there is no current one), from one listing and one `fstatat`
    /// beside it per file: what a long-running reader compares to know
    /// which entries changed without reading them (`job_env::Rails`). A
    /// name is not validated here: `parse_entry_name` does, before a read.
    pub fn stamps(&self) -> StateResult<Vec<(String, Stamp)>> {
        let fail = |e| io_err("list state dir", &self.dir, e);
        let dir: std::os::fd::OwnedFd = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
            .open(&self.dir)
            .map_err(fail)?
            .into();
        let names = crate::fs_read::names(&dir).map_err(fail)?;
        // By suffix only: the caller validates a name it has not seen before
        // it reads it (`parse_entry_name`), and a stat opens nothing.
        let names: Vec<String> = names
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .filter(|n| is_entry_file(n))
            .collect();
        // Which names a current one shadows: none unless 0.1.0 left some.
        let shadowed: Vec<bool> = names
            .iter()
            .map(|name| {
                name.strip_suffix(LEGACY_SUFFIX)
                    .is_some_and(|stem| names.iter().any(|n| n.strip_suffix(SUFFIX) == Some(stem)))
            })
            .collect();
        let mut out = Vec::with_capacity(names.len());
        for (name, shadowed) in names.into_iter().zip(shadowed) {
            if shadowed {
                continue;
            }
            // Gone since the listing: a DEL between the two calls.
            let Ok(st) = nix::sys::stat::fstatat(
                &dir,
                name.as_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            ) else {
                continue;
            };
            let stamp = Stamp {
                ino: st.st_ino,
                size: u64::try_from(st.st_size).unwrap_or(0),
                mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            };
            out.push((name, stamp));
        }
        Ok(out)
    }

    /// The stamp of one file of the dir (no link followed), `None` when it
    /// is not there: what a reader told that the name changed compares.
    pub fn stamp(&self, name: &str) -> StateResult<Option<Stamp>> {
        match std::fs::symlink_metadata(self.dir.join(name)) {
            Ok(m) => Ok(Some(Stamp::of(&m))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("stat", &self.dir.join(name), e)),
        }
    }

    /// The stamp of the dir itself: every write renames an entry into it
    /// and every release unlinks one, so its mtime moves with either.
    pub fn dir_stamp(&self) -> std::io::Result<Stamp> {
        std::fs::symlink_metadata(&self.dir).map(|m| Stamp::of(&m))
    }

    /// Every readable entry; unreadable ones are reported through `skipped`.
    pub fn entries(
        &self,
        mut skipped: impl FnMut(&str, &str, ReadError),
    ) -> StateResult<Vec<Entry>> {
        let mut out = Vec::new();
        for (cid, ifname) in self.attachments()? {
            match self.read(&cid, &ifname) {
                Ok(e) => out.push(e),
                Err(err) => skipped(&cid, &ifname, err),
            }
        }
        Ok(out)
    }

    /// Take the exclusive lock of a device port (`RdmaPort::lock_key`),
    /// waiting until it is free; released when the guard drops or the
    /// process dies (flock), so a crash never leaves it held.
    pub fn lock(&self, key: &str) -> StateResult<DeviceLock> {
        self.lock_waiting(key, LockWait::Blocking)
    }

    /// [`StateDir::lock`], waiting as `wait` says: past a `Within` bound it
    /// is [`StateError::Busy`]. flock(2) has no timeout, so a bounded wait
    /// tries `LOCK_NB` again and again, 1 ms apart at first and at most
    /// [`LOCK_RETRY_MAX`], never sleeping past the bound (a signal to wake a
    /// blocked flock would be the whole process's, and the agent has threads).
    pub fn lock_waiting(&self, key: &str, wait: LockWait) -> StateResult<DeviceLock> {
        if !is_safe_component(key) {
            return Err(StateError::BadLockName);
        }
        let path = self.locks_dir()?.join(format!("{key}.lock"));
        let file = open_lock_file(&path).map_err(|e| io_err("open lock", &path, e))?;
        let bound = match wait {
            LockWait::Blocking => None,
            LockWait::Within(bound) => Some(bound),
            LockWait::Until(deadline) => {
                Some(deadline.saturating_duration_since(std::time::Instant::now()))
            }
        };
        match flock_within(file, bound) {
            Ok(f) => Ok(DeviceLock { _flock: f }),
            Err(Flocked::Busy(waited)) => Err(StateError::Busy { path, waited }),
            Err(Flocked::Os(e)) => Err(io_err("lock", &path, e)),
        }
    }

    /// Whether the dir can take a new entry (STATUS).
    pub fn probe_writable(&self) -> StateResult<()> {
        let probe = self
            .dir
            .join(format!(".status-probe{}", std::process::id()));
        let r = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&probe);
        let _ = std::fs::remove_file(&probe);
        r.map(|_| ())
            .map_err(|e| io_err("write to state dir", &self.dir, e))
    }
}

pub struct DeviceLock {
    _flock: nix::fcntl::Flock<File>,
}

/// A lock file of the state dir, made 0600 when missing, never through a
/// link; locked with `flock` by its users.
pub(crate) fn open_lock_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
}

/// `dir/name` holds `body` or what it held before, never half of either: a
/// temporary file (0600, never through a link), renamed over it. `durable`:
/// on disk before the rename, and the rename too (an entry; a cache that a
/// crash may lose need not pay the fsyncs).
pub(crate) fn write_atomically(
    dir: &Path,
    name: &str,
    body: &[u8],
    durable: bool,
) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp{}", crate::log::pid()));
    let result = (|| -> std::io::Result<()> {
        let create = || {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
                .open(&tmp)
        };
        // A temporary file left by a crashed process of the same pid goes
        // (only when there is one: an unlink first cost every ADD a call).
        let mut f = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&tmp)?;
                create()?
            }
            other => other?,
        };
        f.write_all(body)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, dir.join(name))?;
        if durable {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// How long a taker of a device lock waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    /// Until it is free: the CNI commands, whose runtime bounds each call
    /// (it kills the plugin past its timeout).
    Blocking,
    /// At most this long, then [`StateError::Busy`]: the agent and the orphan
    /// repair, which nothing else bounds; `Within(Duration::ZERO)` tries once.
    Within(Duration),
    /// Until this instant at most (tried once when it has passed): the NRI
    /// plugin's RunPodSandbox, whose whole answer has a budget
    /// (`nri::answer::Plugin::pod_event_budget`) that every lock it takes
    /// shares.
    Until(std::time::Instant),
}

impl LockWait {
    /// The agent's and the orphan repair's bound (docs/reliability.md, "A
    /// device lock held"): far above the longest an ADD or a DEL holds a
    /// lock here, and a tenth of the second SIGTERM may take.
    pub const REPAIR: LockWait = LockWait::Within(Duration::from_millis(100));
}

/// The longest pause between two tries of a bounded lock wait.
const LOCK_RETRY_MAX: Duration = Duration::from_millis(10);

/// Why `flock_within` got no lock.
pub(crate) enum Flocked {
    /// Still held by another when the bound passed, after this long.
    Busy(Duration),
    Os(nix::errno::Errno),
}

/// An exclusive `flock` of `file`, waited for until it is free (`None`) or
/// for at most `bound`, tried with pauses that double up to
/// `LOCK_RETRY_MAX` (`Some(Duration::ZERO)` tries once).
pub(crate) fn flock_within(
    file: File,
    bound: Option<Duration>,
) -> Result<nix::fcntl::Flock<File>, Flocked> {
    use nix::fcntl::{Flock, FlockArg};
    let Some(bound) = bound else {
        return Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| Flocked::Os(e));
    };
    let started = std::time::Instant::now();
    let mut file = file;
    let mut pause = Duration::from_millis(1);
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => return Ok(f),
            Err((f, nix::errno::Errno::EWOULDBLOCK | nix::errno::Errno::EINTR)) => file = f,
            Err((_, e)) => return Err(Flocked::Os(e)),
        }
        let left = bound.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(Flocked::Busy(started.elapsed()));
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(LOCK_RETRY_MAX);
    }
}

/// Nanoseconds since the epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A format 4 entry of a rail that owns its class (other modules' tests
    /// start from it too).
    pub(crate) fn entry(cid: &str) -> Entry {
        Entry {
            version: FORMAT,
            network: "rdma-vf".into(),
            container_id: cid.into(),
            ifname: "net1".into(),
            netns: "/var/run/netns/p".into(),
            netns_id: Some(NsId {
                dev: 4,
                ino: 4026532000,
            }),
            reach: Reach::Host,
            device: "mlx5_2".into(),
            port: 1,
            pci: Some("0000:0c:00.2".into()),
            guid: Some("506b:4b03:00f3:8a3e".into()),
            owned: [(
                "trafficClass".to_string(),
                Owned {
                    original: None,
                    written: 41,
                },
            )]
            .into(),
            device_info: None,
            pod: None,
            placement: None,
            gid: Some("0000:0000:0000:0000:0000:ffff:c0a8:0022".into()),
            rail: Some(RailRecord {
                gid_index: Some(3),
                traffic_class: Some(41),
                rdma_cm_tos: None,
            }),
            created_ns: 1,
        }
    }

    #[test]
    fn names_round_trip_and_refuse_foreign_files() {
        assert_eq!(entry_name("c1", "net1"), "c1:net1.state");
        assert_eq!(
            parse_entry_name("c1:net1.state"),
            Some(("c1".into(), "net1".into()))
        );
        assert_eq!(
            parse_entry_name("c1:net1.json"),
            Some(("c1".into(), "net1".into())),
            "version 1 files are still ours"
        );
        for bad in [
            "x.state",
            "c1:net1.state.corrupt",
            ".c1:net1.state.tmp1",
            "../c:n.state",
            "-c:n.state",
            "c:a/b.state",
        ] {
            assert_eq!(parse_entry_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn versions_decide_how_an_entry_is_read() {
        let e = entry("c1");
        let bytes = serde_json::to_vec(&e).unwrap();
        assert_eq!(decode(&bytes).unwrap(), e);
        let v1 = json!({"version": 1, "network": "rdma-vf", "containerId": "c1", "ifname": "net1",
            "netns": "/var/run/netns/p", "sysfsRoot": "/evil", "exclusive": false,
            "device": "mlx5_2", "port": 1, "original": 106, "written": 41, "created": 7});
        let old = decode(v1.to_string().as_bytes()).unwrap();
        assert_eq!(
            old.owned["trafficClass"],
            Owned {
                original: Some(106),
                written: 41
            }
        );
        assert_eq!(old.netns_id, None);
        assert_eq!(old.created_ns, 7_000_000_000);
        // Format 2: each setting a field of its own, `exclusive` for the reach.
        let mut v2 = serde_json::to_value(&e).unwrap();
        let m = v2.as_object_mut().unwrap();
        for new_in_3_or_4 in [
            "reach",
            "deviceInfo",
            "owned",
            "pod",
            "placement",
            "gid",
            "rail",
        ] {
            m.remove(new_in_3_or_4);
        }
        v2["version"] = json!(2);
        v2["exclusive"] = json!(true);
        v2["trafficClass"] = json!({"original": null, "written": 41});
        v2["rdmaCmTos"] = json!({"original": 0, "written": 106});
        let two = decode(v2.to_string().as_bytes()).unwrap();
        assert_eq!((two.version, two.reach), (2, Reach::Pod));
        assert_eq!(two.owned["trafficClass"], e.owned["trafficClass"]);
        assert_eq!(two.owned["rdmaCmTos"].written, 106);
        let newer = json!({"version": 5, "whatever": "a later binary wrote"});
        assert!(matches!(
            decode(newer.to_string().as_bytes()),
            Err(ReadError::Newer(what)) if what == "format 5"
        ));
        // A setting only a newer binary knows: left alone as newer, not corrupt.
        let mut later = serde_json::to_value(&e).unwrap();
        later["owned"]["laterSetting"] = json!({"original": 1500, "written": 9000});
        assert!(matches!(
            decode(later.to_string().as_bytes()),
            Err(ReadError::Newer(what)) if what == "the setting laterSetting"
        ));
        // serde would quote the bad value; the reason must not.
        let mut bad = serde_json::to_value(&e).unwrap();
        bad["port"] = json!("root:$6$secret");
        match decode(bad.to_string().as_bytes()) {
            Err(ReadError::Corrupt(why)) => assert!(!why.contains("secret"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut bad = serde_json::to_value(&e).unwrap();
        bad["device"] = json!("../../etc");
        assert!(matches!(
            decode(bad.to_string().as_bytes()),
            Err(ReadError::Corrupt(_))
        ));
    }

    /// Format 4 records a rail that owns nothing; format 3 (no `rail`) is
    /// read as it is; an entry with neither a rail nor anything to give back
    /// is not one of ours.
    #[test]
    fn a_rail_record_alone_is_an_entry() {
        let mut rail_only = entry("c1");
        rail_only.owned.clear();
        let bytes = serde_json::to_vec(&rail_only).unwrap();
        assert_eq!(decode(&bytes).unwrap(), rail_only);
        let mut v3 = serde_json::to_value(entry("c1")).unwrap();
        v3["version"] = json!(3);
        v3.as_object_mut().unwrap().remove("rail");
        let three = decode(v3.to_string().as_bytes()).unwrap();
        assert_eq!((three.version, three.rail), (3, None));
        assert_eq!(three.owned["trafficClass"].written, 41);
        let mut nothing = rail_only.clone();
        nothing.rail = None;
        assert!(matches!(
            decode(&serde_json::to_vec(&nothing).unwrap()),
            Err(ReadError::Corrupt(why)) if why.contains("no rail")
        ));
        let mut far = serde_json::to_value(&rail_only).unwrap();
        far["rail"]["gidIndex"] = json!(1024);
        assert!(matches!(
            decode(far.to_string().as_bytes()),
            Err(ReadError::Corrupt(why)) if why.contains("GID index")
        ));
        let mut odd = serde_json::to_value(&rail_only).unwrap();
        odd["rail"]["ncclIbHca"] = json!("mlx5_0");
        assert!(matches!(
            decode(odd.to_string().as_bytes()),
            Err(ReadError::Corrupt(_))
        ));
    }

    #[test]
    fn co_owners_are_matched_by_pci_function_before_name() {
        let a = entry("c1");
        let mut b = entry("c2");
        b.device = "mlx5_9".into();
        assert!(a.same_device(&b), "renamed: the PCI function decides");
        b.pci = Some("0000:0c:00.3".into());
        b.device = "mlx5_2".into();
        assert!(!a.same_device(&b), "the name moved to another function");
        assert_eq!(a.lock_key(), "0000:0c:00.2.1");
    }
}
