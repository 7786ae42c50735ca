//! The right rail (docs/placement.md): at each rail's ADD, whether the
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

/// The bounds of a judgement, each checked before the placing it guards
/// (without them, an answer of 100,000 GPU IDs took 1.46 s to judge and one
/// 6.1 MB line to report). Placing a function reads a few dozen sysfs
/// files, about 0.05 ms; these keep a judgement within a few ms.
///
/// The pod's device IDs of the node's GPU resources: a node holds at most
/// 16 GPUs, 8 of them with 7 MIG slices each is 56 IDs.
pub const GPU_IDS_MAX: usize = 128;
/// The pod's other device IDs that are PCI addresses, each a rail to place:
/// 16 rails is a full node, 32 with dual-port VFs.
pub const RAIL_IDS_MAX: usize = 128;
/// IDs a line names one by one (GPUs not placed); the rest are counted.
const NAMED_MAX: usize = 8;

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
    /// The pod lists more devices than a judgement takes.
    TooMany(String),
    /// An input of the verdict is not one only root can provide (the
    /// kubelet socket's peer, the checkpoint, an `information` file): named,
    /// and never believed. With `enforce`, the rail fails (107).
    /// Recorded by `pod_answer` as the text that says it.
    Untrusted(String),
    /// Another rail of the pod's skip, as it said it (`pod_answer`).
    Recorded(String),
}

impl Skip {
    /// A skip the log says as a warning: someone may be forging the verdict.
    pub fn is_untrusted(&self) -> bool {
        matches!(self, Skip::Untrusted(_))
    }
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
            Skip::TooMany(what) => write!(f, "the pod lists {what}"),
            Skip::Untrusted(what) => write!(
                f,
                "{what}; only root may provide what the verdict is judged on, so it is not believed"
            ),
            Skip::Recorded(why) => f.write_str(why),
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
        Err(KubeletError::Untrusted(what)) => Err(Skip::Untrusted(what)),
        Err(e) => Err(Skip::Kubelet(e)),
    }
}

/// The pod's verdict, judged at a rail's ADD (or by `inspect`).
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// The first of the rails the caller named: its place in `verdict.rails`.
    pub rail: usize,
    /// GPUs of the pod that name no PCI function here, with why.
    pub unmapped: Vec<(String, String)>,
}

impl Judgement {
    /// The verdict a rail's ADD would judge, from one judged without any
    /// rail of the caller's (`judge(.., &[], ..)`: every rail named by the
    /// kubelet's ID): the rail of VF `vf` renamed `ifname`, as `judge`
    /// names the rails the caller shows. `None` when that VF is not among
    /// the verdict's rails; a fresh `judge` would then count one rail more.
    /// One judgement serves every rail of the pod this way (`pod_answer`).
    pub fn for_rail(&self, ifname: &str, vf: &str) -> Option<Judgement> {
        let bdf = Bdf::parse(&vf.to_ascii_lowercase())?;
        self.renamed(bdf, own_name(ifname, vf))
    }

    /// The verdict with the rail of `bdf` named `name` and made this one's.
    fn renamed(&self, bdf: Bdf, name: String) -> Option<Judgement> {
        let rail = self.verdict.rails.iter().position(|r| r.pci == bdf)?;
        let mut j = self.clone();
        let old = std::mem::replace(&mut j.verdict.rails[rail].name, name.clone());
        for g in &mut j.verdict.gpus {
            for n in g.near.iter_mut().filter(|n| **n == old) {
                n.clone_from(&name);
            }
        }
        j.rail = rail;
        Some(j)
    }

    /// What this rail's ADD says of it: its line, its entry's record, and
    /// whether the pod is starved (which `enforce` refuses).
    pub fn said(&self) -> Said {
        Said {
            line: self.explain(),
            record: self.record(),
            starved: self.verdict.starved,
        }
    }

    /// `said` for each of the verdict's rails, as that rail's own ADD would
    /// say it, its name left as [`Said::NAME`] (`Said::named` puts it in):
    /// what the pod's first rail records for the others (`pod_answer`).
    pub fn said_by_each(&self) -> Vec<(Bdf, Said)> {
        let v = &self.verdict;
        (0..v.rails.len())
            .map(|i| {
                let rename = Some((v.rails[i].name.as_str(), Said::NAME));
                let said = Said {
                    line: self.explain_as(i, rename),
                    record: self.record_of(i),
                    starved: v.starved,
                };
                (v.rails[i].pci, said)
            })
            .collect()
    }

    /// The verdict as it concerns this rail: what its state entry records
    /// and the agent exports.
    pub fn record(&self) -> PlacementRecord {
        self.record_of(self.rail)
    }

    fn record_of(&self, rail: usize) -> PlacementRecord {
        PlacementRecord {
            near: self.verdict.rails.get(rail).is_some_and(|r| r.near),
            starved_gpus: self.verdict.gpus.iter().filter(|g| g.starved).count() as u32,
            level: self.verdict.level.name().to_string(),
        }
    }

    /// One line for the log (and the enforce error): the rail, near or far,
    /// each starved GPU with its near rails and its share (and, where GPUs
    /// share their near rails, what the pool has and needs: two GPUs with
    /// the same two near rails each "have" two, and share them), and the fix.
    pub fn explain(&self) -> String {
        self.explain_as(self.rail, None)
    }

    /// `explain` as the rail at `rail` says it, a rail's name `(from, to)`
    /// said as `to` (what a clone renamed by `for_rail` would say).
    fn explain_as(&self, rail: usize, rename: Option<(&str, &str)>) -> String {
        let v = &self.verdict;
        let name = |n: &str| match rename {
            Some((from, to)) if n == from => crate::log::escape(to),
            _ => crate::log::escape(n),
        };
        let names = |list: &[String]| -> String {
            if list.is_empty() {
                return "none".to_string();
            }
            let escaped: Vec<String> = list.iter().map(|n| name(n)).collect();
            escaped.join(", ")
        };
        let mut out = match v.rails.get(rail) {
            Some(r) => format!(
                "rail {} (VF {}) is {}: {} to the nearest of the pod's {} GPUs, GDR level {}",
                name(&r.name),
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
            out.push_str(&format!("; not placed: {}", not_placed(&self.unmapped)));
        }
        out
    }
}

/// The GPUs not placed, with why: the first [`NAMED_MAX`], then how many more.
fn not_placed(unmapped: &[(String, String)]) -> String {
    let mut s = unmapped
        .iter()
        .take(NAMED_MAX)
        .map(|(id, why)| format!("{} ({why})", crate::log::escape(id)))
        .collect::<Vec<_>>()
        .join(", ");
    if unmapped.len() > NAMED_MAX {
        s.push_str(&format!(" and {} more", unmapped.len() - NAMED_MAX));
    }
    s
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
    let is_gpu = |d: &&podresources::Device| node.gpu_resources.contains(&d.resource);
    let gpu_ids = devices.devices.iter().filter(is_gpu).count();
    if gpu_ids > GPU_IDS_MAX {
        return Err(Skip::TooMany(format!(
            "{gpu_ids} GPU device IDs, over the {GPU_IDS_MAX} a judgement takes"
        )));
    }
    let rail_ids = devices
        .devices
        .iter()
        .filter(|d| !is_gpu(d) && Bdf::parse(&d.id.to_ascii_lowercase()).is_some())
        .count();
    if rail_ids > RAIL_IDS_MAX {
        return Err(Skip::TooMany(format!(
            "{rail_ids} other PCI devices, over the {RAIL_IDS_MAX} rails a judgement takes"
        )));
    }
    // One placer for every function: they share their switches. The GPUs
    // first: a pod without any needs no look at the node's ports.
    let placer = pci::Placer::for_verdict(host);
    let (gpus, unmapped) = place_gpus(&placer, node, devices)?;
    if gpus.is_empty() {
        return Err(if unmapped.is_empty() {
            Skip::NoGpus
        } else {
            Skip::NoPlacedGpus(not_placed(&unmapped))
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
                name: own_name(ifname, vf),
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

/// What a rail's ADD says of the pod's placement (`Judgement::said`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    /// The log line (and `enforce`'s message).
    pub line: String,
    /// What the rail's state entry records.
    pub record: PlacementRecord,
    /// Some GPU of the pod is starved.
    pub starved: bool,
}

impl Said {
    /// Where the rail's own name goes in a recorded line: a character no
    /// escaping changes and no name the log carries holds.
    pub const NAME: &'static str = "\u{fffe}";

    /// A line recorded with [`Said::NAME`], said by the rail `ifname` (VF
    /// `vf`), named as `judge` names the rails its caller shows.
    pub fn named(mut self, ifname: &str, vf: &str) -> Said {
        self.line = self
            .line
            .replace(Said::NAME, &crate::log::escape(&own_name(ifname, vf)));
        self
    }
}

/// How a rail the caller shows is named: its interface, when that is a
/// name a log line can carry as it is; else its VF.
fn own_name(ifname: &str, vf: &str) -> String {
    if is_safe_component(ifname) {
        ifname.to_owned()
    } else {
        vf.to_owned()
    }
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

/// The pod's GPUs, placed, and those that could not be, each with why.
type PlacedGpus = (Vec<Gpu>, Vec<(String, String)>);

/// The pod's GPUs with their places, and those that could not be placed;
/// `Untrusted` when the driver's proc directory holds a file root did not
/// write.
fn place_gpus(
    placer: &pci::Placer,
    node: &NodeConfig,
    devices: &PodDevices,
) -> Result<PlacedGpus, Skip> {
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
                if proc_gpus.is_none() {
                    let listed = View::open(&node.nvidia_gpus_dir)
                        .map_err(gpu::ListError::Dir)
                        .and_then(|v| gpu::list(&v));
                    proc_gpus = Some(match listed {
                        Ok(entries) => entries,
                        Err(gpu::ListError::Untrusted { gpu, why }) => {
                            return Err(Skip::Untrusted(format!(
                                "the NVIDIA information file {}: {why}",
                                node.nvidia_gpus_dir
                                    .join(gpu.to_string())
                                    .join("information")
                                    .display()
                            )))
                        }
                        Err(_) => Vec::new(),
                    });
                }
                gpu::resolve_in(proc_gpus.as_deref().unwrap_or_default(), &id)
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
            Err(why) => unmapped.push((d.id.clone(), why.to_string())),
        }
    }
    placed.sort_by_key(|g| g.node.bdf);
    Ok((placed, unmapped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::Device;

    fn pod(gpus: usize, vfs: usize) -> PodDevices {
        let gpu = (0..gpus).map(|i| Device {
            resource: "nvidia.com/gpu".into(),
            id: format!("GPU-{i:08x}-0000-4000-8000-000000000000"),
        });
        let vf = (0..vfs).map(|i| Device {
            resource: "nvidia.com/rdma_vf".into(),
            id: format!("0000:{:02x}:{:02x}.{}", i / 256, (i / 8) % 32, i % 8),
        });
        PodDevices {
            devices: gpu.chain(vf).collect(),
        }
    }

    /// Over a bound, the judgement stops before it places anything: the
    /// view (an empty dir) is never read.
    #[test]
    fn a_judgement_takes_at_most_its_bounds() {
        let empty = std::env::temp_dir().join(format!("rt-judge-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let view = View::open(&empty).unwrap();
        let node = NodeConfig::defaults("/nonexistent".into());
        let judge = |d: &PodDevices| judge(&view, &node, d, &[], PathType::Pxb).err();
        assert!(matches!(
            judge(&pod(GPU_IDS_MAX + 1, 1)),
            Some(Skip::TooMany(m)) if m.starts_with("129 GPU device IDs")
        ));
        assert!(matches!(
            judge(&pod(1, RAIL_IDS_MAX + 1)),
            Some(Skip::TooMany(m)) if m.starts_with("129 other PCI devices")
        ));
        // Within them, the GPUs are looked up (none is in the empty dir).
        assert!(matches!(
            judge(&pod(GPU_IDS_MAX, RAIL_IDS_MAX)),
            Some(Skip::NoPlacedGpus(_))
        ));
        std::fs::remove_dir_all(&empty).unwrap();
    }

    #[test]
    fn a_line_names_the_first_gpus_not_placed_and_counts_the_rest() {
        let unmapped: Vec<(String, String)> = (0..20)
            .map(|i| (format!("GPU-{i}"), Unmapped::NoSuchGpu.to_string()))
            .collect();
        let s = not_placed(&unmapped);
        assert!(s.starts_with("GPU-0 (no GPU of"), "{s}");
        assert!(s.contains("GPU-7 (") && !s.contains("GPU-8 ("), "{s}");
        assert!(s.ends_with(" and 12 more"), "{s}");
        assert_eq!(not_placed(&unmapped[..1]).matches('(').count(), 1);
    }
}
