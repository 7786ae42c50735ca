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

use crate::cni::{code, CniError, CniResult};
use nix::sched::{setns, CloneFlags};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
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

impl NetNs {
    /// Open `path` and prove it is a network namespace (NS_GET_NSTYPE).
    pub fn lookup(path: &Path) -> CniResult<Lookup> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if crate::is_missing(&e) => return Ok(Lookup::Missing),
            Err(e) => return Err(CniError::io(format!("open netns {}", path.display()), e)),
        };
        // SAFETY: an ioctl without arguments on a descriptor we own.
        let kind = unsafe { nix::libc::ioctl(file.as_raw_fd(), nix::libc::NS_GET_NSTYPE) };
        if kind != nix::libc::CLONE_NEWNET {
            return Ok(Lookup::NotNetns);
        }
        let meta = file
            .metadata()
            .map_err(|e| CniError::io(format!("stat netns {}", path.display()), e))?;
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

    /// CNI_NETNS of ADD and CHECK: it must exist and be a network namespace.
    pub fn open_required(path: &Path) -> CniResult<NetNs> {
        match Self::lookup(path)? {
            Lookup::Netns(ns) => Ok(ns),
            Lookup::Missing => Err(CniError::new(
                code::CONTAINER_UNKNOWN,
                format!(
                    "netns {} does not exist: the pod sandbox is gone or CNI_NETNS is wrong",
                    path.display()
                ),
            )),
            Lookup::NotNetns => Err(CniError::env(format!(
                "CNI_NETNS {} is not a network namespace (neither an nsfs bind mount nor /proc/<pid>/ns/net)",
                path.display()
            ))),
        }
    }

    /// The netns an entry recorded, if it is still that one: the same path
    /// and the same nsfs inode. `None` means gone: missing, not a network
    /// namespace, or another one. An entry without an identity (written by
    /// 0.1.0) is alive while its path is a network namespace.
    pub fn still(path: &Path, id: Option<NsId>) -> CniResult<Option<NetNs>> {
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
    pub fn run<T: Send>(&self, f: impl FnOnce() -> CniResult<T> + Send) -> CniResult<T> {
        std::thread::scope(|s| {
            s.spawn(|| {
                setns(&self.file, CloneFlags::CLONE_NEWNET)
                    .map_err(|e| CniError::io(format!("enter netns {}", self.path.display()), e))?;
                f()
            })
            .join()
            .unwrap_or_else(|_| {
                Err(CniError::new(
                    code::IO_FAILURE,
                    "a netns worker thread panicked",
                ))
            })
        })
    }
}
