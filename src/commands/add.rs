//! ADD: validate everything; make ONE trip into the pod netns to find the
//! pod's RDMA port (as the kernel shows it from there), set the sysctls and
//! prove the GID (nothing on the device is changed if any of that fails);
//! then take the device's files from this thread, through the view that
//! shows the device. Each change pushes its undo on a guard, so any failure
//! leaves the node as ADD found it.

use crate::cni::config::{GidCheck, NetConf, PlacementCheck};
use crate::cni::env::CniEnv;
use crate::cni::result::NetResult;
use crate::cni::{code, CniError, CniResult};
use crate::device_info::{self, Plan, Request};
use crate::node::NodeConfig;
use crate::ownership::{self, Claim, Wanted};
use crate::placement;
use crate::pod_answer::{self, PodAnswer};
use crate::rdma::gid::{self, Verdict, Want};
use crate::rdma::lookup::Found;
use crate::rdma::reach::{PodSide, Reach};
use crate::rdma::setting::{PodIface, Views};
use crate::settings;
use crate::state::{DeviceInfoFile, PlacementRecord, PodRecord, RailRecord, StateDir};
use crate::sysctl;
use crate::sysfs::View;
use crate::topology::PathType;
use crate::undo::Undo;
use serde_json::Value;
use std::net::{IpAddr, Ipv6Addr};
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
    let netns = super::open_netns(env)?;
    let wants: Vec<Wanted> = conf
        .owned()
        .into_iter()
        .filter_map(|(key, value)| settings::by_key(key).map(|s| (s, value)))
        .collect();
    // The device-info file is judged by its name now, by its content once
    // the pod's device is known; a refusal is logged, never fatal.
    let info_request = conf
        .device_info_file
        .as_deref()
        .filter(|_| conf.needs_rdma())
        .and_then(|f| {
            device_info::request(node, f, env.container_id(), ifname)
                .inspect_err(|why| {
                    crate::warn!("device info {}: not written: {why}", crate::log::escape(f))
                })
                .ok()
        });
    // Opened once for the record and the orphan sweep. Every RDMA ADD
    // records its rail; without one, a missing or refused dir only means
    // nothing to sweep.
    let state = if conf.needs_rdma() {
        Some(StateDir::create(&node.state_dir)?)
    } else {
        StateDir::existing(&node.state_dir).ok().flatten()
    };
    let sysfs = if conf.needs_rdma() || state.is_some() {
        Some(super::sysfs(node)?)
    } else {
        None
    };
    // Decided once: where this rail's device is reached.
    let reach = sysfs.as_ref().map_or(Reach::Host, |s| s.reach());
    // The pod's GPUs and VFs, from the kubelet, asked from this host-side
    // thread within the node's bound (or another rail's record of the pod's
    // one call), and the pod judged once; a skip is one log line, never an
    // error (but an untrusted input in enforce mode, 107).
    let pod = env.pod();
    let level = PathType::parse_level(conf.gdr_level.name()).unwrap_or(PathType::Pxb);
    let kubelet = match sysfs
        .as_ref()
        .filter(|_| conf.placement_check != PlacementCheck::Off && conf.needs_rdma())
    {
        Some(sysfs) => {
            // The pod's record lives in the state dir, made for it if need be.
            let made;
            let records = match &state {
                Some(s) => Some(s),
                None => {
                    made = StateDir::create(&node.state_dir).ok();
                    made.as_ref()
                }
            };
            let host = sysfs.host();
            match pod_answer::obtain(records, host, node, pod.as_ref(), env.container_id(), level) {
                Err(skip) => {
                    placement_skipped(conf, &skip)?;
                    None
                }
                Ok(answer) => Some(answer),
            }
        }
        None => None,
    };
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-validation");

    // The trip: everything that needs the pod's netns. Its thread dies with
    // it; this thread never leaves the host's namespaces, and meanwhile
    // repairs up to four orphans (other pods' entries: the trip reads no
    // entry and takes no lock; this ADD's own take comes after both).
    let sweep = || {
        if let (Some(state), Some(sysfs)) = (&state, &sysfs) {
            crate::orphans::sweep_bounded(super::place(state, sysfs, node), env.container_id());
        }
    };
    let (trip, ()) = netns
        .run_beside(
            || -> CniResult<_> {
                let Some(sysfs) = sysfs.as_ref().filter(|_| conf.needs_rdma()) else {
                    let undo = sysctl::apply(&sysctls)?;
                    return Ok((None, None, undo, (None, None)));
                };
                let label = format!("<sysfs of netns {}>", netns.path().display());
                let mut side = PodSide::new(sysfs, netns.id(), label);
                let link = super::pod_link(ifname)?;
                let found = super::locate(conf, &mut side, reach, &link)?;
                // Judged before anything changes: enforce leaves the node as it was.
                let placed = kubelet
                    .as_ref()
                    .and_then(|answer| {
                        judge_placement(conf, node, sysfs, answer, level, ifname, &found)
                    })
                    .transpose()?;
                let undo = sysctl::apply(&sysctls)?;
                crate::debug!("sysctls applied: {}", sysctls.len());
                #[cfg(feature = "fault-injection")]
                crate::fault::point("add-after-sysctls");
                let pod_view = match reach {
                    Reach::Pod => side
                        .into_view()
                        .map_err(|e| CniError::io("the pod's sysfs", e))?,
                    Reach::Host => None,
                };
                let mut gid_index = None;
                if let Some((want, addr)) = &expected {
                    let view = pod_view.as_ref().unwrap_or(sysfs.host());
                    match check_gid(conf, view, &found.port, want, addr) {
                        Ok(index) => gid_index = index,
                        Err(e) => {
                            sysctl::revert(&undo);
                            return Err(e);
                        }
                    }
                }
                Ok((Some(found), pod_view, undo, (placed, gid_index)))
            },
            sweep,
        )
        .map_err(super::ns_error)?;
    let trip = trip?;
    let (found, pod_view, applied, (placed, gid_index)) = trip;
    let views = sysfs.as_ref().map(|s| Views {
        device: pod_view.as_ref().unwrap_or(s.host()),
        host: s.host(),
        pod: Some(PodIface {
            netns: &netns,
            ifname,
        }),
    });
    let mut undo = Undo::new();
    undo.push(|| {
        let put_back = netns.run(|| sysctl::revert(&applied));
        if let Err(e) = put_back {
            crate::error!("ADD failed and its sysctls could not be put back: {e}");
        }
    });

    let (Some(found), Some(sysfs), Some(views)) = (&found, &sysfs, views) else {
        undo.disarm();
        return Ok(output);
    };
    let info = info_request.and_then(|r| plan_device_info(node, r, found));
    if let Some(state) = &state {
        let created = info.as_ref().filter(|(_, plan, _)| *plan == Plan::Create);
        let claim = Claim {
            network: &conf.name,
            container_id: env.container_id(),
            ifname,
            netns: &netns,
            reach,
            device_info: created.map(|(r, _, pci)| DeviceInfoFile {
                name: r.name.clone(),
                pci: pci.clone(),
            }),
            pod: pod.map(|p| PodRecord {
                namespace: p.namespace,
                name: p.name,
                uid: p.uid,
            }),
            placement: placed,
            gid: expected.map(|(g, _)| gid::format_gid(&g)),
            rail: RailRecord {
                gid_index,
                traffic_class: conf.traffic_class,
                rdma_cm_tos: conf.rdma_cm_tos,
            },
        };
        release_previous_device(super::place(state, sysfs, node), env, &found.port)?;
        // Recorded before the first write; a failure gives back what this
        // ADD wrote (the entry says what) and drops the record, before the
        // sysctls.
        let port = &found.port;
        undo.push(move || ownership::undo_take(state, views, port, env.container_id(), ifname));
        ownership::take(state, views, &found.port, &claim, &wants)?;
    }
    if let Some((req, plan, pci)) = &info {
        device_info::apply(node, req, plan, &found.port, pci);
    }
    undo.disarm();
    Ok(output)
}

/// The placement verdict for this rail, `Err` (106) when the pod is starved
/// and the network enforces it; `None` when the check cannot run here.
fn judge_placement(
    conf: &NetConf,
    node: &NodeConfig,
    sysfs: &crate::rdma::reach::Sysfs,
    answer: &PodAnswer,
    level: PathType,
    ifname: &str,
    found: &Found,
) -> Option<CniResult<PlacementRecord>> {
    let Some(vf) = found
        .port
        .pci
        .as_deref()
        .or_else(|| found.parent.as_ref().and_then(|p| p.pci_address()))
    else {
        // Soft-RoCE, an SF: no place in the PCI tree to judge. Said once, as
        // every skip is.
        crate::info!(
            "placement check skipped: {}",
            placement::Skip::RailNotPlaced(format!(
                "its RDMA device {} is no PCI function's",
                found.port.device
            ))
        );
        return None;
    };
    let said = match answer.for_rail(sysfs.host(), node, ifname, vf, level) {
        Ok(said) => said,
        Err(skip) => return placement_skipped(conf, &skip).err().map(Err),
    };
    let explained = format!(
        "placement: {} (from the kubelet's {:?})",
        said.line, answer.source
    );
    if !said.starved {
        crate::info!("{explained}");
    } else if conf.placement_check == PlacementCheck::Enforce {
        return Some(Err(CniError::new(
            code::PLACEMENT,
            format!("{explained}; placementCheck is enforce: nothing was changed"),
        )));
    } else {
        crate::warn!("{explained}");
    }
    Some(Ok(said.record))
}

/// The one line of a placement check that did not run; with `enforce`, an
/// input that is not root's fails the rail (107) rather than let it through
/// unjudged: whoever provides it could make any verdict.
fn placement_skipped(conf: &NetConf, skip: &placement::Skip) -> CniResult<()> {
    if !skip.is_untrusted() {
        crate::info!("placement check skipped: {skip}");
        return Ok(());
    }
    if conf.placement_check == PlacementCheck::Enforce {
        return Err(CniError::new(
            code::UNTRUSTED_INPUT,
            format!(
                "placement not judged: {skip}; placementCheck is enforce, so the rail is refused and nothing was changed: the node admin makes the input root's again"
            ),
        ));
    }
    crate::warn!("placement check skipped: {skip}");
    Ok(())
}

/// This attachment's device-info file, judged against the PCI function the
/// pod's netdev proved to be; a refusal is logged and the file left alone.
fn plan_device_info(
    node: &NodeConfig,
    req: Request,
    found: &Found,
) -> Option<(Request, Plan, String)> {
    let Some(pci) = found.parent.as_ref().and_then(|p| p.pci_address()) else {
        crate::warn!(
            "device info {}: not written: the pod's netdev is no PCI function's, so no pci-address can be proved",
            req.name
        );
        return None;
    };
    match device_info::plan(node, &req, &found.port, pci) {
        Ok(plan) => Some((req, plan, pci.to_owned())),
        Err(why) => {
            crate::warn!("device info {}: not written: {why}", req.name);
            None
        }
    }
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

/// The index that holds the pod's RoCE v2 GID, as the rail record keeps it:
/// the one verified, or (warn) the one found elsewhere, if any.
fn check_gid(
    conf: &NetConf,
    view: &View,
    port: &crate::rdma::RdmaPort,
    want: &Ipv6Addr,
    addr: &IpAddr,
) -> CniResult<Option<u32>> {
    let timeout = Duration::from_millis(conf.gid_timeout_ms);
    let at = wanted_index(conf);
    match gid::wait_for(view, port, at, want, timeout) {
        Verdict::Pass(index) => {
            crate::info!(
                "GID index {index} of {} is the RoCE v2 GID {} of {addr}",
                port.device,
                gid::format_gid(want)
            );
            Ok(Some(index))
        }
        Verdict::Mismatch { found, located } => {
            let err = super::gid_mismatch(port, at, want, addr, found.as_ref(), located);
            if conf.gid_check == GidCheck::Warn {
                crate::warn!("{} (gidCheck is warn: ADD goes on)", err.msg);
                Ok(located)
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
    place: ownership::Place,
    env: &CniEnv,
    port: &crate::rdma::RdmaPort,
) -> CniResult<()> {
    let Ok(old) = place.state.read(env.container_id(), env.ifname()) else {
        return Ok(());
    };
    let same = old.port == port.port
        && match (&old.pci, &port.pci) {
            (Some(a), Some(b)) => a == b,
            _ => old.device == port.device,
        };
    if same {
        return Ok(());
    }
    crate::warn!(
        "repeated ADD now on {} port {}: first giving back {} port {}",
        port.device,
        port.port,
        old.device,
        old.port
    );
    match ownership::release_entry(place, &old) {
        ownership::Done::Kept(why) | ownership::Done::Busy(why) => Err(CniError::new(
            code::TRY_AGAIN_LATER,
            format!(
                "this attachment's previous device {} cannot be given back yet ({why}); its original is kept, retry the ADD",
                old.device
            ),
        )),
        done => {
            crate::info!("previous device {}: {done}", old.device);
            Ok(())
        }
    }
}
