//! The CNI edge: read env and stdin, dispatch, print the result or the error
//! object on stdout, exit code. Logs go to stderr (and logFile), never stdout.
//! Stdin is decoded once: the command's config, and the version an error
//! speaks, both come from that one value.

use crate::cni::config::{self, LogLevel, NetConf, MAX_STDIN_BYTES};
use crate::cni::env::{CniEnv, Command};
use crate::cni::{code, version, CniError, CniResult};
use crate::commands;
use crate::node::NodeConfig;
use crate::syscall::KERNEL;
use serde_json::Value;
use std::io::{Read, Write};

/// Used in an error object when the config's own version is not known.
const FALLBACK_VERSION: &str = "1.1.0";

/// What a run leaves for the tally: the command, and the node's state dir
/// once the node config named one.
#[derive(Default)]
struct Ran {
    command: Option<Command>,
    state_dir: Option<std::path::PathBuf>,
}

/// Run one CNI command as a runtime invokes it; returns the exit code.
pub fn run() -> i32 {
    let started = std::time::Instant::now();
    let mut ran = Ran::default();
    let mut stdin = Vec::new();
    // One byte over the limit is enough to know it is too large.
    let read = std::io::stdin()
        .take(MAX_STDIN_BYTES as u64 + 1)
        .read_to_end(&mut stdin);
    let decoded = match read {
        Ok(_) => config::decode(&stdin),
        Err(e) => Err(CniError::io("read stdin", e)),
    };
    let version = version_of(&decoded);
    let outcome = dispatch(&decoded, &version, &mut ran);
    let code = outcome.as_ref().map_or_else(|e| e.code, |_| 0);
    let status = match outcome {
        Ok(Some(v)) => print(&v),
        Ok(None) => 0,
        Err(e) => {
            crate::error!("{e}");
            print(&e.to_json(&version));
            1
        }
    };
    // Counted for the agent (roce_tune_cni_requests_total) in a state dir
    // that is the node's own, after the answer is out.
    if let (Some(command), Some(dir)) = (ran.command, ran.state_dir) {
        if let Ok(Some(state)) = crate::state::StateDir::proved_earlier_or_existing(&dir) {
            crate::tally::count(state.path(), command, code, started.elapsed());
        }
    }
    status
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

/// The input's cniVersion if it has one we speak (VERSION echoes it; errors
/// speak it), else the newest we speak.
fn version_of(decoded: &CniResult<Value>) -> String {
    decoded
        .as_ref()
        .ok()
        .and_then(|v| v.get("cniVersion"))
        .and_then(Value::as_str)
        .filter(|v| version::is_supported(v))
        .unwrap_or(FALLBACK_VERSION)
        .to_string()
}

type Outcome = CniResult<Option<Value>>;

fn dispatch(decoded: &CniResult<Value>, version: &str, ran: &mut Ran) -> Outcome {
    ran.command = std::env::var("CNI_COMMAND")
        .ok()
        .and_then(|c| Command::parse(&c).ok());
    if ran.command == Some(Command::Del) {
        return del(decoded, ran);
    }
    let env = match CniEnv::from_process() {
        Ok(env) => env,
        Err(e) => {
            // The runtime's mistake, logged where the node logs, under the
            // command it asked for: "error ADD: code 4: ...".
            init_log(&NodeConfig::load().map_err(node_error), asked_command());
            return Err(e);
        }
    };
    if env.command == Command::Version {
        return Ok(Some(version::version_info(version)));
    }
    // The node config first: it says where to log, so even a refused network
    // config leaves a line in the node's log.
    let node = NodeConfig::load().map_err(node_error);
    ran.state_dir = node.as_ref().ok().map(|n| n.state_dir.clone());
    init_log(&node, context(&env));
    let conf = decoded
        .clone()
        .and_then(|v| NetConf::from_value(&v, &NodeConfig::path_from_env()))?;
    crate::log::set_level(conf.log_level);
    crate::debug!("config {} cniVersion {}", conf.name, conf.cni_version);
    // A typo of one of roce-tune's keys refuses ADD (7): ignored, it would
    // leave the setting it meant at its default without a word. Every other
    // command only warns (`warn_strays`).
    if env.command == Command::Add {
        conf.refuse_typos()?;
    }
    warn_strays(&conf);
    let node = match node {
        Ok(n) => n,
        Err(e) if env.command == Command::Status => {
            return Err(CniError::new(
                code::NOT_READY,
                format!("not ready: {}", e.msg),
            ))
        }
        Err(e) => return Err(e),
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
        Command::Add => commands::add::run(&KERNEL, &env, &conf, &node).map(Some),
        Command::Check => cmd_needs("0.4.0")
            .and_then(|_| commands::check::run(&KERNEL, &env, &conf, &node))
            .map(|_| None),
        Command::Gc => cmd_needs("1.1.0")
            .and_then(|_| commands::gc::run(&conf, &node))
            .map(|_| None),
        Command::Status => cmd_needs("1.1.0")
            .and_then(|_| commands::status::run(&node))
            .map(|_| None),
        Command::Del | Command::Version => unreachable!("answered above"),
    };
    if outcome.is_ok() {
        crate::info!("done");
    }
    outcome
}

/// DEL succeeds whenever ADD could not have recorded anything for this
/// input, and says why; where the attachment's identifiers are readable, it
/// releases that attachment's entry whatever else is wrong with the input.
/// libcni's DelNetworkList stops at the first plugin that fails, so a DEL
/// that refuses leaves the VF of sriov/host-device (after roce-tune in DEL
/// order) in the sandbox and the pod in Terminating. Only a retry that can
/// help (a passing OS error before the entry could be read, code 11) fails.
fn del(decoded: &CniResult<Value>, ran: &mut Ran) -> Outcome {
    let node = NodeConfig::load().map_err(node_error);
    ran.state_dir = node.as_ref().ok().map(|n| n.state_dir.clone());
    let env = match CniEnv::for_del(|k| std::env::var_os(k)) {
        Ok(env) => env,
        Err(e) => {
            init_log(&node, "DEL".into());
            crate::warn!(
                "{}: ADD refuses such an attachment, so nothing was recorded for it; DEL has nothing to do",
                e.msg
            );
            return Ok(None);
        }
    };
    init_log(&node, context(&env));
    match decoded
        .clone()
        .and_then(|v| NetConf::from_value(&v, &NodeConfig::path_from_env()))
    {
        Ok(conf) => {
            crate::log::set_level(conf.log_level);
            warn_strays(&conf);
        }
        // DEL needs nothing of the network config: a config ADD would
        // refuse (edited since, from an older release, or not a config)
        // must not leave the pod stuck in Terminating.
        Err(e) => crate::warn!("{}: DEL goes on with the node's settings", e.msg),
    }
    let node = match node {
        Ok(n) => n,
        Err(e) => {
            // Retrying cannot fix a refused node config; the entries stay in
            // the state dir for the repair once the node admin fixes it.
            crate::error!("{}: DEL restores nothing now", e.msg);
            return Ok(None);
        }
    };
    commands::del::run(&KERNEL, &env, &node)?;
    crate::info!("done");
    Ok(None)
}

/// The one warning line for the keys of the network config roce-tune does
/// not know: another tool's, or, on any command but ADD, a typo. DEL and
/// CHECK never fail on what ADD would have refused first (a failed DEL
/// strands the VF: `del`), GC gives back what ADD recorded, and STATUS
/// says whether the plugin can work at all: refusing helps none of them.
fn warn_strays(conf: &NetConf) {
    if let Some(w) = conf.strays_warning() {
        crate::warn!("{w}");
    }
}

/// What the runtime asked for, for the log line of an environment it got
/// wrong: the command, or what stood in CNI_COMMAND.
fn asked_command() -> String {
    match std::env::var_os("CNI_COMMAND") {
        None => "CNI_COMMAND unset".into(),
        Some(c) => {
            let c = c.to_string_lossy();
            match Command::parse(&c) {
                Ok(cmd) => cmd.as_str().into(),
                Err(_) if c.is_empty() => "CNI_COMMAND unset".into(),
                Err(_) => format!("CNI_COMMAND {}", crate::quote::input(&c)),
            }
        }
    }
}

/// A refused node config is the node admin's problem, never the tenant's: 104.
fn node_error(e: crate::node::NodeError) -> CniError {
    CniError::new(code::NODE_CONFIG, e.0)
}

fn init_log(node: &CniResult<NodeConfig>, context: String) {
    let log_file = node.as_ref().ok().and_then(|n| n.log_file.clone());
    crate::log::init(LogLevel::Info, context, log_file.as_deref());
}

/// What every log line of this run starts with: `ADD <cid>/<ifname>`.
fn context(env: &CniEnv) -> String {
    let name = format!("{:?}", env.command).to_uppercase();
    match env.command {
        Command::Add | Command::Del | Command::Check => {
            format!("{name} {}/{}", env.container_id(), env.ifname())
        }
        _ => name,
    }
}
