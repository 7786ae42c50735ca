//! DEL: give the device's files back and drop the state. DEL never leaves a
//! pod stuck: it succeeds whenever the pod's part is done or can never be
//! done by retrying. What cannot be restored now stays recorded, with a log
//! line saying why, and the orphan repair (`roce-tune gc --orphans`, run in a
//! loop by the DaemonSet) finishes it later. DEL fails only where a retry by
//! the runtime can help: a passing OS error (out of memory or descriptors)
//! before the entry could even be read, code 11.
//!
//! Sysctls are not restored (like the reference tuning plugin): the netns
//! dies with the pod, or the VF moves back to the host, which resets its
//! per-device conf.

use crate::cni::env::CniEnv;
use crate::cni::{code, CniError, CniResult};
use crate::node::NodeConfig;
use crate::ownership::{release_entry, Done};
use crate::rdma::reach::Sysfs;
use crate::state::{ReadError, StateDir};
use crate::syscall::Syscall;

/// `sys`: the host (`syscall::KERNEL`; a unit test's own).
pub fn run(sys: &dyn Syscall, env: &CniEnv, node: &NodeConfig) -> CniResult<()> {
    let state = match StateDir::existing_on(sys, &node.state_dir) {
        Ok(Some(s)) => s,
        Ok(None) => {
            crate::debug!(
                "no state dir {}: nothing to restore",
                node.state_dir.display()
            );
            return Ok(());
        }
        Err(e) => {
            // Retrying cannot fix a refused dir; the entries stay in it for
            // the repair once the node admin has fixed it.
            crate::error!("{e}: nothing restored now; any entry stays for the orphan repair");
            return Ok(());
        }
    };
    let entry = match state.read(env.container_id(), env.ifname()) {
        Ok(e) => e,
        Err(ReadError::Missing) => {
            crate::debug!("no state entry: nothing to restore");
            // A network without owned settings records no entry; its pod's
            // kubelet answer goes with its last rail all the same.
            crate::pod_answer::release_if_last(&state, env.container_id());
            return Ok(());
        }
        Err(ReadError::Corrupt(why)) => {
            // Never guess a value to write: a wrong guess changes the next
            // pod's traffic. Keep the file for the operator and succeed.
            match state.quarantine(env.container_id(), env.ifname()) {
                Ok(moved) => crate::warn!(
                    "state entry is corrupt ({why}): nothing restored; moved the entry to {} for inspection",
                    moved.display()
                ),
                Err(e) => crate::warn!("state entry is corrupt ({why}) and could not be moved aside: {e}"),
            }
            return Ok(());
        }
        Err(ReadError::Newer(v)) => {
            crate::warn!(
                "state entry was written by a newer roce-tune ({v}; this one writes format {}): left alone, nothing restored; that version's orphan repair restores it",
                crate::state::FORMAT
            );
            return Ok(());
        }
        Err(ReadError::Io(e)) if is_passing(&e) => {
            return Err(CniError::new(
                code::TRY_AGAIN_LATER,
                format!("read the state entry: {e}; retry the DEL"),
            ))
        }
        Err(ReadError::Io(e)) => {
            crate::error!("read the state entry: {e}: nothing restored now; the entry stays for the orphan repair");
            return Ok(());
        }
    };
    #[cfg(feature = "fault-injection")]
    crate::fault::point("del-after-read-state");
    let done = match Sysfs::open(&node.sysfs_root) {
        Ok(sysfs) => release_entry(crate::rail::place(&state, &sysfs, node), &entry),
        Err(e) => Done::Kept(format!("sysfs root {}: {e}", node.sysfs_root.display())),
    };
    match &done {
        Done::Kept(_) | Done::Busy(_) => crate::warn!("DEL on {}: {done}", entry.device),
        Done::Released(_) => {
            crate::info!("DEL on {}: {done}", entry.device);
            crate::pod_answer::release_if_last(&state, env.container_id());
        }
    }
    Ok(())
}

/// OS errors a retry can outlive.
fn is_passing(e: &std::io::Error) -> bool {
    use nix::libc::{EAGAIN, EINTR, EMFILE, ENFILE, ENOBUFS, ENOMEM};
    matches!(
        e.raw_os_error(),
        Some(EAGAIN | EINTR | EMFILE | ENFILE | ENOBUFS | ENOMEM)
    )
}
