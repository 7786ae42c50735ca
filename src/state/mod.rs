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
//!
//! A file per concern: `entry` (the record and its rules), `migrations`
//! (reading every format), `store` (the dir and its entry files), `owners`
//! (the owner index of a device port) and `locks` (the device locks).

mod entry;
mod locks;
mod migrations;
mod owners;
mod store;

pub use entry::{
    now_ns, DeviceInfoFile, Entry, Owned, PlacementRecord, PodRecord, RailRecord, DRA_NETWORK,
    FORMAT, OWNER_INDEX_FORMAT,
};
pub(crate) use locks::{flock_within, open_lock_file, Flocked};
pub use locks::{DeviceLock, LockWait};
pub use migrations::{decode, ReadError};
pub(crate) use store::write_atomically;
pub use store::{
    both_entry_names, entry_name, is_entry_file, parse_entry_name, Stamp, StateDir, StateError,
    StateResult,
};

#[cfg(test)]
pub(crate) mod tests;
