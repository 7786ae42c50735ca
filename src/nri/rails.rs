//! Where the plugin's job environment comes from: `crate::job_env::Rails`,
//! the node's rails as the state dir records them, made when the plugin
//! starts and caught up at each CreateContainer (the kernel says which
//! entries changed since the last call, and only those are looked at, so
//! the answer stays well inside its bound: docs/performance.md).

use super::answer::{PodVars, RailEnv};
use crate::job_env::{EnvPolicy, Rails};
use crate::netns::NsId;
use crate::node::NodeConfig;
use std::path::PathBuf;

pub struct JobEnv {
    rails: Rails,
    policy: EnvPolicy,
    /// The state dir: made by the first ADD, maybe after the plugin
    /// started, so it is looked for at each call.
    dir: PathBuf,
}

impl JobEnv {
    pub fn new(node: &NodeConfig) -> JobEnv {
        JobEnv {
            rails: Rails::new(),
            policy: EnvPolicy::from_node(node),
            dir: node.state_dir.clone(),
        }
    }
}

impl JobEnv {
    /// Make the picture now (a listing, every entry read, the watch set),
    /// not at the first request.
    pub fn prime(&mut self) {
        self.rails.follow_dir(&self.dir);
    }
}

impl RailEnv for JobEnv {
    fn env_for(&mut self, netns: &NsId) -> Result<PodVars, String> {
        self.rails.follow_dir(&self.dir);
        self.rails
            .env_for(netns, &self.policy)
            .map(|env| PodVars {
                vars: env.vars,
                notes: env.notes,
            })
            .map_err(|why| why.to_string())
    }
}
