//! The state dir and its entry files: proved the node's own before use,
//! read and written by an attachment's name, listed and stamped for the
//! readers that follow it.

use super::entry::Entry;
use super::migrations::{decode, ReadError};
use crate::cni::env::{validate_container_id, validate_ifname};
use crate::safe_dir::DirError;
use crate::syscall::{Syscall, KERNEL};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A state entry is a few hundred bytes; anything larger is not ours.
const MAX_ENTRY_BYTES: u64 = 64 * 1024;
const SUFFIX: &str = ".state";
/// Version 1 (0.1.0) entries.
const LEGACY_SUFFIX: &str = ".json";

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
    pub(super) dir: PathBuf,
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

pub(super) fn io_err(what: &str, path: &Path, err: impl Into<std::io::Error>) -> StateError {
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

/// The state dir this process last proved (`StateDir::open`).
static PROVED: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

impl StateDir {
    /// The state dir, made (0700) when missing: ADD, STATUS.
    pub fn create(dir: &Path) -> StateResult<StateDir> {
        Self::create_on(&KERNEL, dir)
    }

    /// The state dir if it exists: `Ok(None)` when it does not (DEL without
    /// state: nothing to do).
    pub fn existing(dir: &Path) -> StateResult<Option<StateDir>> {
        Self::open(&KERNEL, dir, false)
    }

    /// `create`, its trust asked of `sys` (the CNI commands' host).
    pub fn create_on(sys: &dyn Syscall, dir: &Path) -> StateResult<StateDir> {
        Self::open(sys, dir, true)?.ok_or_else(|| refused(dir, "it vanished as it was made".into()))
    }

    /// `existing`, its trust asked of `sys`.
    pub fn existing_on(sys: &dyn Syscall, dir: &Path) -> StateResult<Option<StateDir>> {
        Self::open(sys, dir, false)
    }

    fn open(sys: &dyn Syscall, dir: &Path, create: bool) -> StateResult<Option<StateDir>> {
        // Every ancestor, from the root down, then the dir itself: a parent
        // that others can write lets them swap the dir for their own.
        let meta = match sys.own_dir(dir, create) {
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
    pub(super) fn locks_dir(&self) -> StateResult<PathBuf> {
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
