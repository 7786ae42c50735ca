//! `inspect --netns PATH --env`: a running pod's job environment, the lines
//! the NRI plugin injects at CreateContainer, through the same code
//! (`job_env::Rails`): to check what a pod got, or to copy into a job where
//! NRI is off. Stdout holds only `KEY=VALUE` lines (or the JSON object); why
//! a variable is absent, or why the pod gets nothing, goes to stderr.

use super::json;
use crate::cli::errors::cause;
use crate::job_env::{EnvPolicy, NoEnv, PodEnv, Rails};
use crate::netns::{Lookup, NetNs};
use crate::node::NodeConfig;
use anyhow::{bail, Result};
use serde::Serialize;
use std::path::Path;

/// The environment of the pod whose netns `path` names (or why it gets
/// none), from the node config's state dir.
pub fn collect(path: &Path, pid: Option<u32>, node: &NodeConfig) -> Result<Result<PodEnv, NoEnv>> {
    let ns = match NetNs::lookup(path).map_err(cause)? {
        Lookup::Netns(ns) => ns,
        Lookup::Missing => match pid {
            Some(p) => bail!("no process {p} ({} does not exist)", path.display()),
            None => bail!("netns {} does not exist", path.display()),
        },
        Lookup::NotNetns => bail!("{} is not a network namespace", path.display()),
    };
    let mut rails = Rails::new();
    rails.refresh_dir(&node.state_dir);
    Ok(rails.env_for(&ns.id(), &EnvPolicy::from_node(node)))
}

/// The lines for stdout, the lines for stderr, and the exit code.
pub fn render(found: &Result<PodEnv, NoEnv>, as_json: bool) -> (String, Vec<String>, i32) {
    let nothing = PodEnv {
        vars: Vec::new(),
        rails: match found {
            Err(NoEnv::AllLeftOut { rails }) => *rails,
            _ => 0,
        },
        notes: Vec::new(),
    };
    let (env, reason) = match found {
        Ok(e) => (e, None),
        Err(why) => (&nothing, Some(why.to_string())),
    };
    let (vars, rails, notes) = (&env.vars, env.rails, &env.notes);
    let code = i32::from(reason.is_some());
    if as_json {
        #[derive(Serialize)]
        struct Var<'a> {
            name: &'a str,
            value: &'a str,
        }
        #[derive(Serialize)]
        struct Env<'a> {
            env: Vec<Var<'a>>,
            notes: &'a [String],
            pass: bool,
            rails: usize,
            reason: Option<&'a str>,
            view: &'static str,
        }
        let out = json::text(&Env {
            env: vars
                .iter()
                .map(|(name, value)| Var { name, value })
                .collect(),
            notes,
            pass: reason.is_none(),
            rails,
            reason: reason.as_deref(),
            view: "env",
        });
        return (out, Vec::new(), code);
    }
    let out: String = vars.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let mut err: Vec<String> = notes.iter().map(|n| format!("note: {n}")).collect();
    err.extend(reason.map(|r| format!("nothing to inject: {r}")));
    (out, err, code)
}
