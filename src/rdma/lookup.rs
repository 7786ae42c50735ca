//! From the pod's netdev to its RDMA device and port. The rule
//! (docs/design.md, "Which device is the pod's"): **the device roce-tune
//! touches is the one whose netdev is CNI_IFNAME in the pod's own netns, as
//! the kernel says from inside that netns.** A network config is tenant
//! input, so its `deviceID`/`pciBusID` and `rdmaPort` are cross-checks,
//! never the source:
//!
//! 1. RDMA netlink (`nldev`), asked from inside the pod netns: the port whose
//!    netdev is the pod's, by index AND name. The kernel reports a port's
//!    netdev only to a socket in that netdev's netns, so the answer is the
//!    pod's own (a VF, an SF, a bond, soft-RoCE, in both netns modes).
//! 2. Where RDMA netlink has no port for the netdev (or is unusable: no
//!    ib_core; kernels and OFED builds that answer only in the initial
//!    netns), the netdev must prove to be a device's from the pod's side:
//!    rtnetlink's parent device asked in the pod netns, or the
//!    `class/net/<ifname>/device` link of the sysfs the pod netns sees; the
//!    RDMA device is then that parent's. A veth or a macvlan has none: no RDMA
//!    device to tune, whatever the config says.
//!
//! In both cases a `deviceID` that is not the netdev's PCI function, and an
//! `rdmaPort` that is not the port, are errors naming both.
//!
//! `roce-tune inspect` asks the same way, so the device it shows is the one
//! ADD would take; only the names of the settings a failure mentions differ
//! (`Names`).

use super::device::{self, FindError, Parent};
use super::reach::{PodSide, Reach};
use super::{is_safe_component, RdmaPort};
use crate::cni::config::PciAddr;
pub use crate::netlink::nldev::Answer;
use crate::netlink::Link;
use crate::syscall::Syscall;
use crate::sysfs::{SysfsError, View};
use std::fmt;
use std::path::PathBuf;

/// How the device was found, for logs and `inspect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    RdmaNetlink,
    /// The netdev's parent, as the pod's side shows it.
    Parent(Parent),
}

impl fmt::Display for How {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            How::RdmaNetlink => f.write_str("RDMA netlink"),
            How::Parent(p) => write!(f, "its {p}"),
        }
    }
}

/// What the asker calls the settings a failure names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// ADD and CHECK: the network config's `deviceID` and `rdmaPort`.
    Config,
    /// `roce-tune inspect`: its `--port`.
    Inspect,
}

impl Names {
    fn port(self) -> &'static str {
        match self {
            Names::Config => "rdmaPort",
            Names::Inspect => "--port",
        }
    }
}

/// What the asker knows besides the netdev: each is checked, none chooses.
#[derive(Debug, Clone, Copy)]
pub struct CrossCheck<'a> {
    pub device_id: Option<&'a PciAddr>,
    pub rdma_port: Option<u32>,
    pub names: Names,
}

/// The pod's rail: its RDMA port, the netdev's parent when the pod's side
/// showed one (the PCI function a device-info file names), and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub port: RdmaPort,
    pub parent: Option<Parent>,
    pub how: How,
}

/// Why the pod's rail has no device roce-tune may touch. Every variant is
/// error 100 at the CNI edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The netdev has no RDMA port and is no device's (a veth, a macvlan).
    NotAVf {
        ifname: String,
        netlink: String,
        exclusive: bool,
        /// What the config named instead, if anything.
        device_id: Option<PciAddr>,
    },
    /// `deviceID` names another function than the netdev's (`None`: it has none).
    DeviceIdDisagrees {
        device_id: PciAddr,
        ifname: String,
        parent: Option<Parent>,
    },
    /// `rdmaPort` (or `--port`) is not the port RDMA netlink reports.
    PortDisagrees {
        setting: &'static str,
        want: u32,
        ifname: String,
        device: String,
        port: u32,
    },
    /// The parent's RDMA device cannot be had.
    Device {
        ifname: String,
        parent: Parent,
        err: Box<FindError>,
        exclusive: bool,
    },
    /// RDMA netlink's answer cannot be used.
    Netlink { ifname: String, why: String },
    /// The pod's sysfs could not be made (exclusive mode needs it).
    PodSysfs(SysfsError),
}

const EXCLUSIVE_HINT: &str = "; the RDMA netns mode is exclusive (netns_mode N), so the VF's RDMA device must be moved into the pod first: list the rdma plugin before roce-tune in the chain (metaPlugins)";

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupError::NotAVf {
                ifname,
                netlink,
                exclusive,
                device_id,
            } => {
                write!(
                    f,
                    "{ifname} is not a VF: no RDMA device to tune ({ifname} has no RDMA port and no parent device in the pod's netns: a veth or a macvlan?; {netlink})"
                )?;
                if let Some(id) = device_id {
                    write!(
                        f,
                        "; deviceID {id} is not the pod's: roce-tune tunes only the device the kernel shows the pod"
                    )?;
                }
                if *exclusive {
                    f.write_str(EXCLUSIVE_HINT)?;
                }
                Ok(())
            }
            LookupError::DeviceIdDisagrees {
                device_id,
                ifname,
                parent: Some(p),
            } => write!(
                f,
                "deviceID {device_id} is not the pod's {ifname}, which is the {p} as the kernel shows it from the pod's netns: the network's deviceID and the pod's interface are different devices"
            ),
            LookupError::DeviceIdDisagrees {
                device_id,
                ifname,
                parent: None,
            } => write!(
                f,
                "deviceID {device_id} is not the pod's {ifname}: {ifname} is not a VF (no parent device in the pod's netns), so no deviceID can be its"
            ),
            LookupError::PortDisagrees {
                setting,
                want,
                ifname,
                device,
                port,
            } => write!(
                f,
                "{setting} is {want}, but RDMA netlink reports that {ifname} is on {device} port {port}: remove {setting} (the port comes from RDMA netlink) or fix it"
            ),
            LookupError::Device {
                ifname,
                parent,
                err,
                exclusive,
            } => {
                write!(f, "no RDMA device for {ifname} (its {parent}): {err}")?;
                if *exclusive {
                    f.write_str(EXCLUSIVE_HINT)?;
                }
                Ok(())
            }
            LookupError::Netlink { ifname, why } => {
                write!(f, "RDMA device of {ifname}: {why}")
            }
            LookupError::PodSysfs(e) => write!(
                f,
                "the sysfs of the pod's netns could not be made ({e}); roce-tune needs CAP_SYS_ADMIN"
            ),
        }
    }
}

impl std::error::Error for LookupError {}

/// The netdev's parent as the pod's side shows it, or `None` (a veth). On
/// the kernel: rtnetlink's answer in the pod netns (`link`, Linux 5.14+),
/// else the `class/net/<ifname>/device` link of the pod's sysfs. On a test
/// tree: that link in the tree's view of the pod netns, and nothing else (the
/// tree stands for the kernel). Only the link is read, never followed.
pub fn parent_of(pod: &mut PodSide, link: &Link) -> Result<Option<Parent>, LookupError> {
    let host = pod.sysfs().host().host();
    if host.trusts_rtnetlink_parent() {
        if let (Some(bus), Some(dev)) = (&link.parent_bus, &link.parent_dev) {
            return Ok(Some(Parent {
                bus: bus.clone(),
                dev: dev.clone(),
            }));
        }
    }
    let Some(view) = pod.view().map_err(LookupError::PodSysfs)? else {
        return Ok(None);
    };
    if link.name.contains('/') || link.name == "." || link.name == ".." {
        return Ok(None);
    }
    let net = PathBuf::from("class/net").join(&link.name);
    let Ok(dev) = view.link_name(&net.join("device")) else {
        return Ok(None);
    };
    let Some(bus) = host.parent_bus(view, &net) else {
        return Ok(None);
    };
    let parent = Parent { bus, dev };
    let valid = is_safe_component(&parent.bus)
        && is_safe_component(&parent.dev)
        && parent
            .pci_address()
            .is_none_or(|p| PciAddr::parse(p).is_some());
    Ok(valid.then_some(parent))
}

/// The pod's rail for `link`. Runs on a thread inside the pod netns (RDMA
/// netlink and rtnetlink answer for the asking thread's netns); `reach`
/// says where the device is (the host's sysfs, or the pod's side).
pub fn locate(
    sys: &dyn Syscall,
    pod: &mut PodSide,
    reach: Reach,
    link: &Link,
    cross: &CrossCheck,
) -> Result<Found, LookupError> {
    let parent = parent_of(pod, link)?;
    // The parent's RDMA device, read once: netlink's hint and, where netlink
    // has no port, the answer.
    let by_parent = match (&parent, device_view(pod, reach)?) {
        (Some(p), Some(view)) => Some(device::of_parent(view, p)),
        _ => None,
    };
    let hint = by_parent.as_ref().and_then(|r| r.as_ref().ok());
    let answer = sys
        .rdma_port(link, hint.map(String::as_str))
        .map_err(|why| LookupError::Netlink {
            ifname: link.name.clone(),
            why,
        })?;
    let (device, port, how) = decide(link, &answer, parent.as_ref(), cross, reach, by_parent)?;
    let view = device_view(pod, reach)?.ok_or(LookupError::NotAVf {
        ifname: link.name.clone(),
        netlink: answer.to_string(),
        exclusive: reach == Reach::Pod,
        device_id: None,
    })?;
    Ok(Found {
        port: RdmaPort::identify(view, &device, port),
        parent,
        how,
    })
}

/// Where the device's files are: the host's sysfs, or the pod's side.
fn device_view<'p>(pod: &'p mut PodSide, reach: Reach) -> Result<Option<&'p View>, LookupError> {
    match reach {
        Reach::Host => Ok(Some(pod.sysfs().host())),
        Reach::Pod => pod.view().map_err(LookupError::PodSysfs),
    }
}

/// Netlink's answer first, cross-checked; the parent where it has none.
/// `by_parent`: the parent's RDMA device as the device's view shows it
/// (`None`: that view is missing).
fn decide(
    link: &Link,
    answer: &Answer,
    parent: Option<&Parent>,
    cross: &CrossCheck,
    reach: Reach,
    by_parent: Option<Result<String, FindError>>,
) -> Result<(String, u32, How), LookupError> {
    let ifname = || link.name.clone();
    if let Some(id) = cross.device_id {
        if parent.and_then(Parent::pci_address) != Some(id.as_str()) {
            if parent.is_none() && !matches!(answer, Answer::Port(..)) {
                // Neither netlink nor the pod's side knows the netdev as
                // anything's: that is what the tenant must hear.
                return Err(LookupError::NotAVf {
                    ifname: ifname(),
                    netlink: answer.to_string(),
                    exclusive: reach == Reach::Pod,
                    device_id: Some(id.clone()),
                });
            }
            return Err(LookupError::DeviceIdDisagrees {
                device_id: id.clone(),
                ifname: ifname(),
                parent: parent.cloned(),
            });
        }
    }
    if let Answer::Port(dev, port) = answer {
        if let Some(want) = cross.rdma_port.filter(|p| p != port) {
            return Err(LookupError::PortDisagrees {
                setting: cross.names.port(),
                want,
                ifname: ifname(),
                device: dev.clone(),
                port: *port,
            });
        }
        return Ok((dev.clone(), *port, How::RdmaNetlink));
    }
    let Some(parent) = parent else {
        return Err(LookupError::NotAVf {
            ifname: ifname(),
            netlink: answer.to_string(),
            exclusive: reach == Reach::Pod,
            device_id: None,
        });
    };
    let err = |err| LookupError::Device {
        ifname: ifname(),
        parent: parent.clone(),
        err: Box::new(err),
        exclusive: reach == Reach::Pod,
    };
    let device = match by_parent {
        Some(found) => found.map_err(err)?,
        None => {
            return Err(err(FindError::Unreadable {
                dir: "the pod's sysfs".into(),
                why: SysfsError::Missing,
            }))
        }
    };
    Ok((
        device,
        cross.rdma_port.unwrap_or(1),
        How::Parent(parent.clone()),
    ))
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

    fn cross(device_id: Option<&PciAddr>, rdma_port: Option<u32>, names: Names) -> CrossCheck<'_> {
        CrossCheck {
            device_id,
            rdma_port,
            names,
        }
    }

    fn run(
        answer: &Answer,
        parent: Option<&Parent>,
        c: &CrossCheck,
        view: &View,
    ) -> Result<(String, u32, How), LookupError> {
        let by_parent = parent.map(|p| device::of_parent(view, p));
        decide(&link(), answer, parent, c, Reach::Host, by_parent)
    }

    #[test]
    fn netlink_wins_and_device_id_must_be_the_netdevs_function() {
        let (d, view) = tree(
            "x",
            &[("0000:0c:00.2", "mlx5_2"), ("0000:0c:00.3", "mlx5_3")],
        );
        let own = Parent::pci("0000:0c:00.2");
        let other = PciAddr::parse("0000:0c:00.3").unwrap();
        let mine = PciAddr::parse("0000:0c:00.2").unwrap();
        let ans = Answer::Port("mlx5_2".into(), 1);
        let ok = run(
            &ans,
            Some(&own),
            &cross(Some(&mine), None, Names::Config),
            &view,
        );
        assert_eq!(ok.unwrap(), ("mlx5_2".into(), 1, How::RdmaNetlink));
        // Netlink found the port, deviceID names another function: 100
        // naming both, whatever netlink says.
        let e = run(
            &ans,
            Some(&own),
            &cross(Some(&other), None, Names::Config),
            &view,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("0000:0c:00.3") && e.contains("0000:0c:00.2"),
            "{e}"
        );
        // A soft-RoCE netdev (no parent) with a deviceID: 100 too.
        let e = run(&ans, None, &cross(Some(&mine), None, Names::Config), &view).unwrap_err();
        assert!(
            matches!(e, LookupError::DeviceIdDisagrees { parent: None, .. }),
            "{e:?}"
        );
        // Without a deviceID, the netlink answer stands alone.
        assert!(run(&ans, None, &cross(None, None, Names::Config), &view).is_ok());
        let e = run(&ans, None, &cross(None, Some(2), Names::Config), &view)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rdmaPort is 2") && e.contains("port 1"), "{e}");
        let e = run(&ans, None, &cross(None, Some(2), Names::Inspect), &view)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--port is 2") && e.contains("remove --port"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn without_netlink_the_netdevs_parent_and_never_the_device_id() {
        let (d, view) = tree(
            "y",
            &[("0000:0c:00.2", "mlx5_2"), ("0000:0c:00.3", "mlx5_3")],
        );
        let own = Parent::pci("0000:0c:00.2");
        let gone = Answer::Unusable("no ib_core".into());
        let r = run(
            &gone,
            Some(&own),
            &cross(None, Some(2), Names::Config),
            &view,
        );
        assert_eq!(r.unwrap(), ("mlx5_2".into(), 2, How::Parent(own.clone())));
        // A veth naming another pod's VF: not a VF, and the VF is not taken.
        let victim = PciAddr::parse("0000:0c:00.3").unwrap();
        let e = run(
            &gone,
            None,
            &cross(Some(&victim), None, Names::Config),
            &view,
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("net1 is not a VF: no RDMA device to tune"),
            "{msg}"
        );
        assert!(
            msg.contains("no ib_core") && msg.contains("deviceID 0000:0c:00.3"),
            "{msg}"
        );
        // The pod's own VF, and a deviceID naming another: both named.
        let e = run(
            &gone,
            Some(&own),
            &cross(Some(&victim), None, Names::Config),
            &view,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("0000:0c:00.3") && e.contains("0000:0c:00.2"),
            "{e}"
        );
        // No deviceID and no parent: not a VF, and in exclusive mode the
        // rdma plugin is named.
        let none = Answer::NoPort { devices: 0 };
        let e = decide(
            &link(),
            &none,
            None,
            &cross(None, None, Names::Config),
            Reach::Pod,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no RDMA device in the pod netns"), "{e}");
        assert!(e.contains("exclusive") && e.contains("rdma plugin"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_parent_without_its_rdma_device_says_where_it_looked() {
        let (d, view) = tree("z", &[]);
        let own = Parent::pci("0000:0c:00.7");
        let none = Answer::NoPort { devices: 2 };
        let e = run(&none, Some(&own), &cross(None, None, Names::Config), &view)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no RDMA device for net1 (its PCI function 0000:0c:00.7)")
                && e.contains("0000:0c:00.7/infiniband is unreadable"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
