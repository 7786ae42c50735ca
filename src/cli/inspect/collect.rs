//! Everything inspect reads, assembled into plain data: the node view (every
//! RDMA device of the host's sysfs) and the pod view (each rail interface of
//! a pod, read on a thread inside its netns). Nothing here judges or formats:
//! the verdicts and the tables are functions of these structs alone.
//!
//! Every sysfs read goes through a `sysfs::View`, and every RDMA lookup
//! through `rdma/`, the code ADD itself uses, so inspect sees what ADD sees.

use super::args::{Options, DEFAULT_PORT};
use crate::cli::errors::{cause, message};
use crate::cni::config::{SysctlSetting, DEFAULT_SYSCTLS};
use crate::cni::env::{natural_cmp, PodRef};
use crate::cni::{CniError, CniResult};
use crate::idle::{self, Idle};
use crate::netlink::{Link, Netlink};
use crate::netns::{Lookup, NetNs, NsId};
use crate::node::NodeConfig;
use crate::placement;
use crate::podresources::Source;
use crate::rdma::gid::{self, GidEntry};
use crate::rdma::lookup::{self, CrossCheck, How, Names};
use crate::rdma::reach::{PodSide, Reach, Sysfs};
use crate::rdma::setting::{PodIface, Value, Views};
use crate::rdma::{class_dir, is_safe_component, port_state, NetnsMode, RdmaPort};
use crate::settings::SETTINGS;
use crate::sysctl;
use crate::sysfs::{SysfsError, View};
use crate::topology::path::DEFAULT_GDR_LEVEL;
use crate::topology::verdict::Verdict;
use crate::topology::{pci, PathType, PciNode};
use anyhow::{bail, Context, Result};
use std::cmp::Ordering;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// What a setting's file showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingState {
    /// Nothing to read without a change: no `tc/<port>/traffic_class` (not
    /// an MLNX_OFED/DOCA driver), no rdma_cm configfs directory of the device.
    NoFile,
    Unreadable(String),
    Value(Value),
}

/// One registered setting (`crate::settings`) of a device port, as inspect
/// read it: changing nothing (`Setting::peek`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingObs {
    pub key: &'static str,
    pub state: SettingState,
    /// Its file, as a fix names it.
    pub path: PathBuf,
}

/// The setting `key` among those read.
pub fn setting<'a>(read: &'a [SettingObs], key: &str) -> Option<&'a SettingObs> {
    read.iter().find(|o| o.key == key)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDevice {
    pub name: String,
    pub pci: Option<String>,
    pub pf: Option<String>,
    pub netdevs: Vec<String>,
    pub port: u32,
    pub port_state: Option<String>,
    /// Every registered setting, in the list's order.
    pub settings: Vec<SettingObs>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub sysfs_root: PathBuf,
    /// What the text adds beside the root (`sysfs::Host::root_note`): "a
    /// test tree" for a tree a test (or a demo) made, nothing for the kernel's.
    pub root_note: Option<&'static str>,
    pub mode: NetnsMode,
    pub devices: Vec<NodeDevice>,
    /// `--device` named a device that is not there.
    pub missing: Option<String>,
    /// Idle VFs holding a class (`crate::idle`).
    pub idle: Vec<Idle>,
    pub topology: Topology,
}

/// The node's GPUs and RDMA ports, placed as NCCL places them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    pub gpus: Vec<PciNode>,
    pub nics: Vec<PciNode>,
}

/// How an interface's RDMA device was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSource {
    /// `--device`: the operator's word, not looked up.
    Forced,
    /// `rdma::lookup`, as ADD finds it.
    Lookup(How),
}

/// The interface's RDMA device and how it was found, or why none was.
pub type DeviceLookup = Result<(String, DeviceSource), String>;

/// One rail sysctl as read in the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlObs {
    pub key: String,
    pub value: Result<String, String>,
    pub recommended: String,
}

/// One rail interface of the pod, as read from inside its netns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub ifname: String,
    pub device: DeviceLookup,
    pub port: u32,
    pub port_state: Option<String>,
    pub addrs: Vec<(IpAddr, u8)>,
    /// The whole table, unused entries included.
    pub gids: Vec<(u32, GidEntry)>,
    /// Every registered setting, in the list's order; none when no device
    /// was found.
    pub settings: Vec<SettingObs>,
    pub sysctls: Vec<SysctlObs>,
    /// The PCI function of the device (the VF): the rail placed against
    /// the pod's GPUs.
    pub pci: Option<String>,
    /// Where its class lands on its PF; `None` until asked from the host's
    /// netns ([`qos_of`]), and where no device was found.
    pub qos: Option<QosObs>,
}

/// A rail's QoS on its PF, as `rail_qos` judges it at ADD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QosObs {
    /// `qosCheck: off`: the PF is not asked.
    Off,
    /// The class file holds no class (nor the ToS one): the class is the
    /// application's, nothing to judge.
    NoClass,
    Judged {
        /// The PF's netdev (or its PCI address), `None` without a PF.
        pf: Option<String>,
        verdict: crate::qos::Verdict,
        class: u8,
    },
}

/// Each rail's QoS, asked from this (the host's) netns: a PF stays there.
/// One judge for all, so a PF shared by the pod's rails is asked once.
pub fn qos_of(node: &NodeConfig, host: &View, interfaces: &mut [Iface]) {
    let mut judge = crate::rail_qos::Judge::new(&crate::rail_qos::HOST_DCB);
    for i in interfaces.iter_mut().filter(|i| i.device.is_ok()) {
        let class = ["trafficClass", "rdmaCmTos"].iter().find_map(|k| {
            match setting(&i.settings, k).map(|o| &o.state) {
                Some(SettingState::Value(Some(v))) => u8::try_from(*v).ok(),
                _ => None,
            }
        });
        i.qos = Some(judge_rail(node, &mut judge, host, i.pci.as_deref(), class));
    }
}

/// One rail's QoS: the class `class` on the PCI function `pci`, judged
/// against the node config's fabric unless `qosCheck` is off.
pub fn judge_rail(
    node: &NodeConfig,
    judge: &mut crate::rail_qos::Judge,
    host: &View,
    pci: Option<&str>,
    class: Option<u8>,
) -> QosObs {
    match (node.qos.check, class) {
        (crate::qos::QosCheck::Off, _) => QosObs::Off,
        (_, None) => QosObs::NoClass,
        (_, Some(c)) => {
            let j = judge.rail(
                host,
                pci,
                crate::qos::Class(c),
                node.qos.fabric,
                std::time::Instant::now() + crate::rail_qos::DCB_TIMEOUT,
            );
            QosObs::Judged {
                pf: j.pf,
                verdict: j.verdict,
                class: c,
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub netns: PathBuf,
    pub pid: Option<u32>,
    pub sysfs_root: PathBuf,
    pub mode: NetnsMode,
    /// Which sysfs showed the pod's devices, in words
    /// (`sysfs::Host::pod_sysfs_words`): a test tree's `netns/<inode>/`,
    /// the host's /sys read from the pod netns (shared mode), or a sysfs
    /// made inside it (exclusive mode).
    pub sysfs: &'static str,
    pub visible_devices: Vec<String>,
    /// `/dev/infiniband` of the pod (`--pid` only; `None` when unreadable).
    pub char_devices: Option<Vec<String>>,
    pub interfaces: Vec<Iface>,
    /// Interfaces that are not rails, with why (or a missing `--ifname`).
    pub not_rails: Vec<(String, String)>,
    /// `None`: no pod is known for this netns.
    pub placement: Option<Placement>,
}

/// Where inspect learnt which pod the netns is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodFrom {
    /// `--pod`.
    Option,
    /// What ADD recorded for this netns (by its nsfs identity).
    Entry {
        container_id: String,
        ifname: String,
    },
}

/// The pod's GPUs against its rails, as ADD judges them.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub pod: PodRef,
    pub from: PodFrom,
    pub level: PathType,
    /// The verdict, or why there is none (`placement::Skip`'s words).
    pub judged: Result<Judged, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub source: Source,
    pub verdict: Verdict,
    /// GPU IDs that name no PCI function here, with why.
    pub unmapped: Vec<(String, String)>,
}

/// The node's sysfs: what stops the inspection when it cannot be had.
pub fn open_sysfs(root: &Path) -> Result<Sysfs> {
    match Sysfs::open(root) {
        Ok(sysfs) => Ok(sysfs),
        // ENOENT and ENOTDIR alike: there is no tree to read.
        Err(SysfsError::Missing) => bail!("sysfs root {} is not a directory", root.display()),
        Err(e) => Err(cause(e)).with_context(|| format!("sysfs root {}", root.display())),
    }
}

// ---------------------------------------------------------------------------
// Node view

pub fn node(opts: &Options, host: &View, node_config: &NodeConfig) -> NodeView {
    let mut names = device_names(host);
    let mut missing = None;
    if let Some(want) = &opts.device {
        names.retain(|n| n == want);
        if names.is_empty() {
            missing = Some(want.clone());
        }
    }
    let port = opts.port.unwrap_or(DEFAULT_PORT);
    let mut pci_dirs = None;
    let devices = names
        .iter()
        .map(|name| node_device(host, name, port, &mut pci_dirs))
        .collect();
    let entries = idle::node_entries(node_config);
    NodeView {
        sysfs_root: opts.sysfs_root.clone(),
        root_note: host.host().root_note(),
        mode: NetnsMode::read(host),
        devices,
        missing,
        idle: idle::find(host, &entries),
        topology: topology(host),
    }
}

/// Every GPU and RDMA port `bus/pci/devices` shows, placed; none where the
/// tree has no PCI functions to place (a test tree of class files only).
fn topology(host: &View) -> Topology {
    let placer = pci::Placer::new(host);
    Topology {
        gpus: placer.gpus().unwrap_or_default(),
        nics: placer.rdma_ports().unwrap_or_default(),
    }
}

fn node_device(
    view: &View,
    name: &str,
    port: u32,
    pci_dirs: &mut Option<Vec<String>>,
) -> NodeDevice {
    let port = RdmaPort::identify(view, name, port);
    let pci = port
        .pci
        .clone()
        .or_else(|| pci_holding(view, name, pci_dirs));
    let pci_dir = pci.as_ref().map(|p| Path::new("bus/pci/devices").join(p));
    let pf = pci_dir.as_ref().and_then(|d| {
        let name = view.link_name(&d.join("physfn")).ok()?;
        is_safe_component(&name).then_some(name)
    });
    let mut netdevs = pci_dir
        .as_ref()
        .map(|d| safe_names(view, &d.join("net")))
        .unwrap_or_default();
    if netdevs.is_empty() {
        // A device with no PCI function of its own (an SF, soft-RoCE) still
        // names its netdev in the GID table: that of entry 0, the link-local
        // GID the kernel adds for the netdev.
        netdevs.extend(gid::read_ndev(view, &port, 0));
    }
    NodeDevice {
        name: name.to_owned(),
        pci,
        pf,
        netdevs,
        port: port.port,
        port_state: port_state(view, &port),
        settings: read_settings(Views::host_only(view), &port),
    }
}

/// The PCI function whose `infiniband/` holds `dev`: the way back when the
/// class entry has no `device` link. `pci_dirs` is read once for all devices.
fn pci_holding(view: &View, dev: &str, pci_dirs: &mut Option<Vec<String>>) -> Option<String> {
    let devices = Path::new("bus/pci/devices");
    pci_dirs
        .get_or_insert_with(|| safe_names(view, devices))
        .iter()
        .find(|pci| view.exists(&devices.join(pci).join("infiniband").join(dev)))
        .cloned()
}

// ---------------------------------------------------------------------------
// Pod view

pub fn pod(
    opts: &Options,
    sysfs: &Sysfs,
    netns: PathBuf,
    node_config: &NodeConfig,
) -> Result<PodView> {
    let ns = match NetNs::lookup(&netns).map_err(cause)? {
        Lookup::Netns(ns) => ns,
        Lookup::Missing => match opts.pid {
            Some(p) => bail!("no process {p} ({} does not exist)", netns.display()),
            None => bail!("netns {} does not exist", netns.display()),
        },
        Lookup::NotNetns => bail!("{} is not a network namespace", netns.display()),
    };
    let mode = NetnsMode::read(sysfs.host());
    // The same reach as ADD's, so inspect sees what ADD sees.
    let reach = sysfs.reach();
    let shown = sysfs.host().host().pod_sysfs_words(reach == Reach::Pod);
    let in_pod = ns
        .run(|| {
            let mut side = PodSide::new(sysfs, ns.id(), "<pod sysfs>".into());
            in_pod(opts, &mut side, reach, &ns)
        })
        .map_err(cause)
        .and_then(|r| r.map_err(message))
        .with_context(|| format!("inside netns {}", netns.display()))?;
    let char_devices = opts.pid.and_then(|p| {
        // The pod's /dev, not sysfs: through the process's root.
        let dir = PathBuf::from(format!("/proc/{p}/root/dev/infiniband"));
        std::fs::read_dir(&dir).ok().map(|rd| {
            sorted_safe(
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect(),
            )
        })
    });
    let mut in_pod = in_pod;
    qos_of(node_config, sysfs.host(), &mut in_pod.interfaces);
    let placement = placement_of(opts, sysfs.host(), node_config, ns.id(), &in_pod.interfaces);
    Ok(PodView {
        placement,
        netns,
        pid: opts.pid,
        sysfs_root: opts.sysfs_root.clone(),
        mode,
        sysfs: shown,
        visible_devices: in_pod.visible_devices,
        char_devices,
        interfaces: in_pod.interfaces,
        not_rails: in_pod.not_rails,
    })
}

struct InPod {
    interfaces: Vec<Iface>,
    not_rails: Vec<(String, String)>,
    visible_devices: Vec<String>,
}

/// The RDMA port found for an interface, or why none was.
type Found = Result<(RdmaPort, DeviceSource), String>;

/// Runs on the thread inside the pod netns: rtnetlink, RDMA netlink,
/// /proc/sys/net and the GID files all answer for the reading thread's netns.
fn in_pod(opts: &Options, side: &mut PodSide, reach: Reach, ns: &NetNs) -> CniResult<InPod> {
    let mut nl = Netlink::open()?;
    let cross = CrossCheck {
        device_id: None,
        rdma_port: opts.port,
        names: Names::Inspect,
    };
    let mut not_rails = Vec::new();
    let mut rails: Vec<(Link, Found)> = Vec::new();
    match &opts.ifname {
        Some(name) => match nl.link_by_name(name)? {
            Some(link) => {
                let found = match &opts.device {
                    Some(dev) => match device_view(side, reach)? {
                        Some(view) => forced(view, dev, opts),
                        None => Err(no_pod_side()),
                    },
                    None => look_up(side, reach, &link, &cross),
                };
                rails.push((link, found));
            }
            None => not_rails.push((
                name.clone(),
                format!("there is no interface {name} in the pod"),
            )),
        },
        None => {
            let (links, odd) = nl.every_link()?;
            for o in odd {
                not_rails.push((
                    o.shown,
                    "its name is not a usable interface name (bytes that are no interface name of a rail)".into(),
                ));
            }
            for link in links {
                if link.name == "lo" {
                    continue;
                }
                match look_up(side, reach, &link, &cross) {
                    Ok((port, _)) if opts.device.as_ref().is_some_and(|d| *d != port.device) => {
                        let why = format!("its RDMA device is {}", port.device);
                        not_rails.push((link.name.clone(), why));
                    }
                    Ok(found) => rails.push((link, Ok(found))),
                    Err(why) => not_rails.push((link.name.clone(), why)),
                }
            }
        }
    }
    // None: a test tree that gives this netns nothing, so no rail was found
    // and there is nothing to read.
    let host = side.sysfs().host();
    let view = device_view(side, reach)?;
    let settings: Vec<SysctlSetting> = DEFAULT_SYSCTLS
        .iter()
        .map(|(k, v)| SysctlSetting {
            key: k.to_string(),
            value: v.to_string(),
        })
        .collect();
    let mut interfaces = Vec::new();
    for (link, found) in rails {
        let addrs = nl.addresses(link.index)?;
        let sysctls = sysctl::resolve(
            crate::syscall::Syscall::proc_sys(&crate::syscall::KERNEL),
            &settings,
            &link.name,
        )
        .into_iter()
        .map(|s| SysctlObs {
            value: sysctl::read(&s).map_err(|e| e.to_string()),
            recommended: s.value.clone(),
            key: s.key,
        })
        .collect();
        let (device, port) = match found {
            Ok((port, source)) => (Ok((port.device.clone(), source)), Some(port)),
            Err(why) => (Err(why), None),
        };
        let at = port.as_ref().zip(view);
        let read = at.map(|(p, device)| {
            let pod = Some(PodIface {
                netns: ns,
                ifname: &link.name,
            });
            read_settings(Views { device, host, pod }, p)
        });
        interfaces.push(Iface {
            ifname: link.name,
            device,
            port: port
                .as_ref()
                .map_or(opts.port.unwrap_or(DEFAULT_PORT), |p| p.port),
            port_state: at.and_then(|(p, v)| port_state(v, p)),
            addrs,
            gids: at.map(|(p, v)| gid::table(v, p)).unwrap_or_default(),
            settings: read.unwrap_or_default(),
            sysctls,
            pci: port.as_ref().and_then(|p| p.pci.clone()),
            qos: None,
        });
    }
    Ok(InPod {
        interfaces,
        not_rails,
        visible_devices: view.map(device_names).unwrap_or_default(),
    })
}

/// The pod's placement, when the pod is known: `--pod`, else the newest
/// state entry of this netns (by its nsfs identity, whatever path named it)
/// that recorded a pod. Its GPUs and VFs come from the kubelet as ADD asks
/// it (the node config's socket, checkpoint, bound); the level is
/// `--gdr-level`, else the one that ADD judged at, else NCCL's default.
fn placement_of(
    opts: &Options,
    host: &View,
    node: &NodeConfig,
    id: NsId,
    ifaces: &[Iface],
) -> Option<Placement> {
    let entries = idle::node_entries(node);
    let entry = entries
        .iter()
        .filter(|e| e.netns_id == Some(id) && e.pod.is_some())
        .max_by_key(|e| e.created_ns);
    let recorded = entry
        .and_then(|e| e.placement.as_ref())
        .and_then(|p| PathType::parse_level(&p.level));
    let (pod, from) = match (&opts.pod, entry) {
        (Some(p), _) => (p.clone(), PodFrom::Option),
        (None, Some(e)) => {
            let p = e.pod.as_ref()?;
            (
                PodRef {
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                    uid: p.uid.clone(),
                },
                PodFrom::Entry {
                    container_id: e.container_id.clone(),
                    ifname: e.ifname.clone(),
                },
            )
        }
        (None, None) => return None,
    };
    let level = opts.gdr_level.or(recorded).unwrap_or(DEFAULT_GDR_LEVEL);
    let judged = (|| {
        let (devices, source) =
            placement::pod_devices(node, Some(&pod)).map_err(|s| s.to_string())?;
        let own: Vec<(&str, &str)> = ifaces
            .iter()
            .filter_map(|i| Some((i.ifname.as_str(), i.pci.as_deref()?)))
            .collect();
        let j = placement::judge(host, node, &devices, &own, level).map_err(|s| s.to_string())?;
        Ok(Judged {
            source,
            verdict: j.verdict,
            unmapped: j.unmapped,
        })
    })();
    Some(Placement {
        pod,
        from,
        level,
        judged,
    })
}

/// The device ADD would find, by the same lookup.
fn look_up(side: &mut PodSide, reach: Reach, link: &Link, cross: &CrossCheck) -> Found {
    lookup::locate(&crate::syscall::KERNEL, side, reach, link, cross)
        .map(|f| (f.port, DeviceSource::Lookup(f.how)))
        .map_err(|e| e.to_string())
}

/// Where the pod's devices are read: the host's sysfs, or the pod's side.
fn device_view<'s>(side: &'s mut PodSide, reach: Reach) -> CniResult<Option<&'s View>> {
    match reach {
        Reach::Host => Ok(Some(side.sysfs().host())),
        Reach::Pod => side
            .view()
            .map_err(|e| CniError::io("make the pod's sysfs", e)),
    }
}

fn no_pod_side() -> String {
    "the test tree gives this pod's netns no view (netns/<inode>/): no device is visible from the pod".into()
}

/// `--device`: taken as given, as long as the view has it.
fn forced(view: &View, dev: &str, opts: &Options) -> Found {
    if !view.exists(&class_dir(dev)) {
        return Err(format!(
            "RDMA device {dev} (--device) is not under {}",
            view.show(Path::new("class/infiniband"))
        ));
    }
    let port = RdmaPort::identify(view, dev, opts.port.unwrap_or(DEFAULT_PORT));
    Ok((port, DeviceSource::Forced))
}

// ---------------------------------------------------------------------------
// Reads shared by both views

/// Every registered setting of the port, read without a change.
fn read_settings(at: Views, port: &RdmaPort) -> Vec<SettingObs> {
    SETTINGS
        .iter()
        .map(|s| SettingObs {
            key: s.key(),
            state: match s.peek(at, port) {
                Ok(None) => SettingState::NoFile,
                Ok(Some(v)) => SettingState::Value(v),
                Err(e) => SettingState::Unreadable(e.msg),
            },
            path: PathBuf::from(s.show_path(at, port)),
        })
        .collect()
}

/// The RDMA devices the view shows, as an operator lists them.
fn device_names(view: &View) -> Vec<String> {
    safe_names(view, Path::new("class/infiniband"))
}

/// A directory's names that are fit for a path and a table, in natural order.
fn safe_names(view: &View, rel: &Path) -> Vec<String> {
    sorted_safe(view.list(rel).unwrap_or_default())
}

fn sorted_safe(names: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = names.into_iter().filter(|n| is_safe_component(n)).collect();
    // Insertion sort: the names come sorted bytewise from `View::list` (few
    // inversions) and are tens at most, and another instance of the generic
    // stable sort would add about 4 KB to a binary copied to every node.
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && natural_cmp(&v[j - 1], &v[j]) == Ordering::Greater {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_of_device_names() {
        let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_1", "ib0", "mlx5_02x"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["ib0", "mlx5_1", "mlx5_2", "mlx5_02x", "mlx5_10"]);
        assert_eq!(
            sorted_safe(vec!["mlx5_10".into(), "../x".into(), "mlx5_9".into()]),
            ["mlx5_9", "mlx5_10"],
            "a name unfit for a path is left out"
        );
        let names = [
            "rxe0", "mlx5_10", "mlx5_2", "ib0", "mlx5_1", "mlx5_02x", "mlx5_10",
        ];
        let mut want = names.to_vec();
        want.sort_by(|a, b| natural_cmp(a, b));
        let got = sorted_safe(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(got, want, "the same order as a stable sort");
    }

    /// The node view of a test tree without root: a VF found by its PCI
    /// function's `infiniband/` (no `device` link), its PF, a netdev taken
    /// from the GID table, and a device without a class file.
    #[test]
    fn node_view_of_a_test_tree() {
        let d = std::env::temp_dir().join(format!("rt-inspect-node-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let pci = d.join("bus/pci/devices");
        std::fs::create_dir_all(pci.join("0000:0c:00.2/infiniband/mlx5_2")).unwrap();
        std::os::unix::fs::symlink("../0000:0c:00.0", pci.join("0000:0c:00.2/physfn")).unwrap();
        let dev = d.join("class/infiniband/mlx5_2");
        std::fs::create_dir_all(dev.join("tc/1")).unwrap();
        std::fs::write(dev.join("tc/1/traffic_class"), "Global tclass=96\n").unwrap();
        std::fs::create_dir_all(dev.join("ports/1/gid_attrs/ndevs")).unwrap();
        std::fs::write(dev.join("ports/1/gid_attrs/ndevs/0"), "ens1f0v2\n").unwrap();
        std::fs::write(dev.join("ports/1/state"), "1: DOWN\n").unwrap();
        std::fs::create_dir_all(d.join("class/infiniband/rxe0")).unwrap();
        let view = View::open(&d).unwrap();
        let mut dirs = None;
        let vf = node_device(&view, "mlx5_2", 1, &mut dirs);
        assert_eq!(vf.pci.as_deref(), Some("0000:0c:00.2"));
        assert_eq!(vf.pf.as_deref(), Some("0000:0c:00.0"));
        assert_eq!(vf.netdevs, ["ens1f0v2"]);
        assert_eq!(vf.port_state.as_deref(), Some("1: DOWN"));
        let class = |d: &NodeDevice| setting(&d.settings, "trafficClass").unwrap().state.clone();
        assert_eq!(class(&vf), SettingState::Value(Some(96)));
        let rxe = node_device(&view, "rxe0", 1, &mut dirs);
        assert_eq!(class(&rxe), SettingState::NoFile);
        assert_eq!((rxe.pci, rxe.pf), (None, None));
        assert_eq!(device_names(&view), ["mlx5_2", "rxe0"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
