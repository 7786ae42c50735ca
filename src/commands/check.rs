//! CHECK: report drift of what roce-tune set: each sysctl, the traffic class
//! and the GID at the configured index. Success prints nothing.

use super::locate_port;
use crate::cni::config::{GidCheck, NetConf};
use crate::cni::env::CniEnv;
use crate::cni::result::NetResult;
use crate::cni::{code, CniError, CniResult};
use crate::netns::NetNs;
use crate::rdma::gid::{self, Verdict};
use crate::rdma::needs_pod_sysfs;
use crate::rdma::traffic_class::{self, describe};
use crate::sysctl;
use std::path::Path;
use std::time::Duration;

pub fn run(env: &CniEnv, conf: &NetConf) -> CniResult<()> {
    let ifname = env.ifname();
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        CniError::config("prevResult is missing: CHECK needs the result of the chain's ADD")
    })?;
    let result = NetResult::parse(prev, &conf.cni_version)?;
    let sysctls = sysctl::resolve(&conf.sysctls, ifname);
    let netns = NetNs::open_required(Path::new(env.netns.as_deref().unwrap_or_default()))?;
    let exclusive = conf.needs_rdma() && needs_pod_sysfs(&conf.sysfs_root);
    netns.enter_and_run(exclusive, || {
        sysctl::verify(&sysctls)?;
        if !conf.needs_rdma() {
            return Ok(());
        }
        let port = locate_port(conf, ifname)?;
        if let Some(tc) = conf.traffic_class {
            let live = traffic_class::read(&port.traffic_class_path())?;
            if live != Some(tc) {
                return Err(CniError::new(
                    code::TRAFFIC_CLASS,
                    format!(
                        "traffic class of {} port {} is {}, expected {tc} ({})",
                        port.device,
                        port.port,
                        describe(live),
                        port.traffic_class_path().display()
                    ),
                ));
            }
        }
        if conf.gid_check == GidCheck::Off {
            return Ok(());
        }
        let Some((want, addr)) = gid::expected_gid(&result.addresses_of(ifname)) else {
            return match conf.gid_check {
                GidCheck::Enforce => Err(CniError::new(
                    code::GID_CHECK,
                    format!("GID check failed: prevResult gives {ifname} no address"),
                )),
                _ => Ok(()),
            };
        };
        // The GID had all of ADD's wait to appear: CHECK looks once.
        if let Verdict::Mismatch { found, located } =
            gid::wait_for(&port, conf.gid_index, &want, Duration::ZERO)
        {
            let err = gid::mismatch_error(&port, conf.gid_index, &want, &addr, &found, located);
            if conf.gid_check == GidCheck::Enforce {
                return Err(err);
            }
            crate::warn!("{} (gidCheck is warn)", err.msg);
        }
        Ok(())
    })
}
