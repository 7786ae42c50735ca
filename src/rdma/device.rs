//! From the VF to its RDMA device through sysfs: by PCI address when Multus
//! gave one (`deviceID`/`pciBusID`), else by the netdev's parent device as
//! netlink reports it inside the pod (IFLA_PARENT_DEV_NAME/_BUS_NAME), then
//! `bus/<bus>/devices/<dev>/infiniband/` must hold exactly one entry.

use super::lookup::Asker;
use super::{is_safe_component, RdmaPort};
use crate::cni::config::PciAddr;
use crate::cni::{code, CniError, CniResult};
use crate::netlink::Link;
use crate::sysfs::View;
use std::path::PathBuf;

/// How the device was found, for logs and messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub device: String,
    pub bus: String,
    pub parent: String,
}

/// The RDMA device of the PCI function `pci`.
pub fn by_pci(view: &View, pci: &PciAddr) -> CniResult<Found> {
    by_parent(view, "pci", pci.as_str(), &format!("deviceID {pci}"))
}

/// The RDMA device of a netdev's parent, as netlink reported it.
pub fn by_link(view: &View, link: &Link) -> CniResult<Found> {
    by_link_for(view, link, Asker::Plugin)
}

/// `by_link`, whose failure for a netdev without a parent names what `asker`
/// can give instead.
pub fn by_link_for(view: &View, link: &Link, asker: Asker) -> CniResult<Found> {
    match (&link.parent_bus, &link.parent_dev) {
        (Some(bus), Some(dev)) => by_parent(view, bus, dev, &format!("the parent device of {}", link.name)),
        _ => Err(CniError::new(
            code::RDMA_DEVICE,
            format!(
                "no RDMA device for {}: netlink reports no parent device for it (a veth or a kernel before 5.14?); {}",
                link.name,
                asker.instead_of_parent()
            ),
        )),
    }
}

pub fn by_parent(view: &View, bus: &str, dev: &str, what: &str) -> CniResult<Found> {
    if !is_safe_component(bus) || !is_safe_component(dev) {
        return Err(CniError::new(
            code::RDMA_DEVICE,
            format!(
                "no RDMA device for {what}: the bus or device name netlink gave is not a sysfs name"
            ),
        ));
    }
    let dir = PathBuf::from("bus")
        .join(bus)
        .join("devices")
        .join(dev)
        .join("infiniband");
    let entries = view.list(&dir).map_err(|e| {
        CniError::new(
            code::RDMA_DEVICE,
            format!(
                "no RDMA device for {what}: {} is unreadable ({e}); is the VF bound to mlx5_core, and in exclusive mode did the rdma plugin run before roce-tune?",
                view.show(&dir)
            ),
        )
    })?;
    match entries.as_slice() {
        [one] if is_safe_component(one) => Ok(Found {
            device: one.clone(),
            bus: bus.to_owned(),
            parent: dev.to_owned(),
        }),
        [one] => Err(CniError::new(
            code::RDMA_DEVICE,
            format!(
                "no RDMA device for {what}: {} holds a name of {} bytes that is not a device name",
                view.show(&dir),
                one.len()
            ),
        )),
        [] => Err(CniError::new(
            code::RDMA_DEVICE,
            format!("no RDMA device for {what}: {} is empty", view.show(&dir)),
        )),
        many => {
            let names: Vec<&str> = many
                .iter()
                .map(|n| {
                    if is_safe_component(n) {
                        n.as_str()
                    } else {
                        "(not a device name)"
                    }
                })
                .collect();
            Err(CniError::new(
                code::RDMA_DEVICE,
                format!(
                    "RDMA device for {what} is ambiguous: {} holds {}; expected exactly one",
                    view.show(&dir),
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Where a recorded device is in a view, checked by identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The device, under its current name (it may have been renamed).
    Here(RdmaPort),
    /// Its PCI function is here but no RDMA device shows on it: in exclusive
    /// mode the device can be in a netns that is still exiting (the kernel
    /// moves it back only in the asynchronous netns exit). Not gone: kept.
    Invisible,
    /// The device (or its PCI function) is gone, or the name now belongs to
    /// another device.
    Gone,
}

/// Find the device an entry recorded: by its PCI function when recorded
/// (a rename or re-creation keeps it), else by name; the node GUID, when
/// both sides know it, must agree.
pub fn resolve(view: &View, entry: &crate::state::Entry) -> Resolved {
    let same_guid = |p: &RdmaPort| match (&entry.guid, &p.guid) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    match &entry.pci {
        Some(pci) => {
            let func = PathBuf::from("bus/pci/devices").join(pci);
            if !view.exists(&func) {
                return Resolved::Gone;
            }
            let names = view.list(&func.join("infiniband")).unwrap_or_default();
            match names.as_slice() {
                [one] if is_safe_component(one) => {
                    let p = RdmaPort::identify(view, one, entry.port);
                    if same_guid(&p) {
                        Resolved::Here(p)
                    } else {
                        Resolved::Gone
                    }
                }
                [] => Resolved::Invisible,
                _ => Resolved::Gone,
            }
        }
        None => {
            if !view.exists(&super::class_dir(&entry.device)) {
                return Resolved::Gone;
            }
            let p = RdmaPort::identify(view, &entry.device, entry.port);
            if same_guid(&p) {
                Resolved::Here(p)
            } else {
                Resolved::Gone
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rt-dev-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn exactly_one_entry() {
        let root = tree("one");
        std::fs::create_dir_all(&root).unwrap();
        let view = View::open(&root).unwrap();
        let pci = PciAddr::parse("0000:0c:00.2").unwrap();
        let ib = root.join("bus/pci/devices/0000:0c:00.2/infiniband");
        let e = by_pci(&view, &pci).unwrap_err();
        assert_eq!(e.code, 100);
        assert!(
            e.msg.contains("deviceID 0000:0c:00.2") && e.msg.contains("unreadable"),
            "{}",
            e.msg
        );
        std::fs::create_dir_all(&ib).unwrap();
        assert!(by_pci(&view, &pci).unwrap_err().msg.contains("is empty"));
        std::fs::create_dir(ib.join("mlx5_2")).unwrap();
        assert_eq!(by_pci(&view, &pci).unwrap().device, "mlx5_2");
        std::fs::create_dir(ib.join("mlx5_3")).unwrap();
        let e = by_pci(&view, &pci).unwrap_err();
        assert!(
            e.msg.contains("ambiguous") && e.msg.contains("mlx5_2, mlx5_3"),
            "{}",
            e.msg
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn link_without_parent_is_100() {
        let l = Link {
            index: 3,
            name: "net1".into(),
            parent_dev: None,
            parent_bus: None,
        };
        let view = View::open(std::path::Path::new("/")).unwrap();
        let e = by_link(&view, &l).unwrap_err();
        assert_eq!(e.code, 100);
        assert!(e.msg.contains("net1") && e.msg.contains("deviceID"));
        let l = Link {
            parent_dev: Some("../x".into()),
            parent_bus: Some("pci".into()),
            ..l
        };
        assert_eq!(by_link(&view, &l).unwrap_err().code, 100);
    }
}
