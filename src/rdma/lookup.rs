//! From the pod's netdev to its RDMA device and port, asked from a thread
//! inside the pod netns, in this order:
//!
//! 1. RDMA netlink (`nldev`): the port whose netdev is `CNI_IFNAME`, by index
//!    AND name. The kernel's own answer, for every RoCE driver (a VF, an SF, a
//!    bond, soft-RoCE) in both netns modes; it also gives the port.
//! 2. Where RDMA netlink is unavailable (no ib_core; kernels and OFED builds
//!    that answer only in the initial netns) or knows no port for the netdev:
//!    the PCI address Multus gave (`deviceID`/`pciBusID`), through sysfs.
//! 3. Else the netdev's parent device as rtnetlink reports it.
//!
//! A `deviceID` or `rdmaPort` that disagrees with RDMA netlink is an error
//! naming both: one of them points at another rail.
//!
//! `roce-tune inspect` asks the same way (`locate_link` with
//! `Asker::Inspect`), so the device it shows is the one ADD would take; only
//! the settings a failure names differ (its `--device` and `--port`).

use super::device::{self, Found};
use super::nldev::{self, PortMatch, RdmaNetlink};
use super::RdmaPort;
use crate::cni::config::PciAddr;
use crate::cni::{code, CniError, CniResult};
use crate::netlink::{Link, Netlink};
use crate::sysfs::View;

/// How the device was found, for logs and `inspect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    RdmaNetlink,
    DeviceId(String),
    Parent(String),
}

impl std::fmt::Display for How {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            How::RdmaNetlink => f.write_str("RDMA netlink"),
            How::DeviceId(pci) => write!(f, "deviceID {pci}"),
            How::Parent(p) => write!(f, "parent device {p}"),
        }
    }
}

/// Who asks, so that a failure names the setting this asker can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asker {
    /// ADD and CHECK: the network config's `deviceID` and `rdmaPort`.
    Plugin,
    /// `roce-tune inspect`: its `--device` and `--port`.
    Inspect,
}

impl Asker {
    fn port_setting(self) -> &'static str {
        match self {
            Asker::Plugin => "rdmaPort",
            Asker::Inspect => "--port",
        }
    }

    /// The way round a netdev that reports no parent device.
    pub fn instead_of_parent(self) -> &'static str {
        match self {
            Asker::Plugin => "give the VF's PCI address as deviceID",
            Asker::Inspect => "give --device DEV",
        }
    }
}

/// What RDMA netlink said about the netdev.
#[derive(Debug)]
pub enum Answer {
    /// The device and port carrying the netdev.
    Port(String, u32),
    /// It answered, and no port in this netns carries the netdev.
    NoPort { devices: usize },
    /// It could not be asked; why, for the message if the fallback fails too.
    Unusable(String),
}

/// Ask RDMA netlink from the calling thread's netns. `hint` (the device
/// `deviceID` names, when sysfs knows it) is asked first: one port dump
/// instead of one per device on a node with dozens of RDMA devices.
pub fn ask_netlink(link: &Link, hint: Option<&str>) -> CniResult<Answer> {
    let mut nl = match RdmaNetlink::open() {
        Ok(nl) => nl,
        Err(e) => return Ok(Answer::Unusable(e.to_string())),
    };
    let devices = match nl.devices() {
        Ok(d) => d,
        Err(e) => return Ok(Answer::Unusable(e.to_string())),
    };
    if let Some(d) = hint.and_then(|h| devices.iter().find(|d| d.name.as_str() == Some(h))) {
        if let Ok(ports) = nl.ports_of(d.index) {
            if let PortMatch::One(p) = nldev::port_for_netdev(&ports, link.index, &link.name) {
                if let Some(name) = p.dev_name.as_str() {
                    return Ok(Answer::Port(name.to_owned(), p.port));
                }
            }
        }
    }
    let ports = match nl.ports() {
        Ok(p) => p,
        Err(e) => return Ok(Answer::Unusable(e.to_string())),
    };
    match nldev::port_for_netdev(&ports, link.index, &link.name) {
        PortMatch::One(p) => match p.dev_name.as_str() {
            Some(name) => Ok(Answer::Port(name.to_owned(), p.port)),
            None => Err(CniError::new(
                code::RDMA_DEVICE,
                format!(
                    "RDMA netlink names the device of {} with {}",
                    link.name, p.dev_name
                ),
            )),
        },
        PortMatch::None => Ok(Answer::NoPort {
            devices: devices.len(),
        }),
        PortMatch::Ambiguous(list) => Err(CniError::new(
            code::RDMA_DEVICE,
            format!(
                "RDMA device of {} is ambiguous: RDMA netlink reports {}",
                link.name,
                list.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The pod's RDMA port for `ifname`, through `view` (the sysfs that shows
/// the pod's device). Runs on a thread inside the pod netns.
pub fn locate(
    view: &View,
    ifname: &str,
    device_id: Option<&PciAddr>,
    rdma_port: Option<u32>,
    exclusive: bool,
) -> CniResult<(RdmaPort, How)> {
    let link = Netlink::open()?.link_by_name(ifname)?.ok_or_else(|| {
        CniError::new(
            code::RDMA_DEVICE,
            format!("no RDMA device for {ifname}: there is no interface {ifname} in the pod netns"),
        )
    })?;
    let wanted = Wanted {
        device_id,
        rdma_port,
        exclusive,
        asker: Asker::Plugin,
    };
    locate_link(view, &link, &wanted)
}

/// What the asker knows besides the netdev, each of which RDMA netlink's
/// answer is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub device_id: Option<&'a PciAddr>,
    pub rdma_port: Option<u32>,
    /// The RDMA netns mode is exclusive: a failure then names the rdma plugin.
    pub exclusive: bool,
    pub asker: Asker,
}

/// `locate` for a link already read from rtnetlink (`inspect` reads them
/// all). Runs on a thread inside the pod netns.
pub fn locate_link(view: &View, link: &Link, wanted: &Wanted) -> CniResult<(RdmaPort, How)> {
    let by_pci = wanted.device_id.map(|pci| (pci, device::by_pci(view, pci)));
    let hint = match &by_pci {
        Some((_, Ok(f))) => Some(f.device.as_str()),
        _ => None,
    };
    let answer = ask_netlink(link, hint)?;
    let (device, port, how) = decide(link, &answer, by_pci, view, wanted)?;
    Ok((RdmaPort::identify(view, &device, port), how))
}

/// Netlink's answer first, cross-checked; the sysfs lookups where it has none.
fn decide(
    link: &Link,
    answer: &Answer,
    by_pci: Option<(&PciAddr, CniResult<Found>)>,
    view: &View,
    wanted: &Wanted,
) -> CniResult<(String, u32, How)> {
    if let Answer::Port(dev, port) = answer {
        if let Some((pci, Ok(found))) = &by_pci {
            if found.device != *dev {
                return Err(CniError::new(
                    code::RDMA_DEVICE,
                    format!(
                        "deviceID {pci} is RDMA device {}, but RDMA netlink reports that {} is on {dev} port {port}: the network's deviceID and the pod's interface are different VFs",
                        found.device, link.name
                    ),
                ));
            }
        }
        if let Some(want) = wanted.rdma_port.filter(|p| p != port) {
            let setting = wanted.asker.port_setting();
            return Err(CniError::new(
                code::RDMA_DEVICE,
                format!(
                    "{setting} is {want}, but RDMA netlink reports that {} is on {dev} port {port}: remove {setting} (the port comes from RDMA netlink) or fix it",
                    link.name
                ),
            ));
        }
        return Ok((dev.clone(), *port, How::RdmaNetlink));
    }
    let port = wanted.rdma_port.unwrap_or(1);
    let found = match by_pci {
        Some((pci, found)) => found.map(|f| (f, How::DeviceId(pci.to_string()))),
        None => device::by_link_for(view, link, wanted.asker).map(|f| {
            let how = How::Parent(format!("{} {}", f.bus, f.parent));
            (f, how)
        }),
    };
    found
        .map(|(f, how)| (f.device, port, how))
        .map_err(|e| {
            let netlink = match answer {
                Answer::NoPort { devices: 0 } => "RDMA netlink shows no RDMA device in the pod netns".to_string(),
                Answer::NoPort { devices } => format!(
                    "RDMA netlink shows {devices} RDMA devices, none with {} as its netdev",
                    link.name
                ),
                Answer::Unusable(why) => why.clone(),
                Answer::Port(..) => unreachable!("handled above"),
            };
            let mut msg = format!("{}; {netlink}", e.msg);
            if wanted.exclusive {
                msg.push_str(
                    "; the RDMA netns mode is exclusive (netns_mode N), so the VF's RDMA device must be moved into the pod first: list the rdma plugin before roce-tune in the chain (metaPlugins)",
                );
            }
            CniError::new(code::RDMA_DEVICE, msg)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            index: 3,
            name: "net1".into(),
            parent_dev: None,
            parent_bus: None,
        }
    }

    fn tree(tag: &str, devs: &[(&str, &str)]) -> (std::path::PathBuf, View) {
        let d = std::env::temp_dir().join(format!("rt-lookup-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for (pci, dev) in devs {
            std::fs::create_dir_all(d.join(format!("bus/pci/devices/{pci}/infiniband/{dev}")))
                .unwrap();
        }
        std::fs::create_dir_all(&d).unwrap();
        let v = View::open(&d).unwrap();
        (d, v)
    }

    fn wanted(device_id: Option<&PciAddr>, rdma_port: Option<u32>, asker: Asker) -> Wanted<'_> {
        Wanted {
            device_id,
            rdma_port,
            exclusive: false,
            asker,
        }
    }

    #[test]
    fn netlink_wins_and_is_cross_checked() {
        let (d, view) = tree(
            "x",
            &[("0000:0c:00.2", "mlx5_2"), ("0000:0c:00.3", "mlx5_3")],
        );
        let pci = PciAddr::parse("0000:0c:00.2").unwrap();
        let by_pci = || Some((&pci, device::by_pci(&view, &pci)));
        let plugin = wanted(Some(&pci), None, Asker::Plugin);
        let ans = Answer::Port("mlx5_2".into(), 1);
        let ok = decide(&link(), &ans, by_pci(), &view, &plugin);
        assert_eq!(ok.unwrap(), ("mlx5_2".into(), 1, How::RdmaNetlink));
        let other = Answer::Port("mlx5_3".into(), 1);
        let e = decide(&link(), &other, by_pci(), &view, &plugin).unwrap_err();
        assert_eq!(e.code, 100);
        assert!(
            e.msg.contains("mlx5_2") && e.msg.contains("mlx5_3"),
            "{}",
            e.msg
        );
        let e = decide(
            &link(),
            &ans,
            None,
            &view,
            &wanted(None, Some(2), Asker::Plugin),
        )
        .unwrap_err();
        assert!(
            e.msg.contains("rdmaPort is 2") && e.msg.contains("port 1"),
            "{}",
            e.msg
        );
        // inspect's lever is its --port option, not the config key.
        let e = decide(
            &link(),
            &ans,
            None,
            &view,
            &wanted(None, Some(2), Asker::Inspect),
        )
        .unwrap_err();
        assert!(
            e.msg.starts_with("--port is 2") && e.msg.contains("remove --port"),
            "{}",
            e.msg
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn without_netlink_the_pci_address_then_the_parent() {
        let (d, view) = tree("y", &[("0000:0c:00.2", "mlx5_2")]);
        let pci = PciAddr::parse("0000:0c:00.2").unwrap();
        let gone = Answer::Unusable("no ib_core".into());
        let r = decide(
            &link(),
            &gone,
            Some((&pci, device::by_pci(&view, &pci))),
            &view,
            &wanted(Some(&pci), Some(2), Asker::Plugin),
        );
        assert_eq!(
            r.unwrap(),
            ("mlx5_2".into(), 2, How::DeviceId(pci.to_string()))
        );
        // No deviceID and a veth (no parent): 100, naming what netlink said,
        // and in exclusive mode the rdma plugin.
        let none = Answer::NoPort { devices: 0 };
        let exclusive = Wanted {
            exclusive: true,
            ..wanted(None, None, Asker::Plugin)
        };
        let e = decide(&link(), &none, None, &view, &exclusive).unwrap_err();
        assert_eq!(e.code, 100);
        assert!(
            e.msg.contains("no RDMA device in the pod netns"),
            "{}",
            e.msg
        );
        assert!(
            e.msg.contains("exclusive") && e.msg.contains("rdma plugin"),
            "{}",
            e.msg
        );
        assert!(e.msg.contains("as deviceID"), "{}", e.msg);
        // The same miss, asked by inspect, names inspect's --device.
        let e = decide(
            &link(),
            &gone,
            None,
            &view,
            &wanted(None, None, Asker::Inspect),
        )
        .unwrap_err();
        assert!(
            e.msg.contains("no parent device") && e.msg.contains("give --device DEV; no ib_core"),
            "{}",
            e.msg
        );
        assert!(!e.msg.contains("deviceID"), "{}", e.msg);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_parent_device_is_how_inspect_finds_it_without_netlink() {
        let (d, view) = tree("z", &[("0000:0c:00.2", "mlx5_2")]);
        let l = Link {
            parent_dev: Some("0000:0c:00.2".into()),
            parent_bus: Some("pci".into()),
            ..link()
        };
        let none = Answer::NoPort { devices: 0 };
        let r = decide(&l, &none, None, &view, &wanted(None, None, Asker::Inspect));
        assert_eq!(
            r.unwrap(),
            ("mlx5_2".into(), 1, How::Parent("pci 0000:0c:00.2".into()))
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
