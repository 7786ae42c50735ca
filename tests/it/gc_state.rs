//! GC (spec 1.1.0) with real state: entries of this network that are not
//! valid attachments are given back and dropped; valid ones and another
//! network's entries sharing the state dir are left alone.

use crate::common::*;
use serde_json::json;

fn conf(
    network: &str,
    tree: &Tree,
    state: &StateDirPath,
    pci: &str,
    pod: &Pod,
) -> serde_json::Value {
    write_node_config(state, Some(tree), json!({}));
    tree.bind(pod, "net1", pci);
    json!({
        "cniVersion": "1.1.0", "name": network, "type": "roce-tune", "trafficClass": 41,
        "deviceID": pci,
        "prevResult": prev_result("1.1.0", "net1", &pod.path(), &["192.168.0.34/16"]),
    })
}

#[test]
fn gc_releases_only_stale_entries_of_its_network() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    let pods: Vec<Pod> = (0..3)
        .map(|_| Pod::new("net1", Some("192.168.0.34/16")))
        .collect();
    let devs = [
        ("0000:0c:00.2", "mlx5_2", ""),
        ("0000:0c:00.3", "mlx5_3", "Global tclass=106\n"),
        ("0000:0c:00.4", "mlx5_4", ""),
    ];
    let networks = ["rdma-vf", "rdma-vf", "other-net"];
    for (i, (pci, dev, tc)) in devs.iter().enumerate() {
        tree.add_device(pci, dev, tc);
        tree.set_ipv4_gids(dev, "192.168.0.34");
        let c = conf(networks[i], &tree, &state, pci, &pods[i]);
        run_plugin(
            &state,
            "ADD",
            &format!("c{i}"),
            &pods[i].path(),
            "net1",
            c.to_string().as_bytes(),
        )
        .ok();
        assert_eq!(tree.tc(dev), "tclass=41");
    }
    assert_eq!(state.entries().len(), 3);

    // GC for rdma-vf: only c0/net1 is still valid.
    let mut gc = conf("rdma-vf", &tree, &state, devs[0].0, &pods[0]);
    gc.as_object_mut().unwrap().remove("prevResult");
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "c0", "ifname": "net1"}]);
    let r = Exec::new(BIN)
        .env("CNI_COMMAND", "GC")
        .env("ROCE_TUNE_NODE_CONFIG", node_config(&state))
        .stdin(gc.to_string())
        .run();
    r.ok();
    assert_eq!(r.stdout, "", "GC prints nothing on success");
    assert_eq!(tree.tc("mlx5_2"), "tclass=41", "valid attachment untouched");
    assert_eq!(
        tree.tc("mlx5_3"),
        "tclass=106",
        "stale attachment given back its original"
    );
    assert_eq!(
        tree.tc("mlx5_4"),
        "tclass=41",
        "another network's entry is not this GC's business"
    );
    assert_eq!(
        state.entries(),
        vec!["c0:net1.state".to_string(), "c2:net1.state".to_string()]
    );

    // The older key works the same way; an empty list releases everything of the network.
    gc.as_object_mut()
        .unwrap()
        .remove("cni.dev/valid-attachments");
    gc["cni.dev/attachments"] = json!([]);
    Exec::new(BIN)
        .env("CNI_COMMAND", "GC")
        .env("ROCE_TUNE_NODE_CONFIG", node_config(&state))
        .stdin(gc.to_string())
        .run()
        .ok();
    assert_eq!(
        tree.tc("mlx5_2"),
        "tclass=-1",
        "unset original restored through tclass=-1"
    );
    assert_eq!(state.entries(), vec!["c2:net1.state".to_string()]);
}
