//! The state dir: the only record of what a device's traffic class was before
//! a pod. One JSON file per attachment, `<containerID>:<ifname>.json` (':' is
//! in neither, so names never collide), written atomically (temp file, fsync,
//! rename, fsync dir) before the class is changed. A per-device lock file in
//! `locks/` serialises everything that reads or writes a device's class.
//!
//! Hostile-node rules: the dir is created 0700 and refused if it is a link or
//! writable by others; files are 0600, opened with O_NOFOLLOW, and only names
//! built from validated identifiers are ever opened.

use crate::cni::env::{validate_container_id, validate_ifname};
use crate::cni::{code, CniError, CniResult};
use crate::rdma::is_safe_component;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Bumped when the entry's meaning changes; older entries are still read.
pub const STATE_VERSION: u32 = 1;
/// A state entry is a few hundred bytes; anything larger is not ours.
const MAX_ENTRY_BYTES: u64 = 64 * 1024;

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
    /// The pod netns path at ADD: orphan repair checks whether it still exists.
    pub netns: String,
    pub sysfs_root: PathBuf,
    /// The device was inside the pod (exclusive mode): reach it through a
    /// sysfs mounted in the pod netns while the pod lives.
    pub exclusive: bool,
    pub device: String,
    pub port: u32,
    /// The class before the first ADD; `None` = unset.
    pub original: Option<u8>,
    /// What roce-tune wrote; DEL restores only if the file still holds it.
    pub written: u8,
    /// Seconds since the epoch, for the log and for ordering co-owners.
    pub created: u64,
}

impl Entry {
    /// Refuse an entry whose fields could steer a write somewhere else.
    pub fn validate(&self) -> Result<(), String> {
        validate_container_id(&self.container_id).map_err(|e| e.msg)?;
        validate_ifname(&self.ifname).map_err(|e| e.msg)?;
        if !is_safe_component(&self.device) {
            return Err(format!("device {:?} is not a device name", self.device));
        }
        if self.port == 0 || self.port > 255 {
            return Err(format!("port {} is out of range", self.port));
        }
        let root_ok = self.sysfs_root.is_absolute()
            && self
                .sysfs_root
                .components()
                .all(|c| !matches!(c, std::path::Component::ParentDir));
        if !root_ok {
            return Err(format!(
                "sysfsRoot {} is not a clean absolute path",
                self.sysfs_root.display()
            ));
        }
        Ok(())
    }

    /// The same device port (co-owners share one traffic class file).
    pub fn same_device(&self, other: &Entry) -> bool {
        self.device == other.device
            && self.port == other.port
            && self.sysfs_root == other.sysfs_root
    }
}

/// Why an entry could not be read.
#[derive(Debug)]
pub enum ReadError {
    Missing,
    /// Present but not trustworthy: not a regular file, too large, or not an entry.
    Corrupt(String),
    Io(std::io::Error),
}

pub struct StateDir {
    dir: PathBuf,
}

/// `<containerID>:<ifname>.json`, from identifiers validated by the caller.
pub fn entry_name(container_id: &str, ifname: &str) -> String {
    format!("{container_id}:{ifname}.json")
}

/// The attachment a file name stands for, if it is one of ours.
pub fn parse_entry_name(name: &str) -> Option<(String, String)> {
    let stem = name.strip_suffix(".json")?;
    let (cid, ifname) = stem.split_once(':')?;
    (validate_container_id(cid).is_ok() && validate_ifname(ifname).is_ok())
        .then(|| (cid.to_owned(), ifname.to_owned()))
}

fn io_err(what: &str, path: &Path, e: impl std::fmt::Display) -> CniError {
    CniError::io(format!("{what} {}", path.display()), e)
}

impl StateDir {
    /// Open the state dir, creating it (0700) when `create`. `Ok(None)` when
    /// it does not exist and `create` is false (DEL without state: nothing to do).
    pub fn open(dir: &Path, create: bool) -> CniResult<Option<StateDir>> {
        if create {
            // Only the dir itself here: `locks/` is made after the checks
            // below, so nothing is created through a link or in an open dir.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| io_err("create state dir", dir, e))?;
        }
        let meta = match std::fs::symlink_metadata(dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("stat state dir", dir, e)),
        };
        if !meta.file_type().is_dir() {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!("state dir {} is not a directory (a link or a file?): remove it or set stateDir", dir.display()),
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!(
                    "state dir {} is writable by group or others (mode {:o}): others could plant entries; chmod 700 it",
                    dir.display(),
                    meta.mode() & 0o777
                ),
            ));
        }
        if create {
            match std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir.join("locks"))
            {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(io_err("create state dir", &dir.join("locks"), e))
                }
                _ => {}
            }
        }
        Ok(Some(StateDir {
            dir: dir.to_owned(),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Read the entry of an attachment.
    pub fn read(&self, container_id: &str, ifname: &str) -> Result<Entry, ReadError> {
        self.read_name(&entry_name(container_id, ifname))
    }

    fn read_name(&self, name: &str) -> Result<Entry, ReadError> {
        let path = self.dir.join(name);
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc_flags::O_NOFOLLOW | libc_flags::O_NONBLOCK)
            .open(&path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
            Err(e) if e.raw_os_error() == Some(libc_flags::ELOOP) => {
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
        let mut buf = Vec::with_capacity(meta.len() as usize);
        Read::by_ref(&mut file)
            .take(MAX_ENTRY_BYTES)
            .read_to_end(&mut buf)
            .map_err(ReadError::Io)?;
        let entry: Entry = serde_json::from_slice(&buf)
            .map_err(|e| ReadError::Corrupt(format!("it is not a state entry: {e}")))?;
        entry.validate().map_err(ReadError::Corrupt)?;
        if entry_name(&entry.container_id, &entry.ifname) != name {
            return Err(ReadError::Corrupt(
                "its content names another attachment".into(),
            ));
        }
        Ok(entry)
    }

    /// Write an entry atomically: a crash leaves either the old file or the
    /// new one, never half of one.
    pub fn write(&self, entry: &Entry) -> CniResult<()> {
        let name = entry_name(&entry.container_id, &entry.ifname);
        let tmp = self.dir.join(format!(".{name}.tmp{}", std::process::id()));
        let path = self.dir.join(&name);
        let body =
            serde_json::to_vec_pretty(entry).map_err(|e| io_err("encode state", &path, e))?;
        let _ = std::fs::remove_file(&tmp);
        let result = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc_flags::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err("write state", &path, e));
        }
        Ok(())
    }

    /// Remove an attachment's entry; a missing one is fine.
    pub fn remove(&self, container_id: &str, ifname: &str) -> CniResult<()> {
        let path = self.dir.join(entry_name(container_id, ifname));
        match std::fs::remove_file(&path) {
            Ok(()) => {
                let _ = File::open(&self.dir).and_then(|d| d.sync_all());
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove state", &path, e)),
        }
    }

    /// Move an untrustworthy entry aside (kept for the operator, never used).
    pub fn quarantine(&self, container_id: &str, ifname: &str) -> CniResult<PathBuf> {
        let name = entry_name(container_id, ifname);
        let to = self.dir.join(format!("{name}.corrupt"));
        std::fs::rename(self.dir.join(&name), &to)
            .map_err(|e| io_err("move aside corrupt state", &to, e))?;
        Ok(to)
    }

    /// Every attachment with an entry file (names only; files that are not
    /// ours are skipped, never opened).
    pub fn attachments(&self) -> CniResult<Vec<(String, String)>> {
        let rd =
            std::fs::read_dir(&self.dir).map_err(|e| io_err("list state dir", &self.dir, e))?;
        let mut out: Vec<_> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(parse_entry_name))
            .collect();
        out.sort();
        Ok(out)
    }

    /// Every readable entry; unreadable ones are reported through `skipped`.
    pub fn entries(&self, mut skipped: impl FnMut(&str, &str, ReadError)) -> CniResult<Vec<Entry>> {
        let mut out = Vec::new();
        for (cid, ifname) in self.attachments()? {
            match self.read(&cid, &ifname) {
                Ok(e) => out.push(e),
                Err(err) => skipped(&cid, &ifname, err),
            }
        }
        Ok(out)
    }

    /// Take the exclusive lock of a device port; released when the guard drops
    /// or the process dies (flock), so a crash never leaves it held.
    pub fn lock_device(&self, device: &str, port: u32) -> CniResult<DeviceLock> {
        if !is_safe_component(device) {
            return Err(CniError::new(
                code::RDMA_DEVICE,
                format!("device name {device:?} is not safe to lock"),
            ));
        }
        let locks = self.dir.join("locks");
        let path = locks.join(format!("{device}.{port}.lock"));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&locks);
        // O_NOFOLLOW guards only the last component: a planted `locks` link
        // would put the lock file wherever it points.
        if !std::fs::symlink_metadata(&locks).is_ok_and(|m| m.file_type().is_dir()) {
            return Err(CniError::new(
                code::IO_FAILURE,
                format!(
                    "{} is not a directory (a link?): remove it",
                    locks.display()
                ),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc_flags::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| io_err("open lock", &path, e))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map(|f| DeviceLock { _flock: f })
            .map_err(|(_, e)| io_err("lock", &path, e))
    }

    /// Whether the dir can take a new entry (STATUS).
    pub fn probe_writable(&self) -> CniResult<()> {
        let probe = self
            .dir
            .join(format!(".status-probe{}", std::process::id()));
        let r = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_flags::O_NOFOLLOW)
            .open(&probe);
        let _ = std::fs::remove_file(&probe);
        r.map(|_| ())
            .map_err(|e| io_err("write to state dir", &self.dir, e))
    }
}

pub struct DeviceLock {
    _flock: nix::fcntl::Flock<File>,
}

/// The few libc constants used here (nix re-exports libc).
mod libc_flags {
    pub const O_NOFOLLOW: i32 = nix::libc::O_NOFOLLOW;
    pub const O_NONBLOCK: i32 = nix::libc::O_NONBLOCK;
    pub const ELOOP: i32 = nix::libc::ELOOP;
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn is_private(path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rt-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn entry(cid: &str) -> Entry {
        Entry {
            version: STATE_VERSION,
            network: "rdma-vf".into(),
            container_id: cid.into(),
            ifname: "net1".into(),
            netns: "/var/run/netns/p".into(),
            sysfs_root: "/sys".into(),
            exclusive: false,
            device: "mlx5_2".into(),
            port: 1,
            original: None,
            written: 41,
            created: 1,
        }
    }

    #[test]
    fn names_round_trip_and_refuse_foreign_files() {
        assert_eq!(entry_name("c1", "net1"), "c1:net1.json");
        assert_eq!(
            parse_entry_name("c1:net1.json"),
            Some(("c1".into(), "net1".into()))
        );
        for bad in [
            "x.json",
            "c1:net1.json.corrupt",
            ".c1:net1.json.tmp1",
            "../c:n.json",
            "-c:n.json",
            "c:a/b.json",
        ] {
            assert_eq!(parse_entry_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn write_read_remove_with_private_modes() {
        let d = dir("rw");
        let s = StateDir::open(&d, true).unwrap().unwrap();
        assert!(is_private(&d));
        let e = entry("c1");
        s.write(&e).unwrap();
        assert!(is_private(&d.join("c1:net1.json")));
        assert_eq!(s.read("c1", "net1").unwrap(), e);
        assert_eq!(
            s.attachments().unwrap(),
            vec![("c1".to_string(), "net1".to_string())]
        );
        s.remove("c1", "net1").unwrap();
        s.remove("c1", "net1").unwrap();
        assert!(matches!(s.read("c1", "net1"), Err(ReadError::Missing)));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn links_and_garbage_are_corrupt_not_followed() {
        let d = dir("evil");
        let s = StateDir::open(&d, true).unwrap().unwrap();
        let target = d.join("target.json");
        std::fs::write(&target, serde_json::to_vec(&entry("c1")).unwrap()).unwrap();
        std::os::unix::fs::symlink(&target, d.join("c1:net1.json")).unwrap();
        assert!(matches!(s.read("c1", "net1"), Err(ReadError::Corrupt(_))));
        std::fs::write(d.join("c2:net1.json"), b"{garbage").unwrap();
        assert!(matches!(s.read("c2", "net1"), Err(ReadError::Corrupt(_))));
        // content naming another attachment
        std::fs::write(
            d.join("c3:net1.json"),
            serde_json::to_vec(&entry("c1")).unwrap(),
        )
        .unwrap();
        assert!(matches!(s.read("c3", "net1"), Err(ReadError::Corrupt(_))));
        // a device name that climbs
        let mut e = entry("c4");
        e.device = "../../etc".into();
        std::fs::write(d.join("c4:net1.json"), serde_json::to_vec(&e).unwrap()).unwrap();
        assert!(matches!(s.read("c4", "net1"), Err(ReadError::Corrupt(_))));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn world_writable_or_linked_dir_is_refused() {
        let d = dir("perm");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(StateDir::open(&d, false).err().unwrap().code, 5);
        let l = dir("link");
        std::os::unix::fs::symlink(&d, &l).unwrap();
        assert!(StateDir::open(&l, false).is_err());
        assert!(StateDir::open(&dir("absent"), false).unwrap().is_none());
        std::fs::remove_file(&l).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
