//! `roce-tune-agent`'s command line: the long-running commands (`agent`,
//! `nri`, `gc --orphans --every`), the DaemonSet's. Only
//! src/bin/roce-tune-agent.rs calls `run`: the CNI binary's `cli::run` never
//! reaches this file, so the agent, its HTTP server, its metrics and the NRI
//! plugin stay out of `roce-tune` (docs/design.md, "Two binaries").

use super::{cause, every_arg, exit_code, gc_args, gc_orphans, load_node, node_config_arg};
use crate::node::NodeConfig;
use anyhow::Result;
use std::path::Path;
use std::time::Duration;

pub const USAGE: &str = "\
roce-tune-agent: the long-running side of roce-tune, the DaemonSet's container.
The CNI plugin and the operator's commands (inspect, reset-idle, gc --orphans
once) are the roce-tune binary's: roce-tune --help.

  roce-tune-agent agent [--every SECONDS] [--nri] [--node-config PATH]
      The node's agent: every SECONDS (default 10) repair orphans and drift
      (driftPolicy), read every rail; serve Prometheus metrics on the node
      config's metricsAddress (/metrics, /healthz) all the time; with --nri,
      also be the NRI plugin (see nri); until SIGTERM.
  roce-tune-agent nri [--node-config PATH]
      The NRI plugin alone (the agent's duty with `agent --nri`): connect to the
      runtime's nriSocket, register as roce-tune at nriIndex, and give the
      containers of pods that ask (ncclEnv) their rails' NCCL_IB_HCA, GID index
      and class; reconnect whenever the runtime goes; until SIGTERM. A refused
      nriSocket (a link another uid owns on its way) stops it, naming why.
  roce-tune-agent gc --orphans [--every SECONDS] [--node-config PATH]
      Restore what every state entry whose pod netns is gone recorded: with
      --every it is `agent --every`; without, once, as roce-tune gc --orphans.
      The node config is --node-config, else ROCE_TUNE_NODE_CONFIG, else
      /etc/cni/roce-tune/node.json, whose absence alone means the defaults:
      a file named must exist, and one missing or refused stops every command.
  roce-tune-agent --help | --version
";

/// Run the agent binary's command line; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        None => usage_error("a command is needed"),
        Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            0
        }
        Some("-V") | Some("--version") => {
            println!(
                "{}",
                crate::build_info::version_line("roce-tune-agent", None)
            );
            0
        }
        Some("agent") => agent(&args[1..]),
        Some("nri") => nri(&args[1..]),
        Some("gc") => match gc_args(&args[1..], usage_error) {
            Ok((node_path, Some(every))) => exit_code(
                // The repair loop grew into the agent; `gc --orphans --every` is it.
                load_node(&node_path, "GC --orphans").map(|n| crate::agent::run(&n, every, false)),
            ),
            Ok((node_path, None)) => exit_code(gc_orphans(&node_path)),
            Err(code) => code,
        },
        Some(other) => usage_error(&format!(
            "unknown command {other:?} (the operator's commands are roce-tune's)"
        )),
    }
}

fn usage_error(msg: &str) -> i32 {
    eprintln!("roce-tune-agent: {msg}\n\n{USAGE}");
    2
}

/// The agent's default period: an orphan or a drifted class is back within
/// two of them (docs/agent.md).
const DEFAULT_EVERY: Duration = Duration::from_secs(10);

/// The node config of a command that runs the NRI plugin: `nriSocket`
/// resolved, or the command stops naming why (no other command resolves it).
fn load_nri_node(path: &Path, context: &str) -> Result<NodeConfig> {
    let mut node = load_node(path, context)?;
    node.resolve_nri_socket().map_err(cause)?;
    Ok(node)
}

fn nri(args: &[String]) -> i32 {
    let mut node_path = NodeConfig::path_from_env();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--node-config" => match node_config_arg(&mut it, usage_error) {
                Ok(p) => node_path = p,
                Err(code) => return code,
            },
            "-h" | "--help" => {
                println!("roce-tune-agent nri [--node-config PATH]\n  The NRI plugin: the job environment of a pod's rails at CreateContainer; until SIGTERM.");
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
            "--every" => match every_arg(&mut it, usage_error) {
                Ok(d) => every = d,
                Err(code) => return code,
            },
            "--nri" => with_nri = true,
            "--node-config" => match node_config_arg(&mut it, usage_error) {
                Ok(p) => node_path = p,
                Err(code) => return code,
            },
            "-h" | "--help" => {
                println!("roce-tune-agent agent [--every SECONDS] [--nri] [--node-config PATH]\n  The node's agent: repairs orphans and drift every SECONDS (default 10), serves metrics;\n  with --nri, also the NRI plugin (the job environment at CreateContainer); until SIGTERM.");
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
