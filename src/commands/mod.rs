//! One file per CNI command. Each reads top to bottom: validate, make one trip
//! into the pod netns (`NetNs::run`), act, print. Shared steps live here:
//! finding the RDMA port, and giving an entry's files back in the view where
//! its device is now.

pub mod add;
pub mod check;
pub mod del;
pub mod gc;
pub mod status;

use crate::cni::config::NetConf;
use crate::cni::{code, CniError, CniResult};
use crate::netns::NetNs;
use crate::node::NodeConfig;
use crate::ownership::{self, Knob, Outcome, Views};
use crate::rdma::device::{self, Resolved};
use crate::rdma::{lookup, RdmaPort};
use crate::state::{Entry, StateDir};
use crate::sysfs::View;
use std::path::Path;

/// The VF's RDMA port, found from a thread inside the pod netns through the
/// view that shows the pod's device (`rdma::lookup`: RDMA netlink first).
pub fn locate_port(
    conf: &NetConf,
    ifname: &str,
    view: &View,
    exclusive: bool,
) -> CniResult<RdmaPort> {
    let (port, how) = lookup::locate(
        view,
        ifname,
        conf.device_id.as_ref(),
        conf.rdma_port,
        exclusive,
    )?;
    crate::debug!(
        "{ifname} -> RDMA device {} port {} (by {how})",
        port.device,
        port.port
    );
    Ok(port)
}

/// The host's view of sysfs, from the node config's root.
pub fn host_view(node: &NodeConfig) -> CniResult<View> {
    View::open(&node.sysfs_root).map_err(|e| {
        CniError::new(
            code::RDMA_DEVICE,
            format!(
                "sysfs root {} cannot be opened: {e}",
                node.sysfs_root.display()
            ),
        )
    })
}

/// What became of an entry.
#[derive(Debug)]
pub enum Done {
    /// Its files were given back (or were gone) and the entry dropped.
    Released(Vec<(Knob, Outcome)>),
    /// Nothing could be restored now; the entry stays for the orphan repair.
    Kept(String),
}

impl std::fmt::Display for Done {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Done::Released(list) if list.is_empty() => {
                f.write_str("device gone, nothing to restore")
            }
            Done::Released(list) => {
                let parts: Vec<String> = list
                    .iter()
                    .map(|(k, o)| format!("{} {o}", k.name()))
                    .collect();
                f.write_str(&parts.join(", "))
            }
            Done::Kept(why) => write!(f, "kept for the orphan repair: {why}"),
        }
    }
}

/// Give back an entry's files where its device is now: inside the pod (a
/// sysfs made in the pod netns) for an exclusive-mode device whose pod still
/// lives, else the host's view (the kernel returns a device to the host netns
/// when its netns dies). Never fails: what cannot be done now is `Kept`.
pub fn release_entry(state: &StateDir, entry: &Entry, host: &View) -> Done {
    let mut seen_invisible = false;
    if entry.exclusive {
        match NetNs::still(Path::new(&entry.netns), entry.netns_id) {
            Ok(Some(ns)) => {
                let label = format!("<sysfs of netns {}>", entry.netns);
                match ns.run(|| {
                    View::fresh_sysfs(&label).map_err(|e| CniError::io("make the pod's sysfs", e))
                }) {
                    Ok(pod) => match device::resolve(&pod, entry) {
                        Resolved::Here(port) => {
                            let views = Views { device: &pod, host };
                            return release_in(state, entry, views, &port);
                        }
                        Resolved::Invisible => seen_invisible = true,
                        Resolved::Gone => {}
                    },
                    Err(e) => crate::warn!("{}; trying the host's view", e.msg),
                }
            }
            Ok(None) => {}
            Err(e) => crate::warn!("{}; trying the host's view", e.msg),
        }
    }
    match device::resolve(host, entry) {
        Resolved::Here(port) => release_in(state, entry, Views { device: host, host }, &port),
        Resolved::Invisible if entry.exclusive || seen_invisible => Done::Kept(format!(
            "{} (PCI {}) shows no RDMA device from here: in exclusive mode it is still in a netns that has not finished exiting",
            entry.device,
            entry.pci.as_deref().unwrap_or("?")
        )),
        Resolved::Invisible | Resolved::Gone => {
            crate::info!(
                "{} port {} is gone (removed, re-created or renamed away): nothing to restore",
                entry.device,
                entry.port
            );
            match state.remove(&entry.container_id, &entry.ifname) {
                Ok(()) => Done::Released(Vec::new()),
                Err(e) => Done::Kept(e.msg),
            }
        }
    }
}

fn release_in(state: &StateDir, entry: &Entry, view: Views, port: &RdmaPort) -> Done {
    match ownership::release(state, entry, view, port) {
        Ok(list) => Done::Released(list),
        Err(e) => Done::Kept(e.msg),
    }
}
