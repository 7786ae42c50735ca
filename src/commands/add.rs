//! ADD: validate everything, then in ONE trip into the pod netns: find the
//! RDMA port (nothing is changed if it is missing), apply the sysctls, take
//! the traffic class, prove the GID. Any failure undoes what this ADD did.

use super::locate_port;
use crate::cni::config::{GidCheck, NetConf};
use crate::cni::env::CniEnv;
use crate::cni::result::NetResult;
use crate::cni::{code, CniError, CniResult};
use crate::netns::NetNs;
use crate::ownership::{self, Claim};
use crate::rdma::gid::{self, Verdict};
use crate::rdma::{needs_pod_sysfs, RdmaPort};
use crate::state::StateDir;
use crate::sysctl;
use serde_json::Value;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;

pub fn run(env: &CniEnv, conf: &NetConf) -> CniResult<Value> {
    let ifname = env.ifname();
    // The reference plugins (tuning, sbr) fail ADD without a prevResult: a
    // chained plugin has nothing to pass on otherwise.
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        CniError::config("prevResult is missing: roce-tune is a chained plugin; list it after sriov (and rdma) in plugins")
    })?;
    let result = NetResult::parse(prev, &conf.cni_version)?;
    let output = result.to_value(&conf.cni_version)?;
    let expected = expected_gid(conf, &result, ifname)?;
    let sysctls = sysctl::resolve(&conf.sysctls, ifname);
    let netns = NetNs::open_required(Path::new(env.netns.as_deref().unwrap_or_default()))?;
    // Opened once for both the class record and the orphan sweep; without a
    // class to record, a missing or refused dir only means nothing to sweep.
    let state = match conf.traffic_class {
        Some(_) => StateDir::open(&conf.state_dir, true)?,
        None => StateDir::open(&conf.state_dir, false).ok().flatten(),
    };
    if let Some(state) = &state {
        crate::orphans::sweep_bounded(state, env.container_id());
    }
    let exclusive = conf.needs_rdma() && needs_pod_sysfs(&conf.sysfs_root);
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-validation");

    netns.enter_and_run(exclusive, || {
        let port = if conf.needs_rdma() {
            Some(locate_port(conf, ifname)?)
        } else {
            None
        };
        let undo = sysctl::apply(&sysctls)?;
        crate::debug!("sysctls applied: {}", sysctls.len());
        #[cfg(feature = "fault-injection")]
        crate::fault::point("add-after-sysctls");
        let claim = Claim {
            network: &conf.name,
            container_id: env.container_id(),
            ifname,
            netns: netns.path().to_str().unwrap_or_default(),
            exclusive,
        };
        let rail = || -> CniResult<()> {
            if let (Some(tc), Some(port), Some(state)) = (conf.traffic_class, &port, &state) {
                release_previous_device(state, env, port);
                ownership::take(state, port, &claim, tc)?;
            }
            if let (Some((want, addr)), Some(port)) = (&expected, &port) {
                check_gid(conf, port, want, addr)?;
            }
            Ok(())
        };
        rail().inspect_err(|_| {
            if let (Some(state), Some(_)) = (&state, conf.traffic_class) {
                roll_back_class(state, env);
            }
            sysctl::revert(&undo);
        })
    })?;
    Ok(output)
}

/// The GID the pod's address must have, or `None` when the check is off (or
/// warn-only and there is no address to check).
fn expected_gid(
    conf: &NetConf,
    result: &NetResult,
    ifname: &str,
) -> CniResult<Option<(Ipv6Addr, IpAddr)>> {
    if conf.gid_check == GidCheck::Off {
        return Ok(None);
    }
    match gid::expected_gid(&result.addresses_of(ifname)) {
        Some(g) => Ok(Some(g)),
        None if conf.gid_check == GidCheck::Warn => {
            crate::warn!("GID check skipped: prevResult gives {ifname} no address");
            Ok(None)
        }
        None => Err(CniError::new(
            code::GID_CHECK,
            format!(
                "GID check failed: prevResult gives {ifname} no IP address, so no RoCE v2 GID can be expected; give the network an IPAM, or set gidCheck to \"off\""
            ),
        )),
    }
}

fn check_gid(conf: &NetConf, port: &RdmaPort, want: &Ipv6Addr, addr: &IpAddr) -> CniResult<()> {
    let timeout = Duration::from_millis(conf.gid_timeout_ms);
    match gid::wait_for(port, conf.gid_index, want, timeout) {
        Verdict::Pass => {
            crate::info!(
                "GID index {} of {} is the RoCE v2 GID {} of {addr}",
                conf.gid_index,
                port.device,
                gid::format_gid(want)
            );
            Ok(())
        }
        Verdict::Mismatch { found, located } => {
            let err = gid::mismatch_error(port, conf.gid_index, want, addr, &found, located);
            if conf.gid_check == GidCheck::Warn {
                crate::warn!("{} (gidCheck is warn: ADD goes on)", err.msg);
                Ok(())
            } else {
                crate::error!("{}", err.msg);
                Err(err)
            }
        }
    }
}

/// A repeated ADD whose attachment now resolves to another device (the VF
/// changed under the same ifname): give the first device back before the
/// entry is overwritten, or its original would be lost.
fn release_previous_device(state: &StateDir, env: &CniEnv, port: &RdmaPort) {
    if let Ok(old) = state.read(env.container_id(), env.ifname()) {
        if old.device != port.device || old.port != port.port || old.sysfs_root != port.root {
            crate::warn!(
                "repeated ADD now on {} port {}: first giving back {} port {}",
                port.device,
                port.port,
                old.device,
                old.port
            );
            if let Err(e) = super::release_entry(state, &old) {
                crate::error!("could not give back {}: {e}", old.device);
            }
        }
    }
}

/// A failed ADD leaves the device as it found it and no state behind.
fn roll_back_class(state: &StateDir, env: &CniEnv) {
    match state.read(env.container_id(), env.ifname()) {
        Ok(entry) => match super::release_entry(state, &entry) {
            Ok(r) => crate::info!("ADD failed: traffic class rolled back ({r:?})"),
            Err(e) => crate::error!("ADD failed and the rollback of the traffic class failed too: {e}; the entry is kept for DEL"),
        },
        Err(crate::state::ReadError::Missing) => {}
        Err(e) => crate::error!("ADD failed and its state entry is unreadable: {e:?}"),
    }
}
