//! CHECK: report drift of what roce-tune set: each sysctl, the traffic class
//! and the GID. One trip into the pod netns; success prints nothing.

use super::add::wanted_index;
use super::locate_port;
use crate::cni::config::{GidCheck, NetConf};
use crate::cni::env::CniEnv;
use crate::cni::result::NetResult;
use crate::cni::{code, CniError, CniResult};
use crate::netns::NetNs;
use crate::node::NodeConfig;
use crate::rdma::gid::{self, Verdict};
use crate::rdma::traffic_class::{self, describe};
use crate::rdma::{needs_pod_sysfs, rdma_cm};
use crate::sysctl;
use crate::sysfs::View;
use std::path::Path;
use std::time::Duration;

pub fn run(env: &CniEnv, conf: &NetConf, node: &NodeConfig) -> CniResult<()> {
    let ifname = env.ifname();
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        CniError::config("prevResult is missing: CHECK needs the result of the chain's ADD")
    })?;
    let result = NetResult::parse(prev, &conf.cni_version)?;
    let sysctls = sysctl::resolve(&conf.sysctls, ifname);
    let netns = NetNs::open_required(Path::new(env.netns.as_deref().unwrap_or_default()))?;
    let host = if conf.needs_rdma() {
        Some(super::host_view(node)?)
    } else {
        None
    };
    netns.run(|| {
        sysctl::verify(&sysctls)?;
        let Some(host) = &host else {
            return Ok(());
        };
        let view = if needs_pod_sysfs(host) {
            View::fresh_sysfs(&format!("<sysfs of netns {}>", netns.path().display()))
                .map_err(|e| CniError::io("make the pod's sysfs", e))?
        } else {
            host.try_clone().map_err(|e| CniError::io("sysfs", e))?
        };
        let port = locate_port(conf, ifname, &view, needs_pod_sysfs(host))?;
        if let Some(tc) = conf.traffic_class {
            let live = traffic_class::read(&view, &port)?;
            if live != Some(tc) {
                return Err(CniError::new(
                    code::TRAFFIC_CLASS,
                    format!(
                        "traffic class of {} port {} is {}, expected {tc} ({})",
                        port.device,
                        port.port,
                        describe(live),
                        view.show(&port.traffic_class_path())
                    ),
                ));
            }
        }
        if let Some(tos) = conf.rdma_cm_tos {
            let live = rdma_cm::read(host, &port)?;
            if live != tos {
                return Err(CniError::new(
                    code::RDMA_CM_TOS,
                    format!(
                        "rdma_cm default ToS of {} port {} is {live}, expected {tos} ({})",
                        port.device,
                        port.port,
                        host.show(&rdma_cm::tos_path(&port))
                    ),
                ));
            }
        }
        if conf.gid_check == GidCheck::Off {
            return Ok(());
        }
        let Some((want, addr)) = gid::expected_gid(&result.addresses_of(ifname)) else {
            return match conf.gid_check {
                GidCheck::Warn => Ok(()),
                _ => Err(CniError::new(
                    code::GID_CHECK,
                    format!("GID check failed: prevResult gives {ifname} no address"),
                )),
            };
        };
        // The GID had all of ADD's wait to appear: CHECK looks once.
        let at = wanted_index(conf);
        if let Verdict::Mismatch { found, located } =
            gid::wait_for(&view, &port, at, &want, Duration::ZERO)
        {
            let err = gid::mismatch_error(&port, at, &want, &addr, found.as_ref(), located);
            if conf.gid_check != GidCheck::Warn {
                return Err(err);
            }
            crate::warn!("{} (gidCheck is warn)", err.msg);
        }
        Ok(())
    })
}
