//! One rail's tuning, below both edges that tune a rail: a CNI ADD
//! (`commands::add::run`: the network config, prevResult, the kubelet's
//! answer, the output) and a DRA rail at RunPodSandbox (`nri::dra`). Both
//! call `tune`, so a rail is found, tuned, recorded and undone alike; CHECK
//! finds it and judges its GID with the same pieces. The rail's failures are
//! its own `Error`, which each edge answers in its own terms.
//!
//! `tune` (the rail, the trip, the take and its record), `gid` (the GID
//! expected, its index, the wait, a mismatch), `placement` (the pod's VFs
//! against its GPUs), `locate` (the node's sysfs, the pod's link and port,
//! the place entries are given back through), `error` (the failure kinds).

mod error;
mod gid;
mod locate;
mod placement;
mod tune;

pub use error::{Error, Failure};
pub use gid::{expected_gid, gid_mismatch, wanted_index};
pub use locate::{locate, lookup_error, ns_error, place, pod_link, sysfs};
pub use placement::placement_skipped;
pub use tune::{trip, tune, Expect, Rail, TuneExtras, Tuned};

#[cfg(test)]
pub(crate) mod tests;
