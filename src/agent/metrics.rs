//! What `roce-tune-agent agent` exposes: the metric catalogue, the plain-data
//! [`Snapshot`] the repair loop fills, and [`render`], which turns a snapshot
//! into the text exposition.
//!
//! [`CATALOGUE`] is the one list of metric names: `render` writes only its
//! families (a test checks both ways), and `integration/check-conf.py` reads
//! this file to check that the Grafana dashboard queries nothing else. Keep
//! each row of the table in the form `Family { metric: Metric::X, name: "...",
//! kind: Kind::Y, labels: CONST, help: "..." }` with `CONST` one of the label
//! lists just above it, and no `"` or `\` in a help text: check-conf parses
//! exactly that.
//!
//! Naming follows node_exporter's and the Prometheus naming guide's habits
//! (prometheus/docs `docs/practices/naming.md` at c105550a, lines 21-49):
//! base units in the name (`_seconds`, `_timestamp_seconds`), `_total` on
//! counters only, `_info` for a gauge of 1 whose labels carry the data. Every
//! label is bounded: per rail (a node has as many rails as VFs), per pod, per
//! setting or CNI command (fixed sets), per error code (a fixed set); nothing
//! that grows without end (a container ID, a time) is a label.
//!
//! Settings come from the one list (`crate::settings`), by key: the drift
//! counters have a `setting` label per registered setting (a count of
//! events, summable across settings), and a setting's value on each rail is
//! a pair of families of its own, `roce_tune_rail_<name>` and `_wanted`
//! (`settings::snake_name`), found in the catalogue by that name, not a
//! `setting` label: a class and a ToS added together mean nothing, and the
//! same naming guide says to split such data into metrics ("either the
//! `sum()` or the `avg()` over all dimensions of a given metric should be
//! meaningful").

use crate::settings::{self, SETTINGS};
use crate::wire::exposition::{HistogramData, Kind, Value, Writer};
use std::time::{SystemTime, UNIX_EPOCH};

pub use super::samples::*;

/// The families, in the order of [`CATALOGUE`] (a test checks that row `i`
/// names `Metric` `i`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    BuildInfo,
    AgentStartTime,
    RepairInterval,
    RepairPasses,
    RepairPassFailures,
    RepairLastSuccess,
    RepairPassDuration,
    RailInfo,
    RailTrafficClass,
    RailTrafficClassWanted,
    RailRdmaCmTos,
    RailRdmaCmTosWanted,
    RailGidIndex,
    RailPlacementNear,
    RailHwCounter,
    PodStarvedGpus,
    Drift,
    DriftRepairs,
    OrphanRepairs,
    OrphansPending,
    RepairSkipped,
    IdleVfsHoldingClass,
    RailQos,
    PfPfcPause,
    CniRequests,
    CniRequestDuration,
    NriConnected,
    NriRequests,
    NriEnvInjected,
    NriEnvKept,
}

#[derive(Debug)]
pub struct Family {
    pub metric: Metric,
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

/// The labels of every per-rail family, in this order ([`RailLabels`]).
pub const RAIL: &[&str] = &[
    "namespace",
    "pod",
    "interface",
    "rdma_device",
    "pci_address",
    "network",
];
/// A rail's RDMA counter: the rail's labels, its port, the kernel's name.
pub const RAIL_COUNTER: &[&str] = &[
    "namespace",
    "pod",
    "interface",
    "rdma_device",
    "pci_address",
    "network",
    "port",
    "counter",
];
pub const POD: &[&str] = &["namespace", "pod"];
pub const SETTING: &[&str] = &["setting"];
pub const CNI_REQUEST: &[&str] = &["command", "code"];
pub const CNI_COMMAND: &[&str] = &["command"];
pub const BUILD: &[&str] = &["version", "revision"];
pub const NRI_REQUEST: &[&str] = &["method", "outcome"];
pub const NONE: &[&str] = &[];
/// A rail's QoS verdict: the rail's labels ([`RAIL`], written out again:
/// integration/check-conf.py reads each list as a literal), the verdict, the
/// priority.
pub const RAIL_QOS: &[&str] = &[
    "namespace",
    "pod",
    "interface",
    "rdma_device",
    "pci_address",
    "network",
    "verdict",
    "priority",
];
pub const PF_PAUSE: &[&str] = &["pf", "priority", "direction"];

pub const CATALOGUE: &[Family] = &[
    Family {
        metric: Metric::BuildInfo,
        name: "roce_tune_build_info",
        kind: Kind::Gauge,
        labels: BUILD,
        help: "Always 1; the labels are the roce-tune version of the running agent and the git revision it was built from (12 hex digits, -dirty for an uncommitted tree, unknown without git).",
    },
    Family {
        metric: Metric::AgentStartTime,
        name: "roce_tune_agent_start_time_seconds",
        kind: Kind::Gauge,
        labels: NONE,
        help: "Unix time at which the agent started.",
    },
    Family {
        metric: Metric::RepairInterval,
        name: "roce_tune_repair_interval_seconds",
        kind: Kind::Gauge,
        labels: NONE,
        help: "Seconds the agent waits between two repair passes.",
    },
    Family {
        metric: Metric::RepairPasses,
        name: "roce_tune_repair_passes_total",
        kind: Kind::Counter,
        labels: NONE,
        help: "Repair passes run since the agent started, failed ones included.",
    },
    Family {
        metric: Metric::RepairPassFailures,
        name: "roce_tune_repair_pass_failures_total",
        kind: Kind::Counter,
        labels: NONE,
        help: "Repair passes that left something unrepaired or could not read the node.",
    },
    Family {
        metric: Metric::RepairLastSuccess,
        name: "roce_tune_repair_last_success_timestamp_seconds",
        kind: Kind::Gauge,
        labels: NONE,
        help: "Unix time at which the last repair pass without failure ended; 0 before the first.",
    },
    Family {
        metric: Metric::RepairPassDuration,
        name: "roce_tune_repair_pass_duration_seconds",
        kind: Kind::Gauge,
        labels: NONE,
        help: "How long the last repair pass took.",
    },
    Family {
        metric: Metric::RailInfo,
        name: "roce_tune_rail_info",
        kind: Kind::Gauge,
        labels: RAIL,
        help: "1 for each live rail: a state entry whose pod is still there.",
    },
    Family {
        metric: Metric::RailTrafficClass,
        name: "roce_tune_rail_traffic_class",
        kind: Kind::Gauge,
        labels: RAIL,
        help: "Global traffic class the VF's traffic_class file holds now; -1 when unset.",
    },
    Family {
        metric: Metric::RailTrafficClassWanted,
        name: "roce_tune_rail_traffic_class_wanted",
        kind: Kind::Gauge,
        labels: RAIL,
        help: "Traffic class the VF's file should hold: what roce-tune wrote for the rail (trafficClass or the pod's pick), on a port with co-owners the newest live owner's.",
    },
    Family {
        metric: Metric::RailRdmaCmTos,
        name: "roce_tune_rail_rdma_cm_tos",
        kind: Kind::Gauge,
        labels: RAIL,
        help: "rdma_cm default_roce_tos the device port holds now, for rails with rdmaCmTos.",
    },
    Family {
        metric: Metric::RailRdmaCmTosWanted,
        name: "roce_tune_rail_rdma_cm_tos_wanted",
        kind: Kind::Gauge,
        labels: RAIL,
        help: "rdma_cm default_roce_tos the device port should hold: what roce-tune wrote for the rail (rdmaCmTos), on a port with co-owners the newest live owner's.",
    },
    Family {
        metric: Metric::RailGidIndex,
        name: "roce_tune_rail_gid_index",
        kind: Kind::Gauge,
        labels: RAIL,
        help: "GID index that holds the RoCE v2 GID of the pod's address now; -1 when none does.",
    },
    Family {
        metric: Metric::RailPlacementNear,
        name: "roce_tune_rail_placement_near",
        kind: Kind::Gauge,
        labels: RAIL,
        help: "1 when the rail's VF is near one of the pod's GPUs (within gdrLevel: PXB, behind the same PCIe switches, by default), 0 when far.",
    },
    Family {
        metric: Metric::RailHwCounter,
        name: "roce_tune_rail_hw_counter_total",
        kind: Kind::Counter,
        labels: RAIL_COUNTER,
        help: "An RDMA counter of the rail's device port as the kernel's file holds it (hw_counters/ or counters/ of the port; counter is the file name), for the names railCounters picks.",
    },
    Family {
        metric: Metric::PodStarvedGpus,
        name: "roce_tune_pod_starved_gpus",
        kind: Kind::Gauge,
        labels: POD,
        help: "GPUs of the pod that are starved: fewer near rails than their share of the pod's rails.",
    },
    Family {
        metric: Metric::Drift,
        name: "roce_tune_drift_total",
        kind: Kind::Counter,
        labels: SETTING,
        help: "Times a repair pass found a live rail's setting differing from what roce-tune wrote.",
    },
    Family {
        metric: Metric::DriftRepairs,
        name: "roce_tune_drift_repairs_total",
        kind: Kind::Counter,
        labels: SETTING,
        help: "Drifted settings the agent wrote back and verified.",
    },
    Family {
        metric: Metric::OrphanRepairs,
        name: "roce_tune_orphan_repairs_total",
        kind: Kind::Counter,
        labels: NONE,
        help: "State entries whose pod was gone and whose originals the agent gave back.",
    },
    Family {
        metric: Metric::OrphansPending,
        name: "roce_tune_orphans_pending",
        kind: Kind::Gauge,
        labels: NONE,
        help: "State entries whose pod is gone and whose originals could not be given back yet.",
    },
    Family {
        metric: Metric::RepairSkipped,
        name: "roce_tune_repair_skipped_total",
        kind: Kind::Counter,
        labels: NONE,
        help: "Live rails and orphans a repair pass skipped because another process held the device's lock past 100 ms; each is tried again next pass.",
    },
    Family {
        metric: Metric::IdleVfsHoldingClass,
        name: "roce_tune_idle_vfs_holding_class",
        kind: Kind::Gauge,
        labels: NONE,
        help: "Idle VFs (no pod, no state entry) whose traffic_class file holds a class.",
    },
    Family {
        metric: Metric::RailQos,
        name: "roce_tune_rail_qos",
        kind: Kind::Gauge,
        labels: RAIL_QOS,
        help: "1 for each live rail with its QoS verdict: where its class lands in its PF's DSCP map against railPriority (ok, wrong_priority, no_pfc, pcp_trust, unknown) and that priority (empty when unknown or pcp_trust); no series with qosCheck off.",
    },
    Family {
        metric: Metric::PfPfcPause,
        name: "roce_tune_pf_pfc_pause_total",
        kind: Kind::Counter,
        labels: PF_PAUSE,
        help: "PFC pause frames of a live rail's PF, per priority, as its driver counts them: direction requests (sent) or indications (received).",
    },
    Family {
        metric: Metric::CniRequests,
        name: "roce_tune_cni_requests_total",
        kind: Kind::Counter,
        labels: CNI_REQUEST,
        help: "CNI requests the plugin answered, by command and result code (0 success).",
    },
    Family {
        metric: Metric::CniRequestDuration,
        name: "roce_tune_cni_request_duration_seconds",
        kind: Kind::Histogram,
        labels: CNI_COMMAND,
        help: "How long the plugin took to answer a CNI request, by command.",
    },
    Family {
        metric: Metric::NriConnected,
        name: "roce_tune_nri_connected",
        kind: Kind::Gauge,
        labels: NONE,
        help: "1 while the NRI plugin is registered with the runtime; 0 while it is not, and containers start without the job environment.",
    },
    Family {
        metric: Metric::NriRequests,
        name: "roce_tune_nri_requests_total",
        kind: Kind::Counter,
        labels: NRI_REQUEST,
        help: "NRI requests the plugin answered, by method and outcome (ok, error, unimplemented).",
    },
    Family {
        metric: Metric::NriEnvInjected,
        name: "roce_tune_nri_env_injected_total",
        kind: Kind::Counter,
        labels: NONE,
        help: "Containers the NRI plugin gave the job environment of their pod's rails.",
    },
    Family {
        metric: Metric::NriEnvKept,
        name: "roce_tune_nri_env_kept_total",
        kind: Kind::Counter,
        labels: NONE,
        help: "Containers that set a job environment variable themselves: their own value was kept.",
    },
];

/// The catalogue row of `m`.
pub fn family(m: Metric) -> &'static Family {
    &CATALOGUE[m as usize]
}

/// A time as a Unix timestamp (a clock before 1970 reads as 0).
fn timestamp(t: SystemTime) -> Value {
    Value::Seconds(t.duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// The QoS families, in the catalogue's order.
fn render_qos(w: &mut Writer, q: &QosSample) {
    open(w, Metric::RailQos);
    let mut rails: Vec<&RailQosSample> = q.rails.iter().collect();
    rails.sort_by(|x, y| x.labels.cmp(&y.labels));
    rails.dedup_by(|x, y| x.labels == y.labels);
    for r in rails {
        let [a, b, c, d, e, f] = r.labels.values();
        w.sample(&[a, b, c, d, e, f, r.verdict, &r.priority], Value::Uint(1));
    }
    open(w, Metric::PfPfcPause);
    let mut pfs: Vec<&PfPauseSample> = q.pfs.iter().collect();
    pfs.sort_by(|x, y| x.pf.cmp(&y.pf));
    pfs.dedup_by(|x, y| x.pf == y.pf);
    for p in pfs {
        for prio in 0..8 {
            let label = prio.to_string();
            w.sample(&[&p.pf, &label, "requests"], Value::Uint(p.requests[prio]));
            w.sample(
                &[&p.pf, &label, "indications"],
                Value::Uint(p.indications[prio]),
            );
        }
    }
}

/// What a per-rail family shows: one of its own, or a registered setting's
/// value (`roce_tune_rail_<name>`) or wanted value (`_wanted`), by name.
#[derive(Clone, Copy)]
enum RailFamily {
    Info,
    GidIndex,
    PlacementNear,
    Setting {
        key: &'static str,
        wanted: bool,
    },
    /// A row no setting names (a test checks there is none): no series.
    Unknown,
}

impl RailFamily {
    fn of(f: &Family) -> RailFamily {
        match f.metric {
            Metric::RailInfo => RailFamily::Info,
            Metric::RailGidIndex => RailFamily::GidIndex,
            Metric::RailPlacementNear => RailFamily::PlacementNear,
            _ => setting_family(f.name).map_or(RailFamily::Unknown, |(key, wanted)| {
                RailFamily::Setting { key, wanted }
            }),
        }
    }

    /// The family's value for one rail, `None` for no series.
    fn value(self, r: &RailSample) -> Option<Value> {
        match self {
            RailFamily::Info => Some(Value::Uint(1)),
            RailFamily::GidIndex => r.gid_index.map(Reading::value),
            RailFamily::PlacementNear => r.placement_near.map(|near| Value::Uint(near.into())),
            RailFamily::Setting { key, wanted: false } => r.setting(key)?.now.map(Reading::value),
            RailFamily::Setting { key, wanted: true } => {
                r.setting(key).map(|s| Value::Uint(s.wanted.into()))
            }
            RailFamily::Unknown => None,
        }
    }
}

/// The registered setting whose family `name` is, and whether it is the
/// `_wanted` one.
pub fn setting_family(name: &str) -> Option<(&'static str, bool)> {
    let stem = name.strip_prefix("roce_tune_rail_")?;
    SETTINGS.iter().find_map(|s| {
        let own = settings::snake_name(s.key());
        if stem == own {
            Some((s.key(), false))
        } else if stem.strip_suffix("_wanted") == Some(own.as_str()) {
            Some((s.key(), true))
        } else {
            None
        }
    })
}

fn open(w: &mut Writer, m: Metric) {
    let f = family(m);
    w.family(f.name, f.kind, f.help, f.labels);
}

/// The text exposition of `s`. Series are sorted (rails by their labels), so
/// two renders of one snapshot are identical; a rail or pod whose label set
/// repeats an earlier one is left out (a series must be unique: exposition
/// format, "Grouping and sorting").
pub fn render(s: &Snapshot) -> String {
    let mut w = Writer::new();
    let a = &s.agent;

    open(&mut w, Metric::BuildInfo);
    w.sample(
        &[crate::build_info::VERSION, crate::build_info::REVISION],
        Value::Uint(1),
    );
    open(&mut w, Metric::AgentStartTime);
    w.sample(&[], timestamp(a.start_time));
    open(&mut w, Metric::RepairInterval);
    w.sample(&[], Value::Seconds(a.repair_interval));
    open(&mut w, Metric::RepairPasses);
    w.sample(&[], Value::Uint(a.repair_passes));
    open(&mut w, Metric::RepairPassFailures);
    w.sample(&[], Value::Uint(a.repair_pass_failures));
    open(&mut w, Metric::RepairLastSuccess);
    w.sample(&[], timestamp(a.last_success.unwrap_or(UNIX_EPOCH)));
    open(&mut w, Metric::RepairPassDuration);
    if let Some(d) = a.last_pass_duration {
        w.sample(&[], Value::Seconds(d));
    }

    // Sorted and deduplicated with slices, not BTreeMaps: each map type is
    // code in the static binary, and these lists are a node's rails and pods.
    let mut rails: Vec<&RailSample> = s.rails.iter().collect();
    rails.sort_by(|x, y| x.labels.cmp(&y.labels)); // stable: the first stays
    rails.dedup_by(|x, y| x.labels == y.labels);
    for f in CATALOGUE.iter().filter(|f| f.labels == RAIL) {
        open(&mut w, f.metric);
        let family = RailFamily::of(f);
        for r in &rails {
            if let Some(v) = family.value(r) {
                w.sample(&r.labels.values(), v);
            }
        }
    }

    open(&mut w, Metric::RailHwCounter);
    for r in &rails {
        for c in &r.hw_counters {
            let [a, b, c2, d, e, f] = r.labels.values();
            let port = c.port.to_string();
            w.sample(&[a, b, c2, d, e, f, &port, &c.name], Value::Uint(c.value));
        }
    }

    open(&mut w, Metric::PodStarvedGpus);
    let mut pods: Vec<&PodSample> = s.pods.iter().collect();
    pods.sort_by(|x, y| (&x.namespace, &x.pod).cmp(&(&y.namespace, &y.pod)));
    pods.dedup_by(|x, y| (&x.namespace, &x.pod) == (&y.namespace, &y.pod));
    for p in pods {
        w.sample(&[&p.namespace, &p.pod], Value::Uint(p.starved_gpus.into()));
    }

    for (m, counts) in [
        (Metric::Drift, &s.drift),
        (Metric::DriftRepairs, &s.drift_repairs),
    ] {
        open(&mut w, m);
        for s in SETTINGS {
            let name = settings::snake_name(s.key());
            w.sample(&[&name], Value::Uint(counts.get(s.key())));
        }
    }
    open(&mut w, Metric::OrphanRepairs);
    w.sample(&[], Value::Uint(s.orphan_repairs));
    open(&mut w, Metric::OrphansPending);
    w.sample(&[], Value::Uint(s.orphans_pending));
    open(&mut w, Metric::RepairSkipped);
    w.sample(&[], Value::Uint(s.repair_skipped));
    open(&mut w, Metric::IdleVfsHoldingClass);
    w.sample(&[], Value::Uint(s.idle_vfs_holding_class));
    render_qos(&mut w, &s.qos);

    open(&mut w, Metric::CniRequests);
    let mut requests = s.cni.requests.clone();
    requests.sort_by_key(|(command, code, _)| (*command, *code));
    let mut i = 0;
    while i < requests.len() {
        let (command, code, mut n) = requests[i];
        i += 1;
        while i < requests.len() && (requests[i].0, requests[i].1) == (command, code) {
            n = n.saturating_add(requests[i].2);
            i += 1;
        }
        w.sample(&[command.as_str(), &code.to_string()], Value::Uint(n));
    }
    open(&mut w, Metric::CniRequestDuration);
    let mut durations = s.cni.durations.clone();
    durations.sort_by_key(|(command, _)| *command);
    let mut i = 0;
    while i < durations.len() {
        let (command, mut h) = durations[i];
        i += 1;
        while i < durations.len() && durations[i].0 == command {
            h.merge(&durations[i].1);
            i += 1;
        }
        w.histogram(
            &[command.as_str()],
            HistogramData {
                bounds: &CNI_DURATION_BUCKETS,
                counts: &h.counts,
                sum: h.sum,
            },
        );
    }
    if let Some(n) = &s.nri {
        open(&mut w, Metric::NriConnected);
        w.sample(&[], Value::Uint(n.connected.into()));
        open(&mut w, Metric::NriRequests);
        for (method, outcome, count) in &n.requests {
            w.sample(&[method, outcome], Value::Uint(*count));
        }
        open(&mut w, Metric::NriEnvInjected);
        w.sample(&[], Value::Uint(n.env_injected));
        open(&mut w, Metric::NriEnvKept);
        w.sample(&[], Value::Uint(n.env_kept));
    }
    w.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::exposition::{is_label_name, is_metric_name};
    use std::collections::BTreeSet;
    use std::time::Duration;

    fn rail(pod: &str, ifname: &str, dev: &str, pci: &str) -> RailSample {
        RailSample {
            labels: RailLabels {
                namespace: "team-a".into(),
                pod: pod.into(),
                interface: ifname.into(),
                rdma_device: dev.into(),
                pci_address: pci.into(),
                network: "rdma-vf".into(),
            },
            ..RailSample::default()
        }
    }

    fn owned(key: &'static str, now: Option<Reading>, wanted: u32) -> SettingSample {
        SettingSample { key, now, wanted }
    }

    /// A snapshot in which every family has at least one sample.
    pub(crate) fn full_snapshot() -> Snapshot {
        let mut add = Histogram::default();
        for ms in [4, 30, 30, 2000, 75_000] {
            add.observe(Duration::from_millis(ms));
        }
        let mut del = Histogram::default();
        del.observe(Duration::from_millis(2));
        Snapshot {
            rails: vec![
                RailSample {
                    settings: vec![
                        owned("trafficClass", Some(Reading::Value(41)), 41),
                        owned("rdmaCmTos", Some(Reading::Value(106)), 106),
                    ],
                    gid_index: Some(Reading::Value(3)),
                    placement_near: Some(true),
                    hw_counters: vec![HwCounter {
                        port: 1,
                        name: "out_of_sequence".into(),
                        value: 11_649,
                    }],
                    ..rail("train-0", "net1", "mlx5_2", "0000:3b:00.2")
                },
                RailSample {
                    settings: vec![owned("trafficClass", Some(Reading::Unset), 41)],
                    gid_index: Some(Reading::Unset),
                    placement_near: Some(false),
                    ..rail("train-0", "net2", "mlx5_3", "0000:3b:00.3")
                },
            ],
            pods: vec![PodSample {
                namespace: "team-a".into(),
                pod: "train-0".into(),
                starved_gpus: 1,
            }],
            drift: SettingCounts::from([("trafficClass", 2)]),
            drift_repairs: SettingCounts::from([("trafficClass", 1)]),
            orphan_repairs: 4,
            orphans_pending: 1,
            repair_skipped: 3,
            idle_vfs_holding_class: 1,
            cni: CniCounts {
                requests: vec![
                    (Command::Add, 0, 10),
                    (Command::Add, 101, 2),
                    (Command::Del, 0, 9),
                ],
                durations: vec![(Command::Add, add), (Command::Del, del)],
            },
            agent: AgentSample {
                start_time: UNIX_EPOCH + Duration::from_millis(1_780_000_000_500),
                repair_interval: Duration::from_secs(60),
                repair_passes: 12,
                repair_pass_failures: 1,
                last_success: Some(UNIX_EPOCH + Duration::from_millis(1_780_000_660_250)),
                last_pass_duration: Some(Duration::from_micros(12_500)),
            },
            nri: Some(NriSample {
                connected: true,
                requests: vec![
                    ("CreateContainer", "ok", 7),
                    ("unknown", "unimplemented", 1),
                ],
                env_injected: 5,
                env_kept: 1,
            }),
            qos: QosSample {
                rails: vec![RailQosSample {
                    labels: rail("train-0", "net1", "mlx5_2", "0000:3b:00.2").labels,
                    verdict: "wrong_priority",
                    priority: "1".into(),
                }],
                pfs: vec![PfPauseSample {
                    pf: "enp59s0f0np0".into(),
                    requests: std::array::from_fn(|p| 1000 + p as u64),
                    indications: std::array::from_fn(|p| 2000 + p as u64),
                }],
            },
        }
    }

    #[test]
    fn renders_each_rails_qos_verdict_and_each_pfs_pause_counts() {
        let text = render(&full_snapshot());
        assert!(
            text.contains(r#"roce_tune_rail_qos{namespace="team-a",pod="train-0",interface="net1",rdma_device="mlx5_2",pci_address="0000:3b:00.2",network="rdma-vf",verdict="wrong_priority",priority="1"} 1"#),
            "{text}"
        );
        for line in [
            r#"roce_tune_pf_pfc_pause_total{pf="enp59s0f0np0",priority="3",direction="requests"} 1003"#,
            r#"roce_tune_pf_pfc_pause_total{pf="enp59s0f0np0",priority="3",direction="indications"} 2003"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line}: {text}");
        }
        // A PF seen by two rails is one set of series.
        let mut s = full_snapshot();
        s.qos.pfs.push(s.qos.pfs[0].clone());
        let text = render(&s);
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("roce_tune_pf_pfc_pause_total{"))
                .count(),
            16
        );
    }

    /// The family names of every `# TYPE` line, and every sample's name.
    fn names(text: &str) -> (Vec<String>, BTreeSet<String>) {
        let mut typed = Vec::new();
        let mut sampled = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.push(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') {
                let end = line.find(['{', ' ']).unwrap();
                sampled.insert(line[..end].to_string());
            }
        }
        (typed, sampled)
    }

    #[test]
    fn catalogue_rows_follow_the_metric_enum_and_the_naming_rules() {
        let mut names = BTreeSet::new();
        for (i, f) in CATALOGUE.iter().enumerate() {
            assert_eq!(f.metric as usize, i, "{} is not row {i}", f.name);
            assert!(names.insert(f.name), "{} twice", f.name);
            assert!(is_metric_name(f.name) && f.name.starts_with("roce_tune_"));
            assert!(f.labels.iter().all(|l| is_label_name(l) && *l != "le"));
            // check-conf parses the help as a plain Rust string literal.
            assert!(!f.help.is_empty() && !f.help.contains(['"', '\\', '\n']));
            assert_eq!(
                f.kind == Kind::Counter,
                f.name.ends_with("_total"),
                "{}",
                f.name
            );
            if f.name.ends_with("_info") {
                assert_eq!(f.kind, Kind::Gauge);
            }
            if f.kind == Kind::Histogram {
                assert!(f.name.ends_with("_seconds"), "{}", f.name);
            }
        }
    }

    #[test]
    fn every_rendered_name_is_in_the_catalogue_and_every_family_is_rendered() {
        let text = render(&full_snapshot());
        let (typed, sampled) = names(&text);
        let catalogue: Vec<String> = CATALOGUE.iter().map(|f| f.name.to_string()).collect();
        assert_eq!(typed, catalogue, "TYPE lines, in catalogue order");
        let mut expected = BTreeSet::new();
        for f in CATALOGUE {
            if f.kind == Kind::Histogram {
                for s in ["_bucket", "_sum", "_count"] {
                    expected.insert(format!("{}{s}", f.name));
                }
            } else {
                expected.insert(f.name.to_string());
            }
        }
        assert_eq!(sampled, expected);
    }

    #[test]
    fn renders_rails_pods_and_cni_counts() {
        let text = render(&full_snapshot());
        let l = |ifname: &str, dev: &str, pci: &str| {
            format!(
                "{{namespace=\"team-a\",pod=\"train-0\",interface=\"{ifname}\",rdma_device=\"{dev}\",pci_address=\"{pci}\",network=\"rdma-vf\"}}"
            )
        };
        let net1 = l("net1", "mlx5_2", "0000:3b:00.2");
        let net2 = l("net2", "mlx5_3", "0000:3b:00.3");
        for line in [
            format!(
                "roce_tune_build_info{{version=\"{}\",revision=\"{}\"}} 1",
                crate::build_info::VERSION,
                crate::build_info::REVISION
            ),
            format!("roce_tune_rail_info{net1} 1"),
            format!("roce_tune_rail_traffic_class{net1} 41"),
            format!("roce_tune_rail_traffic_class{net2} -1"),
            format!("roce_tune_rail_traffic_class_wanted{net2} 41"),
            format!("roce_tune_rail_rdma_cm_tos{net1} 106"),
            format!("roce_tune_rail_gid_index{net1} 3"),
            format!("roce_tune_rail_gid_index{net2} -1"),
            format!("roce_tune_rail_placement_near{net2} 0"),
            format!(
                "roce_tune_rail_hw_counter_total{},port=\"1\",counter=\"out_of_sequence\"}} 11649",
                net1.trim_end_matches('}')
            ),
            "roce_tune_pod_starved_gpus{namespace=\"team-a\",pod=\"train-0\"} 1".into(),
            "roce_tune_drift_total{setting=\"traffic_class\"} 2".into(),
            "roce_tune_drift_total{setting=\"rdma_cm_tos\"} 0".into(),
            "roce_tune_repair_skipped_total 3".into(),
            "roce_tune_cni_requests_total{command=\"ADD\",code=\"101\"} 2".into(),
            "roce_tune_cni_request_duration_seconds_bucket{command=\"ADD\",le=\"0.005\"} 1".into(),
            "roce_tune_cni_request_duration_seconds_bucket{command=\"ADD\",le=\"0.05\"} 3".into(),
            "roce_tune_cni_request_duration_seconds_bucket{command=\"ADD\",le=\"60\"} 4".into(),
            "roce_tune_cni_request_duration_seconds_bucket{command=\"ADD\",le=\"+Inf\"} 5".into(),
            "roce_tune_cni_request_duration_seconds_count{command=\"ADD\"} 5".into(),
            "roce_tune_cni_request_duration_seconds_sum{command=\"DEL\"} 0.002".into(),
            "roce_tune_repair_last_success_timestamp_seconds 1780000660.25".into(),
            "roce_tune_agent_start_time_seconds 1780000000.5".into(),
            "roce_tune_nri_connected 1".into(),
            "roce_tune_nri_requests_total{method=\"CreateContainer\",outcome=\"ok\"} 7".into(),
            "roce_tune_nri_env_injected_total 5".into(),
            "roce_tune_nri_env_kept_total 1".into(),
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        // net2 has no rdmaCmTos: no ToS series for it.
        assert!(!text.contains(&format!("roce_tune_rail_rdma_cm_tos{net2}")));
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn an_empty_snapshot_still_says_who_serves_it() {
        let text = render(&Snapshot::default());
        let (typed, _) = names(&text);
        assert!(typed.contains(&"roce_tune_build_info".to_string()));
        assert!(text.contains("\nroce_tune_repair_last_success_timestamp_seconds 0\n"));
        assert!(!text.contains("roce_tune_rail_info"), "{text}");
        assert!(!text.contains("roce_tune_repair_pass_duration_seconds"));
        assert!(
            !text.contains("roce_tune_nri_"),
            "no NRI families without the plugin"
        );
        assert!(text.contains("roce_tune_drift_total{setting=\"rdma_cm_tos\"} 0"));
    }

    /// The counters and families come from the one list of settings: each
    /// registered setting is a `setting` label of both counters (0 before
    /// its first drift), and a per-rail row is the agent's own or a
    /// registered setting's (a row of a setting since renamed would render
    /// nothing), each setting's two rows together or neither.
    #[test]
    fn settings_come_from_the_one_list_by_key() {
        let text = render(&Snapshot::default());
        for s in SETTINGS {
            let name = settings::snake_name(s.key());
            for counter in ["roce_tune_drift_total", "roce_tune_drift_repairs_total"] {
                let line = format!("\n{counter}{{setting=\"{name}\"}} 0\n");
                assert!(text.contains(&line), "{line:?} in\n{text}");
            }
            let own = format!("roce_tune_rail_{name}");
            let rows = [own.clone(), format!("{own}_wanted")]
                .map(|n| CATALOGUE.iter().any(|f| f.name == n && f.labels == RAIL));
            assert!(rows[0] == rows[1], "{}: one of its two rows", s.key());
        }
        for f in CATALOGUE.iter().filter(|f| f.labels == RAIL) {
            let own = matches!(
                f.metric,
                Metric::RailInfo | Metric::RailGidIndex | Metric::RailPlacementNear
            );
            assert!(
                own || setting_family(f.name).is_some(),
                "{}: no registered setting is named so (roce_tune_rail_<settings::snake_name>[_wanted])",
                f.name
            );
        }
        assert_eq!(
            setting_family("roce_tune_rail_rdma_cm_tos_wanted"),
            Some(("rdmaCmTos", true))
        );
        assert_eq!(
            setting_family("roce_tune_rail_traffic_class"),
            Some(("trafficClass", false))
        );
        assert_eq!(setting_family("roce_tune_rail_gid_index"), None);
        // Counted by key: a key no longer registered is kept but not shown.
        let mut c = SettingCounts::from([("trafficClass", 2), ("laterSetting", 5)]);
        c.add("trafficClass", 1);
        assert_eq!((c.get("trafficClass"), c.get("rdmaCmTos")), (3, 0));
        let s = Snapshot {
            drift: c,
            ..Snapshot::default()
        };
        let text = render(&s);
        assert!(text.contains("roce_tune_drift_total{setting=\"traffic_class\"} 3\n"));
        assert!(!text.contains("later_setting"), "{text}");
    }

    #[test]
    fn repeated_label_sets_are_rendered_once_and_summed_where_they_count() {
        let mut s = full_snapshot();
        s.rails.push(s.rails[0].clone());
        s.pods.push(s.pods[0].clone());
        s.cni.requests.push((Command::Add, 0, 5));
        let h = s.cni.durations[0].1;
        s.cni.durations.push((Command::Add, h));
        let text = render(&s);
        assert_eq!(text.matches("roce_tune_rail_info{").count(), 2);
        assert_eq!(text.matches("roce_tune_pod_starved_gpus{").count(), 1);
        assert!(text.contains("roce_tune_cni_requests_total{command=\"ADD\",code=\"0\"} 15\n"));
        assert!(text.contains("roce_tune_cni_request_duration_seconds_count{command=\"ADD\"} 10\n"));
        assert_eq!(render(&s), text, "deterministic");
    }

    #[test]
    fn label_values_from_entries_are_escaped() {
        let mut s = Snapshot::default();
        let mut r = rail("p\"o\\d", "net1", "mlx5_0", "0000:01:00.1");
        r.labels.network = "a\nb".into();
        s.rails.push(r);
        let text = render(&s);
        assert!(text.contains("pod=\"p\\\"o\\\\d\""), "{text}");
        assert!(text.contains("network=\"a\\nb\""), "{text}");
    }

    #[test]
    fn histogram_buckets_take_each_observation_once() {
        let mut h = Histogram::default();
        h.observe(Duration::from_micros(500)); // on a bound: that bucket (le is "<=")
        h.observe(Duration::from_micros(501));
        h.observe(Duration::ZERO);
        h.observe(Duration::from_secs(61));
        assert_eq!(h.counts[0], 2);
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[CNI_DURATION_BUCKETS.len()], 1);
        assert_eq!(h.count(), 4);
        assert_eq!(h.sum, Duration::from_micros(61_001_001));
        assert_eq!(Command::parse("DEL").ok(), Some(Command::Del));
        assert!(Command::parse("del").is_err());
    }
}
