//! ADD: validate everything; make ONE trip into the pod netns to find the
//! pod's RDMA port (as the kernel shows it from there), set the sysctls and
//! prove the GID (nothing on the device is changed if any of that fails);
//! then take the device's files from this thread, through the view that
//! shows the device. Each change pushes its undo on a guard, so any failure
//! leaves the node as ADD found it.

use crate::cni::config::{NetConf, PlacementCheck};
use crate::cni::env::CniEnv;
use crate::cni::result::NetResult;
use crate::cni::{CniError, CniResult};
use crate::device_info;
use crate::node::NodeConfig;
use crate::pod_answer;
use crate::rail::{self, expected_gid, placement_skipped, trip, Expect, Rail, TuneExtras};
use crate::rail_qos;
use crate::state::{PodRecord, StateDir};
use crate::syscall::Syscall;
use crate::sysctl;
use crate::topology::PathType;
use serde_json::Value;

/// `sys`: the host (`syscall::KERNEL`; a unit test's own).
pub fn run(sys: &dyn Syscall, env: &CniEnv, conf: &NetConf, node: &NodeConfig) -> CniResult<Value> {
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
        let state = StateDir::existing_on(sys, &node.state_dir).ok().flatten();
        let sysfs = match state {
            Some(_) => Some(rail::sysfs(node)?),
            None => None,
        };
        let mut sweep = || {
            if let (Some(state), Some(sysfs)) = (&state, &sysfs) {
                crate::orphans::sweep_bounded(rail::place(state, sysfs, node), env.container_id());
            }
        };
        let sysctls = sysctl::resolve(sys.proc_sys(), &conf.sysctls, ifname);
        let mut applied = None;
        trip(
            sys,
            &netns,
            &mut || applied = Some(sysctl::apply(&sysctls)),
            &mut sweep,
        )?;
        applied.transpose()?;
        return Ok(output);
    }
    // Opened once for the record and the orphan sweep: every RDMA ADD
    // records its rail.
    let state = StateDir::create_on(sys, &node.state_dir)?;
    let sysfs = rail::sysfs(node)?;
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
        || crate::orphans::sweep_bounded(rail::place(&state, &sysfs, node), env.container_id());
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
        sys,
    };
    let extras = TuneExtras {
        kubelet: kubelet.as_ref().map(|a| (a, level)),
        info_request,
        sweep: Some(&sweep),
    };
    let tuned = rail::tune(&rail, extras).map_err(rail::Error::into_cni)?;
    if let Some((req, plan, pci)) = &tuned.info {
        device_info::apply(node, req, plan, &tuned.found.port, pci);
    }
    Ok(output)
}
