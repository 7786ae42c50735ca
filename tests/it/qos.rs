//! The QoS verdict at ADD (docs/design.md, "DCB and the QoS verdict"). The
//! test machine has no DCB-capable netdev, so the real kernel is asked about
//! a real veth standing for the VF's PF (veth has no `dcbnl_ops`,
//! drivers/net/veth.c: EOPNOTSUPP), through the binary; the verdicts a PF
//! with DCB gives are driven through `rail::tune` itself (what ADD and a DRA rail tune with), with the
//! DCB source the caller chooses fed answers built by the codec's encoder
//! and read back by its decoder (`wire::dcb::Exchange`), as the socket
//! reads the kernel's. Real netns, real veths (root).

use crate::common::*;
use roce_tune::netlink::DcbQueryError;
use roce_tune::netns::{Lookup, NetNs};
use roce_tune::node::NodeConfig;
use roce_tune::rail::{self, Expect, TuneExtras};
use roce_tune::rail_qos::DcbSource;
use roce_tune::state::StateDir;
use roce_tune::wire::dcb::{encode_answer, Answer, App, DcbError, DcbState, Exchange, Pfc};
use serde_json::json;
use std::time::Duration;

/// The VF's PF in the tree: `bus/pci/devices/<PCI>/physfn` -> the PF, whose
/// `net/` holds `netdev`, as sysfs shows an SR-IOV PF.
const PF_PCI: &str = "0000:0c:00.0";

fn give_pf(tree: &Tree, netdev: &str) {
    give_pf_to(tree, PCI, netdev);
}

/// `give_pf` for the VF at `vf`.
fn give_pf_to(tree: &Tree, vf: &str, netdev: &str) {
    let devices = tree.root.join("bus/pci/devices");
    std::fs::create_dir_all(devices.join(PF_PCI).join("net").join(netdev)).unwrap();
    std::os::unix::fs::symlink(format!("../{PF_PCI}"), devices.join(vf).join("physfn")).unwrap();
}

/// A veth pair in the host's netns, deleted on drop.
struct HostVeth(String);

impl HostVeth {
    fn new() -> HostVeth {
        let name = format!("rtq{}", std::process::id() % 100_000_000);
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &name])
            .output();
        sh(&format!("ip link add {name} type veth peer name {name}p"));
        HostVeth(name)
    }
}

impl Drop for HostVeth {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.0])
            .output();
    }
}

#[test]
fn a_pf_without_dcb_is_unknown_said_once_and_never_fails_add_even_enforced() {
    needs!(root);
    let veth = HostVeth::new();
    let rail = Rail::spec()
        .node(json!({"qosCheck": "enforce", "railPriority": 3, "railLossless": true}))
        .build();
    give_pf(&rail.tree, &veth.0);
    let r = rail.add("c1");
    r.ok();
    let said = format!(
        "QoS of the rails on PF {}: not judged: the PF has no DCB: its driver implements no DCB (EOPNOTSUPP)",
        veth.0
    );
    assert_eq!(r.stderr.matches(&said).count(), 1, "{}", r.stderr);
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    rail.del("c1").ok();
    // A PF netdev that is not in this netns: ENODEV, unknown as well.
    let gone = Rail::spec()
        .node(json!({"qosCheck": "enforce", "railPriority": 3}))
        .build();
    give_pf(&gone.tree, "rtq-nosuchdev");
    let r = gone.add("c2");
    r.ok();
    assert!(r.stderr.contains("(ENODEV)"), "{}", r.stderr);
    gone.del("c2").ok();
}

/// Answers built from the kernel's layouts by the codec's encoder and read
/// back by its decoder: every netdev answers with `state`.
struct Built(Vec<u8>);

const SEQ: u32 = 7;

impl Built {
    /// An mlx5 PF in DSCP trust with the firmware's default map (`dscp >>
    /// 3`) and PFC on the priorities of `pfc_en`.
    fn mlx5(pfc_en: u8) -> Built {
        let state = DcbState {
            ifname: "p0".into(),
            apps: (0..64u16)
                .rev()
                .map(|d| App {
                    selector: 5,
                    priority: (d >> 3) as u8,
                    protocol: d,
                })
                .collect(),
            pfc: Some(Pfc {
                cap: 8,
                enabled: pfc_en,
                mbc: 0,
                delay: 7,
                requests: [0; 8],
                indications: [0; 8],
            }),
            dcbx: Some(0x0d),
        };
        Built(encode_answer(&state, SEQ))
    }
}

impl DcbSource for Built {
    fn ask(&self, _: &str, _: Duration) -> Result<Answer, DcbQueryError> {
        Exchange::new(SEQ)
            .feed(&self.0)
            .map_err(DcbQueryError::Dcb)?
            .ok_or(DcbQueryError::Dcb(DcbError::NoReply))
    }
}

/// `rail::tune` for rail 0 of `rail` with the class of its config and the
/// node config it names, its PF answering `source`; a failure as the CNI
/// edge answers it (`rail::Error::into_cni`).
fn tune(rail: &Rail, source: &dyn DcbSource) -> Result<(), (u32, String)> {
    let node = NodeConfig::load_from(&node_config(&rail.state)).unwrap();
    let conf = roce_tune::cni::config::NetConf::from_profile(
        &json!({"trafficClass": rail.conf["trafficClass"], "gidCheck": "off"}),
        "rdma-vf",
        None,
    )
    .unwrap();
    let Lookup::Netns(netns) = NetNs::lookup(std::path::Path::new(&rail.pod.path())).unwrap()
    else {
        panic!("no netns")
    };
    let state = StateDir::create(&node.state_dir).unwrap();
    let sysfs = rail::sysfs(&node).unwrap();
    let r = rail::Rail {
        conf: &conf,
        node: &node,
        network: "rdma-vf",
        container_id: "c1",
        ifname: &rail.vfs[0].ifname,
        netns: &netns,
        state: &state,
        sysfs: &sysfs,
        expect: Expect::Given(None),
        pod: None,
        deadline: None,
        dcb: source,
        sys: &roce_tune::syscall::KERNEL,
    };
    rail::tune(&r, TuneExtras::default())
        .map(|_| ())
        .map_err(|e| {
            let e = e.into_cni();
            (e.code, e.msg)
        })
}

#[test]
fn enforce_refuses_a_definite_wrong_priority_with_108_and_puts_the_class_back() {
    needs!(root);
    let mut rail = Rail::spec()
        .class("Global tclass=106\n")
        .node(json!({"qosCheck": "enforce", "railPriority": 3, "railLossless": true}))
        .build();
    give_pf(&rail.tree, "p0");
    // Class 41: DSCP 10, which the PF's own entry puts on priority 1.
    let (code, msg) = tune(&rail, &Built::mlx5(0x08)).unwrap_err();
    assert_eq!(code, 108, "{msg}");
    for needle in [
        "class 41",
        "DSCP 10",
        "lands on priority 1",
        "on PF p0",
        "not on priority 3",
        "dscp-prio 10:3",
        "nothing was changed",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    // The node as it was: the class written, then given back (the tree's
    // file holds what was written last: the original, 106), no entry.
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert!(
        rail.state.entries().is_empty(),
        "{:?}",
        rail.state.entries()
    );

    // warn: the same verdict is a line, and the rail is tuned.
    rail.node_config(json!({"qosCheck": "warn", "railPriority": 3, "railLossless": true}));
    tune(&rail, &Built::mlx5(0x08)).unwrap();
    assert_eq!(rail.tree.tc(DEV), "tclass=41");
    rail.del("c1").ok();

    // enforce, and what is not a definite wrong priority passes: the class
    // on the expected priority without PFC (no_pfc), and on it with PFC.
    rail.conf["trafficClass"] = json!(106);
    rail.node_config(json!({"qosCheck": "enforce", "railPriority": 3, "railLossless": true}));
    for pfc in [0x00, 0x08] {
        tune(&rail, &Built::mlx5(pfc)).unwrap();
        assert_eq!(rail.tree.tc(DEV), "tclass=106");
        rail.del("c1").ok();
    }
}

/// A DRA rail's RunPodSandbox judges its PF as ADD does: under `qosCheck:
/// enforce`, class 41 (DSCP 10), which the PF's own DSCP entry puts on
/// priority 1, fails the sandbox with the verdict and its fix, and the node
/// is left as it was; under `warn` the pod starts, tuned, and the verdict
/// is a line. The PF's answer is the kernel's bytes built by the codec's
/// encoder, read by the fault build in place of its socket
/// (`ROCE_TUNE_DCB_ANSWERS`, `rail_qos::planted_answer`): no netdev of this
/// machine has DCB, and the verdict is judged in the agent's process.
#[test]
fn a_dra_rails_sandbox_is_refused_under_enforce_for_a_definite_wrong_priority() {
    needs!(root);
    let agent = needs!(fault_agent);
    let sims: crate::common::need::NriSims = needs!(nri_sim);
    use crate::dra::{registered, Node};
    use crate::nri::{pod, steps, Plugin};
    let says = "class 41 (DSCP 10) lands on priority 1";
    for (name, sim) in sims.both() {
        for check in ["enforce", "warn"] {
            let mut node = Node::new(1, json!({"trafficClass": 41, "gidTimeoutMs": 800}), true);
            give_pf_to(&node.tree, &node.vfs[0].pci, "p0");
            let answers = node.config.parent().unwrap().join("dcb-answers");
            std::fs::create_dir_all(&answers).unwrap();
            std::fs::write(answers.join("p0"), Built::mlx5(0x08).0).unwrap();
            node.config = write_node_config(
                node.state.as_ref().unwrap(),
                Some(&node.tree),
                json!({"nriSocket": path_str(&node.sock),
                       "draRails": {"trafficClass": 41, "gidTimeoutMs": 800},
                       "metricsAddress": "127.0.0.1:0",
                       "qosCheck": check, "railPriority": 3, "railLossless": true}),
            );
            let before = node.picture();
            let state = node.state.take().unwrap();
            let plugin = Plugin::on_bin(
                &agent,
                &[("ROCE_TUNE_DCB_ANSWERS", &answers)],
                state,
                &node.config,
                &["nri"],
            );
            let sandbox = unique("sbq");
            let result = node.run(
                sim,
                registered(json!([
                    {"run_pod": pod(&sandbox, Some(&node.pod.path()), json!({}))}
                ])),
                &[],
            );
            let step = &steps(&result)[1];
            if check == "enforce" {
                assert_eq!(step["ok"], false, "{name}: {step}\n{}", plugin.log());
                let error = step["error"].as_str().unwrap();
                for needle in [says, "on PF p0", "not on priority 3", "dscp-prio 10:3"] {
                    assert!(error.contains(needle), "{name} {needle}: {error}");
                }
                assert_eq!(
                    error.matches("nothing was changed").count(),
                    1,
                    "{name}: said once: {error}"
                );
                let now = node.picture();
                // The class was written, judged, then put back: the file
                // was unset (empty) and holds the write that unsets it
                // (`tclass=-1`, docs/design.md "The traffic class file"), which
                // reads as unset; nothing else in the tree moved.
                let class_file = node.tree.tc_path(&node.vfs[0].dev);
                assert_eq!(
                    snapshot_diff(&before.0, &now.0),
                    vec![format!("changed {}", class_file.display())],
                    "{name}: the tree as it was"
                );
                assert_eq!(
                    node.tree.tc(&node.vfs[0].dev),
                    "tclass=-1",
                    "{name}: put back unset"
                );
                assert_eq!(before.1, now.1, "{name}: the sysctls as they were");
                assert!(node.entries().is_empty(), "{name}: {:?}", node.entries());
            } else {
                assert_eq!(step["ok"], true, "{name}: {step}\n{}", plugin.log());
                assert_eq!(node.tree.tc(&node.vfs[0].dev), "tclass=41", "{name}");
                plugin.wait_log(
                    "lands on priority 1, not on priority 3 (railPriority)",
                    1,
                    Duration::from_secs(10),
                );
            }
        }
    }
}
