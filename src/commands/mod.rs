//! One file per CNI command. Each reads top to bottom: validate, enter the
//! pod netns once, act, print. Shared steps (finding the RDMA port, giving a
//! class back in the right sysfs view) live here.

pub mod add;
pub mod check;
pub mod del;
pub mod gc;
pub mod status;

use crate::cni::config::NetConf;
use crate::cni::{code, CniError, CniResult};
use crate::netlink::Netlink;
use crate::netns::NetNs;
use crate::ownership::{self, Released};
use crate::rdma::{device, RdmaPort};
use crate::state::{Entry, StateDir};
use std::path::Path;

/// The VF's RDMA port, found from inside the pod netns (on the netns thread):
/// by `deviceID` when given, else by the netdev's parent device.
pub fn locate_port(conf: &NetConf, ifname: &str) -> CniResult<RdmaPort> {
    let root = &conf.sysfs_root;
    let found = match &conf.device_id {
        Some(pci) => device::by_pci(root, pci)?,
        None => {
            let link = Netlink::open()?.link_by_name(ifname)?.ok_or_else(|| {
                CniError::new(
                    code::RDMA_DEVICE,
                    format!("no RDMA device for {ifname}: there is no interface {ifname} in the pod netns"),
                )
            })?;
            device::by_link(root, &link)?
        }
    };
    crate::debug!(
        "{ifname} -> RDMA device {} (via {} {})",
        found.device,
        found.bus,
        found.parent
    );
    Ok(RdmaPort::new(root, &found.device, conf.rdma_port))
}

/// Give back an entry's class in the view where its device is now: inside the
/// pod (private sysfs) for an exclusive-mode device whose pod still exists,
/// else the host's view (the kernel returns a device to the host netns when
/// its netns dies). Only what the entry recorded is used.
pub fn release_entry(state: &StateDir, entry: &Entry) -> CniResult<Released> {
    let host_view = RdmaPort::new(&entry.sysfs_root, &entry.device, entry.port);
    if entry.exclusive {
        if let Some(ns) = NetNs::open(Path::new(&entry.netns))? {
            let in_pod = ns.run_with(true, || {
                let pod_view = RdmaPort::new(Path::new("/sys"), &entry.device, entry.port);
                if pod_view.traffic_class_path().exists() {
                    ownership::release(state, entry, &pod_view).map(Some)
                } else {
                    Ok(None)
                }
            })?;
            if let Some(r) = in_pod {
                return Ok(r);
            }
        }
    }
    ownership::release(state, entry, &host_view)
}
