//! From a netdev's parent device to its RDMA device through sysfs:
//! `bus/<bus>/devices/<dev>/infiniband/` must hold exactly one entry; and
//! where a recorded device is now, checked by its identity.

use super::{is_safe_component, RdmaPort};
use crate::sysfs::{SysfsError, View};
use std::fmt;
use std::path::PathBuf;

/// A netdev's parent device, as the kernel shows it from the netdev's netns:
/// a VF's PCI function (`pci`, `0000:0c:00.2`), an SF's auxiliary device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    pub bus: String,
    pub dev: String,
}

impl Parent {
    pub fn pci(dev: &str) -> Parent {
        Parent {
            bus: "pci".into(),
            dev: dev.into(),
        }
    }

    /// The PCI address, when the parent is a PCI function.
    pub fn pci_address(&self) -> Option<&str> {
        (self.bus == "pci").then_some(self.dev.as_str())
    }
}

impl fmt::Display for Parent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pci_address() {
            Some(pci) => write!(f, "PCI function {pci}"),
            None => write!(f, "{} device {}", self.bus, self.dev),
        }
    }
}

/// Why a parent has no usable RDMA device. The directory is named as the
/// view shows it; names read from it are quoted only when they are names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FindError {
    /// The bus or device name is not a sysfs name.
    BadName,
    Unreadable {
        dir: String,
        why: SysfsError,
    },
    Empty {
        dir: String,
    },
    NotADeviceName {
        dir: String,
        len: usize,
    },
    Ambiguous {
        dir: String,
        names: Vec<String>,
    },
}

impl fmt::Display for FindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindError::BadName => f.write_str("its bus or device name is not a sysfs name"),
            FindError::Unreadable { dir, why } => write!(
                f,
                "{dir} is unreadable ({why}); is the VF bound to mlx5_core, and in exclusive mode did the rdma plugin run before roce-tune?"
            ),
            FindError::Empty { dir } => write!(f, "{dir} is empty"),
            FindError::NotADeviceName { dir, len } => write!(
                f,
                "{dir} holds a name of {len} bytes that is not a device name"
            ),
            FindError::Ambiguous { dir, names } => write!(
                f,
                "it is ambiguous: {dir} holds {}; expected exactly one",
                names.join(", ")
            ),
        }
    }
}

/// The RDMA device of `parent`, as `view` shows it.
pub fn of_parent(view: &View, parent: &Parent) -> Result<String, FindError> {
    if !is_safe_component(&parent.bus) || !is_safe_component(&parent.dev) {
        return Err(FindError::BadName);
    }
    let dir = PathBuf::from("bus")
        .join(&parent.bus)
        .join("devices")
        .join(&parent.dev)
        .join("infiniband");
    let entries = view.list(&dir).map_err(|why| FindError::Unreadable {
        dir: view.show(&dir),
        why,
    })?;
    match entries.as_slice() {
        [one] if is_safe_component(one) => Ok(one.clone()),
        [one] => Err(FindError::NotADeviceName {
            dir: view.show(&dir),
            len: one.len(),
        }),
        [] => Err(FindError::Empty {
            dir: view.show(&dir),
        }),
        many => Err(FindError::Ambiguous {
            dir: view.show(&dir),
            names: many
                .iter()
                .map(|n| {
                    if is_safe_component(n) {
                        n.clone()
                    } else {
                        "(not a device name)".into()
                    }
                })
                .collect(),
        }),
    }
}

/// What identifies a device port beyond its name: names change (a rename, a
/// re-created device), the PCI function and the node GUID do not.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub device: &'a str,
    pub port: u32,
    pub pci: Option<&'a str>,
    pub guid: Option<&'a str>,
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

/// Find a recorded device: by its PCI function when recorded (a rename or
/// re-creation keeps it), else by name; the node GUID, when both sides know
/// it, must agree.
pub fn resolve(view: &View, id: Identity) -> Resolved {
    let same_guid = |p: &RdmaPort| match (id.guid, &p.guid) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let name = match id.pci {
        Some(pci) => {
            let func = PathBuf::from("bus/pci/devices").join(pci);
            // The list first: the function is asked about only when its
            // device list cannot be read (two calls fewer on every DEL).
            let names = match view.list(&func.join("infiniband")) {
                Ok(names) => names,
                Err(_) if !view.exists(&func) => return Resolved::Gone,
                Err(_) => Vec::new(),
            };
            match names.as_slice() {
                [one] if is_safe_component(one) => one.clone(),
                [] => return Resolved::Invisible,
                _ => return Resolved::Gone,
            }
        }
        None => {
            if !view.exists(&super::class_dir(id.device)) {
                return Resolved::Gone;
            }
            id.device.to_owned()
        }
    };
    let p = RdmaPort::identify(view, &name, id.port);
    if same_guid(&p) {
        Resolved::Here(p)
    } else {
        Resolved::Gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_entry() {
        let root = std::env::temp_dir().join(format!("rt-dev-one-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let view = View::open(&root).unwrap();
        let vf = Parent::pci("0000:0c:00.2");
        let ib = root.join("bus/pci/devices/0000:0c:00.2/infiniband");
        let e = of_parent(&view, &vf).unwrap_err();
        assert!(
            matches!(&e, FindError::Unreadable { dir, .. } if dir.ends_with("0000:0c:00.2/infiniband")),
            "{e:?}"
        );
        std::fs::create_dir_all(&ib).unwrap();
        assert!(matches!(
            of_parent(&view, &vf),
            Err(FindError::Empty { .. })
        ));
        std::fs::create_dir(ib.join("mlx5_2")).unwrap();
        assert_eq!(of_parent(&view, &vf).unwrap(), "mlx5_2");
        std::fs::create_dir(ib.join("mlx5_3")).unwrap();
        let e = of_parent(&view, &vf).unwrap_err();
        assert!(e.to_string().contains("ambiguous") && e.to_string().contains("mlx5_2, mlx5_3"));
        let climb = Parent::pci("../x");
        assert_eq!(of_parent(&view, &climb), Err(FindError::BadName));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn parents_say_what_they_are() {
        assert_eq!(
            Parent::pci("0000:0c:00.2").to_string(),
            "PCI function 0000:0c:00.2"
        );
        let sf = Parent {
            bus: "auxiliary".into(),
            dev: "mlx5_core.sf.2".into(),
        };
        assert_eq!(sf.pci_address(), None);
        assert_eq!(sf.to_string(), "auxiliary device mlx5_core.sf.2");
    }
}
