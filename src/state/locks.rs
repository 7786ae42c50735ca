//! The device locks: one `flock`ed file per device port in `locks/`,
//! taken before anything reads or writes the port's files, released when
//! the guard drops or the process dies.

use super::store::{io_err, StateDir, StateError, StateResult};
use crate::rdma::is_safe_component;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

impl StateDir {
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
