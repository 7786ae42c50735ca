//! How a rail's RDMA device is reached, decided once per command: through the
//! host's sysfs (shared RDMA netns mode: every netns sees every device), or
//! through the sysfs the pod's own netns sees (exclusive mode: the rdma
//! plugin moved the device into the pod, and it vanished from the host's
//! sysfs). docs/design.md, "RDMA netns modes".
//!
//! "The sysfs the pod's netns sees" is the kernel's answer from inside the
//! pod, and it is also what proves which PCI function the pod's netdev is
//! (`class/net/<ifname>/device`): the device roce-tune touches is the one the
//! kernel shows the pod, never one a config names. On the kernel it is a
//! fresh sysfs instance made by a thread inside the pod netns (a sysfs shows
//! the netns of whoever creates it); on a test tree, which stands for the
//! kernel, it is `<root>/netns/<inode of the pod's nsfs file>/`.

use super::NetnsMode;
use crate::netns::{NetNs, NsError, NsId};
use crate::sysfs::{SysfsError, SysfsResult, View};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where a rail's device files are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reach {
    /// The host's sysfs (shared mode).
    Host,
    /// The sysfs of the pod's netns (exclusive mode).
    Pod,
}

impl Reach {
    /// What the RDMA netns mode of `host` implies.
    pub fn of(host: &View) -> Reach {
        match NetnsMode::read(host) {
            NetnsMode::Exclusive => Reach::Pod,
            NetnsMode::Shared => Reach::Host,
        }
    }
}

/// The node's sysfs: the host's view, through whose seam (`sysfs::Host`:
/// the kernel, or a test tree holding each pod's view under `netns/`) every
/// pod's view is made.
#[derive(Debug)]
pub struct Sysfs {
    host: View,
}

impl Sysfs {
    pub fn open(root: &Path) -> SysfsResult<Sysfs> {
        Ok(Sysfs {
            host: View::open(root)?,
        })
    }

    pub fn from_view(host: View) -> Sysfs {
        Sysfs { host }
    }

    pub fn host(&self) -> &View {
        &self.host
    }

    pub fn reach(&self) -> Reach {
        Reach::of(&self.host)
    }

    /// The sysfs the netns `ns` sees. On the kernel: a fresh instance, which
    /// shows the netns of the CALLING thread, so call this on a thread inside
    /// that netns (`NetNs::run`); `label` names it in messages. On a test
    /// tree: `netns/<inode>/`, from any thread; `None` when the tree gives
    /// that netns nothing.
    pub fn pod_side(&self, ns: NsId, label: &str) -> SysfsResult<Option<View>> {
        #[cfg(feature = "fault-injection")]
        if crate::fault::refused("pod-sysfs") {
            return Err(SysfsError::Os(nix::errno::Errno::EPERM));
        }
        self.host.host().pod_view(&self.host, ns, label)
    }
}

impl Sysfs {
    /// `pod_side` of a live netns from any thread: on the kernel the sysfs
    /// is made on a thread inside `ns` (the one netns rule: this thread
    /// never enters it), on a test tree it is opened here.
    pub fn pod_side_of(&self, ns: &NetNs) -> SysfsResult<Option<View>> {
        let label = format!("<sysfs of netns {}>", ns.path().display());
        let mut made = None;
        let host = self.host.host();
        match host.pod_view_thread(ns, &mut || made = Some(self.pod_side(ns.id(), &label))) {
            Ok(()) => made.unwrap_or(Err(SysfsError::Os(nix::errno::Errno::EIO))),
            Err(e) => Err(SysfsError::Os(enter_errno(&e))),
        }
    }
}

fn enter_errno(e: &NsError) -> nix::errno::Errno {
    match e {
        NsError::Enter { errno, .. } => *errno,
        NsError::Open { err, .. } => {
            nix::errno::Errno::from_raw(err.raw_os_error().unwrap_or(nix::libc::EIO))
        }
        NsError::Panicked => nix::errno::Errno::EIO,
    }
}

/// The pod's side, made when first needed: a fresh sysfs costs a mount (and
/// shared mode on the kernel rarely needs one: rtnetlink's parent device
/// answers), a test tree's is a directory.
pub struct PodSide<'a> {
    sysfs: &'a Sysfs,
    ns: NsId,
    label: String,
    made: Option<Option<View>>,
}

impl<'a> PodSide<'a> {
    /// On the kernel, use it only on a thread inside the netns `ns`.
    pub fn new(sysfs: &'a Sysfs, ns: NsId, label: String) -> PodSide<'a> {
        PodSide {
            sysfs,
            ns,
            label,
            made: None,
        }
    }

    pub fn sysfs(&self) -> &'a Sysfs {
        self.sysfs
    }

    /// The view, `None` for a test tree that gives the netns nothing.
    pub fn view(&mut self) -> SysfsResult<Option<&View>> {
        if self.made.is_none() {
            self.made = Some(self.sysfs.pod_side(self.ns, &self.label)?);
        }
        Ok(self.made.as_ref().and_then(Option::as_ref))
    }

    /// The view, to keep after the trip (a pod's fresh sysfs works from any
    /// thread once made).
    pub fn into_view(mut self) -> SysfsResult<Option<View>> {
        self.view()?;
        Ok(self.made.flatten())
    }
}
