//! The job environment (issue 26): every RDMA ADD records its rail, and a
//! pod's rails give the lines `roce-tune inspect --env` prints and the NRI
//! plugin injects (`job_env::Rails`, the same code). Pods with four rails,
//! each a veth end the test tree binds to a VF of its own (docs/design.md,
//! "Test trees"), added one by one as a runtime runs a pod's networks, in a
//! shuffled order: the lines follow the pod's interfaces, not the ADDs.

use crate::common::*;
use serde_json::{json, Value};

/// net1..net4 on mlx5_2..mlx5_5, each at 10.10.<i>.2.
const RAILS: [(&str, &str, &str, &str); 4] = [
    ("net1", "mlx5_2", "0000:0c:00.2", "10.10.1.2"),
    ("net2", "mlx5_3", "0000:0c:00.3", "10.10.2.2"),
    ("net3", "mlx5_4", "0000:0c:00.4", "10.10.3.2"),
    ("net4", "mlx5_5", "0000:0c:00.5", "10.10.4.2"),
];

/// A node with four VFs and a pod whose four rails are bound to them.
struct Node {
    tree: Tree,
    state: StateDirPath,
    pod: Pod,
    cid: String,
}

impl Node {
    fn new(node_extra: Value) -> Node {
        let tree = Tree::new();
        let state = StateDirPath::new();
        write_node_config(&state, Some(&tree), node_extra);
        let (ifname, _, _, ip) = RAILS[0];
        let pod = Pod::new(ifname, Some(&format!("{ip}/24")));
        for (i, (ifname, dev, pci, ip)) in RAILS.iter().enumerate() {
            if i > 0 {
                pod.add_rail(ifname, Some(&format!("{ip}/24")));
            }
            tree.add_device(pci, dev, "");
            tree.set_ipv4_gids(dev, ip);
            tree.bind(&pod, ifname, pci);
        }
        Node {
            tree,
            state,
            pod,
            cid: unique("sandbox"),
        }
    }

    /// The rail's network config: `extra` over the defaults (gidCheck
    /// enforce at index 3, no class).
    fn conf(&self, rail: usize, extra: &Value) -> Value {
        let (ifname, _, _, ip) = RAILS[rail];
        let mut c = json!({
            "cniVersion": "1.1.0", "name": format!("rail-{}", rail + 1), "type": "roce-tune",
            "gidTimeoutMs": 500,
            "prevResult": prev_result("1.1.0", ifname, &self.pod.path(), &[&format!("{ip}/24")]),
        });
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    fn run(&self, command: &str, rail: usize, extra: &Value) -> Run {
        let conf = self.conf(rail, extra);
        run_plugin(
            &self.state,
            command,
            &self.cid,
            &self.pod.path(),
            RAILS[rail].0,
            conf.to_string().as_bytes(),
        )
    }

    fn entry(&self, rail: usize) -> Option<Value> {
        self.state.entry(&self.cid, RAILS[rail].0)
    }
}

/// Every RDMA ADD records its rail, owning a file or not: the GID index it
/// verified (enforce) or found (present; warn, where the index is another),
/// none when the check is off, and the class and ToS asked for.
#[test]
fn every_rdma_add_records_its_rail() {
    needs!(root);
    let node = Node::new(json!({}));
    // net3's address came second on its VF: its RoCE v2 GID is at 5.
    let (_, dev3, _, ip3) = RAILS[2];
    node.tree.set_gid(dev3, 3, ZERO_GID, "");
    node.tree.set_gid(dev3, 2, ZERO_GID, "");
    node.tree.set_gid(dev3, 5, &v4_gid(ip3), "RoCE v2");
    for (rail, extra) in [
        (0, json!({})),
        (1, json!({"gidCheck": "present"})),
        (2, json!({"gidCheck": "warn"})),
        (3, json!({"gidCheck": "off", "trafficClass": 41})),
    ] {
        node.run("ADD", rail, &extra).ok();
    }
    let rail = |i: usize| {
        node.entry(i)
            .map(|e| (e["version"].clone(), e["rail"].clone()))
    };
    let record = |index: Value, class: Value, tos: Value| {
        Some((
            json!(4),
            json!({"gidIndex": index, "trafficClass": class, "rdmaCmTos": tos}),
        ))
    };
    assert_eq!(
        rail(0),
        record(json!(3), Value::Null, Value::Null),
        "enforce, nothing owned"
    );
    assert_eq!(
        rail(1),
        record(json!(3), Value::Null, Value::Null),
        "present finds 3"
    );
    assert_eq!(
        rail(2),
        record(json!(5), Value::Null, Value::Null),
        "warn finds 5"
    );
    assert_eq!(
        rail(3),
        record(Value::Null, json!(41), Value::Null),
        "the check off"
    );
    let e = node.entry(0).unwrap();
    assert_eq!(e["owned"], json!({}), "a rail that owns nothing");
    assert_eq!(e["gid"], json!(v4_gid(RAILS[0].3)));
    // The owned class is taken as before, and the rail is recorded beside it.
    assert_eq!(node.tree.tc(RAILS[3].1), "tclass=41");
    assert_eq!(
        node.entry(3).unwrap()["owned"]["trafficClass"]["written"],
        41
    );
}

/// `present` records where it found the GID; an ADD that fails (the GID not
/// at the enforced index) leaves no record and changes nothing.
#[test]
fn present_records_the_index_it_found_and_a_failed_add_records_nothing() {
    needs!(root);
    let node = Node::new(json!({}));
    let (_, dev, _, ip) = RAILS[0];
    node.tree.set_gid(dev, 3, ZERO_GID, "");
    node.tree.set_gid(dev, 2, ZERO_GID, "");
    node.tree.set_gid(dev, 4, &v4_gid(ip), "RoCE v2");
    let failed = node.run("ADD", 0, &json!({"gidTimeoutMs": 50}));
    assert_eq!(failed.code(), 101, "{}", failed.stderr);
    assert_eq!(node.entry(0), None, "a failed ADD left a record");
    assert!(node.state.entries().is_empty());
    node.run("ADD", 0, &json!({"gidCheck": "present"})).ok();
    assert_eq!(node.entry(0).unwrap()["rail"]["gidIndex"], 4);
}
