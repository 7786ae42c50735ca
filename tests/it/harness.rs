//! The test runner itself (`tests/it/common`'s `Exec`): what the other tests
//! rely on when a plugin hangs, dies of a signal or is handed bytes that are
//! not UTF-8, and the data it shares with the scripts. No root needed.

use crate::common::*;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

#[test]
fn a_run_past_its_hang_limit_is_killed_and_reported() {
    let r = Exec::new("/bin/sleep")
        .arg("10")
        .hang_after(Duration::from_millis(200))
        .run();
    assert!(r.hung, "{r:?}");
    assert_eq!(r.signal, Some(nix::libc::SIGKILL), "{r:?}");
    assert_eq!(r.status, -1);
    assert!(
        r.stderr.contains("HUNG: killed after 200ms"),
        "{}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(5), "{:?}", r.elapsed);
    assert_eq!(r.outcome(), u64::MAX, "a hang is no CNI outcome");
}

#[test]
fn signal_exit_status_env_bytes_and_stdin_reach_the_caller() {
    let r = Exec::new("/bin/sh").args(["-c", "kill -ABRT $$"]).run();
    assert_eq!(
        (r.status, r.signal, r.hung),
        (-1, Some(nix::libc::SIGABRT), false)
    );

    // Only PATH and what the caller sets; a byte string arrives as it was.
    let r = Exec::new("/bin/sh")
        .args(["-c", "env | sort; cat; printf err >&2; exit 3"])
        .env("RT_BYTES", OsString::from_vec(b"a\xffb".to_vec()))
        .stdin(&b"from stdin"[..])
        .run();
    assert_eq!(r.status, 3);
    assert_eq!(r.stderr, "err");
    let vars: Vec<&str> = r.stdout.lines().collect();
    assert!(vars.contains(&"RT_BYTES=a\u{fffd}b"), "{vars:?}");
    assert!(r.stdout.ends_with("from stdin"), "{}", r.stdout);
    let names: Vec<&str> = vars
        .iter()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| !["PWD", "SHLVL", "_"].contains(k))
        .collect();
    assert_eq!(names, ["PATH", "RT_BYTES"], "{vars:?}");

    // A variable removed is not set at all, not set empty.
    let r = Exec::cni(BIN, "/nonexistent".as_ref(), "ADD", "c", "", "net1")
        .env_remove("CNI_COMMAND")
        .arg("--help")
        .run();
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("CNI_COMMAND"), "{}", r.stdout);
}

/// The scripts' rail sysctls (integration/lib.sh reads them from the same
/// file, tests/data/rail-sysctls.txt) are these tests' own.
#[test]
fn the_scripts_check_the_same_rail_sysctls() {
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/integration/lib.sh");
    let r = Exec::new("/bin/bash")
        .args([
            "-c",
            r#". "$0" && printf '%s\n' "$RAIL_SYSCTLS_ALL" "$RAIL_SYSCTLS""#,
            lib,
        ])
        .run();
    assert_eq!(r.status, 0, "{r:?}");
    let words = |scope: &str, line: Option<&str>| -> Vec<(String, String)> {
        line.unwrap_or_default()
            .split_whitespace()
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("name=value");
                (format!("net.ipv4.conf.{scope}.{k}"), v.to_string())
            })
            .collect()
    };
    let mut lines = r.stdout.lines();
    let mut scripts = words("all", lines.next());
    scripts.extend(words("IFNAME", lines.next()));
    let mut ours: Vec<(String, String)> = rail_sysctls("IFNAME")
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
    scripts.sort();
    ours.sort();
    assert_eq!(scripts, ours);
}

/// The Rail fixture is what it says it is (`tests/it/common/rail.rs`): each
/// rail's interface in the pod with its address, its VF in the tree with the
/// class asked for and the v2 GID of the address at index 3, bound as the
/// kernel shows it from the pod, the node config naming the tree, the state
/// dir and the extra keys; and ADD then DEL of a rail through it.
#[test]
fn the_rail_fixture_lays_out_each_rail_and_runs_the_plugin_on_it() {
    needs!(root);
    let rail = Rail::spec()
        .rails(7)
        .class("Global tclass=106\n")
        .node(serde_json::json!({"podResourcesTimeoutMs": 1000}))
        .build();
    assert_eq!(
        (rail.vfs[0].pci.as_str(), rail.vfs[0].dev.as_str()),
        (PCI, DEV)
    );
    assert_eq!(rail.vfs[0].addr, ADDR);
    assert_eq!(rail.vfs[6].pci, "0000:0c:01.0", "past function 7");
    let bound = |vf: &Vf| {
        let link = rail
            .tree
            .netns_dir(rail.pod.ino())
            .join("class/net")
            .join(&vf.ifname)
            .join("device");
        std::fs::read_link(link).unwrap()
    };
    for vf in &rail.vfs {
        let shown = sh(&format!(
            "ip -n {} -o addr show dev {}",
            rail.pod.ns, vf.ifname
        ));
        assert!(shown.contains(&format!("inet {} ", vf.addr)), "{shown}");
        assert_eq!(rail.tree.tc(&vf.dev), "Global tclass=106\n");
        let gid = std::fs::read_to_string(rail.tree.dev_dir(&vf.dev).join("ports/1/gids/3"));
        assert_eq!(gid.unwrap().trim(), v4_gid(&vf.ip), "{}", vf.dev);
        assert!(bound(vf).ends_with(&vf.pci), "{:?}", bound(vf));
    }
    let node: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(node_config(&rail.state)).unwrap()).unwrap();
    assert_eq!(node["sysfsRoot"], path_str(&rail.tree.root));
    assert_eq!(node["stateDir"], path_str(&rail.state.0));
    assert_eq!(node["podResourcesTimeoutMs"], 1000);
    for i in [0, 6] {
        let r = rail.run_rail("ADD", "c1", i, &rail.conf_of(i));
        r.ok();
        assert_eq!(rail.tree.tc(&rail.vfs[i].dev), "tclass=41");
    }
    assert_eq!(rail.state.entries(), ["c1:net1.state", "c1:net7.state"]);
    rail.del("c1").ok();
    assert_eq!(rail.tree.tc(DEV), "tclass=106");
    assert_eq!(rail.state.entries(), ["c1:net7.state"]);
}
