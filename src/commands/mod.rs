//! One file per CNI command. Each reads top to bottom: validate, make one trip
//! into the pod netns (`NetNs::run`), act, print. This is the CNI edge: what
//! the commands share of one rail (finding it, tuning it, its GID) is
//! `crate::rail`'s, whose failures become `CniError`s with the spec's codes
//! here (`rail::Error::into_cni`).

pub mod add;
pub mod check;
pub mod del;
pub mod gc;
pub mod status;

use crate::cni::env::CniEnv;
use crate::cni::{code, CniError, CniResult};
use crate::netns::{Lookup, NetNs};
use crate::rail::ns_error;
use std::path::Path;

/// CNI_NETNS of ADD and CHECK: it must exist and be a network namespace.
pub fn open_netns(env: &CniEnv) -> CniResult<NetNs> {
    let path = Path::new(env.netns.as_deref().unwrap_or_default());
    match NetNs::lookup(path).map_err(ns_error)? {
        Lookup::Netns(ns) => Ok(ns),
        Lookup::Missing => Err(CniError::new(
            code::CONTAINER_UNKNOWN,
            format!(
                "netns {} does not exist: the pod sandbox is gone or CNI_NETNS is wrong",
                path.display()
            ),
        )),
        Lookup::NotNetns => Err(CniError::env(format!(
            "CNI_NETNS {} is not a network namespace (neither an nsfs bind mount nor /proc/<pid>/ns/net)",
            path.display()
        ))),
    }
}

#[cfg(test)]
pub(crate) mod tests;
