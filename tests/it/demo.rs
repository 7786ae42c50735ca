//! `make demo`, the first try: it installs only what it uses (the CNI
//! plugins, iproute2, jq and cnitool's build; none of podman, Prometheus,
//! Helm, the PyPI venvs or qemu), and its sections show what they say: the
//! job's NCCL variables, a drift the agent repairs, a wrong GID index
//! refused with 101 naming the real one.

use crate::common::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// What no first try should pull in: the image's, check-conf's, the fake
/// kubelet's, the benchmarks' and the kernel lane's tools.
const NOT_FOR_THE_DEMO: &[&str] = &[
    "podman",
    "prometheus",
    "helm",
    "qemu",
    "venv",
    "python3",
    "kubernetes",
    "hyperfine",
    "busybox",
    "curl",
];

fn setup_sh() -> String {
    format!("{REPO}/integration/setup.sh")
}

/// `setup.sh <args> --plan`: its packages and its steps.
fn plan(args: &[&str]) -> (BTreeSet<String>, Vec<String>) {
    let r = Exec::new("bash")
        .arg(setup_sh())
        .args(args)
        .arg("--plan")
        .run();
    assert_eq!(r.status, 0, "{r:?}");
    let mut packages = BTreeSet::new();
    let mut steps = Vec::new();
    for line in r.stdout.lines() {
        match line.split_once(' ') {
            Some(("package", p)) => {
                packages.insert(p.to_owned());
            }
            Some(("step", s)) => steps.push(s.to_owned()),
            _ => panic!("a plan line that is neither package nor step: {line:?}"),
        }
    }
    (packages, steps)
}

fn forbidden<'a>(names: impl IntoIterator<Item = &'a String>) -> Vec<&'a String> {
    names
        .into_iter()
        .filter(|n| NOT_FOR_THE_DEMO.iter().any(|f| n.contains(f)))
        .collect()
}

#[test]
fn the_demos_plan_is_the_chain_and_cnitool_and_nothing_else() {
    let (packages, steps) = plan(&["--demo"]);
    for needed in [
        "containernetworking-plugins",
        "iproute2",
        "jq",
        "golang-go",
        "golang-github-appc-cni-dev",
    ] {
        assert!(packages.contains(needed), "{needed}: {packages:?}");
    }
    assert_eq!(steps, ["cnitool"]);
    assert_eq!(forbidden(&packages), Vec::<&String>::new());
    // The needles find what `make setup` installs: they would find it here.
    let (all, all_steps) = plan(&[]);
    assert!(packages.is_subset(&all));
    for f in ["podman", "python3-venv", "hyperfine", "busybox-static"] {
        assert!(all.contains(f), "{f}: {all:?}");
    }
    for s in [
        "prometheus",
        "helm",
        "venv_check_conf",
        "venv_fake_kubelet",
        "cnitool",
    ] {
        assert!(all_steps.iter().any(|a| a == s), "{s}: {all_steps:?}");
    }
    // `make demo` runs demo.sh alone (no `setup` before it), and demo.sh
    // runs the --demo setup.
    let mk = std::fs::read_to_string(format!("{REPO}/mk/e2e.mk")).unwrap();
    let target = mk
        .lines()
        .find(|l| l.starts_with("demo:"))
        .expect("a demo target in mk/e2e.mk");
    assert_eq!(
        target.trim_end(),
        "demo:",
        "make demo must not run `make setup` first"
    );
    let demo = std::fs::read_to_string(format!("{REPO}/integration/demo.sh")).unwrap();
    let runs: Vec<&str> = demo
        .lines()
        .filter(|l| l.contains("/setup.sh\"") && !l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].contains("\"$here/setup.sh\" --demo"), "{}", runs[0]);
}

/// The demo's setup run for real, on a machine where every package reads as
/// missing (a dpkg-query that knows none) and apt-get, curl and pip only
/// write down what they were asked: it asks apt-get for the plan's packages
/// and fetches nothing else.
#[test]
fn the_demos_setup_asks_for_the_plans_packages_and_fetches_nothing_else() {
    needs!(root);
    let dir = private_dir("rt-demo-setup-");
    let fake = dir.join("bin");
    let build = dir.join("build");
    let asked = dir.join("asked");
    std::fs::create_dir_all(&fake).unwrap();
    let script = |name: &str, body: &str| {
        let p = fake.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let note = format!("echo \"$(basename \"$0\") $*\" >>{}", path_str(&asked));
    script("dpkg-query", "exit 1");
    for tool in ["apt-get", "apt", "curl", "wget", "pip", "pip3"] {
        script(tool, &note);
    }
    // cnitool already built: the one step of the plan does nothing.
    let cnitool = build.join("bin/cnitool");
    std::fs::create_dir_all(cnitool.parent().unwrap()).unwrap();
    std::fs::write(&cnitool, "").unwrap();
    std::fs::set_permissions(&cnitool, std::fs::Permissions::from_mode(0o755)).unwrap();

    let r = Exec::new("bash")
        .args([&setup_sh(), "--demo"])
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", path_str(&fake)),
        )
        .env("ROCE_TUNE_BUILD_DIR", &build)
        .hang_after(Duration::from_secs(60))
        .run();
    assert_eq!(r.status, 0, "{r:?}");
    let asked = std::fs::read_to_string(&asked).unwrap_or_default();
    let installs: Vec<&str> = asked.lines().filter(|l| l.contains(" install ")).collect();
    assert_eq!(installs.len(), 1, "{asked}");
    let got: BTreeSet<String> = installs[0]
        .split_whitespace()
        .skip_while(|w| *w != "--no-install-recommends")
        .skip(1)
        .map(str::to_owned)
        .collect();
    assert_eq!(got, plan(&["--demo"]).0, "{asked}");
    assert_eq!(forbidden(&got), Vec::<&String>::new());
    let others: Vec<&str> = asked
        .lines()
        .filter(|l| !l.contains(" install ") && !l.ends_with(" update"))
        .collect();
    assert!(
        others.is_empty(),
        "fetched besides the packages: {others:?}"
    );
    let left: Vec<PathBuf> = walk(&build);
    assert_eq!(left, [cnitool], "the build dir holds only cnitool");
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// integration/demo.sh on this build (setup and build skipped: the tests
/// have the binaries): every section it prints says OK, with the values it
/// claims.
#[test]
fn the_demo_shows_the_nccl_lines_a_repaired_drift_and_a_refused_gid_index() {
    needs!(root);
    let cnitool = format!("{REPO}/integration/.build/bin/cnitool");
    assert!(
        Path::new(&cnitool).exists(),
        "{cnitool} is missing: run integration/setup.sh --demo (make setup builds it too)"
    );
    let r = Exec::new(format!("{REPO}/integration/demo.sh"))
        .env("DEMO_SKIP_SETUP", "1")
        .env("DEMO_SKIP_BUILD", "1")
        .env("ROCE_TUNE_BIN", BIN)
        .env("ROCE_TUNE_AGENT_BIN", AGENT_BIN)
        .hang_after(Duration::from_secs(240))
        .run();
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    let line = |start: &str| -> String {
        r.stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?}: {}", r.stdout))
            .to_owned()
    };
    let after = |start: &str| -> String {
        let mut it = r.stdout.lines().skip_while(|l| !l.starts_with(start));
        it.next();
        it.next().unwrap_or_default().to_owned()
    };
    let nccl = line("  NCCL env ");
    assert!(
        nccl.contains("NCCL_IB_HCA==mlx5_2:1 NCCL_IB_GID_INDEX=3 NCCL_IB_TC=41")
            && nccl.ends_with(" OK"),
        "{nccl}"
    );
    let agent = line("  agent ");
    assert!(
        agent.contains("class set to 0 behind roce-tune's back")
            && agent.contains(": 41 again")
            && agent.ends_with(" OK"),
        "{agent}"
    );
    let said = after("  agent ");
    assert!(
        said.contains("roce-tune-agent: drift: the traffic class of mlx5_2 port 1")
            && said.contains("is 0, roce-tune wrote 41")
            && said.contains("repaired: it holds 41 again"),
        "{said}"
    );
    let gid = line("  GID index 1 ");
    assert!(
        gid.contains("ADD refused, code 101, the RoCE v2 GID is at index 3")
            && gid.ends_with(" OK"),
        "{gid}"
    );
    assert!(
        after("  GID index 1 ").contains("set NCCL_IB_GID_INDEX=3"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("demo: OK"), "{}", r.stdout);
    assert!(!r.stdout.contains("WRONG"), "{}", r.stdout);
}
