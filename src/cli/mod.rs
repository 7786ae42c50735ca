//! The binary without CNI_COMMAND: an operator's command line (`gc`,
//! `reset-idle`, `inspect`). The long-running commands are `daemons`', which
//! only `roce-tune-agent` calls: `run` never reaches them, so the CNI binary
//! does not carry them (docs/design.md, "Two binaries"). Errors here are
//! `anyhow` chains printed for a person ("roce-tune: what: why"); the CNI
//! edge (`plugin`) keeps the numeric codes a runtime reads.

pub mod daemons;
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
                    [--sysfs-root DIR] [--node-config PATH] [--json]
      Show the node's RDMA devices, or a pod's rails, and PASS/FAIL each check
      (exit 0 all pass, 1 a check failed, 2 usage error); inspect --help for more.
  roce-tune inspect (--netns PATH | --pid PID) --env [--node-config PATH] [--json]
      The pod's job environment (NCCL_IB_HCA, GID index, class), KEY=VALUE.
  roce-tune gc --orphans [--node-config PATH]
      Restore what every state entry whose pod netns is gone recorded, once.
      The state dir and sysfs root come from the node config: --node-config,
      else ROCE_TUNE_NODE_CONFIG, else /etc/cni/roce-tune/node.json (whose
      absence alone means the defaults: a file named must exist).
  roce-tune reset-idle [--dry-run] [--node-config PATH]
      Return every idle VF (netdev on the host, no pod's entry) that holds a
      traffic class to unset, under the same locks as ADD and DEL: the class
      NVIDIA's rdma CNI fork leaves behind (0 when rdmaQoS is unset).
  roce-tune --help | --version

The long-running commands (agent, nri, gc --orphans --every) are the second
binary's: roce-tune-agent --help.
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
            let cni = format!("CNI {}", crate::cni::version::SUPPORTED_VERSIONS.join(", "));
            println!(
                "{}",
                crate::build_info::version_line("roce-tune", Some(&cni))
            );
            0
        }
        Some("gc") => gc(&args[1..]),
        Some(cmd @ ("agent" | "nri")) => not_here(cmd),
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

/// A long-running command asked of the CNI binary: 2, naming the binary
/// that has it.
fn not_here(cmd: &str) -> i32 {
    eprintln!(
        "roce-tune: {cmd} is a long-running command of roce-tune-agent, not of the CNI \
         binary: run roce-tune-agent {cmd} (roce-tune-agent --help)"
    );
    2
}

fn gc(args: &[String]) -> i32 {
    match gc_args(args, usage_error) {
        Ok((_, Some(_))) => not_here("gc --orphans --every"),
        Ok((node_path, None)) => exit_code(gc_orphans(&node_path)),
        Err(code) => code,
    }
}

/// `gc`'s options, for either binary (`usage_error`, its own): the node
/// config and `--every`'s period.
fn gc_args(
    args: &[String],
    usage_error: fn(&str) -> i32,
) -> std::result::Result<(PathBuf, Option<Duration>), i32> {
    let mut orphans = false;
    let mut every = None;
    let mut node_path = NodeConfig::path_from_env();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--orphans" => orphans = true,
            "--node-config" => node_path = node_config_arg(&mut it, usage_error)?,
            "--every" => every = Some(every_arg(&mut it, usage_error)?),
            "-h" | "--help" => {
                println!("roce-tune gc --orphans [--node-config PATH]\n  Restore and drop every state entry whose pod netns no longer exists.\nroce-tune-agent gc --orphans --every SECONDS [--node-config PATH]\n  The same, every SECONDS until SIGTERM.");
                return Err(0);
            }
            other => return Err(usage_error(&format!("unknown gc option {other:?}"))),
        }
    }
    if !orphans {
        return Err(usage_error(
            "gc needs --orphans (the only kind of GC that runs outside a runtime)",
        ));
    }
    Ok((node_path, every))
}

/// The seconds after `--every`: 1 to 86400.
fn every_arg(
    it: &mut std::slice::Iter<'_, String>,
    usage_error: fn(&str) -> i32,
) -> std::result::Result<Duration, i32> {
    match it.next().and_then(|s| s.parse::<u64>().ok()) {
        Some(n) if (1..=86_400).contains(&n) => Ok(Duration::from_secs(n)),
        _ => Err(usage_error(
            "--every needs a whole number of seconds from 1 to 86400",
        )),
    }
}

/// The file after `--node-config`, the option every operator command takes
/// (else ROCE_TUNE_NODE_CONFIG, else /etc/cni/roce-tune/node.json).
fn node_config_arg(
    it: &mut std::slice::Iter<'_, String>,
    usage_error: fn(&str) -> i32,
) -> std::result::Result<PathBuf, i32> {
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

fn gc_orphans(node_path: &Path) -> Result<i32> {
    let node = load_node(node_path, "GC --orphans")?;
    // A state dir or sysfs root that cannot be used is one of the report's
    // failures, not a stop: the sweep says what it could not do.
    let r = crate::orphans::sweep_all(&crate::syscall::KERNEL, &node, &|| false);
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
            "--node-config" => match node_config_arg(&mut it, usage_error) {
                Ok(p) => node_path = p,
                Err(code) => return code,
            },
            "-h" | "--help" => {
                println!("roce-tune reset-idle [--dry-run] [--node-config PATH]\n  Unset the traffic class of every idle VF (its netdev on the host, no pod's entry) that holds one,\n  under the locks ADD and DEL take; --dry-run only lists them. Exit 1 if one could not be reset.");
                return 0;
            }
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
