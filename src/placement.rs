//! The right rail (README, "Placement"): at each rail's ADD, whether the
//! pod's VFs sit close enough to its GPUs for GPUDirect RDMA, judged for the
//! whole pod as NCCL would (`topology`). The pod's GPUs and VFs come from the
//! kubelet's PodResources API (`podresources`), what Multus reads for
//! deviceIDs too; the kubelet has allocated them before the sandbox exists.
//!
//! Nothing here may hang or fail an ADD that did not ask for it: a pod
//! without Kubernetes identity in CNI_ARGS, a node without the kubelet
//! socket, a kubelet that answers slowly, wrongly or not at all, a pod
//! without GPUs: each skips the check with one log line (`Skip`).

use crate::cni::env::PodRef;
use crate::node::NodeConfig;
use crate::podresources::{self, Error as KubeletError, PodDevices, Query, Source};
use crate::rdma::is_safe_component;
use crate::state::PlacementRecord;
use crate::sysfs::View;
use crate::topology::gpu::{self, GpuEntry, GpuId, Unmapped};
use crate::topology::verdict::{self, Gpu, Rail, Verdict};
use crate::topology::{pci, Bdf, PathType, PciNode};
use std::fmt;

/// What NCCL does with a starved pod, and the fix: the ADD line's and
/// `inspect`'s.
pub const FIX: &str = "NCCL then sends those GPUs' traffic over far rails without GPUDirect RDMA (through CPU memory); give each rail its own device-plugin resource (one VF per port, next to the pod's GPUs), or allocate the VFs with DRA and a pcieRoot constraint";

/// Why the check does not run for this ADD: never an error for the pod.
#[derive(Debug)]
pub enum Skip {
    /// CNI_ARGS names no pod (a runtime outside Kubernetes, cnitool).
    NoPod,
    /// The kubelet's socket is not there (or refuses): no kubelet on this node.
    NoSocket,
    /// The kubelet could not be asked within the bound, or answered wrongly.
    Kubelet(KubeletError),
    /// The kubelet does not know the pod.
    UnknownPod,
    /// The pod holds no device of the node's GPU resources.
    NoGpus,
    /// None of the pod's GPUs maps to a PCI function this node shows.
    NoPlacedGpus(String),
    /// This rail's own VF cannot be placed in the PCI tree.
    RailNotPlaced(String),
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::NoPod => f.write_str("CNI_ARGS names no pod (K8S_POD_NAMESPACE, K8S_POD_NAME)"),
            Skip::NoSocket => f.write_str("the kubelet's PodResources socket is absent"),
            Skip::Kubelet(e) => write!(f, "the kubelet's PodResources API: {e}"),
            Skip::UnknownPod => f.write_str("the kubelet does not know the pod"),
            Skip::NoGpus => f.write_str("the pod holds no GPU of the node's gpuResources"),
            Skip::NoPlacedGpus(why) => write!(f, "no GPU of the pod could be placed: {why}"),
            Skip::RailNotPlaced(why) => write!(f, "this rail's VF cannot be placed: {why}"),
        }
    }
}

/// The pod's devices, from the kubelet (or its checkpoint), within the node
/// config's bound. Asked from the host's thread: the socket is a host path.
pub fn pod_devices(node: &NodeConfig, pod: Option<&PodRef>) -> Result<(PodDevices, Source), Skip> {
    let pod = pod.ok_or(Skip::NoPod)?;
    let query = Query {
        namespace: &pod.namespace,
        name: &pod.name,
        uid: pod.uid.as_deref(),
    };
    match podresources::lookup(
        &node.pod_resources_socket,
        node.pod_resources_checkpoint.as_deref(),
        node.pod_resources_timeout,
        &query,
    ) {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(Skip::UnknownPod),
        Err(KubeletError::NoSocket(_)) => Err(Skip::NoSocket),
        Err(e) => Err(Skip::Kubelet(e)),
    }
}

/// The pod's verdict, judged at a rail's ADD (or by `inspect`).
pub struct Judgement {
    pub verdict: Verdict,
    /// The first of the rails the caller named: its place in `verdict.rails`.
    pub rail: usize,
    /// GPUs of the pod that name no PCI function here, with why.
    pub unmapped: Vec<(String, Unmapped)>,
}

impl Judgement {
    /// The verdict as it concerns this rail: what its state entry records
    /// and the agent exports.
    pub fn record(&self) -> PlacementRecord {
        PlacementRecord {
            near: self.verdict.rails.get(self.rail).is_some_and(|r| r.near),
            starved_gpus: self.verdict.gpus.iter().filter(|g| g.starved).count() as u32,
            level: self.verdict.level.name().to_string(),
        }
    }

    /// One line for the log (and the enforce error): the rail, near or far,
    /// each starved GPU with its near rails and its share (and, where GPUs
    /// share their near rails, what the pool has and needs: two GPUs with
    /// the same two near rails each "have" two, and share them), and the fix.
    pub fn explain(&self) -> String {
        let v = &self.verdict;
        let names = |list: &[String]| -> String {
            if list.is_empty() {
                return "none".to_string();
            }
            let escaped: Vec<String> = list.iter().map(|n| crate::log::escape(n)).collect();
            escaped.join(", ")
        };
        let mut out = match v.rails.get(self.rail) {
            Some(r) => format!(
                "rail {} (VF {}) is {}: {} to the nearest of the pod's {} GPUs, GDR level {}",
                crate::log::escape(&r.name),
                r.pci,
                if r.near { "near" } else { "far" },
                r.best.map_or("no path", |b| b.name()),
                v.gpus.len(),
                v.level
            ),
            None => format!("the pod's {} GPUs at GDR level {}", v.gpus.len(), v.level),
        };
        if v.starved {
            let starved: Vec<String> = v
                .gpus
                .iter()
                .filter(|g| g.starved)
                .map(|g| {
                    let mut s = format!(
                        "GPU {} ({}) has near rails {}, share {}",
                        g.pci,
                        crate::log::escape(&g.id),
                        names(&g.near),
                        g.share
                    );
                    let pool = &v.pools[g.pool];
                    let peers: Vec<String> = pool
                        .gpus
                        .iter()
                        .filter(|&&i| v.gpus[i].pci != g.pci)
                        .map(|&i| v.gpus[i].pci.to_string())
                        .collect();
                    if !peers.is_empty() {
                        s.push_str(&format!(
                            " (shared with GPU {}: {} near rail{} for {} GPUs, which need {})",
                            peers.join(", "),
                            pool.near_rails,
                            if pool.near_rails == 1 { "" } else { "s" },
                            pool.gpus.len(),
                            pool.need
                        ));
                    }
                    s
                })
                .collect();
            out.push_str(&format!(
                "; the pod is starved: {}; {FIX}",
                starved.join("; ")
            ));
        } else {
            out.push_str("; every GPU has its share of near rails");
        }
        if !self.unmapped.is_empty() {
            let left: Vec<String> = self
                .unmapped
                .iter()
                .map(|(id, why)| format!("{} ({why})", crate::log::escape(id)))
                .collect();
            out.push_str(&format!("; not placed: {}", left.join(", ")));
        }
        out
    }
}

/// Judge the pod from the host's sysfs: its GPUs (`gpuResources` devices,
/// mapped through the NVIDIA proc directory when they are not PCI
/// addresses), its rails (every device of its other resources that is a
/// PCI function of an RDMA NIC, and `own`: the rails the pod itself shows,
/// `(interface, VF)`, the first of them this ADD's), against every RDMA
/// port of the node.
pub fn judge(
    host: &View,
    node: &NodeConfig,
    devices: &PodDevices,
    own: &[(&str, &str)],
    level: PathType,
) -> Result<Judgement, Skip> {
    // One placer for every function: they share their switches. The GPUs
    // first: a pod without any needs no look at the node's ports.
    let placer = pci::Placer::new(host);
    let (gpus, unmapped) = place_gpus(&placer, node, devices);
    if gpus.is_empty() {
        return Err(if unmapped.is_empty() {
            Skip::NoGpus
        } else {
            Skip::NoPlacedGpus(
                unmapped
                    .iter()
                    .map(|(id, why)| format!("{} ({why})", crate::log::escape(id)))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        });
    }
    // Below PHB a port can be near only under a root of the pod's GPUs; the
    // others cannot change the verdict, so they are not placed.
    let ports = if level < PathType::Phb {
        let roots: Vec<String> = gpus.iter().map(|g| g.node.root()).collect();
        placer.rdma_ports_under(&roots)
    } else {
        placer.rdma_ports()
    }
    .map_err(|e| Skip::RailNotPlaced(e.to_string()))?;
    let mut rails: Vec<Rail> = Vec::new();
    // The rails the pod shows first, named by their interfaces: the kubelet
    // lists no VF of a NAD without a resource, and these are the pod's for sure.
    for (ifname, vf) in own {
        let node = placer
            .locate(vf)
            .map_err(|e| Skip::RailNotPlaced(e.to_string()))?;
        if rails.iter().all(|r| r.node.bdf != node.bdf) {
            rails.push(Rail {
                name: if is_safe_component(ifname) {
                    (*ifname).to_owned()
                } else {
                    (*vf).to_owned()
                },
                node,
            });
        }
    }
    for d in devices
        .devices
        .iter()
        .filter(|d| !node.gpu_resources.contains(&d.resource))
    {
        let Some(bdf) = Bdf::parse(&d.id.to_ascii_lowercase()) else {
            continue;
        };
        if rails.iter().any(|r| r.node.bdf == bdf) {
            continue;
        }
        if let Some(node) = rdma_function(&placer, &bdf, &ports) {
            rails.push(Rail {
                name: d.id.clone(),
                node,
            });
        }
    }
    let first = rails.first().map(|r| r.node.bdf);
    rails.sort_by_key(|r| r.node.bdf);
    let rail = rails
        .iter()
        .position(|r| Some(r.node.bdf) == first)
        .unwrap_or(0);
    Ok(Judgement {
        verdict: verdict::judge(&gpus, &rails, &ports, level),
        rail,
        unmapped,
    })
}

/// A PCI function of an RDMA NIC: a port of the node, or a VF of one (in
/// exclusive mode a VF's own RDMA device may be in a pod's netns, its PF's
/// stays on the host).
fn rdma_function(placer: &pci::Placer, bdf: &Bdf, ports: &[PciNode]) -> Option<PciNode> {
    let node = placer.locate(&bdf.to_string()).ok()?;
    let is_port = ports.iter().any(|p| p.bdf == node.bdf);
    let of_port = node
        .physfn
        .is_some_and(|pf| ports.iter().any(|p| p.bdf == pf));
    (is_port || of_port || !node.rdma.is_empty()).then_some(node)
}

/// The pod's GPUs with their places, and those that could not be placed.
fn place_gpus(
    placer: &pci::Placer,
    node: &NodeConfig,
    devices: &PodDevices,
) -> (Vec<Gpu>, Vec<(String, Unmapped)>) {
    let mut proc_gpus: Option<Vec<GpuEntry>> = None;
    let mut placed: Vec<Gpu> = Vec::new();
    let mut unmapped = Vec::new();
    for d in devices
        .devices
        .iter()
        .filter(|d| node.gpu_resources.contains(&d.resource))
    {
        let bdf = match GpuId::parse(&d.id) {
            Some(GpuId::Pci(b)) => Ok(b),
            Some(id) => {
                let entries = proc_gpus.get_or_insert_with(|| {
                    View::open(&node.nvidia_gpus_dir)
                        .ok()
                        .and_then(|v| gpu::list(&v).ok())
                        .unwrap_or_default()
                });
                gpu::resolve_in(entries, &id)
            }
            None => Err(Unmapped::NotAGpuId),
        };
        match bdf.and_then(|b| {
            placer
                .locate(&b.to_string())
                .map_err(|_| Unmapped::NoSuchGpu)
        }) {
            // Two IDs of one GPU (MIG slices, replicas) are one GPU to NCCL.
            Ok(n) if placed.iter().any(|g| g.node.bdf == n.bdf) => {}
            Ok(n) => placed.push(Gpu {
                id: d.id.clone(),
                node: n,
            }),
            Err(why) => unmapped.push((d.id.clone(), why)),
        }
    }
    placed.sort_by_key(|g| g.node.bdf);
    (placed, unmapped)
}
