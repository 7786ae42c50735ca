//! roce-tune: a chained CNI meta-plugin that makes an SR-IOV VF a correct RoCE
//! rail: the rail sysctls, the traffic class (restored exactly on DEL), and a
//! proof that the GID index NCCL uses holds the pod address's RoCE v2 GID.
//!
//! Where things start: `plugin::run` dispatches a CNI command to
//! `commands::{add,del,check,gc,status}`; the class is written in
//! `ownership::take` and given back in `ownership::release`. Host paths come
//! from `node` (the node config), never from the network config; every sysfs
//! file is reached through a `sysfs::View`.

#[macro_use]
pub mod log;
pub mod agent;
pub mod build_info;
pub mod cli;
pub mod cni;
pub mod commands;
pub mod device_info;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod fs_read;
pub mod idle;
pub mod job_env;
pub mod netlink;
pub mod netns;
pub mod node;
pub mod nri;
pub mod orphans;
pub mod ownership;
pub mod placement;
pub mod plugin;
pub mod pod_answer;
pub mod podresources;
pub mod process;
pub mod qos;
pub mod quote;
pub mod rail;
pub mod rail_qos;
pub mod rdma;
pub mod safe_dir;
pub mod settings;
pub mod state;
pub mod syscall;
pub mod sysctl;
pub mod sysfs;
pub mod tally;
pub mod topology;
pub mod undo;
pub mod wire;

/// An open or stat that failed because the path is not there (ENOENT), or a
/// component of it is not a directory (ENOTDIR): "missing", not an error.
pub(crate) fn is_missing(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::ENOENT | nix::libc::ENOTDIR)
    )
}
