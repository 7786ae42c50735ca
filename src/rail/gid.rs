//! The GID check of one rail: which address's RoCE v2 GID is expected,
//! at which index of the port's table, how long it is waited for, and what
//! a mismatch says (101).

use crate::cni::config::{GidCheck, NetConf};
use crate::cni::{code, CniError, CniResult};
use crate::rdma::gid::{self, Verdict, Want};
use crate::sysfs::View;
use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

/// An IPv6 link-local address: every netdev has one, and its GID is the
/// port's own (index 0), never the pod's address.
pub(super) fn is_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
}

/// How long the GID check waits: the config's `gidTimeoutMs`, or what is
/// left of a deadline when that ends first (`cut`: the wait was cut short
/// by it, not by the config).
#[derive(Clone, Copy)]
pub(super) struct GidWait {
    timeout: Duration,
    cut: bool,
}

impl GidWait {
    pub(super) fn of(conf: &NetConf, deadline: Option<Instant>) -> GidWait {
        let asked = Duration::from_millis(conf.gid_timeout_ms);
        match deadline {
            Some(d) => {
                // What the take after the wait needs (a lock, two writes,
                // an fsynced entry): measured in milliseconds, kept whole.
                let left = d
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(TAKE_RESERVE);
                GidWait {
                    timeout: asked.min(left),
                    cut: left < asked,
                }
            }
            None => GidWait {
                timeout: asked,
                cut: false,
            },
        }
    }
}

/// Kept of a deadline for the take after the GID wait.
const TAKE_RESERVE: Duration = Duration::from_millis(100);

/// The GID the pod's address must have, or `None` when the check is off (or
/// warn-only and there is no address to check).
pub fn expected_gid(
    conf: &NetConf,
    addrs: &[IpNetwork],
    ifname: &str,
    source: &str,
) -> CniResult<Option<(Ipv6Addr, IpAddr)>> {
    if conf.gid_check == GidCheck::Off {
        return Ok(None);
    }
    match gid::expected_gid(addrs) {
        Some(g) => Ok(Some(g)),
        None if conf.gid_check == GidCheck::Warn => {
            crate::warn!("GID check skipped: {source} {ifname} no address");
            Ok(None)
        }
        None => Err(CniError::new(
            code::GID_CHECK,
            format!(
                "GID check failed: {source} {ifname} no IP address, so no RoCE v2 GID can be expected; give the network an IPAM, or set gidCheck to \"off\""
            ),
        )),
    }
}

/// Which index the config asks about.
pub fn wanted_index(conf: &NetConf) -> Want {
    match conf.gid_check {
        GidCheck::Present => Want::Any,
        _ => Want::Index(conf.gid_index),
    }
}

/// The index that holds the pod's RoCE v2 GID, as the rail record keeps it:
/// the one verified, or (warn) the one found elsewhere, if any.
pub(super) fn check_gid(
    conf: &NetConf,
    view: &View,
    port: &crate::rdma::RdmaPort,
    want: &Ipv6Addr,
    addr: &IpAddr,
    wait: GidWait,
) -> CniResult<Option<u32>> {
    let at = wanted_index(conf);
    match gid::wait_for(view, port, at, want, wait.timeout) {
        Verdict::Pass(index) => {
            crate::info!(
                "GID index {index} of {} is the RoCE v2 GID {} of {addr}",
                port.device,
                gid::format_gid(want)
            );
            Ok(Some(index))
        }
        Verdict::Mismatch { found, located } => {
            let err = gid_mismatch(port, at, want, addr, found.as_ref(), located);
            if conf.gid_check == GidCheck::Warn {
                crate::warn!("{} (gidCheck is warn: ADD goes on)", err.msg);
                Ok(located)
            } else if wait.cut && conf.gid_check != GidCheck::Enforce {
                // The answer's budget ended the wait, not the config: the
                // rail is recorded and the agent's pass finds the GID later.
                crate::warn!(
                    "{} (the wait was cut to {} ms by the answer's budget; gidCheck is not enforce: the rail is recorded, and the agent's pass checks its GID)",
                    err.msg,
                    wait.timeout.as_millis()
                );
                Ok(located)
            } else {
                // Logged once, by the edge that ends the request with it.
                Err(err)
            }
        }
    }
}

/// Error 101, from what the GID table showed (`rdma::gid`).
pub fn gid_mismatch(
    port: &crate::rdma::RdmaPort,
    at: Want,
    want: &Ipv6Addr,
    addr: &IpAddr,
    found: Option<&crate::rdma::gid::GidEntry>,
    located: Option<u32>,
) -> CniError {
    let msg = gid::mismatch_message(port, at, want, addr, found, located);
    CniError::new(code::GID_CHECK, msg)
}
