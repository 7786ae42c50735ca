//! The seam between roce-tune and the host behind a sysfs root: the kernel
//! (`/sys`, or a sysfs a thread in a pod's netns made) or a test tree, a
//! plain directory standing in for it (docs/design.md, "Test trees"). The
//! host is chosen once, when a root is opened (`View::open`), and every view
//! opened beneath that root, cloned from it or made for a pod keeps it.
//! Callers ask the seam to do the thing whose doing differs (check an opened
//! file, make a pod's view, name a netdev's bus, word inspect's lines) and
//! never which host it is: every difference between the two lives in this
//! file, each method's two answers side by side. `tests/it/layers.rs` fails
//! when a file of src/ outside this one asks.
//!
//! An enum with its two behaviours here, not a trait with an impl per host:
//! the hosts are two and fixed (a tree models the kernel, nothing else stands
//! behind a root), a reader checks that the tree answers as the kernel would
//! by reading the two arms together, and the value is `Copy` inside every
//! `View`, with no box, vtable or lifetime. Its kind is private: outside this
//! file a `Host` can be used, never matched.

use super::{SysfsError, SysfsResult, View};
use crate::netns::{NetNs, NsError, NsId};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// `include/uapi/linux/magic.h`.
const SYSFS_MAGIC: i64 = 0x6265_6572;
const CONFIGFS_MAGIC: i64 = 0x6265_6570;

/// What stands behind a sysfs root (see the module's comment).
#[derive(Debug, Clone, Copy)]
pub struct Host(Kind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The kernel's sysfs: the host's `/sys`, or a pod's fresh instance.
    Kernel,
    /// A directory laid out like sysfs, each pod netns's view beneath it.
    TestTree,
}

impl Host {
    /// The host behind `root`: the kernel when `root` is `/sys`, a test
    /// tree anywhere else (the node config's `sysfsRoot`).
    pub(super) fn of_root(root: &Path) -> Host {
        if root == Path::new("/sys") {
            Host(Kind::Kernel)
        } else {
            Host(Kind::TestTree)
        }
    }

    /// A sysfs instance the kernel just made (`View::fresh_sysfs`).
    pub(super) fn kernel() -> Host {
        Host(Kind::Kernel)
    }

    /// Whether `fd`, opened at `rel` beneath the root, is a file of this
    /// host. The kernel's must be on sysfs (on configfs under
    /// `kernel/config`), checked with `fstatfs` on the descriptor that is
    /// then read or written: a mount over part of `/sys` is no kernel
    /// attribute. A test tree is plain files, which the no-follow rules
    /// already hold beneath its root (docs/design.md, "Who writes what").
    pub(super) fn verify(self, fd: &impl AsFd, rel: &Path) -> SysfsResult<()> {
        match self.0 {
            Kind::TestTree => Ok(()),
            Kind::Kernel => {
                let (magic, expected) = if rel.starts_with("kernel/config") {
                    (CONFIGFS_MAGIC, "configfs")
                } else {
                    (SYSFS_MAGIC, "sysfs")
                };
                let st = nix::sys::statfs::fstatfs(fd).map_err(SysfsError::Os)?;
                if st.filesystem_type().0 as i64 != magic {
                    return Err(SysfsError::WrongFilesystem { expected });
                }
                Ok(())
            }
        }
    }

    /// The sysfs the netns `ns` sees, `root` being the host's view. On the
    /// kernel: a fresh instance, which shows the netns of the CALLING
    /// thread, so call this on a thread inside `ns` (`pod_view_thread`);
    /// `label` names it in messages. On a test tree: `netns/<inode>/`
    /// beneath `root`, from any thread; `None` when the tree gives that
    /// netns nothing.
    pub fn pod_view(self, root: &View, ns: NsId, label: &str) -> SysfsResult<Option<View>> {
        match self.0 {
            Kind::TestTree => match root.open_beneath(&netns_dir(ns)) {
                Ok(v) => Ok(Some(v)),
                Err(SysfsError::Missing) => Ok(None),
                Err(e) => Err(e),
            },
            Kind::Kernel => View::fresh_sysfs(label).map(Some),
        }
    }

    /// Runs `make` (which calls `pod_view`) on the thread a view of the
    /// live netns `ns` is made on: on the kernel a thread inside `ns` (the
    /// one netns rule: the calling thread never enters it), on a test tree
    /// the calling thread, since the tree's view is a directory.
    pub fn pod_view_thread(
        self,
        ns: &NetNs,
        make: &mut (dyn FnMut() + Send),
    ) -> Result<(), NsError> {
        match self.0 {
            Kind::TestTree => {
                make();
                Ok(())
            }
            Kind::Kernel => ns.run_there(make),
        }
    }

    /// Whether rtnetlink's parent device of a netdev (Linux 5.14+) answers
    /// which PCI function it is. The kernel's is its own answer; a test
    /// tree's netdevs are the machine's, whose parents the tree does not
    /// model (no RDMA devices here), so the pod's view of the tree is the
    /// only witness, as the kernel's sysfs would be.
    pub fn trusts_rtnetlink_parent(self) -> bool {
        match self.0 {
            Kind::Kernel => true,
            Kind::TestTree => false,
        }
    }

    /// The bus of the device behind `net` (`class/net/<ifname>`) in the
    /// pod's `view`, `None` when it cannot be read. The kernel names it by
    /// the `device/subsystem` link; a test tree binds a netdev only to a
    /// PCI function, and has no such link.
    pub fn parent_bus(self, view: &View, net: &Path) -> Option<String> {
        match self.0 {
            Kind::TestTree => Some("pci".to_string()),
            Kind::Kernel => view.link_name(&net.join("device/subsystem")).ok(),
        }
    }

    /// How inspect names the sysfs that shows a pod's devices; `exclusive`
    /// when the RDMA netns mode gives each netns its own devices.
    pub fn pod_sysfs_words(self, exclusive: bool) -> &'static str {
        match (self.0, exclusive) {
            (Kind::TestTree, _) => "a test tree: the pod's view is netns/<inode>/, nothing mounted",
            (Kind::Kernel, true) => "a private sysfs mounted inside the pod netns",
            (Kind::Kernel, false) => "the host's /sys, read from a thread inside the pod netns",
        }
    }

    /// What inspect says of the node's sysfs root beside its path: a test
    /// tree is one, the kernel's needs no word.
    pub fn root_note(self) -> Option<&'static str> {
        match self.0 {
            Kind::TestTree => Some("a test tree"),
            Kind::Kernel => None,
        }
    }
}

/// A test tree's view of one netns (docs/design.md, "Test trees").
pub fn netns_dir(ns: NsId) -> PathBuf {
    PathBuf::from(format!("netns/{}", ns.ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::Lookup;
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;

    fn tree(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rt-host-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const POD: NsId = NsId {
        dev: 4,
        ino: 4026532001,
    };

    #[test]
    fn a_root_other_than_sys_is_a_test_tree() {
        assert_eq!(Host::of_root(Path::new("/sys")).0, Kind::Kernel);
        assert_eq!(Host::of_root(Path::new("/sys/")).0, Kind::Kernel);
        assert_eq!(Host::of_root(Path::new("/tmp/t")).0, Kind::TestTree);
        assert_eq!(Host::of_root(Path::new("/sys/class")).0, Kind::TestTree);
        let d = tree("root");
        assert_eq!(View::open(&d).unwrap().host().0, Kind::TestTree);
        assert_eq!(
            View::open(Path::new("/sys")).unwrap().host().0,
            Kind::Kernel
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_test_tree_finds_a_pod_view_under_netns_inode() {
        let d = tree("pod");
        let root = View::open(&d).unwrap();
        let host = root.host();
        assert!(
            host.pod_view(&root, POD, "<pod>").unwrap().is_none(),
            "no netns/<inode>/: the tree gives that netns nothing"
        );
        std::fs::create_dir_all(d.join("netns/4026532001/class/net/net1")).unwrap();
        std::fs::create_dir_all(d.join("netns/4026532002/class/net/other")).unwrap();
        let pod = host
            .pod_view(&root, POD, "<pod>")
            .unwrap()
            .expect("its view");
        assert_eq!(pod.list(Path::new("class/net")).unwrap(), ["net1"]);
        assert_eq!(pod.host().0, Kind::TestTree, "the pod's view is the tree's");
        assert_eq!(
            pod.show(Path::new("class/net")),
            format!("{}/netns/4026532001/class/net", d.display()),
            "messages name the tree's directory, not the label"
        );
        // A netns directory that leaves the tree is refused, not absent.
        std::fs::remove_dir_all(d.join("netns/4026532001")).unwrap();
        std::os::unix::fs::symlink("/etc", d.join("netns/4026532001")).unwrap();
        assert_eq!(
            host.pod_view(&root, POD, "<pod>").unwrap_err(),
            SysfsError::Escapes
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_test_tree_makes_the_pod_view_on_the_calling_thread() {
        let d = tree("thread");
        let host = View::open(&d).unwrap().host();
        let Lookup::Netns(me) = NetNs::lookup(Path::new("/proc/self/ns/net")).unwrap() else {
            panic!("/proc/self/ns/net is no netns");
        };
        let here = std::thread::current().id();
        let mut ran_on = None;
        host.pod_view_thread(&me, &mut || ran_on = Some(std::thread::current().id()))
            .unwrap();
        assert_eq!(ran_on, Some(here));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_test_tree_binds_pci_and_is_its_own_witness() {
        let d = tree("bus");
        let net = Path::new("class/net/net1");
        std::fs::create_dir_all(d.join(net)).unwrap();
        // A `device/subsystem` link naming another bus is not read on a tree.
        std::fs::create_dir_all(d.join("devices/x")).unwrap();
        std::os::unix::fs::symlink("../../../devices/x", d.join(net).join("device")).unwrap();
        std::os::unix::fs::symlink("../../bus/auxiliary", d.join("devices/x/subsystem")).unwrap();
        let view = View::open(&d).unwrap();
        let host = view.host();
        assert_eq!(host.parent_bus(&view, net).as_deref(), Some("pci"));
        assert!(!host.trusts_rtnetlink_parent());
        assert_eq!(host.root_note(), Some("a test tree"));
        assert_eq!(
            host.pod_sysfs_words(true),
            host.pod_sysfs_words(false),
            "a tree's pod view is netns/<inode>/ in either mode"
        );
        // The kernel's answers, for contrast: the link names the bus.
        let kernel = Host::kernel();
        assert_eq!(kernel.parent_bus(&view, net).as_deref(), Some("auxiliary"));
        assert!(kernel.trusts_rtnetlink_parent());
        assert_eq!(kernel.root_note(), None);
        assert_ne!(kernel.pod_sysfs_words(true), kernel.pod_sysfs_words(false));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_test_tree_accepts_a_plain_dir_the_kernel_refuses() {
        let d = tree("verify");
        let fd = nix::fcntl::open(
            &d,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let tree_host = Host::of_root(&d);
        assert_eq!(tree_host.verify(&fd, Path::new("")), Ok(()));
        assert_eq!(tree_host.verify(&fd, Path::new("kernel/config/x")), Ok(()));
        let kernel = Host::kernel();
        assert_eq!(
            kernel.verify(&fd, Path::new("")),
            Err(SysfsError::WrongFilesystem { expected: "sysfs" })
        );
        assert_eq!(
            kernel.verify(&fd, Path::new("kernel/config/rdma_cm")),
            Err(SysfsError::WrongFilesystem {
                expected: "configfs"
            })
        );
        let sys = nix::fcntl::open(
            "/sys",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        assert_eq!(kernel.verify(&sys, Path::new("")), Ok(()));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
