//! Where a rail is: the node's sysfs, the pod's interface and the RDMA port
//! behind it, found from a thread inside the pod netns; and how the node's
//! entries are given back. What ADD, CHECK and a DRA rail each ask first.

use crate::cni::config::NetConf;
use crate::cni::{code, CniError, CniResult};
use crate::netlink::Link;
use crate::netns::NsError;
use crate::node::NodeConfig;
use crate::ownership::Place;
use crate::rdma::lookup::{self, CrossCheck, Found, LookupError, Names};
use crate::rdma::reach::{PodSide, Reach, Sysfs};
use crate::state::{LockWait, StateDir};
use crate::syscall::Syscall;

/// A netns trip that could not be made.
pub fn ns_error(e: NsError) -> CniError {
    CniError::new(code::IO_FAILURE, e.to_string())
}

pub fn lookup_error(e: LookupError) -> CniError {
    CniError::new(code::RDMA_DEVICE, e.to_string())
}

/// The node's sysfs, from the node config's root.
pub fn sysfs(node: &NodeConfig) -> CniResult<Sysfs> {
    Sysfs::open(&node.sysfs_root).map_err(|e| {
        CniError::new(
            code::RDMA_DEVICE,
            format!(
                "sysfs root {} cannot be opened: {e}",
                node.sysfs_root.display()
            ),
        )
    })
}

/// How the entries of this node are given back by a CNI command: waiting
/// for a device's lock as long as it takes (the runtime bounds the call).
pub fn place<'a>(state: &'a StateDir, sysfs: &'a Sysfs, node: &'a NodeConfig) -> Place<'a> {
    Place {
        state,
        sysfs,
        device_info_dir: &node.device_info_dir,
        lock_wait: LockWait::Blocking,
    }
}

/// The pod's interface, asked on a thread inside the pod netns.
pub fn pod_link(sys: &dyn Syscall, ifname: &str) -> CniResult<Link> {
    sys.link_by_name(ifname)?.ok_or_else(|| {
        CniError::new(
            code::RDMA_DEVICE,
            format!("no RDMA device for {ifname}: there is no interface {ifname} in the pod netns"),
        )
    })
}

/// The pod's rail, found from a thread inside the pod netns
/// (`rdma::lookup`: what the kernel says from there; the config only
/// cross-checks).
pub fn locate(
    sys: &dyn Syscall,
    conf: &NetConf,
    pod: &mut PodSide,
    reach: Reach,
    link: &Link,
) -> CniResult<Found> {
    let cross = CrossCheck {
        device_id: conf.device_id.as_ref(),
        rdma_port: conf.rdma_port,
        names: Names::Config,
    };
    let found = lookup::locate(sys, pod, reach, link, &cross).map_err(lookup_error)?;
    crate::debug!(
        "{} -> RDMA device {} port {} (by {})",
        link.name,
        found.port.device,
        found.port.port,
        found.how
    );
    Ok(found)
}
