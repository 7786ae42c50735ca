//! Idle VFs that hold a traffic class. NVIDIA's rdma CNI fork (the one its
//! network operator ships; upstream rdma-cni has no QoS) writes `rdmaQoS.tc`
//! to the class before it moves the RDMA device into a pod, and 0 when that
//! is unset; on DEL it writes back what it read, reading an empty file as 0.
//! So with that fork, a VF no pod uses ends with a forced class (0, the
//! halved-bandwidth case), whatever roce-tune restored before the fork's DEL.
//!
//! An idle VF: its netdev is in the host netns (no pod holds it; sriov-cni
//! moves it back on DEL), its RDMA device is on the host, and no state entry
//! names it. A VF held by a pod whose chain has no roce-tune is not idle: its
//! netdev is in that pod. `inspect` flags idle VFs holding a class, and
//! `roce-tune reset-idle` returns them to unset.

use crate::node::NodeConfig;
use crate::rdma::traffic_class;
use crate::rdma::{class_dir, RdmaPort};
use crate::state::{Entry, StateDir};
use crate::sysfs::View;
use std::path::{Path, PathBuf};

/// One port of an idle VF that holds a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idle {
    pub port: RdmaPort,
    pub pci: String,
    pub netdev: String,
    pub class: u8,
}

impl Idle {
    /// Who most likely left the class.
    pub fn likely_writer(&self) -> &'static str {
        if self.class == 0 {
            "NVIDIA's rdma CNI fork forces 0 when rdmaQoS.tc is unset and writes back the 0 it read on DEL"
        } else {
            "NVIDIA's rdma CNI fork writes rdmaQoS.tc and on DEL puts back what it read; or a manual write"
        }
    }
}

/// Every port of every idle VF under `host` that holds a class. `entries`
/// are the state dir's (any entry naming the device, live or orphan, makes
/// it not idle: an orphan is the repair's to restore).
pub fn find(host: &View, entries: &[Entry]) -> Vec<Idle> {
    let mut out = Vec::new();
    for dev in host.list(Path::new("class/infiniband")).unwrap_or_default() {
        let ports: Vec<u32> = host
            .list(&class_dir(&dev).join("tc"))
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        for p in ports {
            let port = RdmaPort::identify(host, &dev, p);
            let Some(pci) = port.pci.clone() else {
                continue;
            };
            let func = PathBuf::from("bus/pci/devices").join(&pci);
            if !host.exists(&func.join("physfn")) {
                continue; // a PF, not a VF
            }
            let Some(netdev) = host
                .list(&func.join("net"))
                .unwrap_or_default()
                .into_iter()
                .next()
            else {
                continue; // its netdev is in a pod
            };
            if entries.iter().any(|e| names(e, &port)) {
                continue;
            }
            if let Ok(Some(class)) = traffic_class::read(host, &port) {
                out.push(Idle {
                    port,
                    pci,
                    netdev,
                    class,
                });
            }
        }
    }
    out
}

fn names(e: &Entry, port: &RdmaPort) -> bool {
    e.port == port.port
        && match (&e.pci, &port.pci) {
            (Some(a), Some(b)) => a == b,
            _ => e.device == port.device,
        }
}

fn entries(state: Option<&StateDir>) -> Vec<Entry> {
    state
        .and_then(|s| s.entries(|_, _, _| {}).ok())
        .unwrap_or_default()
}

/// The state entries of the node, for callers without a state dir of their
/// own (`inspect`): none when the node has no state dir yet.
pub fn node_entries(node: &NodeConfig) -> Vec<Entry> {
    entries(StateDir::existing(&node.state_dir).ok().flatten().as_ref())
}

/// `roce-tune reset-idle [--dry-run]`: every idle VF holding a class back to
/// unset (`tclass=-1`), each under the device's lock (the one ADD and DEL
/// take), after checking again, under that lock, that no entry names it.
/// Returns the exit code: 1 when a reset failed.
pub fn reset(host: &View, state: &StateDir, dry_run: bool) -> i32 {
    let idle = find(host, &entries(Some(state)));
    let mut failed = 0;
    for i in &idle {
        let what = format!(
            "{} port {} (VF {}, netdev {} on the host): class {}",
            i.port.device, i.port.port, i.pci, i.netdev, i.class
        );
        if dry_run {
            println!("would reset {what} to unset");
            continue;
        }
        let done = state
            .lock(&i.port.lock_key())
            .map_err(|e| e.to_string())
            .and_then(|_lock| {
                let now = entries(Some(state));
                if now.iter().any(|e| names(e, &i.port)) {
                    return Ok(false); // a pod took it meanwhile
                }
                traffic_class::write_verified(host, &i.port, None)
                    .map(|()| true)
                    .map_err(|e| e.msg)
            });
        match done {
            Ok(true) => {
                crate::info!("reset-idle: {what}, now unset");
                println!("reset {what} to unset");
            }
            Ok(false) => println!("skipped {what}: a pod took it meanwhile"),
            Err(e) => {
                failed += 1;
                println!("failed {what}: {e}");
            }
        }
    }
    println!(
        "{} idle VF ports held a class{}; {} failed",
        idle.len(),
        if dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        },
        failed
    );
    i32::from(failed > 0)
}
