//! One rail tuned: ONE trip into the pod netns finds the pod's RDMA port
//! (as the kernel shows it from there), sets the sysctls and proves the GID
//! (nothing on the device is changed if any of that fails); then the
//! device's files are taken from this thread, through the view that shows
//! the device, and the rail recorded. Each change pushes its undo on a
//! guard, so any failure leaves the node as it was found.

use super::gid::{check_gid, expected_gid, is_link_local, GidWait};
use super::locate::{locate, ns_error, place, pod_link};
use super::placement::judge_placement;
use super::Error;
use crate::cni::config::NetConf;
use crate::cni::{code, CniError, CniResult};
use crate::device_info::{self, Plan, Request};
use crate::netns::NetNs;
use crate::node::NodeConfig;
use crate::ownership::{self, Claim, Wanted};
use crate::pod_answer::PodAnswer;
use crate::qos::{Class, QosCheck};
use crate::rail_qos::{self, DcbSource, Judge};
use crate::rdma::gid;
use crate::rdma::lookup::Found;
use crate::rdma::reach::{PodSide, Reach, Sysfs};
use crate::rdma::setting::{PodIface, Views};
use crate::settings;
use crate::state::{DeviceInfoFile, LockWait, PodRecord, RailRecord, StateDir};
use crate::syscall::Syscall;
use crate::sysctl;
use crate::topology::PathType;
use crate::undo::Undo;
use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Instant;

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
    /// The host the trip, the pod's link and port and its sysctls are asked
    /// of: `syscall::KERNEL` for every command; unit tests choose theirs.
    pub sys: &'a dyn Syscall,
}

/// What only a CNI ADD has: the kubelet's answer (the placement check), the
/// device-info file asked for, and the orphan sweep done beside the trip.
#[derive(Default)]
pub struct TuneExtras<'a> {
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
pub fn tune(rail: &Rail, extras: TuneExtras) -> Result<Tuned, Error> {
    steps(rail, extras).map_err(Error::from)
}

/// `tune`'s steps, each failing as the library's typed causes read as CNI
/// errors (`super::error`), which `tune` turns into the rail's `Error`.
fn steps(rail: &Rail, extras: TuneExtras) -> CniResult<Tuned> {
    let Rail {
        conf,
        node,
        network,
        container_id,
        ifname,
        netns,
        state,
        sysfs,
        sys,
        ..
    } = *rail;
    let sysctls = sysctl::resolve(sys.proc_sys(), &conf.sysctls, ifname);
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
        let link = pod_link(sys, ifname)?;
        let found = locate(sys, conf, &mut side, reach, &link)?;
        let expected = match &rail.expect {
            Expect::Given(e) => *e,
            Expect::FromLink => {
                let addrs = sys.addresses(link.index)?;
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
    trip(sys, netns, &mut || out = Some(there()), &mut sweep)?;
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
        let put_back = sys.run_there(netns, &mut || sysctl::revert(&applied));
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
    let mut place = place(state, sysfs, node);
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

/// A trip into the pod netns with host work beside it (`Syscall::trip`:
/// both of ADD's trips and the NRI plugin's share one instance).
pub fn trip(
    sys: &dyn Syscall,
    netns: &NetNs,
    there: &mut (dyn FnMut() + Send),
    here: &mut dyn FnMut(),
) -> CniResult<()> {
    sys.trip(netns, there, here).map_err(ns_error)
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
