//! `inspect --counters[=SECONDS]`: each rail's RDMA counters read twice,
//! SECONDS apart, and their rates, beside the rail's class: what the agent
//! exports (`roce_tune_rail_hw_counter_total`), live, for the operator at
//! the node. The names are the node config's `railCounters` (and its cap),
//! read through `rdma::counters`, so inspect and the agent show the same.
//!
//! Which ports: the node view shows every RDMA device of the host's sysfs
//! (each port under `ports/`), a device a live rail uses marked with its pod;
//! the pod view (`--netns`/`--pid`) the rails whose state entries name that
//! netns. A rail whose device lives in its pod (exclusive mode) is read in
//! the pod's sysfs, as the agent reads it: the host's view has no such
//! device, and a pod's view in the shared mode has no counters.

use super::args::Options;
use super::collect::{self, QosObs};
use crate::netns::{Lookup, NetNs};
use crate::node::NodeConfig;
use crate::ownership::is_live;
use crate::rail_qos::{Judge, HOST_DCB};
use crate::rdma::counters::{self, Port};
use crate::rdma::device::{self, Resolved};
use crate::rdma::reach::{Reach, Sysfs};
use crate::rdma::RdmaPort;
use crate::state::{Entry, StateDir};
use crate::sysfs::View;
use anyhow::{bail, Result};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// One port read: which, whose, and its two readings.
struct Read {
    port: RdmaPort,
    rail: Option<RailOf>,
    view: Option<View>,
    first: Port,
}

#[derive(Clone, Serialize)]
pub struct RailOf {
    pub namespace: String,
    pub pod: String,
    pub ifname: String,
    /// The class ADD wrote (`trafficClass` or the pod's pick), if it owns one.
    pub class: Option<u32>,
}

#[derive(Serialize)]
pub struct Counter {
    pub name: String,
    pub first: u64,
    pub second: u64,
    /// Per second over the interval; a counter that went down (a reset of
    /// the driver's counters) has none.
    pub rate: Option<f64>,
}

#[derive(Serialize)]
pub struct PortRates {
    pub device: String,
    pub port: u32,
    pub rail: Option<RailOf>,
    /// The rail's QoS verdict (where its class lands on the PF's
    /// priorities), short; `None` for a port no live rail uses.
    pub qos: Option<String>,
    pub counters: Vec<Counter>,
    pub notes: Vec<String>,
}

#[derive(Serialize)]
pub struct Rates {
    pub view: &'static str,
    pub seconds: f64,
    pub ports: Vec<PortRates>,
}

/// Read every port of the view twice, `every` apart.
pub fn collect(opts: &Options, node: &NodeConfig, every: Duration) -> Result<Rates> {
    let sysfs = collect::open_sysfs(&opts.sysfs_root)?;
    let live = live_entries(node);
    let mut reads = match opts.netns_path() {
        None => node_ports(&sysfs, &live, opts),
        Some(path) => pod_ports(&sysfs, &live, &path, opts)?,
    };
    for r in &mut reads {
        let view = r.view.as_ref().unwrap_or(sysfs.host());
        r.first = counters::read(view, &r.port, &node.rail_counters);
    }
    let started = Instant::now();
    std::thread::sleep(every);
    let mut judge = Judge::new(&HOST_DCB);
    let mut ports = Vec::new();
    for r in reads {
        let view = r.view.as_ref().unwrap_or(sysfs.host());
        let second = counters::read(view, &r.port, &node.rail_counters);
        let secs = started.elapsed().as_secs_f64();
        // The PF is the host's, whichever view read the counters.
        let qos = r.rail.as_ref().map(|rail| {
            let q = collect::judge_rail(
                node,
                &mut judge,
                sysfs.host(),
                r.port.pci.as_deref(),
                rail.class.and_then(|c| u8::try_from(c).ok()),
            );
            qos_spot(&q)
        });
        ports.push(PortRates {
            qos,
            ..rates(r, &second, secs)
        });
    }
    Ok(Rates {
        view: if opts.netns_path().is_some() {
            "pod"
        } else {
            "node"
        },
        seconds: every.as_secs_f64(),
        ports,
    })
}

fn live_entries(node: &NodeConfig) -> Vec<Entry> {
    match StateDir::existing(&node.state_dir) {
        Ok(Some(state)) => state
            .entries(|_, _, _| {})
            .unwrap_or_default()
            .into_iter()
            .filter(is_live)
            .collect(),
        _ => Vec::new(),
    }
}

fn rail_of(e: &Entry) -> RailOf {
    RailOf {
        namespace: e
            .pod
            .as_ref()
            .map_or(String::new(), |p| p.namespace.clone()),
        pod: e.pod.as_ref().map_or(String::new(), |p| p.name.clone()),
        ifname: e.ifname.clone(),
        class: e.owned.get("trafficClass").map(|o| o.written),
    }
}

/// A live rail's entry's port, through the view its device is reached by.
fn rail_read(sysfs: &Sysfs, e: &Entry) -> Read {
    let view = match e.reach {
        Reach::Pod => NetNs::still(Path::new(&e.netns), e.netns_id)
            .ok()
            .flatten()
            .and_then(|ns| sysfs.pod_side_of(&ns).ok().flatten()),
        Reach::Host => None,
    };
    Read {
        port: RdmaPort {
            device: e.device.clone(),
            port: e.port,
            pci: e.pci.clone(),
            guid: e.guid.clone(),
        },
        rail: Some(rail_of(e)),
        view,
        first: Port::default(),
    }
}

/// Every port of every device of the host's sysfs (or `--device`'s), and
/// the rails whose devices live in their pods.
fn node_ports(sysfs: &Sysfs, live: &[Entry], opts: &Options) -> Vec<Read> {
    let host = sysfs.host();
    // Each shared-mode rail where its device is now, found by its identity
    // (PCI function, GUID) as DEL finds it: a name may since belong to
    // another device.
    let owners: Vec<(RdmaPort, &Entry)> = live
        .iter()
        .filter(|e| e.reach == Reach::Host)
        .filter_map(|e| match device::resolve(host, e.identity()) {
            Resolved::Here(at) => Some((at, e)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    let devices = host.list(Path::new("class/infiniband")).unwrap_or_default();
    for dev in devices {
        if opts.device.as_ref().is_some_and(|d| *d != dev) {
            continue;
        }
        let ports = host
            .list(Path::new(&format!("class/infiniband/{dev}/ports")))
            .unwrap_or_default();
        for p in ports.iter().filter_map(|p| p.parse::<u32>().ok()) {
            if opts.port.is_some_and(|want| want != p) {
                continue;
            }
            let port = RdmaPort::identify(host, &dev, p);
            let rail = owners
                .iter()
                .find(|(at, _)| at.device == port.device && at.port == port.port)
                .map(|(_, e)| rail_of(e));
            out.push(Read {
                port,
                rail,
                view: None,
                first: Port::default(),
            });
        }
    }
    for e in live.iter().filter(|e| e.reach == Reach::Pod) {
        if opts.device.as_ref().is_none_or(|d| *d == e.device) {
            out.push(rail_read(sysfs, e));
        }
    }
    out
}

/// The rails whose entries name the netns at `path`.
fn pod_ports(sysfs: &Sysfs, live: &[Entry], path: &Path, opts: &Options) -> Result<Vec<Read>> {
    let ns = match NetNs::lookup(path).map_err(crate::cli::errors::cause)? {
        Lookup::Netns(ns) => ns,
        Lookup::Missing => bail!("netns {} does not exist", path.display()),
        Lookup::NotNetns => bail!("{} is not a network namespace", path.display()),
    };
    Ok(live
        .iter()
        .filter(|e| e.netns_id == Some(ns.id()))
        .filter(|e| opts.ifname.as_ref().is_none_or(|i| *i == e.ifname))
        .filter(|e| opts.device.as_ref().is_none_or(|d| *d == e.device))
        .map(|e| rail_read(sysfs, e))
        .collect())
}

/// The verdict's short form beside a port's counters: its name and the
/// priority the class lands on; `inspect` without `--counters` gives the
/// whole line.
fn qos_spot(q: &QosObs) -> String {
    match q {
        QosObs::Off => "off".into(),
        QosObs::NoClass => "-".into(),
        QosObs::Judged { verdict, .. } => match verdict.landing() {
            Some(l) => format!("{} (priority {})", verdict.name(), l.priority),
            None => verdict.name().into(),
        },
    }
}

fn rates(r: Read, second: &Port, secs: f64) -> PortRates {
    let mut notes = Vec::new();
    if !r.first.has_counters && !second.has_counters {
        notes.push(match r.view {
            None if r.rail.is_some() || r.port.pci.is_some() => {
                "no counters in the host's sysfs (the driver keeps none here)".to_string()
            }
            None => "no counters (the driver keeps none here)".to_string(),
            Some(_) => "no counters in the pod's sysfs".to_string(),
        });
    }
    if second.over_cap > 0 {
        notes.push(format!(
            "{} more picked than railCountersMax: not shown",
            second.over_cap
        ));
    }
    for s in &second.skipped {
        notes.push(format!("{} skipped: {}", s.path, s.why));
    }
    let counters = second
        .values
        .iter()
        .filter_map(|(name, b)| {
            let a = r.first.get(name)?;
            Some(Counter {
                name: name.clone(),
                first: a,
                second: *b,
                rate: (*b >= a && secs > 0.0).then(|| (*b - a) as f64 / secs),
            })
        })
        .collect();
    PortRates {
        device: r.port.device,
        port: r.port.port,
        rail: r.rail,
        qos: None,
        counters,
        notes,
    }
}

/// The text: a header per port (device, port, the pod's rail and class,
/// the QoS verdict's spot), then a line per counter.
pub fn render(rates: &Rates) -> String {
    let mut out = format!(
        "RDMA counters over {} s (the node config's railCounters)\n",
        rates.seconds
    );
    if rates.ports.is_empty() {
        out.push_str(match rates.view {
            "pod" => "no rail of this pod in the state dir\n",
            _ => "no RDMA device\n",
        });
    }
    for p in &rates.ports {
        let whose = match &p.rail {
            Some(r) => format!(
                "pod {}/{} {}  class {}",
                r.namespace,
                r.pod,
                r.ifname,
                r.class.map_or("-".into(), |c| c.to_string())
            ),
            None => "no pod".into(),
        };
        let qos = p.qos.as_deref().unwrap_or("-");
        out.push_str(&format!(
            "\n{} port {}  {whose}  qos {qos}\n",
            p.device, p.port
        ));
        let width = p.counters.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &p.counters {
            let rate = c.rate.map_or("reset".into(), |r| format!("{r:.1}/s"));
            out.push_str(&format!("  {:width$}  {:>20}  {rate}\n", c.name, c.second));
        }
        for n in &p.notes {
            out.push_str(&format!("  note: {n}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_per_second_and_a_reset_has_none() {
        let port = |v: &[(&str, u64)]| Port {
            values: v.iter().map(|(n, x)| (n.to_string(), *x)).collect(),
            has_counters: true,
            ..Port::default()
        };
        let r = Read {
            port: RdmaPort {
                device: "rxe0".into(),
                port: 1,
                pci: None,
                guid: None,
            },
            rail: None,
            view: None,
            first: port(&[("rcvd_pkts", 10), ("sent_pkts", 100)]),
        };
        let p = rates(r, &port(&[("rcvd_pkts", 4), ("sent_pkts", 300)]), 2.0);
        assert_eq!(p.counters[0].rate, None, "went down: reset");
        assert_eq!(p.counters[1].rate, Some(100.0));
        let text = render(&Rates {
            view: "node",
            seconds: 2.0,
            ports: vec![p],
        });
        assert!(text.contains("rxe0 port 1  no pod  qos -\n"), "{text}");
        assert!(
            text.contains("sent_pkts                   300  100.0/s\n"),
            "{text}"
        );
        assert!(
            text.contains("rcvd_pkts                     4  reset\n"),
            "{text}"
        );
    }
}
