//! `roce-tune inspect`: the operator's proof that a rail is right, replacing
//! the hand-written check pod and the shell loop over /sys. Two views:
//!
//! - node (no netns): every RDMA device with its PCI function, PF, netdev,
//!   port state and traffic class, and the idle VFs left holding a class;
//! - pod (`--netns`/`--pid`): each RDMA interface of the pod with its
//!   addresses, GID table, rail sysctls and traffic class, and a PASS/FAIL
//!   line per check with the reason and the fix; with `--env`, only the
//!   pod's job environment (`env`, from the state entries: `job_env`);
//!   with `--counters`, only each rail's RDMA counters and their rates
//!   (`counters`).
//!
//! A run is four steps, one module each:
//! - `args`: the options, all validated before anything is read;
//! - `collect`: sysfs (through `sysfs::View`), netlink and /proc/sys, the pod
//!   part on a thread inside the pod netns, into plain structs;
//! - `verdicts`: pure functions of those structs, unit-tested without a pod;
//! - `render` and `json`: the text tables, or one JSON object.
//!
//! Exit codes: 0 every check passed, 1 one failed, 2 a usage error or an
//! error that stopped the inspection before any verdict.

mod args;
mod collect;
mod counters;
mod env;
mod json;
mod render;
mod verdicts;

#[cfg(test)]
mod tests;

use crate::node::NodeConfig;
use anyhow::Result;
use args::{parse_args, Options, Parsed, HELP};

/// Entry point of `roce-tune inspect`; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let opts = match parse_args(args) {
        Ok(Parsed::Help) => {
            print!("{HELP}");
            return 0;
        }
        Ok(Parsed::Run(o)) => *o,
        Err(usage) => {
            eprintln!("roce-tune inspect: {usage}\nSee `roce-tune inspect --help`.");
            return 2;
        }
    };
    // Read once, for every part that needs it (the idle VFs' entries, the
    // pod's placement, its job environment); refused or named but missing,
    // it stops the inspection, as it stops every command: nothing shown
    // from a node config that is not the node's is worth reading.
    let node_path = opts
        .node_config
        .clone()
        .unwrap_or_else(NodeConfig::path_from_env);
    let node = match NodeConfig::load_from(&node_path) {
        Ok(n) => n,
        Err(e) => return stopped(&opts, &anyhow::Error::msg(e.0)),
    };
    if opts.env {
        return job_env(&opts, &node);
    }
    if let Some(every) = opts.counters {
        return rail_counters(&opts, &node, every);
    }
    match inspect(&opts, &node) {
        Ok((out, checks)) => {
            print!("{}", terminal_safe(&out));
            verdicts::exit_code(&checks)
        }
        Err(e) => stopped(&opts, &e),
    }
}

/// `--env`: the pod's job environment on stdout, the notes on stderr.
fn job_env(opts: &Options, node: &NodeConfig) -> i32 {
    let netns = opts.netns_path().unwrap_or_default();
    match env::collect(&netns, opts.pid, node) {
        Ok(found) => {
            let (out, notes, code) = env::render(&found, opts.json);
            print!("{}", terminal_safe(&out));
            for n in notes {
                eprintln!("roce-tune inspect: {}", crate::log::escape(&n));
            }
            code
        }
        Err(e) => stopped(opts, &e),
    }
}

/// `--counters`: each rail's counters read twice, and their rates.
fn rail_counters(opts: &Options, node: &NodeConfig, every: std::time::Duration) -> i32 {
    match counters::collect(opts, node, every) {
        Ok(rates) => {
            let out = match opts.json {
                true => json::text(&rates),
                false => counters::render(&rates),
            };
            print!("{}", terminal_safe(&out));
            0
        }
        Err(e) => stopped(opts, &e),
    }
}

/// What stopped the inspection: on stderr, and on stdout for `--json`.
fn stopped(opts: &Options, e: &anyhow::Error) -> i32 {
    // `{:#}`: the whole chain, outermost context first.
    let msg = format!("{e:#}");
    if opts.json {
        print!("{}", json::stopped(&msg));
    }
    eprintln!("roce-tune inspect: {}", crate::log::escape(&msg));
    2
}

/// A pod names its interfaces itself, with any byte but '/', ':',
/// whitespace and NUL (the kernel's dev_valid_name): an ESC sequence in a
/// name would move the operator's cursor or forge a PASS line. Every line
/// is escaped as the log's are; JSON output is escaped by its encoder.
fn terminal_safe(out: &str) -> String {
    out.split_inclusive('\n')
        .map(|l| {
            let (body, end) = l.strip_suffix('\n').map_or((l, ""), |b| (b, "\n"));
            format!("{}{end}", crate::log::escape(body))
        })
        .collect()
}

/// Collect, judge, render: the output and the checks it shows.
fn inspect(opts: &Options, node_config: &NodeConfig) -> Result<(String, Vec<verdicts::Check>)> {
    let sysfs = collect::open_sysfs(&opts.sysfs_root)?;
    let Some(netns) = opts.netns_path() else {
        let node = collect::node(opts, sysfs.host(), node_config);
        let checks = verdicts::node_checks(&node, opts);
        let out = if opts.json {
            json::text(&json::node(&node, &checks))
        } else {
            render::node_text(&node, &checks)
        };
        return Ok((out, checks));
    };
    let pod = collect::pod(opts, &sysfs, netns, node_config)?;
    let checks = verdicts::pod_checks(&pod, opts);
    let out = if opts.json {
        json::text(&json::pod(&pod, opts, &checks))
    } else {
        render::pod_text(&pod, opts, &checks)
    };
    Ok((out, checks))
}
