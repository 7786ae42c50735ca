//! STATUS (spec 1.1.0): ready for ADD when the state dir can take an entry;
//! without it no original could be recorded, so no class could be written.

use crate::cni::config::NetConf;
use crate::cni::{code, CniError, CniResult};
use crate::state::StateDir;

pub fn run(conf: &NetConf) -> CniResult<()> {
    let not_ready = |e: CniError| {
        CniError::new(
            code::NOT_READY,
            format!(
                "not ready: state dir {} is unusable: {}",
                conf.state_dir.display(),
                e.msg
            ),
        )
    };
    let state = StateDir::open(&conf.state_dir, true).map_err(not_ready)?;
    match state {
        Some(s) => s.probe_writable().map_err(not_ready),
        None => Err(not_ready(CniError::new(
            code::NOT_READY,
            "it could not be created",
        ))),
    }
}
