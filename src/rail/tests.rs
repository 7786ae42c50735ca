//! One rail's tuning on the unit tests' host (`syscall::tests::TestHost`)
//! and a sysfs test tree, and `Rig`, the node those tests and the edges'
//! (`commands::tests`, the agent's pass) run on: no root, no netns made.
//! The test's own netns stands for the pod's. The same rail against the
//! kernel, a real netns and the reference plugins is tests/it's; on
//! soft-RoCE, the kernel lane's.

use super::{tune, Expect, Rail, TuneExtras};
use crate::cni::code;
use crate::cni::config::NetConf;
use crate::cni::env::CniEnv;
use crate::netns::{Lookup, NetNs};
use crate::node::NodeConfig;
use crate::qos::QosCheck;
use crate::rdma::traffic_class;
use crate::state::StateDir;
use crate::syscall::tests::TestHost;
use crate::syscall::Syscall;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub const PCI: &str = "0000:0c:00.2";
pub const DEV: &str = "mlx5_2";
pub const IFNAME: &str = "net1";
pub const IFINDEX: u32 = 7;
pub const IP: &str = "192.168.0.34";
pub const SANDBOX: &str = "0123456789abcdef0123456789abcdef";
/// The RoCE v2 GID of `IP`, as sysfs prints it.
pub const GID: &str = "0000:0000:0000:0000:0000:ffff:c0a8:0022";
const ZERO_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

/// One node with one VF and its RDMA device, a pod (this test's netns) whose
/// `net1` is that VF, and the host the commands ask. Removed when dropped.
pub struct Rig {
    pub host: TestHost,
    pub node: NodeConfig,
    pub ns: NetNs,
    root: PathBuf,
    /// The sysfs test tree.
    pub tree: PathBuf,
}

impl Rig {
    /// The VF's class file holds `tc` ("" is unset), its rdma_cm ToS `tos`;
    /// `exclusive`: the RDMA netns mode, the device then in the pod's netns.
    pub fn new(tag: &str, tc: &str, tos: &str, exclusive: bool) -> Rig {
        let root = std::env::temp_dir().join(format!("rt-cmd-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let tree = root.join("sys");
        let Lookup::Netns(ns) = NetNs::lookup(Path::new("/proc/self/ns/net")).unwrap() else {
            panic!("/proc/self/ns/net is no netns");
        };
        let rig_tree = |rel: &str| tree.join(rel);
        let mode = if exclusive { "N\n" } else { "Y\n" };
        write(&rig_tree("module/ib_core/parameters/netns_mode"), mode);
        // The device as the kernel lays it out: its PCI function's
        // `infiniband/`, its class directory, the class file and GID table.
        std::fs::create_dir_all(rig_tree(&format!("bus/pci/devices/{PCI}/infiniband/{DEV}")))
            .unwrap();
        let dev = rig_tree(&format!("class/infiniband/{DEV}"));
        write(&dev.join("tc/1/traffic_class"), tc);
        write(&dev.join("node_guid"), "0000:0000:000c:0002\n");
        std::os::unix::fs::symlink(
            format!("../../../bus/pci/devices/{PCI}"),
            dev.join("device"),
        )
        .unwrap();
        for i in 0..8 {
            let (gid, kind) = match i {
                0 | 1 => ("fe80:0000:0000:0000:8cca:d1ff:fed4:647d", "RoCE v2"),
                _ => (ZERO_GID, ""),
            };
            write(&dev.join(format!("ports/1/gids/{i}")), &format!("{gid}\n"));
            write(&dev.join(format!("ports/1/gid_attrs/types/{i}")), kind);
        }
        write(
            &rig_tree(&format!(
                "kernel/config/rdma_cm/{DEV}/ports/1/default_roce_tos"
            )),
            tos,
        );
        // The pod's side: its `net1` is the VF (the kernel's
        // `class/net/net1/device` link, seen from a sysfs made in its netns).
        let pod = tree.join(format!("netns/{}", ns.id().ino));
        let net = pod.join(format!("class/net/{IFNAME}"));
        std::fs::create_dir_all(&net).unwrap();
        std::os::unix::fs::symlink(
            format!("../../../../../bus/pci/devices/{PCI}"),
            net.join("device"),
        )
        .unwrap();
        if exclusive {
            // The rdma plugin moved the device into the pod's netns: only
            // the sysfs made there shows it.
            for rel in [
                format!("class/infiniband/{DEV}"),
                format!("bus/pci/devices/{PCI}/infiniband/{DEV}"),
            ] {
                std::fs::create_dir_all(pod.join(&rel).parent().unwrap()).unwrap();
                std::fs::rename(tree.join(&rel), pod.join(&rel)).unwrap();
            }
        }
        let mut host = TestHost::new(tag);
        host.add_link(1, "lo");
        host.add_link(IFINDEX, IFNAME);
        for (key, _) in crate::cni::config::DEFAULT_SYSCTLS {
            host.set_sysctl(&key.replace("IFNAME", IFNAME), "0");
        }
        let mut node = NodeConfig::defaults(root.join("node.json"));
        node.sysfs_root = tree.clone();
        node.state_dir = root.join("state");
        node.device_info_dir = root.join("devinfo");
        node.qos.check = QosCheck::Off;
        Rig {
            host,
            node,
            ns,
            root,
            tree,
        }
    }

    /// Where the device's files are: the host's sysfs, or the pod's.
    fn device_root(&self) -> PathBuf {
        let pod = self.tree.join(format!("netns/{}", self.ns.id().ino));
        if pod.join(format!("class/infiniband/{DEV}")).exists() {
            pod
        } else {
            self.tree.clone()
        }
    }

    pub fn tc_path(&self) -> PathBuf {
        self.device_root()
            .join(format!("class/infiniband/{DEV}/tc/1/traffic_class"))
    }

    /// The class file's content.
    pub fn tc(&self) -> String {
        std::fs::read_to_string(self.tc_path()).unwrap()
    }

    pub fn set_tc(&self, content: &str) {
        std::fs::write(self.tc_path(), content).unwrap();
    }

    pub fn tos_path(&self) -> PathBuf {
        self.tree.join(format!(
            "kernel/config/rdma_cm/{DEV}/ports/1/default_roce_tos"
        ))
    }

    pub fn tos(&self) -> String {
        std::fs::read_to_string(self.tos_path()).unwrap()
    }

    /// GID `index` of the device: the RoCE v2 GID of `IP`, or unused.
    pub fn set_gid(&self, index: u32, gid: &str, kind: &str) {
        let dev = self.device_root().join(format!("class/infiniband/{DEV}"));
        write(
            &dev.join(format!("ports/1/gids/{index}")),
            &format!("{gid}\n"),
        );
        write(&dev.join(format!("ports/1/gid_attrs/types/{index}")), kind);
    }

    /// The kernel's order for an IPv4 address added first: v1 at 2, v2 at 3.
    pub fn give_address(&self) {
        self.set_gid(2, GID, "IB/RoCE v1\n");
        self.set_gid(3, GID, "RoCE v2\n");
    }

    /// The state entries the commands left.
    pub fn entries(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(&self.node.state_dir) else {
            return Vec::new();
        };
        rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".state"))
            .collect()
    }

    /// Every file of the tree and the pod's `/proc/sys`, with its content.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        walk(&self.tree, &mut out);
        walk(self.host.proc_sys(), &mut out);
        out
    }

    pub fn env(&self, command: &str) -> CniEnv {
        let vars: Vec<(&str, String)> = vec![
            ("CNI_COMMAND", command.into()),
            ("CNI_CONTAINERID", SANDBOX.into()),
            ("CNI_NETNS", "/proc/self/ns/net".into()),
            ("CNI_IFNAME", IFNAME.into()),
            (
                "CNI_ARGS",
                "K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer-0".into(),
            ),
        ];
        CniEnv::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        })
        .unwrap()
    }

    /// The network config: roce-tune's keys `extra`, after a prevResult
    /// that gives `net1` its address.
    pub fn conf(&self, extra: Value) -> NetConf {
        let mut c = json!({
            "cniVersion": "1.0.0",
            "name": "rail0",
            "type": "roce-tune",
            "placementCheck": "off",
            "prevResult": {
                "cniVersion": "1.0.0",
                "interfaces": [{"name": IFNAME, "sandbox": "/proc/self/ns/net"}],
                "ips": [{"address": format!("{IP}/16"), "interface": 0}]
            }
        });
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        NetConf::parse(c.to_string().as_bytes(), &self.node.source).unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            walk(&p, out);
        } else if ft.is_file() {
            out.insert(p.clone(), std::fs::read_to_string(&p).unwrap_or_default());
        }
    }
}

impl Rig {
    /// One rail tuned as a DRA rail is: no prevResult, the GID expected
    /// from the address the pod netns shows on the link.
    pub fn tune(&self, extra: Value) -> Result<crate::state::Entry, super::Error> {
        let conf = self.conf(extra);
        let state = StateDir::create_on(&self.host, &self.node.state_dir).unwrap();
        let sysfs = super::sysfs(&self.node).unwrap();
        let rail = Rail {
            conf: &conf,
            node: &self.node,
            network: "dra-rail",
            container_id: SANDBOX,
            ifname: IFNAME,
            netns: &self.ns,
            state: &state,
            sysfs: &sysfs,
            expect: Expect::FromLink,
            pod: None,
            deadline: None,
            dcb: &crate::rail_qos::HOST_DCB,
            sys: &self.host,
        };
        tune(&rail, TuneExtras::default()).map(|t| t.entry)
    }
}

pub fn class(content: &str) -> Option<u8> {
    traffic_class::parse(content).unwrap()
}

/// A rail without a prevResult: its GID expected from the address the pod
/// netns shows on the link (link-local ones left out), checked, and the
/// rail tuned in one trip; with no address there, refused and nothing
/// changed.
#[test]
fn a_rail_expects_the_gid_of_the_address_its_link_shows() {
    let mut rig = Rig::new("fromlink", "", "0\n", false);
    rig.give_address();
    let before = rig.snapshot();
    let e = rig
        .tune(json!({"trafficClass": 106}))
        .unwrap_err()
        .into_cni();
    assert_eq!(e.code, code::GID_CHECK, "{}", e.msg);
    assert_eq!(rig.snapshot(), before);
    rig.host
        .addresses
        .push((IFINDEX, "fe80::8cca:d1ff:fed4:647d".parse().unwrap(), 64));
    rig.host.addresses.push((IFINDEX, IP.parse().unwrap(), 16));
    let entry = rig.tune(json!({"trafficClass": 106})).unwrap();
    assert_eq!(entry.device, DEV);
    assert_eq!(class(&rig.tc()), Some(106));
    assert_eq!(rig.host.trips.load(std::sync::atomic::Ordering::Relaxed), 2);
}

/// A failure after the sysctls were set (the GID check) puts them back.
#[test]
fn a_refused_rail_puts_the_sysctls_back() {
    let mut rig = Rig::new("sysctls", "", "0\n", false);
    rig.host.addresses.push((IFINDEX, IP.parse().unwrap(), 16));
    let before = rig.snapshot();
    let e = rig
        .tune(json!({"trafficClass": 106, "gidCheck": "enforce", "gidTimeoutMs": 0}))
        .unwrap_err()
        .into_cni();
    assert_eq!(e.code, code::GID_CHECK);
    assert_eq!(
        rig.host
            .sysctl(&format!("net.ipv4.conf.{IFNAME}.arp_ignore")),
        "0"
    );
    assert_eq!(rig.snapshot(), before);
}
