//! One file per CNI command. Each reads top to bottom: validate, make one trip
//! into the pod netns (`NetNs::run`), act, print. This is the CNI edge: the
//! library's typed causes become `CniError`s with the spec's codes here.

pub mod add;
pub mod check;
pub mod del;
pub mod gc;
pub mod status;

use crate::cni::config::NetConf;
use crate::cni::env::CniEnv;
use crate::cni::{code, CniError, CniResult};
use crate::netlink::{Link, Netlink};
use crate::netns::{Lookup, NetNs, NsError};
use crate::node::NodeConfig;
use crate::ownership::{OwnError, Place};
use crate::rdma::lookup::{self, CrossCheck, Found, LookupError, Names};
use crate::rdma::reach::{PodSide, Reach, Sysfs};
use crate::rdma::setting::SettingError;
use crate::state::{LockWait, StateDir, StateError};
use std::path::Path;

/// CNI_NETNS of ADD and CHECK: it must exist and be a network namespace.
pub fn open_netns(env: &CniEnv) -> CniResult<NetNs> {
    let path = Path::new(env.netns.as_deref().unwrap_or_default());
    match NetNs::lookup(path).map_err(ns_error)? {
        Lookup::Netns(ns) => Ok(ns),
        Lookup::Missing => Err(CniError::new(
            code::CONTAINER_UNKNOWN,
            format!(
                "netns {} does not exist: the pod sandbox is gone or CNI_NETNS is wrong",
                path.display()
            ),
        )),
        Lookup::NotNetns => Err(CniError::env(format!(
            "CNI_NETNS {} is not a network namespace (neither an nsfs bind mount nor /proc/<pid>/ns/net)",
            path.display()
        ))),
    }
}

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
pub fn pod_link(ifname: &str) -> CniResult<Link> {
    Netlink::open()?.link_by_name(ifname)?.ok_or_else(|| {
        CniError::new(
            code::RDMA_DEVICE,
            format!("no RDMA device for {ifname}: there is no interface {ifname} in the pod netns"),
        )
    })
}

/// The pod's rail, found from a thread inside the pod netns
/// (`rdma::lookup`: what the kernel says from there; the config only
/// cross-checks).
pub fn locate(conf: &NetConf, pod: &mut PodSide, reach: Reach, link: &Link) -> CniResult<Found> {
    let cross = CrossCheck {
        device_id: conf.device_id.as_ref(),
        rdma_port: conf.rdma_port,
        names: Names::Config,
    };
    let found = lookup::locate(pod, reach, link, &cross).map_err(lookup_error)?;
    crate::debug!(
        "{} -> RDMA device {} port {} (by {})",
        link.name,
        found.port.device,
        found.port.port,
        found.how
    );
    Ok(found)
}

// The library's typed causes, as the CNI error codes a runtime reads
// (docs/errors.md). Only the CNI edge makes CniErrors.

impl From<StateError> for CniError {
    fn from(e: StateError) -> CniError {
        let code = match e {
            StateError::BadLockName => code::RDMA_DEVICE,
            StateError::Busy { .. } => code::TRY_AGAIN_LATER,
            _ => code::IO_FAILURE,
        };
        CniError::new(code, e.to_string())
    }
}

impl From<SettingError> for CniError {
    fn from(e: SettingError) -> CniError {
        CniError::new(e.code, e.msg)
    }
}

impl From<OwnError> for CniError {
    fn from(e: OwnError) -> CniError {
        match e {
            OwnError::State(e) => e.into(),
            OwnError::Setting(e) => e.into(),
            e @ OwnError::Newer { .. } => CniError::new(code::IO_FAILURE, e.to_string()),
        }
    }
}

impl From<crate::netlink::Error> for CniError {
    fn from(e: crate::netlink::Error) -> CniError {
        CniError::new(code::IO_FAILURE, e.to_string())
    }
}

impl From<crate::sysctl::SysctlError> for CniError {
    fn from(e: crate::sysctl::SysctlError) -> CniError {
        use crate::sysctl::SysctlError;
        match e {
            SysctlError::Config(m) => CniError::config(m),
            SysctlError::Io(m) => CniError::new(code::IO_FAILURE, m),
            SysctlError::Drifted(m) => CniError::new(code::SYSCTL_DRIFT, m),
        }
    }
}

/// Error 101, from what the GID table showed (`rdma::gid`).
pub fn gid_mismatch(
    port: &crate::rdma::RdmaPort,
    at: crate::rdma::gid::Want,
    want: &std::net::Ipv6Addr,
    addr: &std::net::IpAddr,
    found: Option<&crate::rdma::gid::GidEntry>,
    located: Option<u32>,
) -> CniError {
    let msg = crate::rdma::gid::mismatch_message(port, at, want, addr, found, located);
    CniError::new(code::GID_CHECK, msg)
}
