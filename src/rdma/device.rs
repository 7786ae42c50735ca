//! From the VF to its RDMA device (DESIGN 1.4): by PCI address when Multus
//! gave one (`deviceID`/`pciBusID`), else by the netdev's parent device as
//! netlink reports it inside the pod (IFLA_PARENT_DEV_NAME/_BUS_NAME), then
//! `<root>/bus/<bus>/devices/<dev>/infiniband/` must hold exactly one entry.

use super::is_safe_component;
use crate::cni::config::PciAddr;
use crate::cni::{code, CniError, CniResult};
use crate::netlink::Link;
use std::path::Path;

/// How the device was found, for logs and messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub device: String,
    pub bus: String,
    pub parent: String,
}

/// The RDMA device of the PCI function `pci`.
pub fn by_pci(root: &Path, pci: &PciAddr) -> CniResult<Found> {
    by_parent(root, "pci", pci.as_str(), &format!("deviceID {pci}"))
}

/// The RDMA device of a netdev's parent, as netlink reported it.
pub fn by_link(root: &Path, link: &Link) -> CniResult<Found> {
    match (&link.parent_bus, &link.parent_dev) {
        (Some(bus), Some(dev)) => by_parent(root, bus, dev, &format!("the parent device of {}", link.name)),
        _ => Err(CniError::new(
            code::RDMA_DEVICE,
            format!(
                "no RDMA device for {}: netlink reports no parent device for it (a veth or a kernel before 5.14?); give the VF's PCI address as deviceID",
                link.name
            ),
        )),
    }
}

fn by_parent(root: &Path, bus: &str, dev: &str, what: &str) -> CniResult<Found> {
    if !is_safe_component(bus) || !is_safe_component(dev) {
        return Err(CniError::new(
            code::RDMA_DEVICE,
            format!("no RDMA device for {what}: bus {bus:?} / device {dev:?} is not a sysfs name"),
        ));
    }
    let dir = root
        .join("bus")
        .join(bus)
        .join("devices")
        .join(dev)
        .join("infiniband");
    let entries = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        Err(e) => {
            return Err(CniError::new(
                code::RDMA_DEVICE,
                format!(
                    "no RDMA device for {what}: {} is unreadable ({e}); is the VF bound to mlx5_core, and in exclusive mode did the rdma plugin run before roce-tune?",
                    dir.display()
                ),
            ))
        }
    };
    match entries.as_slice() {
        [one] if is_safe_component(one) => Ok(Found {
            device: one.clone(),
            bus: bus.to_owned(),
            parent: dev.to_owned(),
        }),
        [one] => Err(CniError::new(
            code::RDMA_DEVICE,
            format!(
                "no RDMA device for {what}: {} holds {one:?}, which is not a device name",
                dir.display()
            ),
        )),
        [] => Err(CniError::new(
            code::RDMA_DEVICE,
            format!("no RDMA device for {what}: {} is empty", dir.display()),
        )),
        many => {
            let mut names = many.to_vec();
            names.sort();
            Err(CniError::new(
                code::RDMA_DEVICE,
                format!(
                    "RDMA device for {what} is ambiguous: {} holds {}; expected exactly one",
                    dir.display(),
                    names.join(", ")
                ),
            ))
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
        let pci = PciAddr::parse("0000:0c:00.2").unwrap();
        let ib = root.join("bus/pci/devices/0000:0c:00.2/infiniband");
        let e = by_pci(&root, &pci).unwrap_err();
        assert_eq!(e.code, 100);
        assert!(
            e.msg.contains("deviceID 0000:0c:00.2") && e.msg.contains("unreadable"),
            "{}",
            e.msg
        );
        std::fs::create_dir_all(&ib).unwrap();
        assert!(by_pci(&root, &pci).unwrap_err().msg.contains("is empty"));
        std::fs::create_dir(ib.join("mlx5_2")).unwrap();
        assert_eq!(by_pci(&root, &pci).unwrap().device, "mlx5_2");
        std::fs::create_dir(ib.join("mlx5_3")).unwrap();
        let e = by_pci(&root, &pci).unwrap_err();
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
        let e = by_link(Path::new("/nonexistent"), &l).unwrap_err();
        assert_eq!(e.code, 100);
        assert!(e.msg.contains("net1") && e.msg.contains("deviceID"));
        let l = Link {
            parent_dev: Some("../x".into()),
            parent_bus: Some("pci".into()),
            ..l
        };
        assert_eq!(
            by_link(Path::new("/nonexistent"), &l).unwrap_err().code,
            100
        );
    }
}
