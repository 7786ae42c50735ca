//! The placement verdict of one rail at ADD: the pod's VFs against its
//! GPUs, from the kubelet's answer (`pod_answer`), and the line of a check
//! that did not run.

use crate::cni::config::{NetConf, PlacementCheck};
use crate::cni::{code, CniError, CniResult};
use crate::node::NodeConfig;
use crate::placement;
use crate::pod_answer::PodAnswer;
use crate::rdma::lookup::Found;
use crate::rdma::reach::Sysfs;
use crate::state::PlacementRecord;
use crate::topology::PathType;

/// The placement verdict for this rail, `Err` (106) when the pod is starved
/// and the network enforces it; `None` when the check cannot run here.
pub(super) fn judge_placement(
    conf: &NetConf,
    node: &NodeConfig,
    sysfs: &Sysfs,
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
pub fn placement_skipped(conf: &NetConf, skip: &placement::Skip) -> CniResult<()> {
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
