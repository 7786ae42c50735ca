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
use crate::netlink::Netlink;
use crate::netns::NetNs;
use crate::node::NodeConfig;
use crate::ownership::{self, Claim, Wanted};
use crate::placement;
use crate::pod_answer::{self, PodAnswer};
use crate::qos::{Class, QosCheck};
use crate::rail_qos::{self, DcbSource, Judge};
use crate::rdma::gid::{self, Verdict, Want};
use crate::rdma::lookup::Found;
use crate::rdma::reach::{PodSide, Reach, Sysfs};
use crate::rdma::setting::{PodIface, Views};
use crate::settings;
use crate::state::{DeviceInfoFile, LockWait, PlacementRecord, PodRecord, RailRecord, StateDir};
use crate::sysctl;
use crate::sysfs::View;
use crate::topology::PathType;
use crate::undo::Undo;
use ipnetwork::IpNetwork;
use serde_json::Value;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

pub fn run(env: &CniEnv, conf: &NetConf, node: &NodeConfig) -> CniResult<Value> {
    let ifname = env.ifname();
    // The reference plugins (tuning, sbr) fail ADD without a prevResult: a
    // chained plugin has nothing to pass on otherwise.
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        CniError::config("prevResult is missing: roce-tune is a chained plugin; list it after sriov (and rdma) in plugins")
    })?;
    let result = NetResult::parse(prev, &conf.cni_version)?;
    let output = result.to_value(&conf.cni_version)?;
    let expected = expected_gid(
        conf,
        &result.addresses_of(ifname),
        ifname,
        "prevResult gives",
    )?;
    sysctl::check_allowlist(&conf.sysctls, ifname, node)?;
    let netns = super::open_netns(env)?;
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
    if !conf.needs_rdma() {
        // Only the sysctls; an existing state dir is swept beside them (a
        // missing or refused one only means nothing to sweep).
        let state = StateDir::existing(&node.state_dir).ok().flatten();
        let sysfs = match state {
            Some(_) => Some(super::sysfs(node)?),
            None => None,
        };
        let mut sweep = || {
            if let (Some(state), Some(sysfs)) = (&state, &sysfs) {
                crate::orphans::sweep_bounded(super::place(state, sysfs, node), env.container_id());
            }
        };
        let sysctls = sysctl::resolve(&conf.sysctls, ifname);
        let mut applied = None;
        trip(
            &netns,
            &mut || applied = Some(sysctl::apply(&sysctls)),
            &mut sweep,
        )?;
        applied.transpose()?;
        return Ok(output);
    }
    // Opened once for the record and the orphan sweep: every RDMA ADD
    // records its rail.
    let state = StateDir::create(&node.state_dir)?;
    let sysfs = super::sysfs(node)?;
    // The pod's GPUs and VFs, from the kubelet, asked from this host-side
    // thread within the node's bound (or another rail's record of the pod's
    // one call), and the pod judged once; a skip is one log line, never an
    // error (but an untrusted input in enforce mode, 107).
    let pod = env.pod();
    let level = PathType::parse_level(conf.gdr_level.name()).unwrap_or(PathType::Pxb);
    let kubelet = if conf.placement_check != PlacementCheck::Off {
        match pod_answer::obtain(
            Some(&state),
            sysfs.host(),
            node,
            pod.as_ref(),
            env.container_id(),
            level,
        ) {
            Err(skip) => {
                placement_skipped(conf, &skip)?;
                None
            }
            Ok(answer) => Some(answer),
        }
    } else {
        None
    };
    #[cfg(feature = "fault-injection")]
    crate::fault::point("add-after-validation");
    // Meanwhile, this thread repairs up to four orphans (other pods'
    // entries: the trip reads no entry and takes no lock; this ADD's own
    // take comes after both).
    let sweep =
        || crate::orphans::sweep_bounded(super::place(&state, &sysfs, node), env.container_id());
    let rail = Rail {
        conf,
        node,
        network: &conf.name,
        container_id: env.container_id(),
        ifname,
        netns: &netns,
        state: &state,
        sysfs: &sysfs,
        expect: Expect::Given(expected),
        pod: pod.map(|p| PodRecord {
            namespace: p.namespace,
            name: p.name,
            uid: p.uid,
        }),
        deadline: None,
        dcb: &rail_qos::HOST_DCB,
    };
    let extras = AddExtras {
        kubelet: kubelet.as_ref().map(|a| (a, level)),
        info_request,
        sweep: Some(&sweep),
    };
    let tuned = tune(&rail, extras)?;
    if let Some((req, plan, pci)) = &tuned.info {
        device_info::apply(node, req, plan, &tuned.found.port, pci);
    }
    Ok(output)
}

/// Where the GID check's address comes from.
pub enum Expect {
    /// The prevResult's (a CNI ADD): `None` when the check is off, or warn
    /// and there is no address.
    Given(Option<(Ipv6Addr, IpAddr)>),
    /// The netdev's own addresses in the pod netns, read by rtnetlink on
    /// the trip: a rail a DRA driver moved in has no prevResult.
    FromLink,
}

/// One rail to tune, as a CNI ADD and a DRA rail (`nri::dra`) both have it:
/// one function tunes both, so they are tuned, recorded and undone alike.
pub struct Rail<'a> {
    pub conf: &'a NetConf,
    pub node: &'a NodeConfig,
    /// The state entry's `network`: the config's name, or what tuned it.
    pub network: &'a str,
    /// The pod sandbox's id (CNI_CONTAINERID is the sandbox's too).
    pub container_id: &'a str,
    pub ifname: &'a str,
    pub netns: &'a NetNs,
    pub state: &'a StateDir,
    pub sysfs: &'a Sysfs,
    pub expect: Expect,
    pub pod: Option<PodRecord>,
    /// When the whole answer must be in (a DRA rail: the NRI request's
    /// budget), bounding the GID wait and every device lock; `None` for a
    /// CNI ADD, which its runtime bounds.
    pub deadline: Option<Instant>,
    /// Where the rail's PF's DCB state is asked for its QoS verdict:
    /// `rail_qos::HOST_DCB` for every command; tests choose theirs.
    pub dcb: &'a dyn DcbSource,
}

/// What only a CNI ADD has: the kubelet's answer (the placement check), the
/// device-info file asked for, and the orphan sweep done beside the trip.
#[derive(Default)]
pub struct AddExtras<'a> {
    pub kubelet: Option<(&'a PodAnswer, PathType)>,
    pub info_request: Option<Request>,
    pub sweep: Option<&'a dyn Fn()>,
}

/// A tuned rail: its entry, the sysctls it changed (what a later failure
/// of the same answer puts back), its device, and the device-info file to
/// make.
pub struct Tuned {
    pub entry: crate::state::Entry,
    pub sysctls: sysctl::Undo,
    pub found: Found,
    pub info: Option<(Request, Plan, String)>,
}

/// Tune one rail: ONE trip into the pod netns finds the pod's RDMA port (as
/// the kernel shows it from there), sets the sysctls and proves the GID
/// (nothing on the device is changed if any of that fails); then the
/// device's files are taken from this thread, through the view that shows
/// the device. Each change pushes its undo on a guard, so any failure
/// leaves the node as this found it.
pub fn tune(rail: &Rail, extras: AddExtras) -> CniResult<Tuned> {
    let Rail {
        conf,
        node,
        network,
        container_id,
        ifname,
        netns,
        state,
        sysfs,
        ..
    } = *rail;
    let sysctls = sysctl::resolve(&conf.sysctls, ifname);
    let wants: Vec<Wanted> = conf
        .owned()
        .into_iter()
        .filter_map(|(key, value)| settings::by_key(key).map(|s| (s, value)))
        .collect();
    // Decided once: where this rail's device is reached.
    let reach = sysfs.reach();
    let lock_wait = rail.deadline.map_or(LockWait::Blocking, LockWait::Until);
    let gid_wait = GidWait::of(conf, rail.deadline);
    let mut sweep = || {
        if let Some(f) = extras.sweep {
            f()
        }
    };
    let there = || -> CniResult<_> {
        let label = format!("<sysfs of netns {}>", netns.path().display());
        let mut side = PodSide::new(sysfs, netns.id(), label);
        let link = super::pod_link(ifname)?;
        let found = super::locate(conf, &mut side, reach, &link)?;
        let expected = match &rail.expect {
            Expect::Given(e) => *e,
            Expect::FromLink => {
                let addrs = Netlink::open()?.addresses(link.index)?;
                let addrs: Vec<IpNetwork> = addrs
                    .into_iter()
                    .filter(|(ip, _)| !is_link_local(ip))
                    .filter_map(|(ip, len)| IpNetwork::new(ip, len).ok())
                    .collect();
                expected_gid(conf, &addrs, ifname, "the pod netns shows")?
            }
        };
        // Judged before anything changes: enforce leaves the node as it was.
        let placed = extras
            .kubelet
            .and_then(|(answer, level)| {
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
            match check_gid(conf, view, &found.port, want, addr, gid_wait) {
                Ok(index) => gid_index = index,
                Err(e) => {
                    sysctl::revert(&undo);
                    return Err(e);
                }
            }
        }
        Ok((found, pod_view, undo, placed, gid_index, expected))
    };
    let mut out = None;
    trip(netns, &mut || out = Some(there()), &mut sweep)?;
    let out = out.ok_or_else(|| {
        CniError::new(code::IO_FAILURE, "the trip into the pod netns did not run")
    })?;
    let (found, pod_view, applied, placed, gid_index, expected) = out?;
    let views = Views {
        device: pod_view.as_ref().unwrap_or(sysfs.host()),
        host: sysfs.host(),
        pod: Some(PodIface { netns, ifname }),
    };
    let mut undo = Undo::new();
    undo.push(|| {
        let put_back = netns.run_there(&mut || sysctl::revert(&applied));
        if let Err(e) = put_back {
            crate::error!("tuning {ifname} failed and its sysctls could not be put back: {e}");
        }
    });
    let info = extras
        .info_request
        .and_then(|r| plan_device_info(node, r, &found));
    let created = info.as_ref().filter(|(_, plan, _)| *plan == Plan::Create);
    let claim = Claim {
        network,
        container_id,
        ifname,
        netns,
        reach,
        device_info: created.map(|(r, _, pci)| DeviceInfoFile {
            name: r.name.clone(),
            pci: pci.clone(),
        }),
        pod: rail.pod.clone(),
        placement: placed,
        gid: expected.map(|(g, _)| gid::format_gid(&g)),
        rail: RailRecord {
            gid_index,
            traffic_class: conf.traffic_class,
            rdma_cm_tos: conf.rdma_cm_tos,
        },
        lock_wait,
    };
    let mut place = super::place(state, sysfs, node);
    place.lock_wait = lock_wait;
    release_previous_device(place, container_id, ifname, &found.port)?;
    // Recorded before the first write; a failure gives back what this
    // take wrote (the entry says what) and drops the record, before the
    // sysctls.
    let port = &found.port;
    undo.push(move || ownership::undo_take(state, views, port, container_id, ifname, lock_wait));
    let entry = ownership::take(state, views, &found.port, &claim, &wants)?;
    // Judged once the class is written, as the rail will carry it; an
    // enforced refusal drops `undo`, which puts the class back.
    judge_qos(rail, &found).map_err(|msg| CniError::new(code::QOS_PRIORITY, msg))?;
    undo.disarm();
    Ok(Tuned {
        entry,
        sysctls: applied,
        found,
        info,
    })
}

/// The rail's QoS verdict (`rail_qos`), asked from this host-side thread,
/// within what is left of the rail's deadline; `Err` is `qosCheck:
/// enforce`'s refusal of a definite wrong priority.
fn judge_qos(rail: &Rail, found: &Found) -> Result<(), String> {
    let qos = rail.node.qos;
    if qos.check == QosCheck::Off {
        return Ok(());
    }
    // The class the rail's packets carry: the one written, else the ToS
    // rdma_cm gives its connections; neither set, the class is the
    // application's, and nothing here can judge it.
    let Some(class) = rail.conf.traffic_class.or(rail.conf.rdma_cm_tos) else {
        crate::debug!("QoS of {} not judged: no class set", rail.ifname);
        return Ok(());
    };
    let until = Instant::now() + rail_qos::DCB_TIMEOUT;
    let until = rail.deadline.map_or(until, |d| until.min(d));
    let vf = found
        .port
        .pci
        .as_deref()
        .or_else(|| found.parent.as_ref().and_then(|p| p.pci_address()));
    let judged = Judge::new(rail.dcb).rail(rail.sysfs.host(), vf, Class(class), qos.fabric, until);
    rail_qos::gate(qos.check, &judged, rail.ifname)
}

/// A trip into the pod netns with host work beside it (`NetNs::run_dyn`:
/// both of ADD's trips and the NRI plugin's share one instance).
fn trip(netns: &NetNs, there: &mut (dyn FnMut() + Send), here: &mut dyn FnMut()) -> CniResult<()> {
    netns.run_dyn(there, here).map_err(super::ns_error)
}

/// An IPv6 link-local address: every netdev has one, and its GID is the
/// port's own (index 0), never the pod's address.
fn is_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
}

/// How long the GID check waits: the config's `gidTimeoutMs`, or what is
/// left of a deadline when that ends first (`cut`: the wait was cut short
/// by it, not by the config).
#[derive(Clone, Copy)]
struct GidWait {
    timeout: Duration,
    cut: bool,
}

impl GidWait {
    fn of(conf: &NetConf, deadline: Option<Instant>) -> GidWait {
        let asked = Duration::from_millis(conf.gid_timeout_ms);
        match deadline {
            Some(d) => {
                // What the take after the wait needs (a lock, two writes,
                // an fsynced entry): measured in milliseconds, kept whole.
                let left = d
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(TAKE_RESERVE);
                GidWait {
                    timeout: asked.min(left),
                    cut: left < asked,
                }
            }
            None => GidWait {
                timeout: asked,
                cut: false,
            },
        }
    }
}

/// Kept of a deadline for the take after the GID wait.
const TAKE_RESERVE: Duration = Duration::from_millis(100);

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
    addrs: &[IpNetwork],
    ifname: &str,
    source: &str,
) -> CniResult<Option<(Ipv6Addr, IpAddr)>> {
    if conf.gid_check == GidCheck::Off {
        return Ok(None);
    }
    match gid::expected_gid(addrs) {
        Some(g) => Ok(Some(g)),
        None if conf.gid_check == GidCheck::Warn => {
            crate::warn!("GID check skipped: {source} {ifname} no address");
            Ok(None)
        }
        None => Err(CniError::new(
            code::GID_CHECK,
            format!(
                "GID check failed: {source} {ifname} no IP address, so no RoCE v2 GID can be expected; give the network an IPAM, or set gidCheck to \"off\""
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
    wait: GidWait,
) -> CniResult<Option<u32>> {
    let at = wanted_index(conf);
    match gid::wait_for(view, port, at, want, wait.timeout) {
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
            } else if wait.cut && conf.gid_check != GidCheck::Enforce {
                // The answer's budget ended the wait, not the config: the
                // rail is recorded and the agent's pass finds the GID later.
                crate::warn!(
                    "{} (the wait was cut to {} ms by the answer's budget; gidCheck is not enforce: the rail is recorded, and the agent's pass checks its GID)",
                    err.msg,
                    wait.timeout.as_millis()
                );
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
    container_id: &str,
    ifname: &str,
    port: &crate::rdma::RdmaPort,
) -> CniResult<()> {
    let Ok(old) = place.state.read(container_id, ifname) else {
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
