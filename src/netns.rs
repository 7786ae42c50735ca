//! Work inside a pod's network namespace, by ONE rule: the calling thread
//! never changes namespace. `NetNs::run` runs a closure on a scoped thread
//! that enters the pod netns, and that thread dies with it. Everything a
//! thread does in the host's namespaces (the state dir, the host's sysfs, the
//! orphan repair) is therefore done by a thread that never left them.
//!
//! What needs the pod's netns: the sysctls (/proc/sys/net shows the netns of
//! the task that opens it), the netlink sockets (bound to the netns they are
//! opened in), the GID reads (MLNX_OFED hides GIDs of another netns from the
//! reader), and in exclusive RDMA mode the pod's sysfs, which is made on the
//! pod's thread as a detached mount (`sysfs::View::fresh_sysfs`) and then used
//! from any thread, so no thread's `/sys` is ever a pod's.
//!
//! A netns is known by the identity of its nsfs inode, not by its path: a
//! bind mount can be gone while its file stays, and a `/proc/<pid>/ns/net`
//! path can name another process's netns once the pid is reused.

use nix::sched::{setns, CloneFlags};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The identity of a netns: device and inode of its nsfs inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsId {
    pub dev: u64,
    pub ino: u64,
}

/// An opened netns: opening it once proves it is one and pins it.
pub struct NetNs {
    file: File,
    path: PathBuf,
    id: NsId,
}

/// What a path turned out to be.
pub enum Lookup {
    Netns(NetNs),
    Missing,
    /// It exists but is not a network namespace (a plain file left behind
    /// when the mount went, a directory, another kind of namespace).
    NotNetns,
}

/// `include/uapi/linux/magic.h`: the filesystem of namespace files.
const NSFS_MAGIC: i64 = 0x6e73_6673;

impl NetNs {
    /// Open `path` and prove it is a network namespace. A recorded path may
    /// name anything by now (a FIFO, whose plain open blocks until a writer
    /// comes; a device node, whose open has side effects), so it is first
    /// opened with O_PATH, which neither blocks nor touches what it names,
    /// and must be on nsfs; only then is the namespace file itself opened
    /// (through /proc/self/fd: setns and NS_GET_NSTYPE refuse O_PATH
    /// descriptors) and asked its type (NS_GET_NSTYPE).
    pub fn lookup(path: &Path) -> Result<Lookup, NsError> {
        let fail = |err: std::io::Error| NsError::Open {
            path: path.to_owned(),
            err,
        };
        let probe = match OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_PATH | nix::libc::O_CLOEXEC)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if crate::is_missing(&e) => return Ok(Lookup::Missing),
            Err(e) => return Err(fail(e)),
        };
        match nix::sys::statfs::fstatfs(&probe) {
            Ok(st) if st.filesystem_type().0 == NSFS_MAGIC => {}
            Ok(_) => return Ok(Lookup::NotNetns),
            Err(e) => return Err(fail(e.into())),
        }
        let file = File::open(format!("/proc/self/fd/{}", probe.as_raw_fd())).map_err(fail)?;
        // SAFETY: an ioctl without arguments on a descriptor we own.
        let kind = unsafe { nix::libc::ioctl(file.as_raw_fd(), nix::libc::NS_GET_NSTYPE) };
        if kind != nix::libc::CLONE_NEWNET {
            return Ok(Lookup::NotNetns);
        }
        let meta = file.metadata().map_err(fail)?;
        let id = NsId {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        Ok(Lookup::Netns(NetNs {
            file,
            path: path.to_owned(),
            id,
        }))
    }

    /// The netns an entry recorded, if it is still that one: the same path
    /// and the same nsfs inode. `None` means gone: missing, not a network
    /// namespace, or another one. An entry without an identity (written by
    /// 0.1.0) is alive while its path is a network namespace.
    pub fn still(path: &Path, id: Option<NsId>) -> Result<Option<NetNs>, NsError> {
        Ok(match Self::lookup(path)? {
            Lookup::Netns(ns) if id.is_none_or(|id| id == ns.id) => Some(ns),
            _ => None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn id(&self) -> NsId {
        self.id
    }

    /// Run `f` on a thread inside this netns; the thread dies afterwards, so
    /// the caller's thread never changes namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, NsError> {
        self.run_beside(f, || ()).map(|(t, ())| t)
    }

    /// `run_beside` over dyn closures: one instance of the scoped-thread
    /// machinery shared by every caller that takes it (each closure type
    /// given to the generic one is kilobytes of the one binary; measured
    /// with `make release`, 2,944 bytes for ADD's second trip alone).
    pub fn run_dyn(
        &self,
        there: &mut (dyn FnMut() + Send),
        here: &mut dyn FnMut(),
    ) -> Result<(), NsError> {
        self.run_beside(there, here).map(|_| ())
    }

    /// `run_dyn` with nothing to do beside: a closure's result is written
    /// into a variable it borrows.
    pub fn run_there(&self, there: &mut (dyn FnMut() + Send)) -> Result<(), NsError> {
        self.run_dyn(there, &mut || {})
    }

    /// `run`, doing `beside` on the calling thread, in the host's namespaces,
    /// while the pod's thread works: host work the pod's work does not need,
    /// done by the time this returns, instead of waiting idle for the thread.
    pub fn run_beside<T: Send, U>(
        &self,
        f: impl FnOnce() -> T + Send,
        beside: impl FnOnce() -> U,
    ) -> Result<(T, U), NsError> {
        std::thread::scope(|s| {
            let pod = s.spawn(|| {
                setns(&self.file, CloneFlags::CLONE_NEWNET).map_err(|errno| NsError::Enter {
                    path: self.path.clone(),
                    errno,
                })?;
                Ok(f())
            });
            let here = beside();
            let there = pod.join().unwrap_or(Err(NsError::Panicked))?;
            Ok((there, here))
        })
    }
}

/// Why a netns could not be used. Callers turn it into their own error.
#[derive(Debug)]
pub enum NsError {
    /// Opening or examining the path failed (not "missing": that is a Lookup).
    Open { path: PathBuf, err: std::io::Error },
    /// setns(2) refused it.
    Enter {
        path: PathBuf,
        errno: nix::errno::Errno,
    },
    /// The worker thread panicked.
    Panicked,
}

impl std::fmt::Display for NsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NsError::Open { path, err } => write!(f, "open netns {}: {err}", path.display()),
            NsError::Enter { path, errno } => {
                write!(f, "enter netns {}: {}", path.display(), errno.desc())
            }
            NsError::Panicked => f.write_str("a netns worker thread panicked"),
        }
    }
}

impl std::error::Error for NsError {}
