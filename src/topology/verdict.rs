//! The pod's verdict: did its GPUs get their part of the rails NCCL can use
//! with GPUDirect RDMA? Pure: places in, verdict out (docs/topology.md, "The
//! verdict").
//!
//! A rail is near a GPU when NCCL's path type between them is within the GDR
//! level (`path::gdr`). A far rail alone is no fault: NCCL prefers each
//! GPU's nearest NICs and does not go past PXN while it has a solution there
//! (search.cc:1229-1233). What starves a pod is too few near rails where its
//! GPUs are:
//!
//! - GPUs that share near node ports form a pool: NCCL splits a GPU's nearest
//!   NICs among the GPUs nearest to them (`ncclTopoGetLocalNetType`,
//!   topo.cc:2052-2075), and PXN lets a pool's NVLink peers send through them
//!   (paths.cc:813-843), so the near rails of a pool serve the pool as one.
//! - With R rails and G GPUs each GPU's share is R/G; a pool of k GPUs needs
//!   floor(k x R / G) near rails, or every port the node has near the pool if
//!   it has fewer. A pool below that is starved, and so is each of its GPUs.
//!
//! The floor keeps the need satisfiable: the pools' needs never add up to
//! more than R.

use super::path::{self, PathType};
use super::pci::{Bdf, PciNode};
use serde::Serialize;

/// One of the pod's GPUs, placed.
#[derive(Debug, Clone)]
pub struct Gpu {
    /// The device plugin's ID, for messages.
    pub id: String,
    pub node: PciNode,
}

/// One of the pod's rails (a VF, or a PF given whole), placed.
#[derive(Debug, Clone)]
pub struct Rail {
    /// The pod's interface or the RDMA device, for messages.
    pub name: String,
    pub node: PciNode,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The GDR level judged against (NCCL_NET_GDR_LEVEL).
    pub level: PathType,
    /// ceil(R / G): each GPU's share of the pod's rails.
    pub share: usize,
    /// Some pool of GPUs has fewer near rails than it needs.
    pub starved: bool,
    pub gpus: Vec<GpuVerdict>,
    pub rails: Vec<RailVerdict>,
    pub pools: Vec<Pool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuVerdict {
    pub id: String,
    pub pci: Bdf,
    /// The pod's rails near this GPU, by name, in the pod's order.
    pub near: Vec<String>,
    /// ceil(R / G).
    pub share: usize,
    /// Index into `Verdict::pools`.
    pub pool: usize,
    /// Its pool is starved.
    pub starved: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RailVerdict {
    pub name: String,
    pub pci: Bdf,
    /// Near at least one of the pod's GPUs.
    pub near: bool,
    /// The best path type to any of the pod's GPUs (`None` without GPUs).
    pub best: Option<PathType>,
    /// The path type to each GPU, in `Verdict::gpus` order.
    pub paths: Vec<PathType>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pool {
    /// Indexes into `Verdict::gpus`.
    pub gpus: Vec<usize>,
    /// The pod's rails near any GPU of the pool.
    pub near_rails: usize,
    /// The node's ports near any GPU of the pool.
    pub node_ports: usize,
    /// min(floor(k x R / G), ports near the pool).
    pub need: usize,
    pub starved: bool,
}

/// Judge a pod: its GPUs, its rails, every RDMA port of the node
/// (`pci::rdma_ports`), at a GDR level (`path::DEFAULT_GDR_LEVEL` unless
/// NCCL_NET_GDR_LEVEL says otherwise).
pub fn judge(gpus: &[Gpu], rails: &[Rail], node_ports: &[PciNode], level: PathType) -> Verdict {
    let (g_count, r_count) = (gpus.len(), rails.len());
    let share = if g_count == 0 {
        0
    } else {
        r_count.div_ceil(g_count)
    };
    let near = |g: &Gpu, n: &PciNode| path::gdr(path::between(&g.node, n), level);

    // Pools: GPUs joined by a node port, or a pod rail, near both.
    let mut pool_of: Vec<usize> = (0..g_count).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let places = node_ports.iter().chain(rails.iter().map(|r| &r.node));
    for place in places {
        let mut first: Option<usize> = None;
        for i in (0..g_count).filter(|&i| near(&gpus[i], place)) {
            match first {
                None => first = Some(i),
                Some(f) => {
                    let (a, b) = (find(&mut pool_of, f), find(&mut pool_of, i));
                    pool_of[a.max(b)] = a.min(b);
                }
            }
        }
    }
    let roots: Vec<usize> = (0..g_count).map(|i| find(&mut pool_of, i)).collect();
    let mut pool_roots: Vec<usize> = roots.clone();
    pool_roots.sort_unstable();
    pool_roots.dedup();

    let pools: Vec<Pool> = pool_roots
        .iter()
        .map(|&root| {
            let members: Vec<usize> = (0..g_count).filter(|&i| roots[i] == root).collect();
            let near_any = |n: &PciNode| members.iter().any(|&i| near(&gpus[i], n));
            let near_rails = rails.iter().filter(|r| near_any(&r.node)).count();
            let ports = node_ports.iter().filter(|p| near_any(p)).count();
            let part = members.len() * r_count / g_count;
            let need = part.min(ports.max(near_rails));
            Pool {
                gpus: members,
                near_rails,
                node_ports: ports,
                need,
                starved: near_rails < need,
            }
        })
        .collect();

    let gpu_verdicts = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let pool = pool_roots
                .binary_search(&roots[i])
                .expect("every root is a pool");
            GpuVerdict {
                id: g.id.clone(),
                pci: g.node.bdf,
                near: rails
                    .iter()
                    .filter(|r| near(g, &r.node))
                    .map(|r| r.name.clone())
                    .collect(),
                share,
                pool,
                starved: pools[pool].starved,
            }
        })
        .collect();
    let rail_verdicts = rails
        .iter()
        .map(|r| {
            let paths: Vec<PathType> = gpus
                .iter()
                .map(|g| path::between(&g.node, &r.node))
                .collect();
            let best = paths.iter().copied().min();
            RailVerdict {
                name: r.name.clone(),
                pci: r.node.bdf,
                near: best.is_some_and(|b| path::gdr(b, level)),
                best,
                paths,
            }
        })
        .collect();
    Verdict {
        level,
        share,
        starved: pools.iter().any(|p| p.starved),
        gpus: gpu_verdicts,
        rails: rail_verdicts,
        pools,
    }
}
