//! The trust boundary: what a namespace user writes (the network config, a
//! pod's cni-args, CNI_ARGS, `args`, `runtimeConfig`) must never make
//! roce-tune read, write, create or append to anything outside sysfs and the
//! node's state dir, nor disclose what a host file holds.
//!
//! Each attack runs as a runtime runs the plugin (a process, a real netns),
//! and is checked for its exact code, for every file outside the sysfs tree
//! and the state dir being unchanged (the "host": a shadow file holding a
//! password hash, a precious file, /etc/passwd), and for the secret appearing
//! nowhere: not on stdout, stderr, nor in the node's log file.

use crate::common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const CID: &str = "attack1";
/// Another pod's VF on the same node, and the PF both sit on: what a tenant
/// must never reach through its own network config.
const VICTIM_PCI: &str = "0000:0c:00.3";
const VICTIM_DEV: &str = "mlx5_3";
const VICTIM_IP: &str = "10.9.0.7";
const VICTIM_CLASS: &str = "Global tclass=96\n";
const PF_PCI: &str = "0000:0c:00.0";
const PF_DEV: &str = "mlx5_0";
/// What the shadow file holds: it must never reach an output.
const SECRET: &str = "rootpwhash9f8e7d6c";

/// A node for one attack: the test tree, the state dir, the node config with
/// a log file, and a "host" dir standing for files outside both.
struct Node {
    state: StateDirPath,
    tree: Tree,
    host: PathBuf,
    log: PathBuf,
    /// The pod that owns VICTIM_PCI (the tree binds its net1 to it); held
    /// only so that its netns lives while the attack runs.
    _victim: Pod,
}

impl Node {
    fn new() -> Node {
        let state = StateDirPath::new();
        let host = state.base().join("host");
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(
            host.join("shadow"),
            format!("root:$6${SECRET}:19000:0:99999:7:::\n"),
        )
        .unwrap();
        std::fs::write(host.join("precious"), "do not touch\n").unwrap();
        let tree = Tree::new();
        tree.add_device(PCI, DEV, "Global tclass=106\n");
        tree.set_ipv4_gids(DEV, IP);
        tree.add_device(VICTIM_PCI, VICTIM_DEV, VICTIM_CLASS);
        tree.set_ipv4_gids(VICTIM_DEV, VICTIM_IP);
        tree.add_device(PF_PCI, PF_DEV, "");
        for dev in [DEV, VICTIM_DEV, PF_DEV] {
            let port = tree
                .root
                .join(format!("kernel/config/rdma_cm/{dev}/ports/1"));
            std::fs::create_dir_all(&port).unwrap();
            std::fs::write(port.join("default_roce_tos"), "106\n").unwrap();
        }
        let victim = Pod::new("net1", Some(&format!("{VICTIM_IP}/16")));
        tree.bind(&victim, "net1", VICTIM_PCI);
        let log = state.base().join("roce-tune.log");
        let n = Node {
            state,
            tree,
            host,
            log,
            _victim: victim,
        };
        n.node_config(json!({}));
        n
    }

    fn node_config(&self, extra: Value) {
        let mut e = json!({"logFile": path_str(&self.log)});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        write_node_config(&self.state, Some(&self.tree), e);
    }

    fn shadow(&self) -> PathBuf {
        self.host.join("shadow")
    }

    /// The attacker's own rail: the tree binds its net1 to PCI.
    fn conf(&self, pod: &Pod) -> Value {
        self.tree.bind(pod, "net1", PCI);
        self.bare_conf(pod)
    }

    /// The same config for a pod whose net1 is a plain veth (no binding).
    fn bare_conf(&self, pod: &Pod) -> Value {
        json!({
            "cniVersion": "1.0.0", "name": "rail", "type": "roce-tune",
            "trafficClass": 7, "deviceID": PCI, "gidTimeoutMs": 0,
            "prevResult": prev_result("1.0.0", "net1", &pod.path(), &[ADDR]),
        })
    }

    /// Everything outside the sysfs tree and the state dir, plus /etc/passwd.
    fn outside(&self) -> BTreeMap<PathBuf, String> {
        let mut m = snapshot(&self.host);
        m.insert(
            "/etc/passwd".into(),
            format!("{:?}", std::fs::read("/etc/passwd").unwrap()),
        );
        m
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A veth pod whose config names a device that is not its own: refused as
/// "not a VF" (100), the victim untouched.
fn from_a_veth(name: &'static str, setup: fn(&Node, &Pod) -> Value) -> Attack {
    Attack {
        name,
        setup,
        env: &[],
        command: "ADD",
        code: 100,
        check: |n, r| victim_untouched_naming(n, r, "not a VF"),
    }
}

/// `c` with the keys of `set` set and those of `drop` removed.
fn edited(mut c: Value, set: &[(&str, Value)], drop: &[&str]) -> Value {
    for (k, v) in set {
        c[*k] = v.clone();
    }
    for k in drop {
        c.as_object_mut().unwrap().remove(*k);
    }
    c
}

/// One attack: how it is set up, how it is run, what it must give.
struct Attack {
    name: &'static str,
    /// Plants files and changes the node or the config; returns the config.
    setup: fn(&Node, &Pod) -> Value,
    /// Extra or changed CNI_* variables.
    env: &'static [(&'static str, &'static str)],
    command: &'static str,
    code: u64,
    /// A further check of what the node looks like afterwards.
    check: fn(&Node, &Run) -> Result<(), String>,
}

fn none(_: &Node, _: &Run) -> Result<(), String> {
    Ok(())
}

fn ensure(ok: bool, why: impl Into<String>) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why.into())
    }
}

/// The class file is untouched and nothing is recorded.
fn class_untouched(n: &Node, _: &Run) -> Result<(), String> {
    ensure(
        n.tree.tc(DEV) == "Global tclass=106\n",
        format!("class written: {:?}", n.tree.tc(DEV)),
    )?;
    ensure(
        n.state.entries().is_empty(),
        format!("entries: {:?}", n.state.entries()),
    )
}

/// Lines roce-tune logged for this run: each must start a line of its own.
/// The other pod's VF and the PF are as they were: class, ToS, no entry.
fn victim_untouched(n: &Node, _: &Run) -> Result<(), String> {
    ensure(
        n.tree.tc(VICTIM_DEV) == VICTIM_CLASS,
        format!(
            "the victim's class was written: {:?}",
            n.tree.tc(VICTIM_DEV)
        ),
    )?;
    ensure(n.tree.tc(PF_DEV).is_empty(), "the PF's class was written")?;
    for dev in [DEV, VICTIM_DEV, PF_DEV] {
        let tos = n.tree.root.join(format!(
            "kernel/config/rdma_cm/{dev}/ports/1/default_roce_tos"
        ));
        let now = std::fs::read_to_string(&tos).unwrap_or_default();
        ensure(now == "106\n", format!("the ToS of {dev} is {now:?}"))?;
    }
    ensure(
        n.state.entries().is_empty(),
        format!("entries: {:?}", n.state.entries()),
    )
}

/// `victim_untouched`, and the message names both the deviceID and what the
/// pod's own netdev is, and never the victim's GID (its pod's address).
fn victim_untouched_naming(n: &Node, r: &Run, netdev: &str) -> Result<(), String> {
    victim_untouched(n, r)?;
    let msg = r.msg();
    ensure(
        msg.contains(VICTIM_PCI) || msg.contains(PF_PCI),
        format!("the message does not name the deviceID: {msg}"),
    )?;
    ensure(
        msg.contains(netdev),
        format!("the message does not say {netdev:?}: {msg}"),
    )?;
    ensure(
        !msg.contains("ffff:0a09:0007") && !msg.contains(VICTIM_IP),
        format!("the message quotes the victim's GID: {msg}"),
    )
}

fn log_not_forged(n: &Node, _: &Run) -> Result<(), String> {
    for line in n.log_text().lines() {
        ensure(
            line.len() > 24 && line.as_bytes()[4] == b'-' && line.contains(" roce-tune["),
            format!("a log line roce-tune did not write: {line:?}"),
        )?;
        ensure(
            !line.starts_with("2026-01-01T00:00:00.000Z FORGED"),
            format!("forged: {line:?}"),
        )?;
    }
    Ok(())
}

fn link(target: &Path, at: &Path) {
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at).unwrap();
}

/// The attacks' names, for docs_figures.
pub(crate) fn row_names() -> Vec<String> {
    attacks().iter().map(|a| a.name.to_string()).collect()
}

fn attacks() -> Vec<Attack> {
    const FORGED: &str = "x\n2026-01-01T00:00:00.000Z FORGED roce-tune[1] info ADD x/y: done";
    vec![
        Attack {
            name: "class file is a link to a host file (write)",
            setup: |n, pod| {
                link(&n.host.join("precious"), &n.tree.tc_path(DEV));
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 102,
            check: |n, _| {
                ensure(
                    n.state.entries().is_empty(),
                    "an entry was recorded for a refused class",
                )
            },
        },
        Attack {
            name: "class file is a link to the shadow file (read)",
            setup: |n, pod| {
                link(&n.shadow(), &n.tree.tc_path(DEV));
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 102,
            check: none,
        },
        Attack {
            name: "class file holds a secret (not a class)",
            setup: |n, pod| {
                n.tree
                    .set_tc(DEV, &std::fs::read_to_string(n.shadow()).unwrap());
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 102,
            check: |n, r| {
                ensure(
                    r.msg().contains("bytes"),
                    format!("says nothing of the size: {}", r.msg()),
                )
                .and_then(|_| ensure(n.state.entries().is_empty(), "entry recorded"))
            },
        },
        Attack {
            name: "GID file is a link to the shadow file",
            setup: |n, pod| {
                link(&n.shadow(), &n.tree.dev_dir(DEV).join("ports/1/gids/3"));
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 101,
            check: class_untouched,
        },
        Attack {
            name: "GID type file is a link to the shadow file",
            setup: |n, pod| {
                link(
                    &n.shadow(),
                    &n.tree.dev_dir(DEV).join("ports/1/gid_attrs/types/3"),
                );
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 101,
            check: class_untouched,
        },
        Attack {
            name: "GID type file holds a secret",
            setup: |n, pod| {
                std::fs::write(
                    n.tree.dev_dir(DEV).join("ports/1/gid_attrs/types/3"),
                    std::fs::read(n.shadow()).unwrap(),
                )
                .unwrap();
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 101,
            check: class_untouched,
        },
        Attack {
            name: "stateDir in the network config",
            setup: |n, pod| {
                let mut c = n.conf(pod);
                c["stateDir"] = json!(path_str(&n.host.join("state")));
                c
            },
            env: &[],
            command: "ADD",
            code: 7,
            check: class_untouched,
        },
        Attack {
            name: "sysfsRoot in the network config (a tree whose class is a link)",
            setup: |n, pod| {
                let evil = n.host.join("sys");
                let tc = evil.join("class/infiniband/x/tc/1");
                std::fs::create_dir_all(&tc).unwrap();
                link(&n.host.join("precious"), &tc.join("traffic_class"));
                let mut c = n.conf(pod);
                c["sysfsRoot"] = json!(path_str(&evil));
                c
            },
            env: &[],
            command: "ADD",
            code: 7,
            check: class_untouched,
        },
        Attack {
            name: "logFile in the network config",
            setup: |n, pod| {
                let mut c = n.conf(pod);
                c["logFile"] = json!(path_str(&n.host.join("precious")));
                c["logLevel"] = json!("debug");
                c
            },
            env: &[],
            command: "ADD",
            code: 7,
            check: class_untouched,
        },
        Attack {
            name: "host paths in args and runtimeConfig are nobody's keys",
            setup: |n, pod| {
                let mut c = n.conf(pod);
                let p = path_str(&n.host.join("planted"));
                c["args"] = json!({"cni": {"stateDir": p, "logFile": p, "sysfsRoot": p}});
                c["runtimeConfig"] = json!({"stateDir": p, "logFile": p, "sysfsRoot": p});
                c
            },
            env: &[(
                "CNI_ARGS",
                "IgnoreUnknown=1;stateDir=/tmp/planted;logFile=/tmp/planted",
            )],
            command: "ADD",
            code: 0,
            check: |n, _| {
                ensure(
                    !n.host.join("planted").exists(),
                    "a tenant path was created",
                )?;
                ensure(
                    !Path::new("/tmp/planted").exists(),
                    "/tmp/planted was created",
                )?;
                ensure(n.tree.tc(DEV) == "tclass=7", "the ADD itself did not run")
            },
        },
        Attack {
            name: "control characters in name",
            setup: |n, pod| {
                let mut c = n.conf(pod);
                c["name"] = json!(FORGED);
                c["logLevel"] = json!("debug");
                c
            },
            env: &[],
            command: "ADD",
            code: 7,
            check: log_not_forged,
        },
        Attack {
            name: "control characters in CNI_IFNAME",
            setup: |n, pod| n.conf(pod),
            env: &[("CNI_IFNAME", FORGED)],
            command: "ADD",
            code: 4,
            check: log_not_forged,
        },
        Attack {
            name: "control characters in CNI_CONTAINERID",
            setup: |n, pod| n.conf(pod),
            env: &[("CNI_CONTAINERID", FORGED)],
            command: "DEL",
            // DEL never refuses what ADD would have refused: nothing was
            // recorded for it, and refusing would strand the pod's VF.
            code: 0,
            check: log_not_forged,
        },
        Attack {
            name: "control characters in a CNI_ARGS value",
            setup: |n, pod| n.conf(pod),
            env: &[(
                "CNI_ARGS",
                "K8S_POD_NAME=a\n2026-01-01T00:00:00.000Z FORGED roce-tune[1] x",
            )],
            command: "ADD",
            code: 4,
            check: log_not_forged,
        },
        Attack {
            name: "the node's log file is a link to a host file",
            setup: |n, pod| {
                link(&n.host.join("precious"), &n.log);
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 0,
            check: |n, r| {
                ensure(
                    r.stderr.contains("symbolic link"),
                    format!("stderr does not say why: {}", r.stderr),
                )?;
                ensure(n.tree.tc(DEV) == "tclass=7", "logging failed the pod")
            },
        },
        Attack {
            name: "node config writable by others",
            setup: |n, pod| {
                std::fs::set_permissions(
                    node_config(&n.state),
                    std::fs::Permissions::from_mode(0o666),
                )
                .unwrap();
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 104,
            check: class_untouched,
        },
        Attack {
            name: "node config owned by another user",
            setup: |n, pod| {
                std::os::unix::fs::chown(node_config(&n.state), Some(65534), None).unwrap();
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 104,
            check: class_untouched,
        },
        Attack {
            name: "node config is a link",
            setup: |n, pod| {
                let real = n.state.base().join("node.real.json");
                std::fs::rename(node_config(&n.state), &real).unwrap();
                link(&real, &node_config(&n.state));
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 104,
            check: class_untouched,
        },
        Attack {
            name: "state dir is world-writable",
            setup: |n, pod| {
                std::fs::create_dir_all(&n.state.0).unwrap();
                std::fs::set_permissions(&n.state.0, std::fs::Permissions::from_mode(0o777))
                    .unwrap();
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 5,
            check: |n, r| {
                class_untouched(n, r)?;
                ensure(
                    std::fs::read_dir(&n.state.0).unwrap().count() == 0,
                    "files made in the refused dir",
                )
            },
        },
        Attack {
            name: "a parent of the state dir is world-writable",
            setup: |n, pod| {
                let open = n.state.base().join("open");
                std::fs::create_dir_all(&open).unwrap();
                std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
                n.node_config(json!({"stateDir": path_str(&open.join("state"))}));
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 5,
            check: |n, r| {
                class_untouched(n, r)?;
                ensure(
                    !n.state.base().join("open/state").exists(),
                    "state dir made under an open parent",
                )
            },
        },
        Attack {
            name: "state dir is a link to a host dir",
            setup: |n, pod| {
                link(&n.host, &n.state.0);
                n.conf(pod)
            },
            env: &[],
            command: "ADD",
            code: 5,
            check: class_untouched,
        },
        // The device is the pod's own, as the kernel says from inside the
        // pod's netns; deviceID is a cross-check, never the source.
        from_a_veth(
            "deviceID names another pod's VF from a veth (trafficClass 0)",
            |n, pod| {
                let set = [
                    ("deviceID", json!(VICTIM_PCI)),
                    ("trafficClass", json!(0)),
                    ("gidCheck", json!("off")),
                ];
                edited(n.bare_conf(pod), &set, &[])
            },
        ),
        from_a_veth(
            "deviceID names the PF from a veth (rdmaCmTos 0)",
            |n, pod| {
                let set = [
                    ("deviceID", json!(PF_PCI)),
                    ("rdmaCmTos", json!(0)),
                    ("gidCheck", json!("off")),
                ];
                edited(n.bare_conf(pod), &set, &["trafficClass"])
            },
        ),
        from_a_veth(
            "deviceID names another pod's VF with gidCheck enforce (its GID)",
            |n, pod| edited(n.bare_conf(pod), &[("deviceID", json!(VICTIM_PCI))], &[]),
        ),
        Attack {
            name: "deviceID names another pod's VF while the pod has its own",
            setup: |n, pod| edited(n.conf(pod), &[("deviceID", json!(VICTIM_PCI))], &[]),
            env: &[],
            command: "ADD",
            code: 100,
            check: |n, r| {
                victim_untouched_naming(n, r, PCI)?;
                ensure(
                    n.tree.tc(DEV) == "Global tclass=106\n",
                    "its own VF was written",
                )
            },
        },
        from_a_veth(
            "pciBusID alone names another pod's VF from a veth",
            |n, pod| {
                let set = [("pciBusID", json!(VICTIM_PCI))];
                edited(n.bare_conf(pod), &set, &["deviceID"])
            },
        ),
        Attack {
            name: "a VF the tree gives another pod's netns is not this pod's",
            setup: |n, pod| {
                // The victim's binding is by its netns: the same ifname in
                // the attacker's netns proves nothing.
                edited(
                    n.bare_conf(pod),
                    &[("trafficClass", json!(0))],
                    &["deviceID"],
                )
            },
            env: &[],
            command: "ADD",
            code: 100,
            check: victim_untouched,
        },
        Attack {
            name: "a planted entry's netns is a host file, not a netns (DEL)",
            setup: |n, pod| {
                n.state.plant(&json!({
                    "version": 2, "network": "rail", "containerId": CID, "ifname": "net1",
                    "netns": path_str(&n.shadow()), "netnsId": null, "exclusive": true,
                    "device": DEV, "port": 1, "pci": PCI, "guid": null,
                    "trafficClass": {"original": 106, "written": 7}, "rdmaCmTos": null,
                    "createdNs": 1,
                }));
                n.tree.set_tc(DEV, "tclass=7");
                n.conf(pod)
            },
            env: &[("CNI_NETNS", "")],
            command: "DEL",
            code: 0,
            check: |n, _| {
                ensure(
                    n.tree.tc(DEV) == "tclass=106",
                    format!(
                        "class {:?}: not restored from the host's view",
                        n.tree.tc(DEV)
                    ),
                )?;
                ensure(n.state.entries().is_empty(), "entry kept")
            },
        },
    ]
}

#[test]
fn no_tenant_input_reaches_a_host_file() {
    needs!(root);
    // How many attacks there are is for docs_figures to check, against
    // what docs/ cites.
    let list = attacks();
    let mut failures = Vec::new();
    for a in &list {
        let pod = Pod::new("net1", Some(ADDR));
        let node = Node::new();
        let conf = (a.setup)(&node, &pod);
        let before = node.outside();
        let exec = Exec::cni(
            BIN,
            &node_config(&node.state),
            a.command,
            CID,
            &pod.path(),
            "net1",
        );
        let r = a
            .env
            .iter()
            .fold(exec, |e, (k, v)| e.env(k, v))
            .stdin(conf.to_string())
            .run();
        let mut why = Vec::new();
        let code = r.outcome();
        if code != a.code {
            why.push(format!(
                "code {code}, expected {}: {} {}",
                a.code, r.stdout, r.stderr
            ));
        }
        for (what, text) in [
            ("stdout", &r.stdout),
            ("stderr", &r.stderr),
            ("log", &node.log_text()),
        ] {
            if text.contains(SECRET) {
                why.push(format!("the secret is in {what}: {text}"));
            }
        }
        if node.outside() != before {
            why.push("a file outside sysfs and the state dir changed".into());
        }
        if r.stderr.contains("panicked") {
            why.push(format!("panicked: {}", r.stderr));
        }
        if let Err(e) = (a.check)(&node, &r) {
            why.push(e);
        }
        if !why.is_empty() {
            failures.push(format!("{}: {}", a.name, why.join("; ")));
        }
    }
    println!("{} attacks, {} failed", list.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
