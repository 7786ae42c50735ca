//! The binary without CNI_COMMAND: an operator's command line (`gc`,
//! `reset-idle`, `inspect`; `agent` is `crate::agent`'s). Errors here are
//! `anyhow` chains printed for a person ("roce-tune: what: why"); the CNI
//! edge (`plugin`) keeps the numeric codes a runtime reads.

pub(crate) mod errors;
pub mod inspect;

use crate::idle;
use crate::node::NodeConfig;
use crate::state::StateDir;
use crate::sysfs::View;
use anyhow::{Context, Result};
use errors::cause;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const USAGE: &str = "\
roce-tune: a chained CNI meta-plugin for RoCE rails on SR-IOV VFs.

As a CNI plugin it is run by the container runtime (CNI_COMMAND set) and reads
its network config on stdin. Without CNI_COMMAND it is an operator's tool:

  roce-tune inspect [--netns PATH | --pid PID] [--ifname NAME] [--device DEV]
                    [--gid-index N] [--traffic-class N] [--port N]
                    [--sysfs-root DIR] [--json]
      Show the node's RDMA devices, or a pod's rails, and PASS/FAIL each check
      (exit 0 all pass, 1 a check failed, 2 usage error); inspect --help for more.
  roce-tune inspect (--netns PATH | --pid PID) --env [--json]
      The pod's job environment (NCCL_IB_HCA, GID index, class), KEY=VALUE.
  roce-tune agent [--every SECONDS] [--nri] [--node-config PATH]
      The node's agent (the DaemonSet's long-running container): every SECONDS
      (default 10) repair orphans and drift (driftPolicy), read every rail; serve
      Prometheus metrics on the node config's metricsAddress (/metrics,
      /healthz) all the time; with --nri, also be the NRI plugin (see nri);
      until SIGTERM.
  roce-tune nri [--node-config PATH]
      The NRI plugin alone (the agent's duty with `agent --nri`): connect to the
      runtime's nriSocket, register as roce-tune at nriIndex, and give the
      containers of pods that ask (ncclEnv) their rails' NCCL_IB_HCA, GID index
      and class; reconnect whenever the runtime goes; until SIGTERM.
  roce-tune gc --orphans [--every SECONDS] [--node-config PATH]
      Restore what every state entry whose pod netns is gone recorded, once;
      with --every it is `agent --every`. The state dir and sysfs root come from
      the node config (/etc/cni/roce-tune/node.json, or ROCE_TUNE_NODE_CONFIG).
  roce-tune reset-idle [--dry-run] [--node-config PATH]
      Return every idle VF (netdev on the host, no pod's entry) that holds a
      traffic class to unset, under the same locks as ADD and DEL: the class
      NVIDIA's rdma CNI fork leaves behind (0 when rdmaQoS is unset).
  roce-tune --help | --version
";

/// Run the command line; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        None | Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            if args.is_empty() {
                eprintln!(
                    "roce-tune: CNI_COMMAND is not set; supported CNI versions: {}",
                    crate::cni::version::SUPPORTED_VERSIONS.join(", ")
                );
                1
            } else {
                0
            }
        }
        Some("-V") | Some("--version") => {
            println!(
                "roce-tune {} (CNI {})",
                env!("CARGO_PKG_VERSION"),
                crate::cni::version::SUPPORTED_VERSIONS.join(", ")
            );
            0
        }
        Some("gc") => gc(&args[1..]),
        Some("agent") => agent(&args[1..]),
        Some("nri") => nri(&args[1..]),
        Some("reset-idle") => reset_idle(&args[1..]),
        Some("inspect") => inspect::run(&args[1..]),
        Some(other) => {
            eprintln!("roce-tune: unknown command {other:?}\n\n{USAGE}");
            2
        }
    }
}

/// The exit code of a command that may stop: 1 when it stopped, with the
/// whole chain ("roce-tune: what: why").
fn exit_code(outcome: Result<i32>) -> i32 {
    outcome.unwrap_or_else(|e| {
        eprintln!("roce-tune: {e:#}");
        1
    })
}

fn usage_error(msg: &str) -> i32 {
    eprintln!("roce-tune: {msg}\n\n{USAGE}");
    2
}

fn gc(args: &[String]) -> i32 {
    let mut orphans = false;
    let mut every = None;
    let mut node_path = NodeConfig::path_from_env();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--orphans" => orphans = true,
            "--node-config" => match node_config_arg(&mut it) {
                Ok(p) => node_path = p,
                Err(code) => return code,
            },
            "--every" => match it.next().and_then(|s| s.parse::<u64>().ok()) {
                Some(n) if (1..=86_400).contains(&n) => every = Some(Duration::from_secs(n)),
                _ => return usage_error("--every needs a whole number of seconds from 1 to 86400"),
            },
            "-h" | "--help" => {
                println!("roce-tune gc --orphans [--every SECONDS] [--node-config PATH]\n  Restore and drop every state entry whose pod netns no longer exists;\n  with --every, repeat every SECONDS until SIGTERM.");
                return 0;
            }
            other => return usage_error(&format!("unknown gc option {other:?}")),
        }
    }
    if !orphans {
        return usage_error("gc needs --orphans (the only kind of GC that runs outside a runtime)");
    }
    exit_code(gc_orphans(&node_path, every))
}

/// The file after `--node-config`, the option every operator command takes
/// (else ROCE_TUNE_NODE_CONFIG, else /etc/cni/roce-tune/node.json).
fn node_config_arg(it: &mut std::slice::Iter<'_, String>) -> std::result::Result<PathBuf, i32> {
    it.next()
        .map(PathBuf::from)
        .ok_or_else(|| usage_error("--node-config needs a file"))
}

/// Every operator command starts so: the node config, and the log where it says.
fn load_node(path: &Path, context: &str) -> Result<NodeConfig> {
    let node = NodeConfig::load_from(path).map_err(cause)?;
    crate::log::init(
        crate::cni::config::LogLevel::Info,
        context.into(),
        node.log_file.as_deref(),
    );
    Ok(node)
}

/// The node config of a command that runs the NRI plugin: `nriSocket`
/// resolved, or the command stops naming why (no other command resolves it).
fn load_nri_node(path: &Path, context: &str) -> Result<NodeConfig> {
    let mut node = load_node(path, context)?;
    node.resolve_nri_socket().map_err(cause)?;
    Ok(node)
}

/// The agent's default period: an orphan or a drifted class is back within
/// two of them (README, "The agent").
const DEFAULT_EVERY: Duration = Duration::from_secs(10);

fn nri(args: &[String]) -> i32 {
    let mut node_path = NodeConfig::path_from_env();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--node-config" => match node_config_arg(&mut it) {
                Ok(p) => node_path = p,
                Err(code) => return code,
            },
            "-h" | "--help" => {
                println!("roce-tune nri [--node-config PATH]\n  The NRI plugin: the job environment of a pod's rails at CreateContainer; until SIGTERM.");
                return 0;
            }
            other => return usage_error(&format!("unknown nri option {other:?}")),
        }
    }
    exit_code(load_nri_node(&node_path, "nri").map(|node| crate::nri::run(&node)))
}

fn agent(args: &[String]) -> i32 {
    let mut every = DEFAULT_EVERY;
    let mut with_nri = false;
    let mut node_path = NodeConfig::path_from_env();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--every" => match it.next().and_then(|s| s.parse::<u64>().ok()) {
                Some(n) if (1..=86_400).contains(&n) => every = Duration::from_secs(n),
                _ => return usage_error("--every needs a whole number of seconds from 1 to 86400"),
            },
            "--nri" => with_nri = true,
            "--node-config" => match node_config_arg(&mut it) {
                Ok(p) => node_path = p,
                Err(code) => return code,
            },
            "-h" | "--help" => {
                println!("roce-tune agent [--every SECONDS] [--nri] [--node-config PATH]\n  The node's agent: repairs orphans and drift every SECONDS (default 10), serves metrics;\n  with --nri, also the NRI plugin (the job environment at CreateContainer); until SIGTERM.");
                return 0;
            }
            other => return usage_error(&format!("unknown agent option {other:?}")),
        }
    }
    let node = if with_nri {
        load_nri_node(&node_path, "agent")
    } else {
        load_node(&node_path, "agent")
    };
    exit_code(node.map(|node| crate::agent::run(&node, every, with_nri)))
}

fn gc_orphans(node_path: &Path, every: Option<Duration>) -> Result<i32> {
    let node = load_node(node_path, "GC --orphans")?;
    if let Some(every) = every {
        // The repair loop grew into the agent; `gc --orphans --every` is it.
        return Ok(crate::agent::run(&node, every, false));
    }
    // A state dir or sysfs root that cannot be used is one of the report's
    // failures, not a stop: the sweep says what it could not do.
    let r = crate::orphans::sweep_all(&node, &|| false);
    println!(
        "examined {} entries, released {} orphans, {} failed",
        r.examined,
        r.released.len(),
        r.failed.len()
    );
    for f in &r.failed {
        println!("  failed: {}", crate::log::escape(f));
    }
    Ok(i32::from(!r.failed.is_empty()))
}

fn reset_idle(args: &[String]) -> i32 {
    let mut dry_run = false;
    let mut node_path = NodeConfig::path_from_env();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dry-run" => dry_run = true,
            "--node-config" => match node_config_arg(&mut it) {
                Ok(p) => node_path = p,
                Err(code) => return code,
            },
            other => return usage_error(&format!("unknown reset-idle option {other:?}")),
        }
    }
    exit_code(reset_idle_vfs(&node_path, dry_run))
}

fn reset_idle_vfs(node_path: &Path, dry_run: bool) -> Result<i32> {
    let node = load_node(node_path, "reset-idle")?;
    let host = View::open(&node.sysfs_root)
        .map_err(cause)
        .with_context(|| format!("sysfs root {}", node.sysfs_root.display()))?;
    // Made when missing: the locks ADD and DEL take live in it.
    let state = StateDir::create(&node.state_dir).map_err(cause)?;
    Ok(idle::reset(&host, &state, dry_run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_exits_1_with_its_whole_chain() {
        assert_eq!(exit_code(Ok(0)), 0);
        assert_eq!(exit_code(Ok(1)), 1);
        let stop: Result<i32> =
            Err(cause(crate::sysfs::SysfsError::Missing)).context("sysfs root /x");
        let chain = format!("{:#}", stop.as_ref().unwrap_err());
        assert_eq!(chain, "sysfs root /x: it does not exist");
        assert_eq!(exit_code(stop), 1);
        // A CniError shows its message, not the code a runtime reads.
        let e = errors::message(crate::cni::CniError::new(104, "node config /n is refused"));
        assert_eq!(e.to_string(), "node config /n is refused");
    }
}
