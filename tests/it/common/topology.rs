//! The measured node as a sysfs test tree: BM.GPU.B4.8 (docs/topology.md,
//! "The measured node"), two CPU sockets, 8 A100 GPUs and 8 dual-port NICs on
//! 4 PCIe roots, each root one NUMA node with 2 GPUs and 2 NICs behind a
//! Broadcom switch. Which GPUs and NICs share a root, the NUMA nodes, class
//! codes and link rates are OCI's (oracle-quickstart/oci-hpc
//! samples/gpu/topo-flattened-b4.xml); the bridge chains are the HGX A100
//! baseboard's as a DGX A100 shows them (NVIDIA's GPUDirect Storage guide,
//! lstopo of a DGX A100): a root port, a two-level Broadcom PEX88000 switch
//! (1000:c010, subsystem 1000:a096), and per GPU a bridge pair with NVIDIA's
//! subsystem (1000:c010, 10de:13b8). Bus numbers of bridges, host bridges,
//! VF addresses and RDMA names are assumed.
//!
//! Layout: `<base>/sys` (devices/, bus/pci/devices/ links, numa_node, class,
//! vendor, device, subsystem_*, max_link_*, physfn/virtfnN, infiniband/) and
//! `<base>/proc` standing for /proc/driver/nvidia/gpus.

use std::fs;
use std::path::{Path, PathBuf};

/// GPUs by bus, in PCI order.
pub const GPUS: [u8; 8] = [0x0f, 0x15, 0x50, 0x53, 0x8c, 0x91, 0xd6, 0xda];
/// NICs by bus, in PCI order; each has ports .0 and .1.
pub const NICS: [u8; 8] = [0x0c, 0x16, 0x47, 0x4b, 0x89, 0x93, 0xc3, 0xd1];
/// VFs made on each port.
pub const VFS_PER_PORT: u8 = 2;

// The measured split (docs/topology.md, "The verdict"): the two 4-GPU pods
// whose VFs came from one resource, each GPU by bus and each VF by its
// port (NIC bus, port).
pub const POD_A_GPUS: [u8; 4] = [0x50, 0x53, 0x8c, 0x91];
pub const POD_A_PORTS: [(u8, u8); 8] = [
    (0x0c, 1),
    (0x16, 0),
    (0x16, 1),
    (0x47, 1),
    (0x4b, 0),
    (0x89, 0),
    (0xc3, 0),
    (0xd1, 0),
];
pub const POD_B_GPUS: [u8; 4] = [0x0f, 0x15, 0xd6, 0xda];
pub const POD_B_PORTS: [(u8, u8); 8] = [
    (0x0c, 0),
    (0x47, 0),
    (0x4b, 1),
    (0x89, 1),
    (0x93, 0),
    (0x93, 1),
    (0xc3, 1),
    (0xd1, 1),
];

const ROOT_PORT: Ids = (0x060400, 0x1022, 0x1483, 0x1022, 0x1453);
const BCM: Ids = (0x060400, 0x1000, 0xc010, 0x1000, 0xa096);
const NV_BRIDGE: Ids = (0x060400, 0x1000, 0xc010, 0x10de, 0x13b8);
const A100: Ids = (0x030200, 0x10de, 0x20b2, 0x10de, 0x1463);
const CX6_PF: Ids = (0x020000, 0x15b3, 0x101d, 0x15b3, 0x0016);
const CX6_VF: Ids = (0x020000, 0x15b3, 0x101e, 0x15b3, 0x0016);
const ASPEED_VGA: Ids = (0x030000, 0x1a03, 0x2000, 0x1a03, 0x2000);

/// class, vendor, device, subsystem vendor, subsystem device.
type Ids = (u32, u16, u16, u16, u16);

/// Below a switch half: a NIC on a downstream port, or a GPU behind the
/// board's bridge pair (downstream port, bridge up, bridge down).
enum Item {
    Nic(&'static str, u8),
    Gpu(&'static str, &'static str, &'static str, u8),
}

struct Root {
    host: &'static str,
    numa: i32,
    root_port: &'static str,
    top: &'static str,
    halves: [(&'static str, &'static str, [Item; 2]); 2],
}

fn roots() -> [Root; 4] {
    use Item::*;
    [
        Root {
            host: "pci0000:00",
            numa: 3,
            root_port: "0000:00:01.1",
            top: "0000:01:00.0",
            halves: [
                (
                    "0000:02:00.0",
                    "0000:0a:00.0",
                    [
                        Nic("0000:0b:00.0", 0x0c),
                        Gpu("0000:0b:10.0", "0000:0d:00.0", "0000:0e:00.0", 0x0f),
                    ],
                ),
                (
                    "0000:02:04.0",
                    "0000:11:00.0",
                    [
                        Gpu("0000:12:00.0", "0000:13:00.0", "0000:14:00.0", 0x15),
                        Nic("0000:12:10.0", 0x16),
                    ],
                ),
            ],
        },
        Root {
            host: "pci0000:30",
            numa: 1,
            root_port: "0000:30:01.1",
            top: "0000:3f:00.0",
            halves: [
                (
                    "0000:40:00.0",
                    "0000:45:00.0",
                    [Nic("0000:46:00.0", 0x47), Nic("0000:46:08.0", 0x4b)],
                ),
                (
                    "0000:40:04.0",
                    "0000:4c:00.0",
                    [
                        Gpu("0000:4d:00.0", "0000:4e:00.0", "0000:4f:00.0", 0x50),
                        Gpu("0000:4d:08.0", "0000:51:00.0", "0000:52:00.0", 0x53),
                    ],
                ),
            ],
        },
        Root {
            host: "pci0000:70",
            numa: 7,
            root_port: "0000:70:01.1",
            top: "0000:7e:00.0",
            halves: [
                (
                    "0000:7f:00.0",
                    "0000:87:00.0",
                    [
                        Nic("0000:88:00.0", 0x89),
                        Gpu("0000:88:10.0", "0000:8a:00.0", "0000:8b:00.0", 0x8c),
                    ],
                ),
                (
                    "0000:7f:04.0",
                    "0000:8d:00.0",
                    [
                        Gpu("0000:8e:00.0", "0000:8f:00.0", "0000:90:00.0", 0x91),
                        Nic("0000:8e:10.0", 0x93),
                    ],
                ),
            ],
        },
        Root {
            host: "pci0000:b0",
            numa: 5,
            root_port: "0000:b0:01.1",
            top: "0000:bb:00.0",
            halves: [
                (
                    "0000:bc:00.0",
                    "0000:c1:00.0",
                    [Nic("0000:c2:00.0", 0xc3), Nic("0000:c2:08.0", 0xd1)],
                ),
                (
                    "0000:bc:04.0",
                    "0000:d2:00.0",
                    [
                        Gpu("0000:d3:00.0", "0000:d4:00.0", "0000:d5:00.0", 0xd6),
                        Gpu("0000:d3:08.0", "0000:d8:00.0", "0000:d9:00.0", 0xda),
                    ],
                ),
            ],
        },
    ]
}

/// `0000:BB:00.0`.
pub fn func(bus: u8, f: u8) -> String {
    format!("0000:{bus:02x}:00.{f}")
}

/// The GPU at `bus`.
pub fn gpu(bus: u8) -> String {
    func(bus, 0)
}

/// Port `port` (0 or 1) of the NIC at `bus`.
pub fn port(bus: u8, port: u8) -> String {
    func(bus, port)
}

/// VF `n` of a port: functions 2, 3 of port 0 and 4, 5 of port 1 (assumed;
/// ConnectX places VFs by its own offset and stride).
pub fn vf(bus: u8, port: u8, n: u8) -> String {
    func(bus, 2 + port * VFS_PER_PORT + n)
}

/// The UUID the driver reports for the GPU at `bus` (made up, unique).
pub fn uuid(bus: u8) -> String {
    format!("GPU-{bus:02x}a100b4-4b08-4000-8000-{:012x}", u64::from(bus))
}

pub struct Node {
    /// What the node removes on drop: the proc stand-in, and the sysfs
    /// unless it was built on a `Tree` (which removes its own root).
    pub base: PathBuf,
    pub sysfs: PathBuf,
    pub proc: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

fn write_ids(dir: &Path, ids: Ids, numa: i32) {
    fs::create_dir_all(dir).unwrap();
    let w = |n: &str, v: String| fs::write(dir.join(n), v + "\n").unwrap();
    w("class", format!("{:#08x}", ids.0));
    w("vendor", format!("{:#06x}", ids.1));
    w("device", format!("{:#06x}", ids.2));
    w("subsystem_vendor", format!("{:#06x}", ids.3));
    w("subsystem_device", format!("{:#06x}", ids.4));
    w("numa_node", numa.to_string());
    w("max_link_speed", "16.0 GT/s PCIe".into());
    w("max_link_width", "16".into());
}

impl Node {
    /// Build the node under a fresh directory of the temp dir.
    pub fn build(tag: &str) -> Node {
        let base = std::env::temp_dir().join(format!("rt-b48-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        Node::build_at(base.join("sys"), base.join("proc"), base)
    }

    /// Build the node's PCI functions into the RDMA test tree `tree` (whose
    /// root is the plugin's `sysfsRoot`), the proc stand-in beside it. The
    /// two agree on what `bus/pci/devices/<bdf>` is: here it is the link
    /// into `devices/`, as the kernel makes it, and `Tree::add_device` of a
    /// VF with the RDMA name this node gave it (`rdma_name`) only adds the
    /// `class/infiniband/<dev>` side, since `infiniband/<dev>` is already
    /// there through the link.
    pub fn build_on(tree: &super::Tree) -> Node {
        let base = tree.root.with_extension("b48");
        let _ = fs::remove_dir_all(&base);
        Node::build_at(tree.root.clone(), base.join("proc"), base)
    }

    fn build_at(sysfs: PathBuf, proc: PathBuf, base: PathBuf) -> Node {
        let node = Node { base, sysfs, proc };
        fs::create_dir_all(node.sysfs.join("bus/pci/devices")).unwrap();
        fs::create_dir_all(&node.proc).unwrap();
        let mut rdma = 0..;
        let mut minor = 0..;
        let mut vfs: Vec<(PathBuf, String)> = Vec::new();
        for r in roots() {
            let top = [r.host, r.root_port, r.top];
            node.function(&top[..2], ROOT_PORT, r.numa);
            node.function(&top, BCM, r.numa);
            for (down, sub, items) in &r.halves {
                let at: Vec<&str> = [&top[..], &[*down, *sub]].concat();
                node.function(&at[..at.len() - 1], BCM, r.numa);
                node.function(&at, BCM, r.numa);
                for item in items {
                    match item {
                        Item::Nic(d, bus) => {
                            let up: Vec<&str> = [&at[..], &[*d]].concat();
                            node.function(&up, BCM, r.numa);
                            for p in 0..2 {
                                let pf = port(*bus, p);
                                let dir = node.function(
                                    &[&up[..], &[pf.as_str()]].concat(),
                                    CX6_PF,
                                    r.numa,
                                );
                                fs::create_dir_all(
                                    dir.join(format!("infiniband/mlx5_{}", rdma.next().unwrap())),
                                )
                                .unwrap();
                                for n in 0..VFS_PER_PORT {
                                    let v = vf(*bus, p, n);
                                    let vdir = node.function(
                                        &[&up[..], &[v.as_str()]].concat(),
                                        CX6_VF,
                                        r.numa,
                                    );
                                    std::os::unix::fs::symlink(
                                        format!("../{pf}"),
                                        vdir.join("physfn"),
                                    )
                                    .unwrap();
                                    std::os::unix::fs::symlink(
                                        format!("../{v}"),
                                        dir.join(format!("virtfn{n}")),
                                    )
                                    .unwrap();
                                    vfs.push((vdir, v));
                                }
                            }
                        }
                        Item::Gpu(d, nv_up, nv_down, bus) => {
                            let mut up: Vec<&str> = [&at[..], &[*d]].concat();
                            node.function(&up, BCM, r.numa);
                            up.push(nv_up);
                            node.function(&up, NV_BRIDGE, r.numa);
                            up.push(nv_down);
                            node.function(&up, NV_BRIDGE, r.numa);
                            let g = gpu(*bus);
                            node.function(&[&up[..], &[g.as_str()]].concat(), A100, r.numa);
                            node.proc_entry(*bus, minor.next().unwrap());
                        }
                    }
                }
            }
        }
        // The VFs' RDMA devices come after the 16 PFs', as mlx5 probes them.
        for (vdir, _) in &vfs {
            fs::create_dir_all(vdir.join(format!("infiniband/mlx5_{}", rdma.next().unwrap())))
                .unwrap();
        }
        // The board's VGA controller: class 0x03, yet no GPU of NCCL's.
        node.function(&["pci0000:00", "0000:00:08.1"], ROOT_PORT, 3);
        node.function(
            &["pci0000:00", "0000:00:08.1", "0000:17:00.0"],
            ASPEED_VGA,
            3,
        );
        node
    }

    /// The RDMA device this node gave the function `bdf` (a port or a VF).
    pub fn rdma_name(&self, bdf: &str) -> String {
        let dir = self
            .sysfs
            .join("bus/pci/devices")
            .join(bdf)
            .join("infiniband");
        let names: Vec<String> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 1, "{bdf}: {names:?}");
        names.into_iter().next().unwrap()
    }

    /// A function at `host/bridges.../bdf`, with its bus/pci/devices link.
    fn function(&self, chain: &[&str], ids: Ids, numa: i32) -> PathBuf {
        let rel: PathBuf = std::iter::once("devices")
            .chain(chain.iter().copied())
            .collect();
        let dir = self.sysfs.join(&rel);
        if !dir.exists() {
            write_ids(&dir, ids, numa);
            let link = self
                .sysfs
                .join("bus/pci/devices")
                .join(chain.last().unwrap());
            std::os::unix::fs::symlink(Path::new("../../..").join(&rel), link).unwrap();
        }
        dir
    }

    /// The driver's `information` for the GPU at `bus`, as the NVIDIA
    /// driver lays it out.
    fn proc_entry(&self, bus: u8, minor: u32) {
        let dir = self.proc.join(gpu(bus));
        fs::create_dir_all(&dir).unwrap();
        let info = format!(
            "Model: \t\t NVIDIA A100-SXM4-80GB\nIRQ:   \t\t 0\nGPU UUID: \t {}\nVideo BIOS: \t 92.00.45.00.06\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t {}\nDevice Minor: \t {minor}\nGPU Excluded:\t No\n",
            uuid(bus),
            gpu(bus)
        );
        fs::write(dir.join("information"), info).unwrap();
    }
}
