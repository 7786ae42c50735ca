//! The host of the unit tests (`TestHost`), and the tests that hold it to
//! the kernel's answers where this process can ask both.
//!
//! `TestHost` is what the kernel would answer on a trip into
//! a pod's netns, from tables a test fills, and a `/proc/sys` of plain
//! files. Used with a sysfs test tree (`sysfs::host`), it lets the CNI
//! commands, one rail's tuning and the agent's pass run as any user, with
//! no netns made: the test's own netns stands for the pod's (its nsfs inode
//! names the tree's `netns/<inode>/`, as on a node).
//!
//! Each answer is the kernel's documented one, held to it where the real
//! side runs: a trip runs `there` on a thread of its own, never the
//! caller's (`NetNs::run_dyn`); a link is found by its exact name
//! (RTM_GETLINK with IFLA_IFNAME); RDMA netlink's port is the one whose
//! netdev matches by index AND name, else `NoPort` with the devices it
//! shows, and without any device the socket's own failure
//! (`netlink::nldev::ask_port`, `port_for_netdev`); a sysctl missing from
//! `/proc/sys` is ENOENT. The directory trust rules (`safe_dir`: root's,
//! no links, no parent others can write) are not asked: only root can make
//! a directory they accept, and their own tests run as root.

use super::{Syscall, KERNEL};
use crate::netlink::nldev::Answer;
use crate::netlink::{self, Link};
use crate::netns::Lookup;
use crate::netns::{NetNs, NsError};
use crate::safe_dir::DirError;
use std::fs::Metadata;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A port RDMA netlink reports: the netdev (index and name) it carries,
/// the device and the port number.
#[derive(Debug, Clone)]
pub struct RdmaPort {
    pub ifindex: u32,
    pub ifname: String,
    pub device: String,
    pub port: u32,
}

/// See the module's comment. Removes its `/proc/sys` when dropped.
pub struct TestHost {
    /// The links of the pod netns.
    pub links: Vec<Link>,
    /// Each address: the link's index, the address, its prefix length.
    pub addresses: Vec<(u32, IpAddr, u8)>,
    /// What RDMA netlink reports; empty: the socket cannot be opened (no
    /// ib_core), as on a machine without RDMA.
    pub rdma_ports: Vec<RdmaPort>,
    /// Trips made (`trip`), for tests that count them.
    pub trips: AtomicUsize,
    root: PathBuf,
    proc_sys: PathBuf,
}

impl TestHost {
    /// A host whose `/proc/sys` is a fresh directory named by `tag`.
    pub fn new(tag: &str) -> TestHost {
        let root = std::env::temp_dir().join(format!("rt-host-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let proc_sys = root.join("proc/sys");
        std::fs::create_dir_all(&proc_sys).unwrap();
        TestHost {
            links: Vec::new(),
            addresses: Vec::new(),
            rdma_ports: Vec::new(),
            trips: AtomicUsize::new(0),
            root,
            proc_sys,
        }
    }

    /// A link of the pod netns, as rtnetlink lists one whose parent it
    /// does not report (a test tree's `class/net/<name>/device` is then
    /// the pod side's only witness).
    pub fn add_link(&mut self, index: u32, name: &str) {
        self.links.push(Link {
            index,
            name: name.to_owned(),
            parent_dev: None,
            parent_bus: None,
        });
    }

    /// A sysctl of the pod netns, `key` dotted, holding `value` (without
    /// the newline procfs adds when read: what `sysctl::revert` writes back
    /// is then the file's content byte for byte).
    pub fn set_sysctl(&self, key: &str, value: &str) {
        let path = self.sysctl_path(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value).unwrap();
    }

    /// What a sysctl holds now, its newline trimmed.
    pub fn sysctl(&self, key: &str) -> String {
        let v = std::fs::read_to_string(self.sysctl_path(key)).unwrap();
        v.trim_end().to_owned()
    }

    fn sysctl_path(&self, key: &str) -> PathBuf {
        let mut p = self.proc_sys.clone();
        p.extend(key.split('.'));
        p
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Syscall for TestHost {
    fn trip(
        &self,
        _ns: &NetNs,
        there: &mut (dyn FnMut() + Send),
        here: &mut dyn FnMut(),
    ) -> Result<(), NsError> {
        self.trips.fetch_add(1, Ordering::Relaxed);
        std::thread::scope(|s| {
            let pod = s.spawn(there);
            here();
            pod.join().map_err(|_| NsError::Panicked)
        })
    }

    fn link_by_name(&self, name: &str) -> Result<Option<Link>, netlink::Error> {
        Ok(self.links.iter().find(|l| l.name == name).cloned())
    }

    fn addresses(&self, index: u32) -> Result<Vec<(IpAddr, u8)>, netlink::Error> {
        Ok(self
            .addresses
            .iter()
            .filter(|(i, _, _)| *i == index)
            .map(|(_, ip, len)| (*ip, *len))
            .collect())
    }

    fn rdma_port(&self, link: &Link, _hint: Option<&str>) -> Result<Answer, String> {
        if self.rdma_ports.is_empty() {
            return Ok(Answer::Unusable(
                "open RDMA netlink: Protocol not supported (EPROTONOSUPPORT)".into(),
            ));
        }
        let mine: Vec<&RdmaPort> = self
            .rdma_ports
            .iter()
            .filter(|p| p.ifindex == link.index && p.ifname == link.name)
            .collect();
        match mine.as_slice() {
            [p] => Ok(Answer::Port(p.device.clone(), p.port)),
            [] => {
                let mut devices: Vec<&str> =
                    self.rdma_ports.iter().map(|p| p.device.as_str()).collect();
                devices.sort_unstable();
                devices.dedup();
                Ok(Answer::NoPort {
                    devices: devices.len(),
                })
            }
            _ => Err(format!(
                "ambiguous: RDMA netlink reports {} ports",
                mine.len()
            )),
        }
    }

    fn proc_sys(&self) -> &Path {
        &self.proc_sys
    }

    fn own_dir(&self, dir: &Path, create: bool) -> Result<Option<Metadata>, DirError> {
        if create {
            std::fs::create_dir_all(dir).map_err(|err| DirError::Io {
                what: "create",
                path: dir.to_owned(),
                err,
            })?;
        }
        match std::fs::symlink_metadata(dir) {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(DirError::Io {
                what: "stat",
                path: dir.to_owned(),
                err,
            }),
        }
    }
}

fn own_netns() -> NetNs {
    match NetNs::lookup(Path::new("/proc/self/ns/net")).unwrap() {
        Lookup::Netns(ns) => ns,
        _ => panic!("/proc/self/ns/net is no netns"),
    }
}

/// The loopback of this netns, asked of both: found by its exact name
/// at index 1 with 127.0.0.1/8, and a name no link has is `None`.
#[test]
fn a_link_and_its_addresses_are_answered_as_rtnetlink_does() {
    let mut host = TestHost::new("lo");
    host.add_link(1, "lo");
    host.addresses.push((1, "127.0.0.1".parse().unwrap(), 8));
    for sys in [&KERNEL as &dyn Syscall, &host] {
        let lo = sys.link_by_name("lo").unwrap().expect("lo");
        assert_eq!((lo.index, lo.name.as_str()), (1, "lo"));
        assert!(sys.link_by_name("rt-no-such").unwrap().is_none());
        assert!(
            sys.link_by_name("l").unwrap().is_none(),
            "a prefix is no name"
        );
        let addrs = sys.addresses(1).unwrap();
        assert!(
            addrs.contains(&("127.0.0.1".parse().unwrap(), 8)),
            "{addrs:?}"
        );
        // No RDMA port carries the loopback, whatever RDMA netlink shows.
        let answer = sys.rdma_port(&lo, None).unwrap();
        assert!(!matches!(answer, Answer::Port(..)), "{answer}");
    }
}

/// A sysctl reads the same through either `/proc/sys` (procfs ends a
/// value with a newline, which `sysctl` trims), and one that does not
/// exist is ENOENT in both (`sysctl` then names the key as the config's
/// mistake).
#[test]
fn a_sysctl_reads_and_fails_as_procfs_does() {
    let host = TestHost::new("procfs");
    let live = std::fs::read_to_string("/proc/sys/net/ipv4/conf/lo/arp_ignore").unwrap();
    host.set_sysctl("net.ipv4.conf.lo.arp_ignore", live.trim_end());
    let read = |sys: &dyn Syscall, rel: &str| std::fs::read_to_string(sys.proc_sys().join(rel));
    let at = "net/ipv4/conf/lo/arp_ignore";
    assert_eq!(
        read(&KERNEL, at).unwrap().trim_end(),
        read(&host, at).unwrap().trim_end()
    );
    for sys in [&KERNEL as &dyn Syscall, &host] {
        let e = read(sys, "net/ipv4/conf/rt-no-such/arp_ignore").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}

/// A trip runs its work on a thread of its own, never the caller's,
/// beside what the caller does meanwhile. Entering a netns, even this
/// one, takes CAP_SYS_ADMIN: the kernel's side is asked as root only.
#[test]
fn a_trip_runs_there_on_its_own_thread() {
    let host = TestHost::new("trip");
    let ns = own_netns();
    let mut hosts: Vec<&dyn Syscall> = vec![&host];
    if crate::process::test_runs_as_root(
        "syscall::a_trip_runs_there_on_its_own_thread",
        "setns(2) into a netns",
    ) {
        hosts.push(&KERNEL);
    }
    for sys in hosts {
        let me = std::thread::current().id();
        let (mut there, mut here) = (None, None);
        sys.trip(
            &ns,
            &mut || there = Some(std::thread::current().id()),
            &mut || here = Some(std::thread::current().id()),
        )
        .unwrap();
        assert_eq!(here, Some(me));
        assert!(there.is_some_and(|t| t != me));
    }
    assert_eq!(host.trips.load(Ordering::Relaxed), 1);
}

/// The one answer the test host gives otherwise: the state dir's trust.
/// The kernel's host refuses a directory beneath a parent others can
/// write (the temp dir), which only root could avoid making.
#[test]
fn only_the_kernel_asks_a_directory_to_be_roots() {
    let host = TestHost::new("dirs");
    let dir = host.root.join("state");
    assert!(matches!(
        KERNEL.own_dir(&dir, false),
        Err(DirError::Writable(..) | DirError::Owner(..))
    ));
    assert!(host.own_dir(&dir, false).unwrap().is_none());
    assert!(host
        .own_dir(&dir, true)
        .unwrap()
        .is_some_and(|m| m.is_dir()));
}
