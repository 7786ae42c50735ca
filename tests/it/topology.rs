//! The placement verdict on the measured node (tests/it/common/topology.rs, BM.GPU.B4.8),
//! through the public API only: GPU IDs resolved through the proc stand-in,
//! functions placed from the sysfs tree, pods judged and rendered. The pods
//! are the two of the measured split (17.95 and 8.99 GB/s instead of 96),
//! the per-rail-resource layout and a whole-node pod. Needs no root.

use crate::common::topology::{
    self as b48, Node, POD_A_GPUS, POD_A_PORTS, POD_B_GPUS, POD_B_PORTS,
};
use roce_tune::sysfs::View;
use roce_tune::topology::gpu::{self, Unmapped};
use roce_tune::topology::path::{self, PathType};
use roce_tune::topology::verdict::{judge, Gpu, Rail, Verdict};
use roce_tune::topology::{pci, render, Bdf};

struct Place {
    _node: Node,
    sys: View,
    proc: View,
    ports: Vec<roce_tune::topology::PciNode>,
}

fn place(tag: &str) -> Place {
    let node = Node::build(tag);
    let sys = View::open(&node.sysfs).unwrap();
    let proc = View::open(&node.proc).unwrap();
    let ports = pci::rdma_ports(&sys).unwrap();
    Place {
        _node: node,
        sys,
        proc,
        ports,
    }
}

/// A pod: GPUs named by the UUIDs NVIDIA's plugin hands out, resolved
/// through the proc directory; rails the first VF of each (NIC bus, port).
fn pod(p: &Place, gpus: &[u8], ports: &[(u8, u8)]) -> (Vec<Gpu>, Vec<Rail>) {
    let gpus = gpus
        .iter()
        .map(|&bus| {
            let id = b48::uuid(bus);
            let bdf = gpu::resolve(&p.proc, &id).unwrap();
            Gpu {
                id,
                node: pci::locate(&p.sys, &bdf.to_string()).unwrap(),
            }
        })
        .collect();
    let rails = ports
        .iter()
        .enumerate()
        .map(|(i, &(bus, port))| Rail {
            name: format!("net{}", i + 1),
            node: pci::locate(&p.sys, &b48::vf(bus, port, 0)).unwrap(),
        })
        .collect();
    (gpus, rails)
}

/// The pod's names of the rails on `want`.
fn rail_names(ports: &[(u8, u8)], want: &[(u8, u8)]) -> Vec<String> {
    want.iter()
        .map(|w| format!("net{}", ports.iter().position(|p| p == w).unwrap() + 1))
        .collect()
}

fn gpu_of(v: &Verdict, bus: u8) -> &roce_tune::topology::verdict::GpuVerdict {
    v.gpus.iter().find(|g| g.pci.bus == bus).unwrap()
}

#[test]
fn the_node_is_placed_as_nccl_places_it() {
    let p = place("nodeview");
    assert_eq!(p.ports.len(), 16, "8 dual-port NICs");
    let gpus = pci::gpus(&p.sys).unwrap();
    let buses: Vec<u8> = gpus.iter().map(|g| g.bdf.bus).collect();
    assert_eq!(buses, b48::GPUS, "the VGA controller is no GPU");
    let g0f = pci::locate(&p.sys, &b48::gpu(0x0f)).unwrap();
    // Two levels up each time, the Broadcom sub-switch fused into its top.
    let sw: Vec<String> = g0f.switches.iter().map(|s| s.bdf.to_string()).collect();
    assert_eq!(sw, ["0000:0d:00.0", "0000:01:00.0"]);
    assert_eq!(g0f.fused, [Bdf::parse("0000:0a:00.0").unwrap()]);
    assert_eq!(g0f.numa, Some(3));
    assert_eq!(g0f.root(), "pci0000:00/0000:00:01.1");
    let vf = pci::locate(&p.sys, &b48::vf(0x0c, 1, 1)).unwrap();
    assert_eq!(vf.physfn.map(|b| b.to_string()), Some(b48::port(0x0c, 1)));
    let at = |bus, port| pci::locate(&p.sys, &b48::vf(bus, port, 0)).unwrap();
    assert_eq!(path::between(&g0f, &at(0x0c, 0)), PathType::Pxb);
    assert_eq!(path::between(&g0f, &at(0x16, 1)), PathType::Pxb);
    // Another root is another NUMA node (NPS4 on two sockets): SYS, never PHB.
    assert_eq!(path::between(&g0f, &at(0x47, 0)), PathType::Sys);
    assert_eq!(path::between(&g0f, &at(0xd1, 0)), PathType::Sys);
    let groups = render::node_groups(&gpus, &p.ports);
    let numa: Vec<&str> = groups.lines().filter(|l| l.starts_with("NUMA")).collect();
    assert_eq!(
        numa,
        ["NUMA node 1", "NUMA node 3", "NUMA node 5", "NUMA node 7"]
    );
    assert!(
        groups.contains("NUMA node 3\n  PCIe root pci0000:00/0000:00:01.1\n    NIC 0000:0c:00.0 mlx5_0\n    NIC 0000:0c:00.1 mlx5_1\n    GPU 0000:0f:00.0\n    GPU 0000:15:00.0\n    NIC 0000:16:00.0 mlx5_2\n    NIC 0000:16:00.1 mlx5_3\n"),
        "{groups}"
    );
}

#[test]
fn the_measured_split_starves_both_pods() {
    let p = place("split");
    // Pod A: GPUs 50, 53 (root 2) and 8c, 91 (root 3).
    let (gpus, rails) = pod(&p, &POD_A_GPUS, &POD_A_PORTS);
    let v = judge(&gpus, &rails, &p.ports, path::DEFAULT_GDR_LEVEL);
    assert!(v.starved);
    assert_eq!(v.share, 2);
    for bus in [0x8c, 0x91] {
        let g = gpu_of(&v, bus);
        assert_eq!(g.near, rail_names(&POD_A_PORTS, &[(0x89, 0)]));
        assert_eq!(g.share, 2);
        assert!(g.starved, "{bus:x}");
    }
    // GPUs 50, 53 see two near rails each, but share them: NCCL gives each
    // one (ceil(2/2), topo.cc:2058), where the pod's 8 rails make 2 each.
    for bus in [0x50, 0x53] {
        let g = gpu_of(&v, bus);
        assert_eq!(g.near, rail_names(&POD_A_PORTS, &[(0x47, 1), (0x4b, 0)]));
        assert!(g.starved, "{bus:x}");
    }
    let pools: Vec<(usize, usize, usize)> = v
        .pools
        .iter()
        .map(|p| (p.gpus.len(), p.near_rails, p.need))
        .collect();
    assert_eq!(pools, [(2, 2, 4), (2, 1, 4)]);
    let near: Vec<bool> = v.rails.iter().map(|r| r.near).collect();
    assert_eq!(near, [false, false, false, true, true, true, false, false]);
    assert_eq!(v.rails[0].best, Some(PathType::Sys));
    assert_eq!(v.rails[3].best, Some(PathType::Pxb));
    let m = render::matrix(&v);
    assert!(m.contains("\nNIC0  SYS   SYS   SYS   SYS   far\n"), "{m}");
    assert!(m.contains("\nNIC3  PXB   PXB   SYS   SYS   near\n"), "{m}");
    assert!(m.contains("\nNIC5  SYS   SYS   PXB   PXB   near\n"), "{m}");
    assert!(
        m.contains(&format!("GPU2: {} (0000:8c:00.0)", b48::uuid(0x8c))),
        "{m}"
    );
    let s = render::summary(&v);
    assert!(
        s.starts_with("STARVED: GPUs 0000:50:00.0, 0000:53:00.0 have 2 near rails and need 4"),
        "{s}"
    );
    assert!(
        s.contains("GPUs 0000:8c:00.0, 0000:91:00.0 have 1 near rail and need 4"),
        "{s}"
    );
    assert!(
        s.ends_with("Far from every GPU of the pod: net1, net2, net3, net7, net8."),
        "{s}"
    );

    // Pod B: GPUs 0f, 15 (root 1) and d6, da (root 4).
    let (gpus, rails) = pod(&p, &POD_B_GPUS, &POD_B_PORTS);
    let v = judge(&gpus, &rails, &p.ports, path::DEFAULT_GDR_LEVEL);
    assert!(v.starved);
    for bus in [0x0f, 0x15] {
        let g = gpu_of(&v, bus);
        assert_eq!(g.near, rail_names(&POD_B_PORTS, &[(0x0c, 0)]));
        assert!(g.starved);
    }
    for bus in [0xd6, 0xda] {
        assert_eq!(
            gpu_of(&v, bus).near,
            rail_names(&POD_B_PORTS, &[(0xc3, 1), (0xd1, 1)])
        );
    }
    assert_eq!(v.rails.iter().filter(|r| r.near).count(), 3);
    // The verdict goes into a state entry as JSON.
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["level"], "PXB");
    assert_eq!(json["starved"], true);
    assert_eq!(json["gpus"][0]["pci"], "0000:0f:00.0");
    assert_eq!(json["rails"][0]["paths"][0], "PXB");
}

#[test]
fn a_rail_on_every_port_and_the_whole_node_are_clean() {
    let p = place("clean");
    let all_ports: Vec<(u8, u8)> = b48::NICS.iter().flat_map(|&b| [(b, 0), (b, 1)]).collect();
    // The per-rail-resource layout: a VF on all 16 ports, 4 GPUs. Eight
    // rails are far from every GPU of the pod, and that is no fault.
    for gpus in [[0x0f, 0x50, 0x8c, 0xd6], [0x0f, 0x15, 0x50, 0x53]] {
        let (g, r) = pod(&p, &gpus, &all_ports);
        let v = judge(&g, &r, &p.ports, path::DEFAULT_GDR_LEVEL);
        assert!(!v.starved, "{}", render::summary(&v));
        assert_eq!(v.share, 4);
        assert!(v.gpus.iter().all(|g| g.near.len() == 4 && !g.starved));
        let far = v.rails.iter().filter(|r| !r.near).count();
        assert_eq!(far, if gpus[1] == 0x15 { 8 } else { 0 });
    }
    // The whole node: 16 VFs, 8 GPUs.
    let (g, r) = pod(&p, &b48::GPUS, &all_ports);
    let v = judge(&g, &r, &p.ports, path::DEFAULT_GDR_LEVEL);
    assert!(!v.starved);
    assert_eq!(v.share, 2);
    assert_eq!(v.pools.len(), 4);
    assert!(v.pools.iter().all(|p| p.need == 4 && p.near_rails == 4));
    assert!(render::summary(&v).starts_with("clean"));
}

#[test]
fn the_gdr_level_changes_the_verdict_as_nccl_would() {
    let p = place("levels");
    let (gpus, rails) = pod(&p, &POD_A_GPUS, &POD_A_PORTS);
    let at = |level| judge(&gpus, &rails, &p.ports, level);
    // PIX: on this node every GPU-NIC path is PXB, so NCCL uses GDR nowhere;
    // no placement could do better, so no GPU is starved, every rail far.
    let pix = at(PathType::parse_level("PIX").unwrap());
    assert!(!pix.starved && pix.rails.iter().all(|r| !r.near));
    assert!(pix.pools.iter().all(|p| p.node_ports == 0 && p.need == 0));
    assert!(at(PathType::parse_level("PXB").unwrap()).starved);
    // Old-style numbers: 2 is PXB.
    assert_eq!(at(PathType::parse_level("2").unwrap()), at(PathType::Pxb));
    // PHB: each root is its own NUMA node here, so nothing changes.
    let phb = at(PathType::parse_level("PHB").unwrap());
    assert!(phb.starved);
    assert_eq!(phb.rails.iter().filter(|r| r.near).count(), 3);
    // SYS: every rail is near; one pool of 4 GPUs with all 8 rails.
    let sys = at(PathType::parse_level("SYS").unwrap());
    assert!(!sys.starved);
    assert_eq!(sys.pools.len(), 1);
    assert_eq!((sys.pools[0].near_rails, sys.pools[0].need), (8, 8));
}

#[test]
fn gpu_ids_of_every_form_resolve_or_say_why_not() {
    let p = place("ids");
    let want = |bus| Ok(Bdf::parse(&b48::gpu(bus)).unwrap());
    assert_eq!(gpu::resolve(&p.proc, &b48::uuid(0x8c)), want(0x8c));
    assert_eq!(
        gpu::resolve(&p.proc, &format!("{}::1", b48::uuid(0x8c))),
        want(0x8c)
    );
    // Old MIG form names its parent GPU; the new one names only itself.
    assert_eq!(
        gpu::resolve(&p.proc, &format!("MIG-{}/7/0", b48::uuid(0xd6))),
        want(0xd6)
    );
    assert_eq!(
        gpu::resolve(&p.proc, "MIG-3eb87630-93d5-b2b6-b8ff-9b359caf4ee2"),
        Err(Unmapped::MigUuid)
    );
    // Indexes follow PCI order, and the minors agree here.
    assert_eq!(gpu::resolve(&p.proc, "4"), want(0x8c));
    assert_eq!(gpu::resolve(&p.proc, "7:2"), want(0xda));
    assert_eq!(gpu::resolve(&p.proc, "8"), Err(Unmapped::NoSuchGpu));
    // AMD's plugin hands out the PCI address.
    assert_eq!(gpu::resolve(&p.proc, "0000:50:00.0"), want(0x50));
    // A GPU missing from the proc directory is reported, not guessed; the
    // indexes after it then disagree with the minors.
    std::fs::remove_dir_all(p._node.proc.join(b48::gpu(0x50))).unwrap();
    assert_eq!(
        gpu::resolve(&p.proc, &b48::uuid(0x50)),
        Err(Unmapped::NoSuchGpu)
    );
    assert!(matches!(
        gpu::resolve(&p.proc, "3"),
        Err(Unmapped::IndexDisagrees { by_bus_order: Some(a), by_minor: Some(b) }) if a.bus == 0x8c && b.bus == 0x53
    ));
    assert_eq!(gpu::list(&p.proc).unwrap().len(), 7);
    let msg = gpu::resolve(&p.proc, "3").unwrap_err().to_string();
    assert!(
        msg.contains("0000:8c:00.0") && msg.contains("0000:53:00.0"),
        "{msg}"
    );
    // The pod's verdict goes on with the GPUs that mapped.
    let ids = [b48::uuid(0x50), b48::uuid(0x53)];
    let placed: Vec<Gpu> = ids
        .iter()
        .filter_map(|id| gpu::resolve(&p.proc, id).ok().map(|b| (id, b)))
        .map(|(id, b)| Gpu {
            id: id.clone(),
            node: pci::locate(&p.sys, &b.to_string()).unwrap(),
        })
        .collect();
    assert_eq!(placed.len(), 1);
    let rails = vec![Rail {
        name: "net1".into(),
        node: pci::locate(&p.sys, &b48::vf(0x47, 0, 0)).unwrap(),
    }];
    assert!(!judge(&placed, &rails, &p.ports, PathType::Pxb).starved);
}
