//! Unit-sized trees: a handful of functions laid out the way sysfs lays them
//! out (`devices/pciDDDD:BB/<bridges>/<bdf>`, `bus/pci/devices/<bdf>` links),
//! each test building the few it needs. The measured node is the integration
//! tests' (tests/it/common/topology.rs).

use super::gpu::{self, Unmapped};
use super::path::{self, PathType};
use super::pci::{self, Bdf, LocateError, PciNode};
use super::render;
use super::verdict::{judge, Gpu, Rail};
use crate::sysfs::{SysfsError, View};
use std::fs;
use std::path::{Path, PathBuf};

const BRIDGE: (u32, u16, u16) = (0x060400, 0x10b5, 0x8747); // a PLX switch port
const BCM4: (u16, u16, u16, u16) = (0x1000, 0xc010, 0x1000, 0xa096);
const GPU: (u32, u16, u16) = (0x030200, 0x10de, 0x20b2);
const NIC: (u32, u16, u16) = (0x020000, 0x15b3, 0x101d);

struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(tag: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("rt-topo-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
        Tree { root }
    }

    /// A function at `host/chain...`; its bridges must exist already.
    fn add(
        &self,
        host: &str,
        chain: &[&str],
        class: u32,
        vendor: u16,
        device: u16,
        numa: i32,
    ) -> PathBuf {
        self.add_ids(host, chain, class, (vendor, device, vendor, device), numa)
    }

    fn add_ids(
        &self,
        host: &str,
        chain: &[&str],
        class: u32,
        ids: (u16, u16, u16, u16),
        numa: i32,
    ) -> PathBuf {
        let rel: PathBuf = ["devices", host].iter().chain(chain).collect();
        let dir = self.root.join(&rel);
        fs::create_dir_all(&dir).unwrap();
        let w = |n: &str, v: String| fs::write(dir.join(n), v + "\n").unwrap();
        w("class", format!("{class:#08x}"));
        w("vendor", format!("{:#06x}", ids.0));
        w("device", format!("{:#06x}", ids.1));
        w("subsystem_vendor", format!("{:#06x}", ids.2));
        w("subsystem_device", format!("{:#06x}", ids.3));
        w("numa_node", numa.to_string());
        w("max_link_speed", "16.0 GT/s PCIe".into());
        w("max_link_width", "16".into());
        let bdf = chain.last().unwrap();
        std::os::unix::fs::symlink(
            Path::new("../../..").join(&rel),
            self.root.join("bus/pci/devices").join(bdf),
        )
        .unwrap();
        dir
    }

    fn bridge(&self, host: &str, chain: &[&str], numa: i32) {
        self.add(host, chain, BRIDGE.0, BRIDGE.1, BRIDGE.2, numa);
    }

    fn gpu(&self, host: &str, chain: &[&str], numa: i32) {
        self.add(host, chain, GPU.0, GPU.1, GPU.2, numa);
    }

    fn nic(&self, host: &str, chain: &[&str], numa: i32, rdma: &str) {
        let dir = self.add(host, chain, NIC.0, NIC.1, NIC.2, numa);
        fs::create_dir_all(dir.join("infiniband").join(rdma)).unwrap();
    }

    fn view(&self) -> View {
        View::open(&self.root).unwrap()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn at(v: &View, bdf: &str) -> PciNode {
    pci::locate(v, bdf).unwrap_or_else(|e| panic!("{bdf}: {e}"))
}

/// Two sockets. NUMA 0: a switch with GPU0, NIC0 beside it (PIX) and NIC1
/// behind a second switch (PXB); another host bridge with NIC2 (PHB).
/// NUMA 1: a switch with GPU1 and NIC3 (PIX; SYS to GPU0).
fn two_sockets(tag: &str) -> Tree {
    let t = Tree::new(tag);
    let h0 = "pci0000:00";
    t.bridge(h0, &["0000:00:01.1"], 0);
    t.bridge(h0, &["0000:00:01.1", "0000:01:00.0"], 0);
    for d in ["0000:02:00.0", "0000:02:01.0", "0000:02:02.0"] {
        t.bridge(h0, &["0000:00:01.1", "0000:01:00.0", d], 0);
    }
    t.gpu(
        h0,
        &[
            "0000:00:01.1",
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:03:00.0",
        ],
        0,
    );
    t.nic(
        h0,
        &[
            "0000:00:01.1",
            "0000:01:00.0",
            "0000:02:01.0",
            "0000:04:00.0",
        ],
        0,
        "mlx5_0",
    );
    let s2 = [
        "0000:00:01.1",
        "0000:01:00.0",
        "0000:02:02.0",
        "0000:05:00.0",
    ];
    t.bridge(h0, &s2, 0);
    t.bridge(h0, &[&s2[..], &["0000:06:00.0"]].concat(), 0);
    t.nic(
        h0,
        &[&s2[..], &["0000:06:00.0", "0000:07:00.0"]].concat(),
        0,
        "mlx5_1",
    );
    t.bridge("pci0000:20", &["0000:20:01.1"], 0);
    t.nic("pci0000:20", &["0000:20:01.1", "0000:21:00.0"], 0, "mlx5_2");
    let h1 = "pci0000:80";
    t.bridge(h1, &["0000:80:01.1"], 1);
    t.bridge(h1, &["0000:80:01.1", "0000:81:00.0"], 1);
    t.bridge(h1, &["0000:80:01.1", "0000:81:00.0", "0000:82:00.0"], 1);
    t.bridge(h1, &["0000:80:01.1", "0000:81:00.0", "0000:82:01.0"], 1);
    t.gpu(
        h1,
        &[
            "0000:80:01.1",
            "0000:81:00.0",
            "0000:82:00.0",
            "0000:83:00.0",
        ],
        1,
    );
    t.nic(
        h1,
        &[
            "0000:80:01.1",
            "0000:81:00.0",
            "0000:82:01.0",
            "0000:84:00.0",
        ],
        1,
        "mlx5_3",
    );
    t
}

#[test]
fn path_types_follow_nccls_tree() {
    let t = two_sockets("paths");
    let v = t.view();
    let g0 = at(&v, "0000:03:00.0");
    let g1 = at(&v, "0000:83:00.0");
    // The switch node is the upstream port: root port and downstream port
    // are skipped, two levels at a time.
    let names: Vec<String> = g0.switches.iter().map(|s| s.bdf.to_string()).collect();
    assert_eq!(names, ["0000:01:00.0"]);
    assert_eq!(g0.numa, Some(0));
    assert_eq!(g0.host, "pci0000:00");
    assert_eq!(g0.root(), "pci0000:00/0000:00:01.1");
    let nic = |b| at(&v, b);
    assert_eq!(path::between(&g0, &nic("0000:04:00.0")), PathType::Pix);
    assert_eq!(path::between(&g0, &nic("0000:07:00.0")), PathType::Pxb);
    assert_eq!(path::between(&g0, &nic("0000:21:00.0")), PathType::Phb);
    assert_eq!(path::between(&g0, &nic("0000:84:00.0")), PathType::Sys);
    assert_eq!(path::between(&g1, &nic("0000:84:00.0")), PathType::Pix);
    assert_eq!(path::between(&g1, &nic("0000:21:00.0")), PathType::Sys);
    assert_eq!(path::between(&g0, &g0), PathType::Loc);
    // Gen4 x16 links everywhere: 24 GB/s as NCCL rates them.
    assert_eq!(path::pcie_bw(&g0, &nic("0000:07:00.0")), Some(24.0));
}

#[test]
fn functions_on_root_ports_meet_at_the_cpu() {
    let t = Tree::new("rootports");
    t.bridge("pci0000:00", &["0000:00:01.1"], 2);
    t.bridge("pci0000:00", &["0000:00:01.2"], 2);
    t.gpu("pci0000:00", &["0000:00:01.1", "0000:01:00.0"], 2);
    t.nic("pci0000:00", &["0000:00:01.2", "0000:02:00.0"], 2, "mlx5_0");
    // Directly under a host bridge (no root port), as on some VMs.
    t.nic("pci0000:00", &["0000:00:05.0"], 2, "mlx5_1");
    let v = t.view();
    let g = at(&v, "0000:01:00.0");
    assert!(g.switches.is_empty());
    assert_eq!(path::between(&g, &at(&v, "0000:02:00.0")), PathType::Phb);
    assert_eq!(path::between(&g, &at(&v, "0000:00:05.0")), PathType::Phb);
}

/// A Broadcom Gen4 switch in base mode shows two levels: the GPU behind one
/// sub-switch, the NIC behind the other. NCCL fuses the subs into the top
/// switch and the pair becomes PIX; the same shape of another vendor stays PXB.
#[test]
fn broadcom_sub_switches_are_flattened() {
    for (vendor_ids, want) in [
        (BCM4, PathType::Pix),
        ((0x10b5, 0x8747, 0x10b5, 0x8747), PathType::Pxb),
    ] {
        let t = Tree::new(&format!("bcm{:x}", vendor_ids.0));
        let h = "pci0000:00";
        let b = |c: &[&str]| t.add_ids(h, c, 0x060400, vendor_ids, 0);
        b(&["0000:00:01.1"]);
        b(&["0000:00:01.1", "0000:01:00.0"]);
        for (d, l1) in [
            ("0000:02:00.0", "0000:03:00.0"),
            ("0000:02:01.0", "0000:05:00.0"),
        ] {
            b(&["0000:00:01.1", "0000:01:00.0", d]);
            b(&["0000:00:01.1", "0000:01:00.0", d, l1]);
        }
        b(&[
            "0000:00:01.1",
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:03:00.0",
            "0000:04:00.0",
        ]);
        b(&[
            "0000:00:01.1",
            "0000:01:00.0",
            "0000:02:01.0",
            "0000:05:00.0",
            "0000:06:00.0",
        ]);
        t.gpu(
            h,
            &[
                "0000:00:01.1",
                "0000:01:00.0",
                "0000:02:00.0",
                "0000:03:00.0",
                "0000:04:00.0",
                "0000:0a:00.0",
            ],
            0,
        );
        t.nic(
            h,
            &[
                "0000:00:01.1",
                "0000:01:00.0",
                "0000:02:01.0",
                "0000:05:00.0",
                "0000:06:00.0",
                "0000:0b:00.0",
            ],
            0,
            "mlx5_0",
        );
        let v = t.view();
        let (g, n) = (at(&v, "0000:0a:00.0"), at(&v, "0000:0b:00.0"));
        assert_eq!(path::between(&g, &n), want, "{:x}", vendor_ids.0);
        assert_eq!(g.fused.len(), usize::from(want == PathType::Pix));
        assert_eq!(g.bridges.len(), 5);
    }
}

#[test]
fn a_vf_sits_where_its_pf_sits() {
    let t = two_sockets("vf");
    let pf = t
        .root
        .join("devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:01.0/0000:04:00.0");
    let vf = t.add(
        "pci0000:00",
        &[
            "0000:00:01.1",
            "0000:01:00.0",
            "0000:02:01.0",
            "0000:04:00.2",
        ],
        NIC.0,
        NIC.1,
        0x101e,
        0,
    );
    std::os::unix::fs::symlink("../0000:04:00.0", vf.join("physfn")).unwrap();
    std::os::unix::fs::symlink("../0000:04:00.2", pf.join("virtfn0")).unwrap();
    fs::create_dir_all(vf.join("infiniband/mlx5_9")).unwrap();
    let v = t.view();
    let (p, f) = (at(&v, "0000:04:00.0"), at(&v, "0000:04:00.2"));
    assert_eq!(f.physfn, Some(p.bdf));
    assert_eq!(f.rdma, ["mlx5_9"]);
    assert_eq!(f.switches, p.switches);
    let g0 = at(&v, "0000:03:00.0");
    assert_eq!(path::between(&g0, &f), PathType::Pix);
    let ports: Vec<String> = pci::rdma_ports(&v)
        .unwrap()
        .iter()
        .map(|n| n.bdf.to_string())
        .collect();
    assert_eq!(
        ports,
        [
            "0000:04:00.0",
            "0000:07:00.0",
            "0000:21:00.0",
            "0000:84:00.0"
        ]
    );
    let gpus: Vec<String> = pci::gpus(&v)
        .unwrap()
        .iter()
        .map(|n| n.bdf.to_string())
        .collect();
    assert_eq!(gpus, ["0000:03:00.0", "0000:83:00.0"]);
}

#[test]
fn odd_links_are_refused_not_followed() {
    let t = two_sockets("odd");
    let devs = t.root.join("bus/pci/devices");
    std::os::unix::fs::symlink("../../../../etc", devs.join("0000:99:00.0")).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0",
        devs.join("0000:98:00.0"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../../../class/net", devs.join("0000:97:00.0")).unwrap();
    let v = t.view();
    let bdf = |s| Bdf::parse(s).unwrap();
    assert_eq!(
        pci::locate(&v, "0000:99:00.0"),
        Err(LocateError::Link(bdf("0000:99:00.0"), SysfsError::Escapes))
    );
    // Pointing at another function, or outside devices/: no place.
    assert_eq!(
        pci::locate(&v, "0000:98:00.0"),
        Err(LocateError::NotInTree(bdf("0000:98:00.0")))
    );
    assert_eq!(
        pci::locate(&v, "0000:97:00.0"),
        Err(LocateError::NotInTree(bdf("0000:97:00.0")))
    );
    assert_eq!(
        pci::locate(&v, "0000:96:00.0"),
        Err(LocateError::NotFound(bdf("0000:96:00.0")))
    );
    assert_eq!(pci::locate(&v, "../../etc"), Err(LocateError::BadAddress));
    // An attribute planted as a link reads as absent, not as its target.
    let g = t
        .root
        .join("devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0");
    fs::remove_file(g.join("numa_node")).unwrap();
    std::os::unix::fs::symlink("/proc/self/environ", g.join("numa_node")).unwrap();
    // NCCL reads the top node's numa_node, not the GPU's: still 0.
    assert_eq!(at(&v, "0000:03:00.0").numa, Some(0));
    let sw = t.root.join("devices/pci0000:00/0000:00:01.1/0000:01:00.0");
    fs::remove_file(sw.join("numa_node")).unwrap();
    std::os::unix::fs::symlink("/proc/self/environ", sw.join("numa_node")).unwrap();
    assert_eq!(at(&v, "0000:03:00.0").numa, None);
    // Every error names only what parsed.
    let msg = pci::locate(&v, "0000:99:00.0").unwrap_err().to_string();
    assert!(
        msg.contains("0000:99:00.0") && !msg.contains("etc"),
        "{msg}"
    );
}

fn pod(v: &View, gpus: &[&str], rails: &[&str]) -> (Vec<Gpu>, Vec<Rail>) {
    (
        gpus.iter()
            .map(|b| Gpu {
                id: format!("gpu-{b}"),
                node: at(v, b),
            })
            .collect(),
        rails
            .iter()
            .map(|b| Rail {
                name: format!("rail-{b}"),
                node: at(v, b),
            })
            .collect(),
    )
}

#[test]
fn the_gdr_level_moves_the_verdict_as_nccl_would() {
    let t = two_sockets("levels");
    let v = t.view();
    let ports = pci::rdma_ports(&v).unwrap();
    let (gpus, rails) = pod(
        &v,
        &["0000:03:00.0", "0000:83:00.0"],
        &["0000:07:00.0", "0000:21:00.0"],
    );
    let starved_at = |level| {
        let verdict = judge(&gpus, &rails, &ports, level);
        let s: Vec<bool> = verdict.gpus.iter().map(|g| g.starved).collect();
        (verdict.starved, s)
    };
    // PIX: neither rail is near GPU0 (PXB, PHB) nor GPU1 (SYS).
    assert_eq!(starved_at(PathType::Pix), (true, vec![true, true]));
    // PXB: NIC1 serves GPU0; GPU1 has nothing near.
    assert_eq!(starved_at(PathType::Pxb), (true, vec![false, true]));
    assert_eq!(starved_at(PathType::Phb), (true, vec![false, true]));
    // SYS: everything is near everything; one pool of two GPUs, two rails.
    assert_eq!(starved_at(PathType::Sys), (false, vec![false, false]));

    // PHB differs from PXB for a rail behind another host bridge.
    let (g0, r2) = pod(&v, &["0000:03:00.0"], &["0000:21:00.0"]);
    assert!(judge(&g0, &r2, &ports, PathType::Pxb).starved);
    let phb = judge(&g0, &r2, &ports, PathType::Phb);
    assert!(!phb.starved);
    assert_eq!(phb.rails[0].best, Some(PathType::Phb));
    assert_eq!(phb.gpus[0].near, ["rail-0000:21:00.0"]);
}

/// Two GPUs behind one switch, two rails, one of them far: each GPU "has a
/// near rail", but NCCL splits that one NIC between them (topo.cc:2052-2075):
/// the pool has 1 where its part is 2.
#[test]
fn gpus_sharing_one_near_rail_are_one_pool() {
    let t = two_sockets("pool");
    t.bridge(
        "pci0000:00",
        &["0000:00:01.1", "0000:01:00.0", "0000:02:03.0"],
        0,
    );
    t.gpu(
        "pci0000:00",
        &[
            "0000:00:01.1",
            "0000:01:00.0",
            "0000:02:03.0",
            "0000:08:00.0",
        ],
        0,
    );
    let v = t.view();
    let ports = pci::rdma_ports(&v).unwrap();
    let (gpus, rails) = pod(
        &v,
        &["0000:03:00.0", "0000:08:00.0"],
        &["0000:04:00.0", "0000:84:00.0"],
    );
    let verdict = judge(&gpus, &rails, &ports, path::DEFAULT_GDR_LEVEL);
    assert_eq!(verdict.pools.len(), 1);
    assert_eq!(verdict.pools[0].near_rails, 1);
    assert_eq!(verdict.pools[0].need, 2);
    assert!(verdict.starved);
    assert!(verdict
        .gpus
        .iter()
        .all(|g| g.near.len() == 1 && g.share == 1 && g.starved));
    assert!(!verdict.rails[1].near && verdict.rails[0].near);
    // With both rails near the switch, clean.
    let (gpus, rails) = pod(
        &v,
        &["0000:03:00.0", "0000:08:00.0"],
        &["0000:04:00.0", "0000:07:00.0"],
    );
    assert!(!judge(&gpus, &rails, &ports, path::DEFAULT_GDR_LEVEL).starved);
}

#[test]
fn more_gpus_than_rails_or_none_at_all() {
    let t = two_sockets("few");
    let v = t.view();
    let ports = pci::rdma_ports(&v).unwrap();
    // One rail for two GPUs on different sockets: floor(1 x 1 / 2) = 0 each.
    let (gpus, rails) = pod(&v, &["0000:03:00.0", "0000:83:00.0"], &["0000:04:00.0"]);
    let verdict = judge(&gpus, &rails, &ports, PathType::Pxb);
    assert!(!verdict.starved);
    assert_eq!(verdict.share, 1);
    // Three rails for two GPUs: needs 1 each, so 2 near one GPU and 1 near
    // the other is clean, 3 near one GPU starves the other.
    let (gpus, rails) = pod(
        &v,
        &["0000:03:00.0", "0000:83:00.0"],
        &["0000:04:00.0", "0000:07:00.0", "0000:84:00.0"],
    );
    assert!(!judge(&gpus, &rails, &ports, PathType::Pxb).starved);
    let (gpus, rails) = pod(
        &v,
        &["0000:03:00.0", "0000:83:00.0"],
        &["0000:04:00.0", "0000:07:00.0", "0000:21:00.0"],
    );
    let phb = judge(&gpus, &rails, &ports, PathType::Phb);
    assert!(phb.starved);
    assert_eq!(
        phb.gpus.iter().map(|g| g.starved).collect::<Vec<_>>(),
        [false, true]
    );
    let empty = judge(&[], &rails, &ports, PathType::Pxb);
    assert!(
        !empty.starved
            && empty.share == 0
            && empty.rails.iter().all(|r| r.best.is_none() && !r.near)
    );
    let none = judge(&gpus, &[], &ports, PathType::Pxb);
    assert!(!none.starved && none.share == 0);
}

#[test]
fn renders_escape_what_they_print() {
    let t = two_sockets("render");
    let v = t.view();
    let ports = pci::rdma_ports(&v).unwrap();
    let (mut gpus, mut rails) = pod(
        &v,
        &["0000:03:00.0", "0000:83:00.0"],
        &["0000:07:00.0", "0000:84:00.0"],
    );
    gpus[0].id = "GPU-a\nFORGED".into();
    rails[1].name = "net2\u{1b}[2J".into();
    let verdict = judge(&gpus, &rails, &ports, PathType::Pxb);
    let m = render::matrix(&verdict);
    assert!(m.starts_with("      GPU0  GPU1  near at PXB\n"), "{m}");
    assert!(
        m.contains("\nNIC0  PXB   SYS   near\nNIC1  SYS   PIX   near\n"),
        "{m}"
    );
    assert!(m.contains("GPU0: GPU-a\\nFORGED (0000:03:00.0)"), "{m}");
    assert!(m.contains("NIC1: net2\\u{1b}[2J (0000:84:00.0)"), "{m}");
    assert!(!m.contains('\u{1b}'));
    assert_eq!(m.lines().filter(|l| l.contains("FORGED")).count(), 1);
    let s = render::summary(&verdict);
    assert!(s.starts_with("clean"), "{s}");
    let groups = render::node_groups(&pci::gpus(&v).unwrap(), &ports);
    assert!(groups.starts_with("NUMA node 0\n  PCIe root pci0000:00/0000:00:01.1\n    GPU 0000:03:00.0\n    NIC 0000:04:00.0 mlx5_0\n"), "{groups}");
    assert!(
        groups.contains(
            "  PCIe root pci0000:20/0000:20:01.1\n    NIC 0000:21:00.0 mlx5_2\nNUMA node 1\n"
        ),
        "{groups}"
    );
}

/// The driver's proc directory: UUIDs, old MIG IDs and indexes map; a new
/// MIG ID and a missing GPU do not, and say why; a planted link refuses the
/// whole directory, since whoever planted it chose what a UUID maps to.
#[test]
fn gpu_ids_resolve_through_the_proc_directory() {
    if !crate::process::test_runs_as_root(
        "topology::gpu_ids_resolve_through_the_proc_directory",
        "an NVIDIA information file is believed only when root wrote it",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rt-topo-proc-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let uuid = |b: u8| format!("GPU-{b:02x}000000-0000-4000-8000-000000000000");
    for (i, b) in [0x03u8, 0x83].iter().enumerate() {
        let d = dir.join(format!("0000:{b:02x}:00.0"));
        fs::create_dir_all(&d).unwrap();
        let info = format!(
            "Model: \t\t NVIDIA A100-SXM4-80GB\nGPU UUID: \t {}\nBus Location: \t 0000:{b:02x}:00.0\nDevice Minor: \t {i}\n",
            uuid(*b)
        );
        fs::write(d.join("information"), info).unwrap();
    }
    let outside = dir.with_extension("outside");
    fs::write(
        &outside,
        format!("GPU UUID: {}\nDevice Minor: 7\n", uuid(0x99)),
    )
    .unwrap();
    let v = View::open(&dir).unwrap();
    let bdf = |s| Ok(Bdf::parse(s).unwrap());
    assert_eq!(gpu::resolve(&v, &uuid(0x83)), bdf("0000:83:00.0"));
    // NVML prints lowercase; an uppercase copy is the same UUID.
    assert_eq!(
        gpu::resolve(&v, &uuid(0x83).to_uppercase()),
        bdf("0000:83:00.0")
    );
    assert_eq!(
        gpu::resolve(&v, &format!("{}::2", uuid(0x03))),
        bdf("0000:03:00.0")
    );
    assert_eq!(
        gpu::resolve(&v, &format!("MIG-{}/1/0", uuid(0x83))),
        bdf("0000:83:00.0")
    );
    assert_eq!(
        gpu::resolve(&v, "MIG-3eb87630-93d5-b2b6-b8ff-9b359caf4ee2"),
        Err(Unmapped::MigUuid)
    );
    assert_eq!(gpu::resolve(&v, "1"), bdf("0000:83:00.0"));
    assert_eq!(gpu::resolve(&v, "0:3"), bdf("0000:03:00.0"));
    assert_eq!(gpu::resolve(&v, "0000:53:00.0"), bdf("0000:53:00.0"));
    assert_eq!(gpu::resolve(&v, &uuid(0x99)), Err(Unmapped::NoSuchGpu));
    assert_eq!(gpu::resolve(&v, "7"), Err(Unmapped::NoSuchGpu));
    assert_eq!(gpu::resolve(&v, "card1"), Err(Unmapped::NotAGpuId));
    assert_eq!(gpu::list(&v).unwrap().len(), 2);
    // A GPU directory without its file is no GPU; a link in its place
    // (even to a good file) refuses the list.
    fs::create_dir_all(dir.join("0000:99:00.0")).unwrap();
    assert_eq!(gpu::list(&v).unwrap().len(), 2);
    std::os::unix::fs::symlink(&outside, dir.join("0000:99:00.0/information")).unwrap();
    let untrusted = gpu::ListError::Untrusted {
        gpu: Bdf::parse("0000:99:00.0").unwrap(),
        why: crate::sysfs::SysfsError::Link,
    };
    assert_eq!(gpu::list(&v), Err(untrusted.clone()));
    assert_eq!(gpu::resolve(&v, &uuid(0x83)), Err(Unmapped::Dir(untrusted)));
    fs::remove_dir_all(&dir).unwrap();
    fs::remove_file(&outside).unwrap();
}

/// The real sysfs: every PCI function of this machine is placed, through
/// the filesystem check of a real view.
#[test]
fn this_machines_functions_are_placed() {
    let v = View::open(Path::new("/sys")).unwrap();
    let Ok(names) = v.list(Path::new("bus/pci/devices")) else {
        eprintln!("SKIPPED this_machines_functions_are_placed: this machine's /sys has no bus/pci/devices");
        return;
    };
    assert!(!names.is_empty());
    for n in &names {
        let node = pci::locate(&v, n).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert_eq!(node.bdf.to_string(), *n);
        assert!(node.host.starts_with("pci"), "{n}: {}", node.host);
        assert!(node.ids.vendor.is_some() && node.ids.class.is_some(), "{n}");
    }
}
