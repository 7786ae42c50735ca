//! DEL: give the traffic class back and drop the state. Best effort by the
//! spec: a missing state dir, entry, netns, interface or device is success,
//! and so is a second DEL. Sysctls are not restored (like the reference tuning
//! plugin): the netns dies with the pod, or the VF moves back to the host,
//! which resets its per-device conf.

use crate::cni::config::NetConf;
use crate::cni::env::CniEnv;
use crate::cni::CniResult;
use crate::state::{ReadError, StateDir};

pub fn run(env: &CniEnv, conf: &NetConf) -> CniResult<()> {
    let Some(state) = StateDir::open(&conf.state_dir, false)? else {
        crate::debug!(
            "no state dir {}: nothing to restore",
            conf.state_dir.display()
        );
        return Ok(());
    };
    let entry = match state.read(env.container_id(), env.ifname()) {
        Ok(e) => e,
        Err(ReadError::Missing) => {
            crate::debug!("no state entry: nothing to restore");
            return Ok(());
        }
        Err(ReadError::Corrupt(why)) => {
            // Never guess a value to write: a wrong guess changes the next
            // pod's traffic. Keep the file for the operator and succeed.
            let moved = state.quarantine(env.container_id(), env.ifname())?;
            crate::warn!(
                "state entry is corrupt ({why}): traffic class NOT restored; moved the entry to {} for inspection",
                moved.display()
            );
            return Ok(());
        }
        Err(ReadError::Io(e)) => return Err(crate::cni::CniError::io("read state entry", e)),
    };
    #[cfg(feature = "fault-injection")]
    crate::fault::point("del-after-read-state");
    let r = super::release_entry(&state, &entry)?;
    crate::debug!("DEL released {}: {r:?}", entry.device);
    Ok(())
}
