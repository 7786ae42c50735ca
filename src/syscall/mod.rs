//! The seam between roce-tune's rules and the host they act on, for what
//! the sysfs views do not cover: a trip into a pod's netns, what rtnetlink
//! and RDMA netlink answer on that trip's thread (the pod's link, its
//! addresses, the RDMA port that carries it), the `/proc/sys` that thread
//! sees, and the trust of the node's own directories (the state dir).
//!
//! The rules that use these take a `&dyn Syscall`, as youki's container
//! code takes its `Syscall`: the CNI commands, one rail's tuning
//! (`rail::Rail::sys`), the lookup of a netdev's port and the agent's pass.
//! Both binaries pass [`KERNEL`], the real host; unit tests pass a test host
//! (`tests::TestHost`, built only under `cfg(test)`) that answers from tables and
//! plain files, so those rules run without root or a netns
//! (`make unit-unprivileged`). The kernel's side is proven where it runs:
//! the integration tests (a real netns, veths, the reference plugins) and
//! the kernel lane (soft-RoCE).
//!
//! The sysfs and configfs files stay behind `sysfs::View`, whose host (the
//! kernel or a test tree) is chosen once, by the root a view is opened on
//! (`sysfs::host`): a test tree is plain files the kernel's code reads
//! unchanged, so it needs no second implementation of the reads and
//! writes, only of the few answers that differ (docs/design.md, "Test
//! trees").

use crate::netlink::nldev::{self, Answer};
use crate::netlink::{self, Link, Netlink};
use crate::netns::{NetNs, NsError};
use crate::safe_dir::{self, DirError};
use std::fs::Metadata;
use std::net::IpAddr;
use std::path::Path;

/// What roce-tune asks of the host beyond its sysfs (see the module's
/// comment). Each method is asked from the thread the caller is on: the
/// netlink questions and `/proc/sys` answer for that thread's netns, so
/// they are asked from inside a [`Syscall::trip`].
pub trait Syscall: Sync {
    /// Runs `there` on a thread inside `ns` while `here` runs on the
    /// calling thread (`NetNs::run_dyn`: the calling thread never enters).
    fn trip(
        &self,
        ns: &NetNs,
        there: &mut (dyn FnMut() + Send),
        here: &mut dyn FnMut(),
    ) -> Result<(), NsError>;

    /// The link named `name` (rtnetlink, RTM_GETLINK).
    fn link_by_name(&self, name: &str) -> Result<Option<Link>, netlink::Error>;

    /// The addresses on the link `index` (rtnetlink, RTM_GETADDR).
    fn addresses(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, netlink::Error>;

    /// Which RDMA port carries `link` (RDMA netlink, `nldev::ask_port`);
    /// `hint` is the device asked first.
    fn rdma_port(&self, link: &Link, hint: Option<&str>) -> Result<Answer, String>;

    /// Where the sysctls of the calling thread's netns are (`/proc/sys`).
    fn proc_sys(&self) -> &Path;

    /// `dir` and every ancestor checked as a directory of the node's own,
    /// made when missing and `create` (`safe_dir::check_chain`).
    fn own_dir(&self, dir: &Path, create: bool) -> Result<Option<Metadata>, DirError>;

    /// A trip with nothing to do beside it.
    fn run_there(&self, ns: &NetNs, there: &mut (dyn FnMut() + Send)) -> Result<(), NsError> {
        self.trip(ns, there, &mut || {})
    }
}

/// The host roce-tune runs on: the kernel's netns, netlink and procfs, and
/// root's directories.
pub struct Kernel;

/// What both binaries pass.
pub static KERNEL: Kernel = Kernel;

impl Syscall for Kernel {
    fn trip(
        &self,
        ns: &NetNs,
        there: &mut (dyn FnMut() + Send),
        here: &mut dyn FnMut(),
    ) -> Result<(), NsError> {
        ns.run_dyn(there, here)
    }

    fn link_by_name(&self, name: &str) -> Result<Option<Link>, netlink::Error> {
        Netlink::open()?.link_by_name(name)
    }

    fn addresses(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, netlink::Error> {
        Netlink::open()?.addresses(index)
    }

    fn rdma_port(&self, link: &Link, hint: Option<&str>) -> Result<Answer, String> {
        nldev::ask_port(link, hint)
    }

    fn proc_sys(&self) -> &Path {
        Path::new("/proc/sys")
    }

    fn own_dir(&self, dir: &Path, create: bool) -> Result<Option<Metadata>, DirError> {
        safe_dir::check_chain(dir, create)
    }
}

#[cfg(test)]
pub(crate) mod tests;
