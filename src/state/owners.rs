//! The owner index of the state dir: which attachments own a device
//! port's files, one empty file each beside the port's lock.

use super::store::{io_err, StateDir, StateError, StateResult};
use crate::cni::env::{validate_container_id, validate_ifname};
use crate::rdma::is_safe_component;
use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

impl StateDir {
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

    pub(super) fn mark_owner(
        &self,
        lock_key: &str,
        container_id: &str,
        ifname: &str,
    ) -> StateResult<()> {
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

    pub(super) fn unmark_owner(&self, lock_key: &str, container_id: &str, ifname: &str) {
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
}
