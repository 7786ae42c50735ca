//! The VF's RDMA device in sysfs: finding it, its traffic class file and its
//! GID table. Every path is built from `root` (the `sysfsRoot` key), so a test
//! tree (DESIGN 2.3) stands in for /sys.

pub mod device;
pub mod gid;
pub mod nldev;
pub mod traffic_class;

use std::path::{Path, PathBuf};

/// DESIGN 1.4: `Y` shared (devices stay in the host netns), `N` exclusive
/// (the RDMA CNI moved the device into the pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetnsMode {
    Shared,
    Exclusive,
}

impl NetnsMode {
    /// Absent file (no ib_core, or a test tree without it): shared.
    pub fn read(root: &Path) -> NetnsMode {
        match std::fs::read_to_string(root.join("module/ib_core/parameters/netns_mode")) {
            Ok(s) if matches!(s.trim(), "N" | "n" | "0") => NetnsMode::Exclusive,
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

/// Whether the pod's RDMA device is reachable only through a sysfs mounted in
/// the pod netns: exclusive mode on the real /sys. A test tree is both views.
pub fn needs_pod_sysfs(sysfs_root: &Path) -> bool {
    sysfs_root == Path::new("/sys") && NetnsMode::read(sysfs_root) == NetnsMode::Exclusive
}

/// One port of one RDMA device, under one sysfs root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaPort {
    pub root: PathBuf,
    pub device: String,
    pub port: u32,
}

impl RdmaPort {
    pub fn new(root: &Path, device: &str, port: u32) -> RdmaPort {
        RdmaPort {
            root: root.to_owned(),
            device: device.to_owned(),
            port,
        }
    }

    fn class_dir(&self) -> PathBuf {
        self.root.join("class/infiniband").join(&self.device)
    }

    /// mlx5 (MLNX_OFED/DOCA) only: `tc/<port>/traffic_class` (DESIGN 1.2).
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
}

/// A name read from sysfs or a state file, used as one path component:
/// refuse anything that could climb or hide (`..`, `/`, control bytes).
pub fn is_safe_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_sysfs_layout() {
        let p = RdmaPort::new(Path::new("/t"), "mlx5_2", 1);
        assert_eq!(
            p.traffic_class_path(),
            PathBuf::from("/t/class/infiniband/mlx5_2/tc/1/traffic_class")
        );
        assert_eq!(
            p.gid_path(3),
            PathBuf::from("/t/class/infiniband/mlx5_2/ports/1/gids/3")
        );
        assert_eq!(
            p.gid_type_path(3),
            PathBuf::from("/t/class/infiniband/mlx5_2/ports/1/gid_attrs/types/3")
        );
    }

    #[test]
    fn safe_components() {
        assert!(is_safe_component("mlx5_2"));
        assert!(is_safe_component("0000:0c:00.2"));
        assert!(is_safe_component("mlx5_core.sf.2"));
        for bad in ["", ".", "..", "a/b", "a b", "x\n"] {
            assert!(!is_safe_component(bad), "{bad:?}");
        }
    }

    #[test]
    fn netns_mode_absent_is_shared() {
        let d = std::env::temp_dir().join(format!("rt-nsmode-{}", std::process::id()));
        assert_eq!(NetnsMode::read(&d), NetnsMode::Shared);
        std::fs::create_dir_all(d.join("module/ib_core/parameters")).unwrap();
        std::fs::write(d.join("module/ib_core/parameters/netns_mode"), "N\n").unwrap();
        assert_eq!(NetnsMode::read(&d), NetnsMode::Exclusive);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
