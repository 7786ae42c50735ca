//! VERSION, GC and STATUS as a runtime sends them, and the binary run by
//! hand (no CNI_COMMAND). None of these touch a netns, so none needs root.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;

const VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// libcni sets all six variables for every command, the unused ones empty.
fn run_cmd(state: &StateDirPath, command: &str, stdin: &[u8]) -> Run {
    run_plugin(state, command, "", "", "", stdin)
}

fn supported(v: &Value) -> Vec<String> {
    let mut s: Vec<String> = v["supportedVersions"]
        .as_array()
        .expect("supportedVersions is an array")
        .iter()
        .map(|x| x.as_str().expect("a string").to_owned())
        .collect();
    s.sort();
    s
}

#[test]
fn version_echoes_the_input_version_and_lists_all_supported() {
    needs!(root);
    for v in VERSIONS {
        let r = run_cmd(
            &StateDirPath::new(),
            "VERSION",
            json!({"cniVersion": v}).to_string().as_bytes(),
        );
        r.ok();
        let out = r.json();
        assert_eq!(out["cniVersion"], *v, "{v}");
        assert_eq!(supported(&out), VERSIONS, "{v}");
    }
    // Only CNI_COMMAND set, a full config on stdin: the same answer.
    let r = Exec::new(BIN)
        .env("CNI_COMMAND", "VERSION")
        .stdin(br#"{"cniVersion":"0.4.0","name":"rail","type":"roce-tune"}"#)
        .run();
    r.ok();
    assert_eq!(r.json()["cniVersion"], "0.4.0");
}

#[test]
fn version_works_with_empty_stdin() {
    needs!(root);
    for r in [
        run_cmd(&StateDirPath::new(), "VERSION", b""),
        Exec::new(BIN).env("CNI_COMMAND", "VERSION").run(),
    ] {
        r.ok();
        let out = r.json();
        let v = out["cniVersion"].as_str().expect("a cniVersion");
        assert!(VERSIONS.contains(&v), "{v}");
        assert_eq!(supported(&out), VERSIONS);
    }
}

fn gc_conf(version: &str, state: &StateDirPath) -> Value {
    write_node_config(state, None, json!({}));
    json!({
        "cniVersion": version,
        "name": "rail",
        "type": "roce-tune",
    })
}

#[test]
fn gc_accepts_both_attachment_keys_and_prints_nothing() {
    needs!(root);
    let list = json!([{"containerID": "c1", "ifname": "net1"}]);
    for key in ["cni.dev/valid-attachments", "cni.dev/attachments"] {
        for existing_dir in [false, true] {
            let state = StateDirPath::new();
            if existing_dir {
                std::fs::create_dir(&state.0).unwrap();
                std::fs::set_permissions(&state.0, std::fs::Permissions::from_mode(0o700)).unwrap();
            }
            let mut c = gc_conf("1.1.0", &state);
            c[key] = list.clone();
            let r = run_cmd(&state, "GC", c.to_string().as_bytes());
            assert_eq!(r.status, 0, "{key} (dir exists: {existing_dir}): {r:?}");
            assert_eq!(r.stdout, "", "{key}: GC prints nothing on success");
        }
    }
}

#[test]
fn gc_without_the_attachment_list_is_refused() {
    needs!(root);
    let state = StateDirPath::new();
    let r = run_cmd(
        &state,
        "GC",
        gc_conf("1.1.0", &state).to_string().as_bytes(),
    );
    assert_eq!(r.code(), 7, "{r:?}");
    assert!(r.msg().contains("cni.dev/valid-attachments"), "{}", r.msg());
    assert_eq!(r.json()["cniVersion"], "1.1.0");
}

#[test]
fn gc_and_status_need_1_1_0() {
    needs!(root);
    for cmd in ["GC", "STATUS"] {
        for v in ["1.0.0", "0.4.0"] {
            let state = StateDirPath::new();
            let mut c = gc_conf(v, &state);
            c["cni.dev/valid-attachments"] = json!([]);
            let r = run_cmd(&state, cmd, c.to_string().as_bytes());
            assert_eq!(r.code(), 1, "{cmd} on {v}: {r:?}");
            assert!(r.msg().contains("1.1.0"), "{cmd} on {v}: {}", r.msg());
            assert_eq!(r.json()["cniVersion"], v, "{cmd} on {v}");
            assert!(!state.0.exists(), "{cmd} on {v} created the state dir");
        }
    }
}

#[test]
fn status_creates_a_private_state_dir() {
    needs!(root);
    let state = StateDirPath::new();
    assert!(!state.0.exists());
    let r = run_cmd(
        &state,
        "STATUS",
        gc_conf("1.1.0", &state).to_string().as_bytes(),
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "");
    let meta = std::fs::metadata(&state.0).expect("STATUS created the state dir");
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    // Ready again on the second call, with the dir already there.
    run_cmd(
        &state,
        "STATUS",
        gc_conf("1.1.0", &state).to_string().as_bytes(),
    )
    .ok();
}

#[test]
fn status_below_a_regular_file_is_not_ready() {
    needs!(root);
    let state = StateDirPath::new();
    std::fs::write(&state.0, "not a dir").unwrap();
    let c = gc_conf("1.1.0", &state);
    write_node_config(
        &state,
        None,
        json!({"stateDir": path_str(&state.0.join("state"))}),
    );
    let r = run_cmd(&state, "STATUS", c.to_string().as_bytes());
    assert_eq!(r.code(), 50, "{r:?}");
    assert!(r.msg().contains("not ready"), "{}", r.msg());
    assert!(r.msg().contains(&path_str(&state.0)), "{}", r.msg());
    assert!(std::fs::metadata(&state.0).unwrap().is_file());
}

/// The binary run by an operator: no CNI_* variable at all.
fn run_by_hand(args: &[&str]) -> Run {
    Exec::new(BIN).args(args).run()
}

/// Both binaries say the version and the revision they were built from:
/// the one this build had (`unknown` without ROCE_TUNE_REVISION, which only
/// `make release` sets: integration/image-test.sh and integration/dist-check.py
/// hold the shipped binaries to the tree's revision).
#[test]
fn version_names_the_release_and_the_revision() {
    use roce_tune::build_info::{is_revision, REVISION, VERSION};
    assert!(is_revision(REVISION), "{REVISION}");
    for (bin, name) in [(BIN, "roce-tune"), (AGENT_BIN, "roce-tune-agent")] {
        for flag in ["--version", "-V"] {
            let r = Exec::new(bin).arg(flag).run();
            assert_eq!(r.status, 0, "{name} {flag}: {r:?}");
            let want = format!("{name} {VERSION} (revision {REVISION}");
            assert!(
                r.stdout.starts_with(&want),
                "{name} {flag}: {:?}, want it to start {want:?}",
                r.stdout
            );
            assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
        }
    }
    let r = run_by_hand(&["--version"]);
    let cni = roce_tune::cni::version::SUPPORTED_VERSIONS.join(", ");
    assert!(
        r.stdout.trim_end().ends_with(&format!("; CNI {cni})")),
        "the CNI versions: {}",
        r.stdout
    );
}

#[test]
fn help_prints_usage() {
    let r = run_by_hand(&["--help"]);
    assert_eq!(r.status, 0, "{r:?}");
    for part in ["CNI_COMMAND", "roce-tune inspect", "roce-tune gc --orphans"] {
        assert!(r.stdout.contains(part), "usage lacks {part}: {}", r.stdout);
    }
}

/// Every command's --help is its usage on stdout and exit 0, as the
/// top-level one: an operator asks for it, it is no usage error.
#[test]
fn every_commands_help_is_usage_and_exit_0() {
    for (bin, args, says) in [
        (
            BIN,
            &["reset-idle", "--help"][..],
            "roce-tune reset-idle [--dry-run]",
        ),
        (
            BIN,
            &["reset-idle", "--dry-run", "-h"][..],
            "--dry-run only lists them",
        ),
        (BIN, &["gc", "--help"][..], "roce-tune gc --orphans"),
        (BIN, &["inspect", "--help"][..], "--node-config PATH"),
        (AGENT_BIN, &["agent", "--help"][..], "roce-tune-agent agent"),
        (AGENT_BIN, &["nri", "--help"][..], "roce-tune-agent nri"),
        (
            AGENT_BIN,
            &["gc", "--help"][..],
            "roce-tune-agent gc --orphans",
        ),
    ] {
        let r = Exec::new(bin).args(args).run();
        assert_eq!(r.status, 0, "{args:?}: {r:?}");
        assert!(r.stdout.contains(says), "{args:?}: {}", r.stdout);
        assert_eq!(r.stderr, "", "{args:?}");
    }
}

/// An environment the runtime got wrong (code 4) is logged under the
/// command it asked for, in the node's log file too: a node's log of many
/// pods' runs says which call was wrong.
#[test]
fn an_environment_error_is_logged_under_its_command() {
    needs!(root);
    let state = StateDirPath::new();
    let log = state.base().join("roce-tune.log");
    write_node_config(&state, None, json!({"logFile": path_str(&log)}));
    let conf = br#"{"cniVersion":"1.0.0","name":"rail","type":"roce-tune"}"#;
    for (command, line) in [
        (
            Some("ADD"),
            "error ADD: code 4: CNI_NETNS is required for ADD but is empty or unset",
        ),
        (
            Some("CHECK"),
            "error CHECK: code 4: CNI_NETNS is required for CHECK but is empty or unset",
        ),
        (
            Some("ATTACH"),
            "error CNI_COMMAND \"ATTACH\": code 4: CNI_COMMAND \"ATTACH\" is not one of",
        ),
        (
            None,
            "error CNI_COMMAND unset: code 4: CNI_COMMAND is not set",
        ),
    ] {
        let exec = Exec::cni(BIN, &node_config(&state), "", "c1", "", "net1").stdin(&conf[..]);
        let r = match command {
            Some(c) => exec.env("CNI_COMMAND", c),
            None => exec.env_remove("CNI_COMMAND"),
        }
        .run();
        assert_eq!(r.code(), 4, "{command:?}: {r:?}");
        assert!(r.stderr.contains(line), "{command:?}: {}", r.stderr);
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.contains(line), "{command:?}: {logged}");
    }
}

/// The CNI binary does not carry the long-running commands: each is 2,
/// naming the binary that runs it, and starts nothing.
#[test]
fn the_long_running_commands_are_roce_tune_agents() {
    for args in [
        &["agent"][..],
        &["agent", "--nri", "--every", "1"][..],
        &["nri"][..],
        &["gc", "--orphans", "--every", "1"][..],
    ] {
        let r = run_by_hand(args);
        assert_eq!(r.status, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("roce-tune-agent"),
            "{args:?}: {}",
            r.stderr
        );
    }
    // The agent binary has them, and sends the operator's commands back.
    let r = Exec::new(AGENT_BIN).arg("--help").run();
    assert_eq!(r.status, 0, "{r:?}");
    for part in [
        "roce-tune-agent agent",
        "roce-tune-agent nri",
        "roce-tune-agent gc --orphans [--every",
    ] {
        assert!(r.stdout.contains(part), "usage lacks {part}: {}", r.stdout);
    }
    let r = Exec::new(AGENT_BIN).arg("--version").run();
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.starts_with("roce-tune-agent "), "{}", r.stdout);
    let r = Exec::new(AGENT_BIN).arg("inspect").run();
    assert_eq!(r.status, 2, "{r:?}");
    assert!(r.stderr.contains("roce-tune's"), "{}", r.stderr);
}

#[test]
fn no_args_and_no_cni_command_is_an_error_on_stderr() {
    let r = run_by_hand(&[]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.stderr.contains("CNI_COMMAND is not set"), "{}", r.stderr);
    assert!(
        r.stderr.contains("1.1.0"),
        "names the versions: {}",
        r.stderr
    );
}
