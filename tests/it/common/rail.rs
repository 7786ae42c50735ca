//! The rail fixture: what a test of a pod's RDMA rails starts from. A pod
//! netns holding N rails (veth ends renamed net1..netN, up, each with its
//! address), an RDMA sysfs test tree with a VF per rail (its class file, and
//! the RoCE GIDs of its address at 2 and 3, where the kernel puts those of
//! an IPv4 address added first), bound to the rail as the kernel shows it
//! from the pod, a state dir and the node config naming both, and rail 0's
//! network config. `add`, `check` and `del` run roce-tune on it as a
//! runtime does.
//!
//! ```ignore
//! let rail = Rail::new();                                  // one rail, class unset
//! let rail = Rail::spec().class("Global tclass=106\n").build();
//! let rail = Rail::spec().rails(4).node(json!({"jobEnvFamilies": ["nccl"]})).build();
//! rail.add("c1").ok();
//! assert_eq!(rail.tree.tc(DEV), "tclass=41");
//! rail.del("c1").ok();
//! ```

use super::{prev_result, run_plugin, write_node_config, Pod, Run, StateDirPath, Tree};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Rail 0 of every fixture, and the one rail of most tests: the VF's PCI
/// function and RDMA device, the pod's address on it, and the class the
/// network config asks for.
pub const PCI: &str = "0000:0c:00.2";
pub const DEV: &str = "mlx5_2";
pub const IP: &str = "192.168.0.34";
pub const ADDR: &str = "192.168.0.34/16";
pub const CLASS: u8 = 41;

/// One rail of a fixture's pod: its interface, its VF (PCI function and
/// RDMA device), its address.
#[derive(Clone, Debug, PartialEq)]
pub struct Vf {
    pub ifname: String,
    pub pci: String,
    pub dev: String,
    pub ip: String,
    /// `ip` with its prefix length, as the prevResult gives it.
    pub addr: String,
}

impl Vf {
    /// Rail `i`: net<i+1> on mlx5_<i+2>, the VFs of one PF from function
    /// 0000:0c:00.2 on (past function 7, the next device's), at
    /// 192.168.<i>.34/16: one subnet for every rail, the case the rail
    /// sysctls exist for. Rail 0 is `PCI`, `DEV`, `ADDR`.
    pub fn nth(i: usize) -> Vf {
        let f = i + 2;
        let ip = format!("192.168.{i}.34");
        Vf {
            ifname: format!("net{}", i + 1),
            pci: format!("0000:0c:{:02x}.{}", f / 8, f % 8),
            dev: format!("mlx5_{f}"),
            addr: format!("{ip}/16"),
            ip,
        }
    }
}

/// What a fixture is built with (`Rail::spec()`): how many rails, the class
/// each VF's file holds before ADD, whether the GIDs are in place, rail 0's
/// address, and the node config's keys besides the tree and the state dir.
pub struct RailSpec {
    rails: usize,
    class: String,
    gids: bool,
    addr: Option<String>,
    node: Value,
}

impl RailSpec {
    /// `n` rails (at least 1).
    pub fn rails(mut self, n: usize) -> RailSpec {
        assert!(n >= 1, "a pod of no rails");
        self.rails = n;
        self
    }

    /// The class file of every VF before ADD: `""` is unset (the default),
    /// `"Global tclass=106\n"` what MLNX_OFED shows for a class set.
    pub fn class(mut self, original: &str) -> RailSpec {
        self.class = original.to_owned();
        self
    }

    /// No GID of the rails' addresses in the table: the test plays the
    /// kernel adding them, late, elsewhere, or never.
    pub fn no_gids(mut self) -> RailSpec {
        self.gids = false;
        self
    }

    /// Rail 0's address instead of `ADDR` (an IPv6 one wants `no_gids`).
    pub fn addr(mut self, addr: &str) -> RailSpec {
        self.addr = Some(addr.to_owned());
        self
    }

    /// Node config keys besides `sysfsRoot` and `stateDir`.
    pub fn node(mut self, extra: Value) -> RailSpec {
        self.node = extra;
        self
    }

    pub fn build(self) -> Rail {
        let mut vfs: Vec<Vf> = (0..self.rails).map(Vf::nth).collect();
        if let Some(a) = &self.addr {
            vfs[0].addr = a.clone();
            vfs[0].ip = a.split('/').next().unwrap().to_owned();
        }
        let pod = Pod::new(&vfs[0].ifname, Some(&vfs[0].addr));
        let tree = Tree::new();
        for (i, vf) in vfs.iter().enumerate() {
            if i > 0 {
                pod.add_rail(&vf.ifname, Some(&vf.addr));
            }
            tree.add_device(&vf.pci, &vf.dev, &self.class);
            if self.gids {
                tree.set_ipv4_gids(&vf.dev, &vf.ip);
            }
        }
        let state = StateDirPath::new();
        let conf = rail_conf(&tree, &state, &vfs[0].pci, &pod, CLASS, &[&vfs[0].addr]);
        for vf in &vfs[1..] {
            tree.bind(&pod, &vf.ifname, &vf.pci);
        }
        if self.node.as_object().is_some_and(|o| !o.is_empty()) {
            write_node_config(&state, Some(&tree), self.node);
        }
        Rail {
            pod,
            tree,
            state,
            conf,
            vfs,
        }
    }
}

/// A pod with its rails on a test tree, the node's state dir and config,
/// and rail 0's network config (`conf`, trafficClass `CLASS`: change its
/// keys for a test's case).
pub struct Rail {
    pub pod: Pod,
    pub tree: Tree,
    pub state: StateDirPath,
    pub conf: Value,
    pub vfs: Vec<Vf>,
}

impl Rail {
    /// One rail, class unset, its GIDs in place.
    pub fn new() -> Rail {
        Rail::spec().build()
    }

    pub fn spec() -> RailSpec {
        RailSpec {
            rails: 1,
            class: String::new(),
            gids: true,
            addr: None,
            node: json!({}),
        }
    }

    /// Rail `i`'s network config: `conf` with that rail's deviceID and
    /// prevResult.
    pub fn conf_of(&self, i: usize) -> Value {
        let vf = &self.vfs[i];
        let mut c = self.conf.clone();
        c["deviceID"] = json!(vf.pci);
        c["prevResult"] = prev_result("1.1.0", &vf.ifname, &self.pod.path(), &[&vf.addr]);
        c
    }

    /// `command` for rail `i` under `container_id` with `conf`, as a runtime
    /// runs it.
    pub fn run_rail(&self, command: &str, container_id: &str, i: usize, conf: &Value) -> Run {
        run_plugin(
            &self.state,
            command,
            container_id,
            &self.pod.path(),
            &self.vfs[i].ifname,
            conf.to_string().as_bytes(),
        )
    }

    /// `command` for rail 0 with `conf`.
    pub fn run(&self, command: &str, container_id: &str) -> Run {
        self.run_with(command, container_id, &self.conf)
    }

    /// `command` for rail 0 with another config (`conf` with a key changed
    /// for one run, `rail_conf` of another VF).
    pub fn run_with(&self, command: &str, container_id: &str, conf: &Value) -> Run {
        self.run_rail(command, container_id, 0, conf)
    }

    pub fn add(&self, container_id: &str) -> Run {
        self.run("ADD", container_id)
    }

    pub fn check(&self, container_id: &str) -> Run {
        self.run("CHECK", container_id)
    }

    pub fn del(&self, container_id: &str) -> Run {
        self.run("DEL", container_id)
    }

    /// Rewrite the node config: the tree, the state dir and `extra`.
    pub fn node_config(&self, extra: Value) -> PathBuf {
        write_node_config(&self.state, Some(&self.tree), extra)
    }
}

/// The network config of the rail `ifname` of `pod` on the VF `pci`: the
/// deviceID Multus injects, a GID wait of 800 ms, and sriov's prevResult
/// giving `addrs` to the interface; `extra`'s keys over those.
pub fn rail_json(pod: &Pod, ifname: &str, pci: &str, addrs: &[&str], extra: Value) -> Value {
    let mut c = json!({
        "cniVersion": "1.1.0", "name": "rdma-vf", "type": "roce-tune",
        "deviceID": pci, "gidTimeoutMs": 800,
        "prevResult": prev_result("1.1.0", ifname, &pod.path(), addrs),
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// The config the RDMA tests start from: a rail on the VF `pci` of `tree`
/// (the tree binds `pod`'s interface to it, as the kernel would),
/// trafficClass `tc`, the default GID check, and a prevResult giving `addrs`
/// to `pod`'s first interface. Tests change keys on the returned value. The
/// node config naming `tree` and `state` is written too.
pub fn rail_conf(
    tree: &Tree,
    state: &StateDirPath,
    pci: &str,
    pod: &Pod,
    tc: u8,
    addrs: &[&str],
) -> Value {
    write_node_config(state, Some(tree), json!({}));
    tree.bind(pod, &pod.ifname, pci);
    rail_json(pod, &pod.ifname, pci, addrs, json!({"trafficClass": tc}))
}
