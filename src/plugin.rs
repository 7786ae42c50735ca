//! The CNI edge: read env and stdin, dispatch, print the result or the error
//! object on stdout, exit code. Logs go to stderr (and logFile), never stdout.

use crate::cni::config::{LogLevel, NetConf, MAX_STDIN_BYTES};
use crate::cni::env::{CniEnv, Command};
use crate::cni::{code, version, CniError};
use crate::commands;
use crate::node::NodeConfig;
use serde_json::Value;
use std::io::{Read, Write};

/// Used in an error object when the config's own version is not known.
const FALLBACK_VERSION: &str = "1.1.0";

/// Run one CNI command as a runtime invokes it; returns the exit code.
pub fn run() -> i32 {
    let mut stdin = Vec::new();
    // One byte over the limit is enough to know it is too large.
    let read = std::io::stdin()
        .take(MAX_STDIN_BYTES as u64 + 1)
        .read_to_end(&mut stdin);
    let (version, outcome) = match read {
        Ok(_) => dispatch(&stdin),
        Err(e) => (
            FALLBACK_VERSION.to_string(),
            Err(CniError::io("read stdin", e)),
        ),
    };
    match outcome {
        Ok(Some(v)) => print(&v),
        Ok(None) => 0,
        Err(e) => {
            crate::error!("{e}");
            print(&e.to_json(&version));
            1
        }
    }
}

fn print(v: &Value) -> i32 {
    let mut out = std::io::stdout().lock();
    let ok = serde_json::to_writer(&mut out, v).is_ok()
        && out.write_all(b"\n").is_ok()
        && out.flush().is_ok();
    if ok {
        0
    } else {
        1
    }
}

/// Returns the version to speak in errors, and the command's outcome.
fn dispatch(stdin: &[u8]) -> (String, Result<Option<Value>, CniError>) {
    let env = match CniEnv::from_process() {
        Ok(e) => e,
        Err(e) => return (version_hint(stdin), Err(e)),
    };
    if env.command == Command::Version {
        return (
            version_hint(stdin),
            Ok(Some(version::version_info(&version_hint(stdin)))),
        );
    }
    // The node config first: it says where to log, so even a refused network
    // config leaves a line in the node's log.
    let node = NodeConfig::load();
    let context = match env.command {
        Command::Add | Command::Del | Command::Check => {
            format!(
                "{} {}/{}",
                format!("{:?}", env.command).to_uppercase(),
                env.container_id(),
                env.ifname()
            )
        }
        other => format!("{other:?}").to_uppercase(),
    };
    let log_file = node.as_ref().ok().and_then(|n| n.log_file.clone());
    crate::log::init(LogLevel::Info, context, log_file.as_deref());
    let conf = match NetConf::parse(stdin) {
        Ok(c) => c,
        // DEL needs nothing of the network config but its version: a config
        // ADD would refuse (edited since, or from an older release) must not
        // leave the pod stuck in Terminating.
        Err(e) if env.command == Command::Del && e.code == code::INVALID_CONFIG => {
            crate::warn!("{}: DEL goes on with the node's settings", e.msg);
            NetConf::for_del(&version_hint(stdin))
        }
        Err(e) => return (version_hint(stdin), Err(e)),
    };
    crate::log::set_level(conf.log_level);
    crate::debug!("config {} cniVersion {}", conf.name, conf.cni_version);
    let node = match node {
        Ok(n) => n,
        Err(e) if env.command == Command::Del => {
            // Retrying cannot fix a refused node config; the entries stay in
            // the state dir for the repair once the node admin fixes it.
            crate::error!("{}: DEL restores nothing now", e.msg);
            return (conf.cni_version, Ok(None));
        }
        Err(e) if env.command == Command::Status => {
            let e = CniError::new(code::NOT_READY, format!("not ready: {}", e.msg));
            return (conf.cni_version, Err(e));
        }
        Err(e) => return (conf.cni_version, Err(e)),
    };
    let cmd_needs = |min: &str| {
        if version::at_least(&conf.cni_version, min) {
            Ok(())
        } else {
            Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!(
                    "{:?} needs cniVersion {min} or later; the config says {}",
                    env.command, conf.cni_version
                ),
            ))
        }
    };
    let outcome = match env.command {
        Command::Add => commands::add::run(&env, &conf, &node).map(Some),
        Command::Del => commands::del::run(&env, &node).map(|_| None),
        Command::Check => cmd_needs("0.4.0")
            .and_then(|_| commands::check::run(&env, &conf, &node))
            .map(|_| None),
        Command::Gc => cmd_needs("1.1.0")
            .and_then(|_| commands::gc::run(&conf, &node))
            .map(|_| None),
        Command::Status => cmd_needs("1.1.0")
            .and_then(|_| commands::status::run(&node))
            .map(|_| None),
        Command::Version => unreachable!("answered above"),
    };
    if outcome.is_ok() && crate::log::enabled(LogLevel::Info) {
        crate::info!("done");
    }
    (conf.cni_version, outcome)
}

/// The input's cniVersion if it has a readable one (VERSION echoes it; errors
/// speak it), else the newest we speak.
fn version_hint(stdin: &[u8]) -> String {
    serde_json::from_slice::<Value>(stdin)
        .ok()
        .and_then(|v| {
            v.get("cniVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .filter(|v| version::is_supported(v))
        .unwrap_or_else(|| FALLBACK_VERSION.to_string())
}
