//! Each live rail's RDMA counters as the agent exports them
//! (`roce_tune_rail_hw_counter_total`), on a test tree in which the test plays
//! the kernel's `ports/<n>/hw_counters/` and `counters/`: values as the files
//! hold them, under the rail's labels, read again each pass, gone with the
//! rail; the view per RDMA netns mode; and every bad file a driver or a
//! tampered tree could hold, each skipped with one line, never a failed or
//! stalled pass.

use super::*;

const HW: &str = "roce_tune_rail_hw_counter_total";

/// The port's counter directory `dir` (hw_counters or counters) of `dev`
/// under `root` (the host's tree or a pod's view), made.
fn counters_dir(root: &Path, dev: &str, dir: &str) -> PathBuf {
    let d = root.join(format!("class/infiniband/{dev}/ports/1/{dir}"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn counter<'a>(rail: &[(&'a str, &'a str)], name: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut l = rail.to_vec();
    l.extend([("port", "1"), ("counter", name)]);
    l
}

fn node_with(state: &StateDirPath, tree: &Tree, extra: Value) {
    let mut conf = json!({"metricsAddress": "127.0.0.1:0", "driftPolicy": "report"});
    for (k, v) in extra.as_object().unwrap() {
        conf[k] = v.clone();
    }
    write_node_config(state, Some(tree), conf);
}

/// How many lines of the agent's log hold `needle`.
/// The second rail's VF, device and address.
const B: (&str, &str, &str) = ("0000:0c:00.3", "mlx5_3", "192.168.1.34");

/// A pod with two rails, net1 on `DEV` and net2 on `B`, each device holding
/// its rail's RoCE v2 GID.
fn two_rails(tree: &Tree) -> Pod {
    let pod = Pod::new("net1", Some(&format!("{IP}/16")));
    pod.add_rail("net2", Some(&format!("{}/16", B.2)));
    tree.add_device(PCI, DEV, "");
    tree.set_ipv4_gids(DEV, IP);
    tree.add_device(B.0, B.1, "");
    tree.set_ipv4_gids(B.1, B.2);
    pod
}

fn lines_with(agent: &Agent, needle: &str) -> usize {
    agent.log().lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn each_live_rails_counters_are_exported_under_its_pods_labels_and_follow_the_files() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    node_with(&state, &tree, json!({}));
    let pod = two_rails(&tree);
    // mlx5's names: the default picks these, not rx_write_requests.
    let hw = counters_dir(&tree.root, DEV, "hw_counters");
    for (n, v) in [
        ("out_of_sequence", "11649\n"),
        ("packet_seq_err", "0\n"),
        ("np_cnp_sent", "18446744073709551615\n"),
        ("rx_write_requests", "5\n"),
        ("lifespan", "10\n"),
    ] {
        std::fs::write(hw.join(n), v).unwrap();
    }
    // The PMA counters beside them: none of the default names.
    std::fs::write(
        counters_dir(&tree.root, DEV, "counters").join("port_xmit_data"),
        "99\n",
    )
    .unwrap();
    // Shared mode: a pod's view of the device has no counters; a decoy there
    // must not be read (the host's view is the device's).
    std::fs::write(
        counters_dir(&tree.netns_dir(pod.ino()), DEV, "hw_counters").join("out_of_sequence"),
        "1\n",
    )
    .unwrap();
    // net2's device keeps no counters at all.
    let a = rail(&tree, &pod, "net1", PCI, IP, json!({}));
    let b = rail(&tree, &pod, "net2", B.0, B.2, json!({}));
    cni(&state, "ADD", "t0", &pod, "net1", "train-0", &a).ok();
    cni(&state, "ADD", "t0", &pod, "net2", "train-0", &b).ok();

    let agent = Agent::start(&state, 1);
    let la = labels_of("train-0", "net1", DEV, PCI);
    let lb = labels_of("train-0", "net2", B.1, B.0);
    let (m, ok) = agent.wait_for(TWO_PERIODS, |m| {
        m.get(HW, &counter(&la, "out_of_sequence")).is_some()
    });
    assert!(ok, "{}\n{}", m.text, agent.log());
    assert_eq!(m.get(HW, &counter(&la, "out_of_sequence")), Some(11649.0));
    assert_eq!(m.get(HW, &counter(&la, "packet_seq_err")), Some(0.0));
    let max = m
        .text
        .lines()
        .find(|l| l.starts_with(HW) && l.contains("np_cnp_sent"))
        .unwrap();
    assert!(
        max.ends_with(" 18446744073709551615"),
        "as the file holds it: {max}"
    );
    for name in ["rx_write_requests", "lifespan", "port_xmit_data"] {
        assert_eq!(m.get(HW, &counter(&la, name)), None, "{name} is not picked");
    }
    assert!(
        m.all(HW, &lb).is_empty(),
        "net2 has no counters: {}",
        m.text
    );
    assert_eq!(lines_with(&agent, "has no counters"), 1, "{}", agent.log());

    // The kernel counts on: the next pass shows it.
    kernel_write(&hw.join("out_of_sequence"), "12000\n");
    let (m, ok) = agent.wait_for(TWO_PERIODS, |m| {
        m.get(HW, &counter(&la, "out_of_sequence")) == Some(12000.0)
    });
    assert!(ok, "{}", m.text);
    // Said once, not once a pass.
    let passes = m.get("roce_tune_repair_passes_total", &[]).unwrap();
    let (_, ok) = agent.wait_for(Duration::from_secs(5), |m| {
        m.get("roce_tune_repair_passes_total", &[]).unwrap() >= passes + 2.0
    });
    assert!(ok);
    assert_eq!(lines_with(&agent, "has no counters"), 1, "{}", agent.log());

    // The rail goes (its DEL): its series go with it.
    cni(&state, "DEL", "t0", &pod, "net1", "train-0", &a).ok();
    let (m, ok) = agent.wait_for(TWO_PERIODS, |m| m.all(HW, &la).is_empty());
    assert!(ok, "{}", m.text);
    assert_eq!(m.get("roce_tune_rail_info", &lb), Some(1.0));
}

#[test]
fn exclusive_mode_reads_the_counters_in_the_pods_view() {
    needs!(root);
    let pod = Pod::new("net1", Some(&format!("{IP}/16")));
    let tree = Tree::new();
    tree.set_exclusive(true);
    tree.add_device(PCI, DEV, "");
    tree.set_ipv4_gids(DEV, IP);
    std::fs::write(
        counters_dir(&tree.root, DEV, "hw_counters").join("sent_pkts"),
        "42\n",
    )
    .unwrap();
    let state = StateDirPath::new();
    node_with(&state, &tree, json!({"railCounters": ["sent_pkts"]}));
    let c = rail(&tree, &pod, "net1", PCI, IP, json!({}));
    // The rdma plugin moved the device, counters and all, into the pod.
    tree.move_into(&pod, PCI, DEV);
    cni(&state, "ADD", "c1", &pod, "net1", "train-0", &c).ok();
    assert_eq!(state.entry("c1", "net1").unwrap()["reach"], json!("pod"));
    let agent = Agent::start(&state, 1);
    let l = counter(&rail_labels("train-0", DEV, PCI), "sent_pkts");
    let (m, ok) = agent.wait_for(TWO_PERIODS, |m| m.get(HW, &l) == Some(42.0));
    assert!(ok, "{}\n{}", m.text, agent.log());
    kernel_write(
        &counters_dir(&tree.netns_dir(pod.ino()), DEV, "hw_counters").join("sent_pkts"),
        "43\n",
    );
    let (m, ok) = agent.wait_for(TWO_PERIODS, |m| m.get(HW, &l) == Some(43.0));
    assert!(ok, "{}", m.text);
}

/// Garbage, a file past a page, a FIFO, a directory where a file should
/// be, a link, a file that comes and goes between the listing and the read,
/// and 10,000 files under `"*"`: each skipped (or cut at the cap) with one
/// line, while the good counters beside them are exported and every pass
/// ends.
#[test]
fn bad_counter_files_are_skipped_with_one_line_and_never_stall_a_pass() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    node_with(
        &state,
        &tree,
        json!({"railCounters": "*", "railCountersMax": 100}),
    );
    let pod = two_rails(&tree);
    let hw = counters_dir(&tree.root, DEV, "hw_counters");
    std::fs::write(hw.join("a_good"), "7\n").unwrap();
    std::fs::write(hw.join("b_garbage"), "seven\n").unwrap();
    std::fs::write(hw.join("c_negative"), "-1\n").unwrap();
    std::fs::write(hw.join("d_huge"), vec![b'9'; 1 << 20]).unwrap();
    let fifo = hw.join("e_fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::fs::create_dir(hw.join("f_dir")).unwrap();
    std::os::unix::fs::symlink(hw.join("a_good"), hw.join("g_link")).unwrap();
    // 10,000 counter files on net2's device: the cap holds.
    let many = counters_dir(&tree.root, B.1, "hw_counters");
    for i in 0..10_000 {
        std::fs::write(many.join(format!("c{i:05}")), format!("{i}\n")).unwrap();
    }
    let a = rail(&tree, &pod, "net1", PCI, IP, json!({}));
    let b = rail(&tree, &pod, "net2", B.0, B.2, json!({}));
    cni(&state, "ADD", "t0", &pod, "net1", "train-0", &a).ok();
    cni(&state, "ADD", "t0", &pod, "net2", "train-0", &b).ok();

    // A file that comes and goes all the time: it vanishes between the
    // listing and the read, or mid-read.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flicker = {
        let (stop, p) = (stop.clone(), hw.join("h_flicker"));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::write(&p, "5\n");
                let _ = std::fs::remove_file(&p);
            }
        })
    };
    let agent = Agent::start(&state, 1);
    let la = labels_of("train-0", "net1", DEV, PCI);
    let lb = labels_of("train-0", "net2", B.1, B.0);
    let (m, ok) = agent.wait_for(Duration::from_secs(10), |m| {
        m.get("roce_tune_repair_passes_total", &[]).unwrap_or(0.0) >= 4.0
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flicker.join().unwrap();
    assert!(ok, "four passes: {}\n{}", m.text, agent.log());
    assert_eq!(
        m.get("roce_tune_repair_pass_failures_total", &[]),
        Some(0.0)
    );
    assert_eq!(m.get(HW, &counter(&la, "a_good")), Some(7.0));
    for name in [
        "b_garbage",
        "c_negative",
        "d_huge",
        "e_fifo",
        "f_dir",
        "g_link",
    ] {
        assert_eq!(m.get(HW, &counter(&la, name)), None, "{name}: {}", m.text);
        let said = lines_with(&agent, &format!("hw_counters/{name}"));
        assert_eq!(
            said,
            1,
            "{name} said once over four passes:\n{}",
            agent.log()
        );
    }
    // The flickering file: a value when it was there, else skipped; said
    // at most once.
    assert!(
        lines_with(&agent, "hw_counters/h_flicker") <= 1,
        "{}",
        agent.log()
    );
    let series = m.all(HW, &lb);
    assert_eq!(series.len(), 100, "railCountersMax per rail");
    // The first 100 by name, every pass the same ones.
    assert_eq!(m.get(HW, &counter(&lb, "c00000")), Some(0.0));
    assert_eq!(m.get(HW, &counter(&lb, "c00099")), Some(99.0));
    assert_eq!(m.get(HW, &counter(&lb, "c00100")), None);
    assert_eq!(
        lines_with(&agent, "railCountersMax is 100"),
        1,
        "{}",
        agent.log()
    );
    let took = m
        .get("roce_tune_repair_pass_duration_seconds", &[])
        .unwrap();
    // Generous: 100 files of 10,000 on a loaded 2-core machine.
    assert!(took < 5.0, "a pass took {took} s");
}

/// `railCounters` not a list nor "*", a name that walks out of the
/// directory, a cap out of range: the node config is refused (104) naming
/// the key, and nothing is tuned.
#[test]
fn a_bad_rail_counters_key_refuses_the_node_config_naming_it() {
    needs!(root);
    for (extra, key) in [
        (json!({"railCounters": "all"}), "railCounters"),
        (json!({"railCounters": {"sent_pkts": true}}), "railCounters"),
        (
            json!({"railCounters": ["../../../etc/shadow"]}),
            "railCounters",
        ),
        (
            json!({"railCounters": ["hw_counters/sent_pkts"]}),
            "railCounters",
        ),
        (json!({"railCountersMax": 0}), "railCountersMax"),
        (json!({"railCountersMax": 100000}), "railCountersMax"),
    ] {
        let mut rail = Rail::spec().class("Global tclass=106\n").build();
        node_with(&rail.state, &rail.tree, extra.clone());
        rail.conf["trafficClass"] = json!(41);
        let run = cni(
            &rail.state,
            "ADD",
            "c1",
            &rail.pod,
            "net1",
            "train-0",
            &rail.conf,
        );
        assert_eq!(run.code(), 104, "{extra}: {}", run.stdout);
        assert!(run.msg().contains(key), "{extra}: {}", run.msg());
        assert_eq!(
            rail.tree.tc(DEV),
            "Global tclass=106\n",
            "{extra}: untouched"
        );
        assert!(rail.state.entries().is_empty(), "{extra}");
    }
}

/// `inspect --counters`: the counters the agent exports, read twice, with
/// their rates beside the rail's pod and class, in the node view (every
/// device, the rail's marked with its pod) and the pod view, as text and
/// JSON.
#[test]
fn inspect_counters_shows_the_rates_beside_the_rails_pod_and_class() {
    needs!(root);
    let tree = Tree::new();
    let state = StateDirPath::new();
    node_with(
        &state,
        &tree,
        json!({"railCounters": ["sent_pkts", "rcvd_seq_err"]}),
    );
    let pod = Pod::new("net1", Some(&format!("{IP}/16")));
    tree.add_device(PCI, DEV, "Global tclass=106\n");
    tree.set_ipv4_gids(DEV, IP);
    let hw = counters_dir(&tree.root, DEV, "hw_counters");
    std::fs::write(hw.join("sent_pkts"), "1000\n").unwrap();
    std::fs::write(hw.join("rcvd_seq_err"), "3\n").unwrap();
    // A device no pod uses: shown in the node view, without a pod.
    tree.add_device("0000:0c:00.5", "mlx5_5", "");
    std::fs::write(
        counters_dir(&tree.root, "mlx5_5", "hw_counters").join("sent_pkts"),
        "7\n",
    )
    .unwrap();
    let c = rail(&tree, &pod, "net1", PCI, IP, json!({"trafficClass": 41}));
    cni(&state, "ADD", "t0", &pod, "net1", "train-0", &c).ok();
    let inspect = |args: &[&str]| {
        let file = hw.join("sent_pkts");
        // The kernel counts while inspect waits between its two reads.
        let counting = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            kernel_write(&file, "3000\n");
        });
        let run = Exec::new(BIN)
            .args(["inspect", "--sysfs-root"])
            .arg(&tree.root)
            .arg("--node-config")
            .arg(node_config(&state))
            .args(args)
            .run();
        counting.join().unwrap();
        kernel_write(&hw.join("sent_pkts"), "1000\n");
        run.ok();
        run.stdout
    };
    let text = inspect(&["--netns", &pod.path(), "--counters=1"]);
    // docs/inspect.md's "--counters" run is pasted from this one.
    if std::env::var_os("INSPECT_SHOW").is_some() {
        eprintln!(
            "$ roce-tune inspect --netns {} --counters=1\n{text}[exit 0]",
            pod.path()
        );
    }
    assert!(
        text.contains(&format!(
            "{DEV} port 1  pod {NAMESPACE}/train-0 net1  class 41  qos unknown"
        )),
        "{text}"
    );
    let line = |name: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name}: {text}"))
            .to_owned()
    };
    let sent = line("sent_pkts");
    let fields: Vec<&str> = sent.split_whitespace().collect();
    assert_eq!(fields[1], "3000", "{text}");
    // 2000 over a second and a little: the rate is a second's share.
    let rate: f64 = fields[2].trim_end_matches("/s").parse().unwrap();
    assert!((1500.0..=2000.0).contains(&rate), "{text}");
    assert!(line("rcvd_seq_err").ends_with("3  0.0/s"), "{text}");
    assert!(
        !text.contains("mlx5_5"),
        "the pod view is the pod's rails: {text}"
    );

    let node = inspect(&["--counters=0.5", "--json"]);
    let v: Value = serde_json::from_str(&node).unwrap();
    assert_eq!(v["view"], "node");
    let ports = v["ports"].as_array().unwrap();
    let rail = ports.iter().find(|p| p["device"] == DEV).unwrap();
    assert_eq!(rail["rail"]["pod"], "train-0", "{node}");
    assert_eq!(rail["rail"]["class"], 41);
    // The test tree's VF has no PF (no `physfn`): a verdict that cannot
    // vouch, beside the class.
    assert_eq!(rail["qos"], "unknown", "{node}");
    let sent = &rail["counters"][1];
    assert_eq!(
        (sent["name"].as_str(), sent["first"].as_u64()),
        (Some("sent_pkts"), Some(1000))
    );
    assert_eq!(sent["second"], 3000);
    let idle = ports.iter().find(|p| p["device"] == "mlx5_5").unwrap();
    assert!(idle["rail"].is_null(), "{node}");
    assert!(idle["qos"].is_null(), "no rail, no verdict: {node}");

    // A name is not an identity: the rail's device renamed (mlx5_2 to
    // mlx5_7) and the other device now under its old name. The node view
    // marks the rail's device, found by its PCI function and GUID, and
    // leaves the device that took the name without a pod.
    let ib = |pci: &str| tree.root.join(format!("bus/pci/devices/{pci}/infiniband"));
    std::fs::rename(tree.dev_dir(DEV), tree.dev_dir("mlx5_7")).unwrap();
    std::fs::rename(ib(PCI).join(DEV), ib(PCI).join("mlx5_7")).unwrap();
    std::fs::rename(tree.dev_dir("mlx5_5"), tree.dev_dir(DEV)).unwrap();
    std::fs::rename(
        ib("0000:0c:00.5").join("mlx5_5"),
        ib("0000:0c:00.5").join(DEV),
    )
    .unwrap();
    let run = Exec::new(BIN)
        .args(["inspect", "--sysfs-root"])
        .arg(&tree.root)
        .arg("--node-config")
        .arg(node_config(&state))
        .args(["--counters=0.1", "--json"])
        .run();
    run.ok();
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let port = |dev: &str| {
        v["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["device"] == dev)
            .unwrap_or_else(|| panic!("no {dev}: {}", run.stdout))
            .clone()
    };
    assert_eq!(port("mlx5_7")["rail"]["pod"], "train-0", "{}", run.stdout);
    assert!(port(DEV)["rail"].is_null(), "{}", run.stdout);
    assert_eq!(idle["counters"][0]["second"], 7);
}
