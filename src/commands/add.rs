//! ADD: validate everything; make ONE trip into the pod netns to find the RDMA
//! port, set the sysctls and prove the GID (nothing on the device is changed
//! if any of that fails); then take the device's files from this thread,
//! through the view that shows the device. Any failure undoes what this ADD
//! did.

use super::locate_port;
use crate::cni::config::{GidCheck, NetConf};
use crate::cni::env::CniEnv;
use crate::cni::result::NetResult;
use crate::cni::{code, CniError, CniResult};
use crate::netns::NetNs;
use crate::node::NodeConfig;
use crate::ownership::{self, Claim, Knob, Views};
use crate::rdma::gid::{self, Verdict, Want};
use crate::rdma::{NetnsMode, RdmaPort};
use crate::state::{ReadError, StateDir};
use crate::sysctl;
use crate::sysfs::View;
use serde_json::Value;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;

pub fn run(env: &CniEnv, conf: &NetConf, node: &NodeConfig) -> CniResult<Value> {
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
    sysctl::check_allowlist(&conf.sysctls, ifname, node)?;
    let netns = NetNs::open_required(Path::new(env.netns.as_deref().unwrap_or_default()))?;
    let wants: Vec<(Knob, u8)> = [
        conf.traffic_class.map(|tc| (Knob::TrafficClass, tc)),
        conf.rdma_cm_tos.map(|tos| (Knob::RdmaCmTos, tos)),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Opened once for both the record and the orphan sweep; without anything
    // to record, a missing or refused dir only means nothing to sweep.
    let state = if wants.is_empty() {
        StateDir::existing(&node.state_dir).ok().flatten()
    } else {
        Some(StateDir::create(&node.state_dir)?)
    };
    let host = if conf.needs_rdma() || state.is_some() {
        Some(super::host_view(node)?)
    } else {
        None
    };
    if let (Some(state), Some(host)) = (&state, &host) {
        crate::orphans::sweep_bounded(state, host, env.container_id());
    }
    // Exclusive mode on the real sysfs: the device is reachable only through
    // a sysfs made in the pod (a test tree stands for both views).
    let exclusive_mode = conf.needs_rdma()
        && host
            .as_ref()
            .is_some_and(|h| NetnsMode::read(h) == NetnsMode::Exclusive);
    let exclusive = exclusive_mode && host.as_ref().is_some_and(View::is_real);
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-validation");

    // The trip: everything that needs the pod's netns. Its thread dies with
    // it; this thread never leaves the host's namespaces.
    let pod = netns.run(|| {
        let view = match (&host, exclusive) {
            (Some(_), true) => Some(pod_sysfs(&netns)?),
            (Some(h), false) => Some(h.try_clone().map_err(|e| CniError::io("sysfs", e))?),
            (None, _) => None,
        };
        let port = match &view {
            Some(v) if conf.needs_rdma() => Some(locate_port(conf, ifname, v, exclusive_mode)?),
            _ => None,
        };
        let undo = sysctl::apply(&sysctls)?;
        crate::debug!("sysctls applied: {}", sysctls.len());
        #[cfg(feature = "fault-injection")]
        crate::fault::point("add-after-sysctls");
        if let (Some((want, addr)), Some(port), Some(view)) = (&expected, &port, &view) {
            if let Err(e) = check_gid(conf, view, port, want, addr) {
                sysctl::revert(&undo);
                return Err(e);
            }
        }
        Ok((view, port, undo))
    })?;
    let (view, port, undo) = pod;

    if let (Some(state), Some(view), Some(port), false) = (&state, &view, &port, wants.is_empty()) {
        let claim = Claim {
            network: &conf.name,
            container_id: env.container_id(),
            ifname,
            netns: &netns,
            exclusive,
        };
        let previous = match &host {
            Some(host) => release_previous_device(state, host, env, port),
            None => Ok(()),
        };
        let taken = previous.and_then(|()| {
            let views = Views {
                device: view,
                host: host.as_ref().unwrap_or(view),
            };
            ownership::take(state, views, port, &claim, &wants).inspect_err(|_| {
                roll_back(state, views, port, env);
            })
        });
        if let Err(e) = taken {
            if let Err(r) = netns.run(|| {
                sysctl::revert(&undo);
                Ok(())
            }) {
                crate::error!("ADD failed and its sysctls could not be put back: {r}");
            }
            return Err(e);
        }
    }
    if let (Some(file), Some(port)) = (&conf.device_info_file, &port) {
        crate::device_info::update(node, file, port);
    }
    Ok(output)
}

/// The pod's own sysfs, made on the trip's thread (see `netns`).
fn pod_sysfs(netns: &NetNs) -> CniResult<View> {
    View::fresh_sysfs(&format!("<sysfs of netns {}>", netns.path().display())).map_err(|e| {
        CniError::new(
            code::RDMA_DEVICE,
            format!("exclusive RDMA mode: the pod's sysfs could not be made ({e}); roce-tune needs CAP_SYS_ADMIN"),
        )
    })
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

/// Which index the config asks about.
pub fn wanted_index(conf: &NetConf) -> Want {
    match conf.gid_check {
        GidCheck::Present => Want::Any,
        _ => Want::Index(conf.gid_index),
    }
}

fn check_gid(
    conf: &NetConf,
    view: &View,
    port: &RdmaPort,
    want: &Ipv6Addr,
    addr: &IpAddr,
) -> CniResult<()> {
    let timeout = Duration::from_millis(conf.gid_timeout_ms);
    let at = wanted_index(conf);
    match gid::wait_for(view, port, at, want, timeout) {
        Verdict::Pass(index) => {
            crate::info!(
                "GID index {index} of {} is the RoCE v2 GID {} of {addr}",
                port.device,
                gid::format_gid(want)
            );
            Ok(())
        }
        Verdict::Mismatch { found, located } => {
            let err = gid::mismatch_error(port, at, want, addr, found.as_ref(), located);
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
/// changed under the same ifname): give the first device back, from this
/// host-side thread, before the entry is overwritten, or its original would
/// be lost. If it cannot be given back now, the ADD fails (11, try again):
/// overwriting the entry would lose that original.
fn release_previous_device(
    state: &StateDir,
    host: &View,
    env: &CniEnv,
    port: &RdmaPort,
) -> CniResult<()> {
    if let Ok(old) = state.read(env.container_id(), env.ifname()) {
        let same = old.port == port.port
            && match (&old.pci, &port.pci) {
                (Some(a), Some(b)) => a == b,
                _ => old.device == port.device,
            };
        if !same {
            crate::warn!(
                "repeated ADD now on {} port {}: first giving back {} port {}",
                port.device,
                port.port,
                old.device,
                old.port
            );
            match super::release_entry(state, &old, host) {
                super::Done::Kept(why) => {
                    return Err(CniError::new(
                        code::TRY_AGAIN_LATER,
                        format!(
                            "this attachment's previous device {} cannot be given back yet ({why}); its original is kept, retry the ADD",
                            old.device
                        ),
                    ))
                }
                done => crate::info!("previous device {}: {done}", old.device),
            }
        }
    }
    Ok(())
}

/// A failed ADD leaves the device as it found it and no state behind.
fn roll_back(state: &StateDir, view: Views, port: &RdmaPort, env: &CniEnv) {
    match state.read(env.container_id(), env.ifname()) {
        Ok(entry) => match ownership::release(state, &entry, view, port) {
            Ok(r) => crate::info!("ADD failed: rolled back ({r:?})"),
            Err(e) => crate::error!("ADD failed and its rollback failed too: {e}; the entry is kept for DEL and the orphan repair"),
        },
        Err(ReadError::Missing) => {}
        Err(e) => crate::error!("ADD failed and its state entry is unreadable: {e:?}"),
    }
}
