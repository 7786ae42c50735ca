//! The VF's RDMA device in sysfs: finding it, its identity, its traffic class
//! file and its GID table. Every path here is relative to a `sysfs::View`
//! (the host's sysfs, a pod's, or a test tree standing for both).

pub mod counters;
pub mod device;
pub mod gid;
pub mod lookup;
pub mod rdma_cm;
pub mod reach;
pub mod setting;
pub mod traffic_class;

use crate::cni::config::PciAddr;
use crate::sysfs::View;
use std::path::PathBuf;

/// Its type is the nldev codec's (SYS_GET answers it too).
pub use crate::wire::nldev::NetnsMode;

impl NetnsMode {
    /// Absent file (no ib_core, or a test tree without it): shared.
    pub fn read(view: &View) -> NetnsMode {
        match view.read_trimmed(&PathBuf::from("module/ib_core/parameters/netns_mode")) {
            Some(s) if matches!(s.as_str(), "N" | "n" | "0") => NetnsMode::Exclusive,
            _ => NetnsMode::Shared,
        }
    }

    pub fn letter(self) -> char {
        match self {
            NetnsMode::Shared => 'Y',
            NetnsMode::Exclusive => 'N',
        }
    }
}

/// One port of one RDMA device, with what identifies the device beyond its
/// name: names change (a rename, a re-created device), the PCI function and
/// the node GUID do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaPort {
    pub device: String,
    pub port: u32,
    /// The PCI function the device sits on (`class/infiniband/<dev>/device`);
    /// `None` for a device without one (soft-RoCE on a veth).
    pub pci: Option<String>,
    /// `class/infiniband/<dev>/node_guid`, as the kernel prints it.
    pub guid: Option<String>,
}

impl RdmaPort {
    /// A port of `device`, its identity read through `view`.
    pub fn identify(view: &View, device: &str, port: u32) -> RdmaPort {
        let (pci, guid) = identity(view, device);
        RdmaPort {
            device: device.to_owned(),
            port,
            pci,
            guid,
        }
    }

    fn class_dir(&self) -> PathBuf {
        class_dir(&self.device)
    }

    /// MLNX_OFED/DOCA-OFED only: `tc/<port>/traffic_class` (mlx5 main_ext.c).
    pub fn traffic_class_path(&self) -> PathBuf {
        self.class_dir()
            .join(format!("tc/{}/traffic_class", self.port))
    }

    pub fn gids_dir(&self) -> PathBuf {
        self.class_dir().join(format!("ports/{}/gids", self.port))
    }

    pub fn gid_path(&self, index: u32) -> PathBuf {
        self.gids_dir().join(index.to_string())
    }

    pub fn gid_type_path(&self, index: u32) -> PathBuf {
        self.class_dir()
            .join(format!("ports/{}/gid_attrs/types/{index}", self.port))
    }

    pub fn gid_ndev_path(&self, index: u32) -> PathBuf {
        self.class_dir()
            .join(format!("ports/{}/gid_attrs/ndevs/{index}", self.port))
    }

    /// `ports/<port>/state`, e.g. `4: ACTIVE` (drivers/infiniband/core/sysfs.c,
    /// `state_show`).
    pub fn state_path(&self) -> PathBuf {
        self.class_dir().join(format!("ports/{}/state", self.port))
    }

    /// What serialises every writer of this port's files: the PCI function
    /// when there is one (it survives a rename), else the name.
    pub fn lock_key(&self) -> String {
        format!(
            "{}.{}",
            self.pci.as_deref().unwrap_or(&self.device),
            self.port
        )
    }
}

/// The port's state as sysfs prints it (`4: ACTIVE`), `None` when the file is
/// absent (a test tree) or holds anything but a short printable line, so what
/// a planted file holds never reaches a table.
pub fn port_state(view: &View, port: &RdmaPort) -> Option<String> {
    view.read_trimmed(&port.state_path())
        .filter(|s| s.len() <= 64 && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
}

pub fn class_dir(device: &str) -> PathBuf {
    PathBuf::from("class/infiniband").join(device)
}

/// The PCI function and node GUID of `device` as `view` shows them, each
/// only if it parses as what it should be.
pub fn identity(view: &View, device: &str) -> (Option<String>, Option<String>) {
    let dir = class_dir(device);
    let pci = view
        .link_name(&dir.join("device"))
        .ok()
        .and_then(|n| PciAddr::parse(&n))
        .map(|p| p.as_str().to_owned());
    let guid = view
        .read_trimmed(&dir.join("node_guid"))
        .filter(|g| is_guid(g));
    (pci, guid)
}

/// The kernel's form of a GUID: four groups of four hex digits.
pub fn is_guid(s: &str) -> bool {
    s.len() == 19
        && s.split(':').count() == 4
        && s.split(':')
            .all(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub use crate::wire::nldev::is_safe_component;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_sysfs_layout() {
        let p = RdmaPort {
            device: "mlx5_2".into(),
            port: 1,
            pci: None,
            guid: None,
        };
        assert_eq!(
            p.traffic_class_path(),
            PathBuf::from("class/infiniband/mlx5_2/tc/1/traffic_class")
        );
        assert_eq!(
            p.gid_path(3),
            PathBuf::from("class/infiniband/mlx5_2/ports/1/gids/3")
        );
        assert_eq!(
            p.gid_type_path(3),
            PathBuf::from("class/infiniband/mlx5_2/ports/1/gid_attrs/types/3")
        );
        assert_eq!(p.lock_key(), "mlx5_2.1");
        let p = RdmaPort {
            pci: Some("0000:0c:00.2".into()),
            ..p
        };
        assert_eq!(p.lock_key(), "0000:0c:00.2.1");
    }

    #[test]
    fn safe_components_and_guids() {
        assert!(is_safe_component("mlx5_2"));
        assert!(is_safe_component("0000:0c:00.2"));
        assert!(is_safe_component("mlx5_core.sf.2"));
        for bad in ["", ".", "..", "a/b", "a b", "x\n"] {
            assert!(!is_safe_component(bad), "{bad:?}");
        }
        assert!(is_guid("506b:4b03:00f3:8a3e"));
        assert!(!is_guid("506b:4b03:00f3:8a3"));
        assert!(!is_guid("root:x:0:0:root:/root"));
    }

    #[test]
    fn port_state_is_a_short_printable_line_or_nothing() {
        let d = std::env::temp_dir().join(format!("rt-portstate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("class/infiniband/mlx5_2/ports/1")).unwrap();
        let view = View::open(&d).unwrap();
        let port = RdmaPort::identify(&view, "mlx5_2", 1);
        assert_eq!(port_state(&view, &port), None, "absent");
        let file = d.join("class/infiniband/mlx5_2/ports/1/state");
        std::fs::write(&file, "4: ACTIVE\n").unwrap();
        assert_eq!(port_state(&view, &port).as_deref(), Some("4: ACTIVE"));
        std::fs::write(&file, "4: ACTIVE\x1b[2J").unwrap();
        assert_eq!(port_state(&view, &port), None, "a control byte");
        std::fs::write(&file, "x".repeat(65)).unwrap();
        assert_eq!(port_state(&view, &port), None, "longer than a state");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn netns_mode_absent_is_shared() {
        let d = std::env::temp_dir().join(format!("rt-nsmode-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(NetnsMode::read(&View::open(&d).unwrap()), NetnsMode::Shared);
        std::fs::create_dir_all(d.join("module/ib_core/parameters")).unwrap();
        std::fs::write(d.join("module/ib_core/parameters/netns_mode"), "N\n").unwrap();
        assert_eq!(
            NetnsMode::read(&View::open(&d).unwrap()),
            NetnsMode::Exclusive
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
