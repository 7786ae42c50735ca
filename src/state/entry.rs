//! An entry: what ADD recorded of one attachment (the device, what it
//! owned and what was there before, the pod, the rail), the format this
//! binary writes, and what a trustworthy entry holds (`Entry::validate`).

use crate::cni::config::MAX_GID_INDEX;
use crate::cni::env::{is_k8s_name, validate_container_id, validate_ifname};
use crate::netns::NsId;
use crate::rdma::device::Identity;
use crate::rdma::reach::Reach;
use crate::rdma::{is_guid, is_safe_component};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// The entry format this binary writes: 4 records every RDMA ADD's rail
/// (`rail`), whether or not it owns a file; 3 recorded owned settings by
/// their key (`owned`), how the device is reached (`reach`, was
/// `exclusive`), and a device-info file roce-tune made.
pub const FORMAT: u32 = 4;

/// The `network` of a rail a DRA driver moved into a pod, tuned by the NRI
/// plugin at RunPodSandbox (`nri::dra`). A colon is in no CNI network's
/// name (`cni::config::validate_name`), so no CNI GC ever claims these
/// entries, and no network config can pose as one.
pub const DRA_NETWORK: &str = "nri:dra-rails";
/// The first format whose entries are marked in the owner index: older ones
/// are rewritten while their pod lives (`orphans::sweep`).
pub const OWNER_INDEX_FORMAT: u32 = 3;

/// What roce-tune changed on one device file, and what was there before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Owned {
    /// The value before the first ADD; `None` = unset.
    pub original: Option<u32>,
    /// What roce-tune wrote; DEL restores only if the file still holds it.
    pub written: u32,
}

/// What ADD recorded for one attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    pub version: u32,
    /// The network (config `name`): GC is per network and must not touch
    /// another network's entries in a shared state dir.
    pub network: String,
    pub container_id: String,
    pub ifname: String,
    /// The pod netns path at ADD, and the identity of its nsfs inode: the pod
    /// is gone when the path is missing, is no netns, or is another one.
    pub netns: String,
    /// `None` only for entries written by 0.1.0.
    pub netns_id: Option<NsId>,
    /// Where the device's files are: the host's sysfs, or (exclusive mode)
    /// the sysfs of the pod's netns while the pod lives.
    pub reach: Reach,
    pub device: String,
    pub port: u32,
    /// The device's PCI function and node GUID at ADD: a name can move to
    /// another device, these do not.
    pub pci: Option<String>,
    pub guid: Option<String>,
    /// Each setting roce-tune owns (`crate::settings`), by its key.
    pub owned: BTreeMap<String, Owned>,
    /// The device-info file roce-tune made for this attachment (it goes on
    /// release); `None` when it made none.
    pub device_info: Option<DeviceInfoFile>,
    /// The pod, when CNI_ARGS named one.
    #[serde(default)]
    pub pod: Option<PodRecord>,
    /// The placement verdict, when the check ran.
    #[serde(default)]
    pub placement: Option<PlacementRecord>,
    /// The RoCE v2 GID of the pod's address (sysfs's form), when the GID
    /// check ran: the agent reports where it sits now.
    #[serde(default)]
    pub gid: Option<String>,
    /// What the pod's jobs need of this rail (`job_env`); format 4 on.
    #[serde(default)]
    pub rail: Option<RailRecord>,
    /// Nanoseconds since the epoch: orders co-owners.
    pub created_ns: u64,
}

/// What an RDMA ADD verified of its rail and what the network asked of it,
/// recorded whether or not the ADD owns a file: the job environment's
/// source (`job_env`: NCCL_IB_GID_INDEX, NCCL_IB_TC), read by the NRI plugin
/// and `inspect --env`, never by a CNI command. The device and port are the
/// entry's own; the interface's place among the pod's is its name
/// (docs/design.md, "State entries").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RailRecord {
    /// The index holding the RoCE v2 GID of the pod's address: the one
    /// `gidCheck: enforce` verified, the one `present` or `warn` found;
    /// `None` when the check was off or found it nowhere.
    pub gid_index: Option<u32>,
    /// The class the network (or the pod's pick) asked for, owned or not.
    pub traffic_class: Option<u8>,
    /// The rdma_cm default ToS the network asked for.
    pub rdma_cm_tos: Option<u8>,
}

/// The Kubernetes pod of an attachment, from CNI_ARGS at ADD: what the
/// agent labels the rail's metrics with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

impl PodRecord {
    /// A Kubernetes namespace, name and (when known) UID: what an entry may
    /// record of its pod.
    pub fn is_valid(&self) -> bool {
        let uid_ok = self
            .uid
            .as_deref()
            .is_none_or(|u| u.len() == 36 && u.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        is_k8s_name(&self.namespace, 63) && is_k8s_name(&self.name, 253) && uid_ok
    }
}

/// The placement verdict at ADD (docs/placement.md), as it concerns this
/// rail: the agent exports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementRecord {
    /// This rail is near at least one of the pod's GPUs.
    pub near: bool,
    /// How many of the pod's GPUs are starved of near rails.
    pub starved_gpus: u32,
    /// The GDR level judged against.
    pub level: String,
}

/// A device-info file roce-tune created, by its name in the node's
/// deviceInfoDir (never a path: the dir is the node config's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceInfoFile {
    pub name: String,
    /// The PCI function it names: it is removed only while it still does.
    pub pci: String,
}

impl Entry {
    /// Refuse an entry whose fields could steer a write somewhere else.
    pub fn validate(&self) -> Result<(), String> {
        validate_container_id(&self.container_id).map_err(|e| e.msg)?;
        validate_ifname(&self.ifname).map_err(|e| e.msg)?;
        if self.network != DRA_NETWORK {
            crate::cni::config::validate_name(&self.network).map_err(|e| e.msg)?;
        }
        if !is_safe_component(&self.device) {
            return Err("its device is not a device name".into());
        }
        if self.port == 0 || self.port > 255 {
            return Err(format!("port {} is out of range", self.port));
        }
        if self
            .pci
            .as_deref()
            .is_some_and(|p| crate::cni::config::PciAddr::parse(p).is_none())
        {
            return Err("its pci is not a PCI address".into());
        }
        if self.guid.as_deref().is_some_and(|g| !is_guid(g)) {
            return Err("its guid is not a GUID".into());
        }
        let ns = Path::new(&self.netns);
        if !ns.is_absolute() || ns.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err("its netns is not a clean absolute path".into());
        }
        if let Some(d) = &self.device_info {
            let name_ok = d.name.len() <= 255
                && d.name != "."
                && d.name != ".."
                && d.name.bytes().all(|b| b.is_ascii_graphic() && b != b'/');
            if !name_ok || crate::cni::config::PciAddr::parse(&d.pci).is_none() {
                return Err("its device-info file is not a file name and a PCI address".into());
            }
        }
        if self.pod.as_ref().is_some_and(|p| !p.is_valid()) {
            return Err("its pod is not a Kubernetes namespace, name and UID".into());
        }
        if self
            .gid
            .as_deref()
            .is_some_and(|g| g.parse::<std::net::Ipv6Addr>().is_err())
        {
            return Err("its gid is not a GID".into());
        }
        if let Some(p) = &self.placement {
            if !matches!(p.level.as_str(), "PIX" | "PXB" | "PHB" | "SYS") {
                return Err("its placement level is not a GDR level".into());
            }
        }
        if self
            .rail
            .is_some_and(|r| r.gid_index.is_some_and(|i| i > MAX_GID_INDEX))
        {
            return Err("its GID index is out of range".into());
        }
        // Before format 4 an ADD recorded only what it had to give back.
        if self.owned.is_empty() && self.device_info.is_none() && self.rail.is_none() {
            return Err("it records no rail and nothing to restore".into());
        }
        Ok(())
    }

    /// What identifies the recorded device port.
    pub fn identity(&self) -> Identity<'_> {
        Identity {
            device: &self.device,
            port: self.port,
            pci: self.pci.as_deref(),
            guid: self.guid.as_deref(),
        }
    }

    /// The lock key and port (co-owners share one device file).
    pub fn lock_key(&self) -> String {
        format!(
            "{}.{}",
            self.pci.as_deref().unwrap_or(&self.device),
            self.port
        )
    }

    /// The same device port: by PCI function when both know it, else by name.
    pub fn same_device(&self, other: &Entry) -> bool {
        self.records(&other.device, other.port, other.pci.as_deref())
    }

    /// Whether this entry records the port `port` of `device` (on the PCI
    /// function `pci`), by `same_device`'s rule: never by the interface
    /// name, which a pod can change.
    pub fn records(&self, device: &str, port: u32, pci: Option<&str>) -> bool {
        self.port == port
            && match (self.pci.as_deref(), pci) {
                (Some(a), Some(b)) => a == b,
                _ => self.device == device,
            }
    }
}

/// Nanoseconds since the epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}
