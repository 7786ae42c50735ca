//! `--json`: one object with what the tables show, built from the same views
//! and checks. Fields are declared in alphabetical order, the order the keys
//! print in; scripts read them by name.

use super::args::Options;
use super::collect::{
    DeviceSource, Iface, NodeView, Placement, PodView, QosObs, SettingObs, SettingState,
};
use super::render::{pod_from, shown_gids};
use super::verdicts::{checked_address, exit_code, locate_in, sysctl_ok, Check};
use crate::rdma::gid;
use crate::rdma::NetnsMode;
use crate::topology::verdict::Verdict;
use crate::topology::{Bdf, PciNode};
use serde::{Serialize, Serializer};
use std::path::Path;

/// Pretty JSON and a newline, as every `--json` run ends.
pub fn text(v: &impl Serialize) -> String {
    terminal_safe(&(serde_json::to_string_pretty(v).unwrap_or_default() + "\n"))
}

/// serde_json escapes C0 controls only; C1 (U+0080..U+009F: U+009B is the
/// 8-bit CSI) and the line separators reach a terminal raw. Outside strings
/// JSON holds none of them, so escaping every one keeps the JSON valid.
fn terminal_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if ('\u{80}'..='\u{9f}').contains(&c) || c == '\u{2028}' || c == '\u{2029}' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// What stopped the inspection, on one line, for a script that reads
/// stdout only.
pub fn stopped(error: &str) -> String {
    #[derive(Serialize)]
    struct Stopped<'a> {
        error: &'a str,
    }
    terminal_safe(&(serde_json::to_string(&Stopped { error }).unwrap_or_default() + "\n"))
}

#[derive(Serialize)]
pub struct CheckJson<'a> {
    device: Option<&'a str>,
    fix: Option<&'a str>,
    ifname: Option<&'a str>,
    name: &'a str,
    pass: bool,
    reason: &'a str,
}

pub fn check(c: &Check) -> CheckJson<'_> {
    CheckJson {
        device: c.device.as_deref(),
        fix: c.fix.as_deref(),
        ifname: c.ifname.as_deref(),
        name: c.name,
        pass: c.pass,
        reason: &c.reason,
    }
}

/// One setting: `state` is `set` (with its `value`), `unset`, `n/a` (no
/// file to read) or `unreadable` (with the `error`).
#[derive(Serialize)]
struct SettingJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    path: &'a Path,
    state: &'static str,
    value: Option<u32>,
}

fn setting_json(o: &SettingObs) -> SettingJson<'_> {
    let (state, value, error) = match &o.state {
        SettingState::NoFile => ("n/a", None, None),
        SettingState::Unreadable(e) => ("unreadable", None, Some(e.as_str())),
        SettingState::Value(None) => ("unset", None, None),
        SettingState::Value(Some(n)) => ("set", Some(*n), None),
    };
    SettingJson {
        error,
        path: &o.path,
        state,
        value,
    }
}

/// Every setting read, as an object keyed by `Setting::key()` in
/// alphabetical order, as every key prints. Written as a map from the list
/// itself: a BTreeMap of them would be one more map type in the binary.
struct Settings<'a>(&'a [SettingObs]);

impl Serialize for Settings<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        // Insertion sort: a handful of keys, and the slice sort's instance
        // for them measured 3.6 KB of the static binary.
        let mut sorted: Vec<&SettingObs> = self.0.iter().collect();
        for i in 1..sorted.len() {
            let mut j = i;
            while j > 0 && sorted[j - 1].key > sorted[j].key {
                sorted.swap(j - 1, j);
                j -= 1;
            }
        }
        ser.collect_map(sorted.into_iter().map(|o| (o.key, setting_json(o))))
    }
}

fn mode_word(mode: NetnsMode) -> &'static str {
    match mode {
        NetnsMode::Shared => "shared",
        NetnsMode::Exclusive => "exclusive",
    }
}

// ---------------------------------------------------------------------------
// Node view

#[derive(Serialize)]
pub struct Node<'a> {
    checks: Vec<CheckJson<'a>>,
    devices: Vec<Device<'a>>,
    mode: &'static str,
    /// `Y` or `N`, as `module/ib_core/parameters/netns_mode` prints it.
    netns_mode: char,
    pass: bool,
    sysfs_root: &'a Path,
    topology: Topology,
    view: &'static str,
}

/// The node's GPUs and RDMA ports, where NCCL places them.
#[derive(Serialize)]
struct Topology {
    gpus: Vec<Function>,
    nics: Vec<Function>,
}

#[derive(Serialize)]
struct Function {
    numa: Option<i32>,
    pci: Bdf,
    rdma: Vec<String>,
    /// Host bridge and root port, as the text groups them.
    root: String,
}

fn functions(nodes: &[PciNode]) -> Vec<Function> {
    nodes
        .iter()
        .map(|n| Function {
            numa: n.numa.filter(|n| *n >= 0),
            pci: n.bdf,
            rdma: n.rdma.clone(),
            root: n.root(),
        })
        .collect()
}

#[derive(Serialize)]
struct Device<'a> {
    device: &'a str,
    netdevs: &'a [String],
    pci: Option<&'a str>,
    pf: Option<&'a str>,
    port: u32,
    port_state: Option<&'a str>,
    settings: Settings<'a>,
}

pub fn node<'a>(node: &'a NodeView, checks: &'a [Check]) -> Node<'a> {
    Node {
        checks: checks.iter().map(check).collect(),
        devices: node
            .devices
            .iter()
            .map(|d| Device {
                device: &d.name,
                netdevs: &d.netdevs,
                pci: d.pci.as_deref(),
                pf: d.pf.as_deref(),
                port: d.port,
                port_state: d.port_state.as_deref(),
                settings: Settings(&d.settings),
            })
            .collect(),
        mode: mode_word(node.mode),
        netns_mode: node.mode.letter(),
        pass: exit_code(checks) == 0,
        sysfs_root: &node.sysfs_root,
        topology: Topology {
            gpus: functions(&node.topology.gpus),
            nics: functions(&node.topology.nics),
        },
        view: "node",
    }
}

// ---------------------------------------------------------------------------
// Pod view

#[derive(Serialize)]
pub struct Pod<'a> {
    char_devices: Option<&'a [String]>,
    checks: Vec<CheckJson<'a>>,
    gid_index: u32,
    interfaces: Vec<Interface<'a>>,
    mode: &'static str,
    netns: &'a Path,
    /// `Y` or `N`, as `module/ib_core/parameters/netns_mode` prints it.
    netns_mode: char,
    not_rails: Vec<NotRail<'a>>,
    pass: bool,
    /// `null` when no pod is known for the netns.
    placement: Option<PlacementJson<'a>>,
    rdma_devices_visible: &'a [String],
    sysfs_root: &'a Path,
    sysfs_view: &'static str,
    view: &'static str,
}

#[derive(Serialize)]
struct PlacementJson<'a> {
    level: &'static str,
    pod: PodName<'a>,
    /// `--pod`, or the state entry that named the pod.
    pod_from: String,
    /// Why the pod was not judged (`null` when it was).
    skipped: Option<&'a str>,
    /// Which answer of the kubelet's the devices came from.
    source: Option<String>,
    unplaced: Vec<Unplaced<'a>>,
    verdict: Option<&'a Verdict>,
}

#[derive(Serialize)]
struct PodName<'a> {
    name: &'a str,
    namespace: &'a str,
}

#[derive(Serialize)]
struct Unplaced<'a> {
    id: &'a str,
    why: &'a str,
}

fn placement(p: &Placement) -> PlacementJson<'_> {
    let judged = p.judged.as_ref().ok();
    PlacementJson {
        level: p.level.name(),
        pod: PodName {
            name: &p.pod.name,
            namespace: &p.pod.namespace,
        },
        pod_from: pod_from(&p.from),
        skipped: p.judged.as_ref().err().map(String::as_str),
        source: judged.map(|j| format!("{:?}", j.source)),
        unplaced: judged
            .map(|j| {
                j.unmapped
                    .iter()
                    .map(|(id, why)| Unplaced { id, why })
                    .collect()
            })
            .unwrap_or_default(),
        verdict: judged.map(|j| &j.verdict),
    }
}

#[derive(Serialize)]
struct NotRail<'a> {
    ifname: &'a str,
    why: &'a str,
}

#[derive(Serialize)]
struct Interface<'a> {
    addresses: Vec<Address>,
    device: Option<&'a str>,
    device_error: Option<&'a str>,
    /// `--device`, or how `rdma::lookup` found it (`How`'s words).
    device_source: Option<String>,
    gids: Vec<Gid<'a>>,
    ifname: &'a str,
    port: u32,
    port_state: Option<&'a str>,
    /// `null` when no device was found.
    qos: Option<Qos>,
    /// `null` when no device was found: there is no setting to read.
    settings: Option<Settings<'a>>,
    sysctls: Vec<Sysctl<'a>>,
}

/// A rail's QoS on its PF: `asked` false with `qosCheck: off` or without a
/// class (every other field null then).
#[derive(Serialize)]
struct Qos {
    asked: bool,
    class: Option<u8>,
    dscp: Option<u8>,
    ecn: Option<u8>,
    /// Pause frames on that priority: (sent, received).
    pause_received: Option<u64>,
    pause_sent: Option<u64>,
    pf: Option<String>,
    pfc: Option<bool>,
    priority: Option<u8>,
    verdict: Option<&'static str>,
    why: String,
}

fn qos(q: &QosObs) -> Qos {
    let mut out = Qos {
        asked: false,
        class: None,
        dscp: None,
        ecn: None,
        pause_received: None,
        pause_sent: None,
        pf: None,
        pfc: None,
        priority: None,
        verdict: None,
        why: super::render::qos_line(q),
    };
    if let QosObs::Judged { pf, verdict, class } = q {
        let c = crate::qos::Class(*class);
        let l = verdict.landing();
        out = Qos {
            asked: true,
            class: Some(*class),
            dscp: Some(c.dscp()),
            ecn: Some(c.ecn()),
            pause_received: l.and_then(|l| l.pause).map(|p| p.received),
            pause_sent: l.and_then(|l| l.pause).map(|p| p.sent),
            pf: pf.clone(),
            pfc: l.and_then(|l| l.pfc),
            priority: l.map(|l| l.priority),
            verdict: Some(verdict.name()),
            why: verdict.to_string(),
        };
    }
    out
}

#[derive(Serialize)]
struct Address {
    address: String,
    checked: bool,
    gid: String,
    roce_v2_index: Option<u32>,
}

#[derive(Serialize)]
struct Gid<'a> {
    gid: Option<String>,
    index: u32,
    netdev: Option<&'a str>,
    #[serde(rename = "type")]
    gid_type: Option<&'a str>,
}

#[derive(Serialize)]
struct Sysctl<'a> {
    key: &'a str,
    ok: bool,
    recommended: &'a str,
    value: Option<&'a str>,
}

pub fn pod<'a>(pod: &'a PodView, opts: &Options, checks: &'a [Check]) -> Pod<'a> {
    Pod {
        char_devices: pod.char_devices.as_deref(),
        checks: checks.iter().map(check).collect(),
        gid_index: opts.gid_index,
        interfaces: pod
            .interfaces
            .iter()
            .map(|i| interface(i, opts.gid_index))
            .collect(),
        mode: mode_word(pod.mode),
        netns: &pod.netns,
        netns_mode: pod.mode.letter(),
        not_rails: pod
            .not_rails
            .iter()
            .map(|(ifname, why)| NotRail { ifname, why })
            .collect(),
        pass: exit_code(checks) == 0,
        placement: pod.placement.as_ref().map(placement),
        rdma_devices_visible: &pod.visible_devices,
        sysfs_root: &pod.sysfs_root,
        sysfs_view: pod.sysfs,
        view: "pod",
    }
}

fn interface(i: &Iface, gid_index: u32) -> Interface<'_> {
    let want = checked_address(&i.addrs).map(|(g, _)| g);
    let (device, source, error) = match &i.device {
        Ok((d, DeviceSource::Forced)) => (Some(d.as_str()), Some("--device".into()), None),
        Ok((d, DeviceSource::Lookup(how))) => (Some(d.as_str()), Some(how.to_string()), None),
        Err(e) => (None, None, Some(e.as_str())),
    };
    Interface {
        addresses: i
            .addrs
            .iter()
            .map(|(ip, prefix)| {
                let g = gid::of_address(ip);
                Address {
                    address: format!("{ip}/{prefix}"),
                    checked: want == Some(g),
                    gid: gid::format_gid(&g),
                    roce_v2_index: locate_in(&i.gids, &g),
                }
            })
            .collect(),
        device,
        device_error: error,
        device_source: source,
        gids: shown_gids(&i.gids, gid_index)
            .into_iter()
            .map(|(index, e)| Gid {
                gid: e.gid.as_ref().map(gid::format_gid),
                index: *index,
                netdev: e.ndev.as_deref(),
                gid_type: e.gid_type.as_deref(),
            })
            .collect(),
        ifname: &i.ifname,
        port: i.port,
        port_state: i.port_state.as_deref(),
        qos: i.qos.as_ref().map(qos),
        settings: i.device.is_ok().then_some(Settings(&i.settings)),
        sysctls: i
            .sysctls
            .iter()
            .map(|s| Sysctl {
                key: &s.key,
                ok: sysctl_ok(s),
                recommended: &s.recommended,
                value: s.value.as_deref().ok(),
            })
            .collect(),
    }
}
