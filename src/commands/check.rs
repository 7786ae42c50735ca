//! CHECK: report drift of what roce-tune set: each sysctl, each owned
//! setting (the traffic class, the rdma_cm ToS) and the GID. One trip into the pod netns; success prints nothing.

use crate::cni::config::{GidCheck, NetConf};
use crate::cni::env::CniEnv;
use crate::cni::result::NetResult;
use crate::cni::{code, CniError, CniResult};
use crate::node::NodeConfig;
use crate::rail::{self, gid_mismatch, locate, ns_error, pod_link, wanted_index};
use crate::rdma::gid::{self, Verdict};
use crate::rdma::reach::{PodSide, Reach};
use crate::rdma::setting::{show, PodIface, Views};
use crate::settings::by_key;
use crate::syscall::Syscall;
use crate::sysctl;
use std::time::Duration;

/// `sys`: the host (`syscall::KERNEL`; a unit test's own).
pub fn run(sys: &dyn Syscall, env: &CniEnv, conf: &NetConf, node: &NodeConfig) -> CniResult<()> {
    let ifname = env.ifname();
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        CniError::config("prevResult is missing: CHECK needs the result of the chain's ADD")
    })?;
    let result = NetResult::parse(prev, &conf.cni_version)?;
    let sysctls = sysctl::resolve(sys.proc_sys(), &conf.sysctls, ifname);
    let netns = super::open_netns(env)?;
    let sysfs = if conf.needs_rdma() {
        Some(rail::sysfs(node)?)
    } else {
        None
    };
    let body = || -> CniResult<()> {
        sysctl::verify(&sysctls)?;
        let Some(sysfs) = &sysfs else {
            return Ok(());
        };
        let host = sysfs.host();
        // The same reach, the same lookup as ADD: the pod's own device.
        let reach = sysfs.reach();
        let label = format!("<sysfs of netns {}>", netns.path().display());
        let mut side = PodSide::new(sysfs, netns.id(), label);
        let link = pod_link(sys, ifname)?;
        let port = locate(sys, conf, &mut side, reach, &link)?.port;
        let view = match reach {
            Reach::Pod => side
                .view()
                .map_err(|e| CniError::io("the pod's sysfs", e))?
                .unwrap_or(host),
            Reach::Host => host,
        };
        // Every owned setting, as ADD wrote it (`crate::settings`).
        let at = Views {
            device: view,
            host,
            pod: Some(PodIface {
                netns: &netns,
                ifname,
            }),
        };
        for (key, want) in conf.owned() {
            let setting = by_key(key).expect("NetConf::owned names registered settings");
            let live = setting.read(at, &port)?;
            if !setting.same(live, Some(want)) {
                return Err(CniError::new(
                    setting.code(),
                    format!(
                        "{} of {} port {} is {}, expected {want} ({})",
                        setting.title(),
                        port.device,
                        port.port,
                        show(live),
                        setting.show_path(at, &port)
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
            gid::wait_for(view, &port, at, &want, Duration::ZERO)
        {
            let err = gid_mismatch(&port, at, &want, &addr, found.as_ref(), located);
            if conf.gid_check != GidCheck::Warn {
                return Err(err);
            }
            crate::warn!("{} (gidCheck is warn)", err.msg);
        }
        Ok(())
    };
    // Through `run_there`: the one instance of the netns machinery ADD's
    // trips share.
    let mut out = Ok(());
    sys.run_there(&netns, &mut || out = body())
        .map_err(ns_error)?;
    out
}
