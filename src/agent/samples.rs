//! The plain data a repair pass fills and `metrics::render` turns into the
//! exposition: one sample type per family or group of families, no logic
//! beyond their own bookkeeping.

use crate::wire::exposition::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Upper bounds of `roce_tune_cni_request_duration_seconds`: the tally's,
/// where the CNI processes count themselves (`crate::tally::BUCKETS`).
pub const CNI_DURATION_BUCKETS: [Duration; crate::tally::BUCKETS.len()] = crate::tally::BUCKETS;

/// The per-rail label values: where the rail is (pod, interface) and what it
/// is (device, VF, network). All come from a state entry's validated fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct RailLabels {
    pub namespace: String,
    pub pod: String,
    pub interface: String,
    pub rdma_device: String,
    pub pci_address: String,
    pub network: String,
}

impl RailLabels {
    pub(super) fn values(&self) -> [&str; 6] {
        [
            &self.namespace,
            &self.pod,
            &self.interface,
            &self.rdma_device,
            &self.pci_address,
            &self.network,
        ]
    }
}

/// A value read from the device, or the fact that it holds none: a class
/// file with no global class, a GID table where the pod's GID is at no
/// index. Rendered as -1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Unset,
    Value(u32),
}

impl Reading {
    pub(super) fn value(self) -> Value {
        match self {
            Reading::Unset => Value::Int(-1),
            Reading::Value(v) => Value::Uint(u64::from(v)),
        }
    }
}

/// One live rail. `None` leaves the series out: not read (the pod's view
/// unreachable) or not known (no GPU found for the pod).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RailSample {
    pub labels: RailLabels,
    /// Each setting the rail owns (its state entry's), in the list's order.
    pub settings: Vec<SettingSample>,
    pub gid_index: Option<Reading>,
    /// `None`: the topology is unknown (no GPU found for the pod).
    pub placement_near: Option<bool>,
    /// The port's counters `railCounters` picks (`agent::counters`).
    pub hw_counters: Vec<HwCounter>,
}

/// One RDMA counter of a live rail: its port, the kernel's file name, the
/// value the file holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HwCounter {
    pub port: u32,
    pub name: String,
    pub value: u64,
}

/// One owned setting of a live rail, by its key (`Setting::key()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettingSample {
    pub key: &'static str,
    /// What the file holds now; `None` leaves the series out: not read (no
    /// `tc/` file, configfs absent, the lock or the file unreadable).
    pub now: Option<Reading>,
    /// What it should hold: what roce-tune wrote for the rail, on a port
    /// with co-owners the newest live owner's.
    pub wanted: u32,
}

impl RailSample {
    /// The sample of the setting `key`, if the rail owns it.
    pub fn setting(&self, key: &str) -> Option<&SettingSample> {
        self.settings.iter().find(|s| s.key == key)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSample {
    pub namespace: String,
    pub pod: String,
    pub starved_gpus: u32,
}

/// A counter per registered setting, by its key; every setting is rendered,
/// 0 included, so that `rate()` sees the first increment. A list, not a
/// map: a handful of settings, and each map type is code in the binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SettingCounts(Vec<(&'static str, u64)>);

impl SettingCounts {
    pub fn get(&self, key: &str) -> u64 {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, n)| *n)
    }

    pub fn add(&mut self, key: &'static str, n: u64) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, c)) => *c = c.saturating_add(n),
            None => self.0.push((key, n)),
        }
    }
}

/// Counts by key, as a test or a snapshot states them.
impl<const N: usize> From<[(&'static str, u64); N]> for SettingCounts {
    fn from(counts: [(&'static str, u64); N]) -> SettingCounts {
        let mut c = SettingCounts::default();
        for (key, n) in counts {
            c.add(key, n);
        }
        c
    }
}

/// A CNI command (the label `command`, as `CNI_COMMAND` spells it).
pub use crate::cni::env::Command;

/// Observations over [`CNI_DURATION_BUCKETS`]: `counts[i]` fell at or below
/// bound `i` and above bound `i - 1`; the last one is the `+Inf` bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    pub counts: [u64; CNI_DURATION_BUCKETS.len() + 1],
    pub sum: Duration,
}

impl Histogram {
    pub fn observe(&mut self, took: Duration) {
        let i = CNI_DURATION_BUCKETS
            .iter()
            .position(|b| took <= *b)
            .unwrap_or(CNI_DURATION_BUCKETS.len());
        self.counts[i] = self.counts[i].saturating_add(1);
        self.sum = self.sum.saturating_add(took);
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a = a.saturating_add(b);
        }
        self.sum = self.sum.saturating_add(other.sum);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, c| a.saturating_add(*c))
    }
}

/// What the CNI processes counted (the journal they append to, read by the
/// agent). Repeated keys are summed by [`render`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CniCounts {
    /// (command, result code, requests): code 0 is success, else the CNI
    /// error code the plugin printed.
    pub requests: Vec<(Command, u32, u64)>,
    pub durations: Vec<(Command, Histogram)>,
}

/// The agent's own health: what an operator needs to trust the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentSample {
    pub start_time: SystemTime,
    pub repair_interval: Duration,
    pub repair_passes: u64,
    pub repair_pass_failures: u64,
    /// When the last pass without failure ended; `None` before the first
    /// (rendered 0, so that `time() - x` alerts from the start).
    pub last_success: Option<SystemTime>,
    /// `None` before the first pass (no series).
    pub last_pass_duration: Option<Duration>,
}

impl Default for AgentSample {
    fn default() -> Self {
        AgentSample {
            start_time: UNIX_EPOCH,
            repair_interval: Duration::ZERO,
            repair_passes: 0,
            repair_pass_failures: 0,
            last_success: None,
            last_pass_duration: None,
        }
    }
}

/// The NRI plugin's counters (`crate::nri::Stats`), where the agent runs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NriSample {
    pub connected: bool,
    /// (method, outcome, requests), every pair of the fixed sets.
    pub requests: Vec<(&'static str, &'static str, u64)>,
    pub env_injected: u64,
    pub env_kept: u64,
}

/// Everything one exposition says, as plain data: the repair loop fills one
/// after each pass and publishes [`render`]'s text; a scrape reads that text
/// and nothing else.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub rails: Vec<RailSample>,
    pub pods: Vec<PodSample>,
    pub drift: SettingCounts,
    pub drift_repairs: SettingCounts,
    pub orphan_repairs: u64,
    pub orphans_pending: u64,
    pub repair_skipped: u64,
    pub idle_vfs_holding_class: u64,
    pub cni: CniCounts,
    pub agent: AgentSample,
    /// `None`: the agent does not run the NRI plugin (no `--nri`), and its
    /// families are left out rather than read as "disconnected".
    pub nri: Option<NriSample>,
    /// The live rails' QoS verdicts and their PFs' pause counts
    /// (`agent::qos`).
    pub qos: QosSample,
}

/// One live rail's QoS verdict (`roce_tune_rail_qos`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RailQosSample {
    pub labels: RailLabels,
    /// `Verdict::name`.
    pub verdict: &'static str,
    /// `Verdict::priority_label`.
    pub priority: String,
}

/// One PF's pause frames per priority (`roce_tune_pf_pfc_pause_total`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PfPauseSample {
    /// The PF's netdev.
    pub pf: String,
    pub requests: [u64; 8],
    pub indications: [u64; 8],
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QosSample {
    pub rails: Vec<RailQosSample>,
    pub pfs: Vec<PfPauseSample>,
}
