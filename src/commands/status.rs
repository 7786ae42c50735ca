//! STATUS (spec 1.1.0): ready for ADD when the node config is usable and the
//! state dir can take an entry; without it no original could be recorded, so
//! no class could be written.

use crate::cni::{code, CniError, CniResult};
use crate::node::NodeConfig;
use crate::state::StateDir;

pub fn run(node: &NodeConfig) -> CniResult<()> {
    let not_ready = |e: crate::state::StateError| {
        CniError::new(
            code::NOT_READY,
            format!(
                "not ready: state dir {} is unusable: {e}",
                node.state_dir.display()
            ),
        )
    };
    let state = StateDir::create(&node.state_dir).map_err(not_ready)?;
    state.probe_writable().map_err(not_ready)
}
