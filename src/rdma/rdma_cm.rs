//! The rdma_cm default ToS of a device port (drivers/infiniband/core/
//! cma_configfs.c): `<configfs>/rdma_cm/<dev>/ports/<port>/default_roce_tos`,
//! configfs being `<sysfs root>/kernel/config`. Applications that connect
//! through rdma_cm (UCX, MPI, storage) take their ToS from it, on the inbox
//! driver and soft-RoCE too, unlike the MLNX_OFED traffic class file.
//!
//! The device's directory exists only once someone has made it (`mkdir`);
//! the value, 0..255 with 0 the kernel's default, lives in the kernel's cma
//! device and survives an `rmdir` and `mkdir` of that directory. So the
//! directory itself holds no state: roce-tune makes it when missing and
//! leaves it in place.

use super::setting::{Setting, SettingError, SettingResult, Value, Views};
use super::{is_safe_component, RdmaPort};
use crate::cni::code;
use crate::cni::keys::Key;
use crate::sysfs::{SysfsError, View};
use std::path::PathBuf;

/// The rdma_cm default ToS as a setting roce-tune owns. configfs is one per
/// node, whatever the RDMA netns mode: always the host's view.
pub struct Tos;
pub static TOS: Tos = Tos;

impl Setting for Tos {
    fn declared(&self) -> Key {
        Key::RdmaCmTos
    }

    fn read(&self, at: Views, port: &RdmaPort) -> SettingResult<Value> {
        read(at.host, port).map(|v| Some(u32::from(v)))
    }

    /// A ToS has no unset state: 0 is the kernel's default.
    fn write(&self, at: Views, port: &RdmaPort, value: Value) -> SettingResult<()> {
        write(at.host, port, value.unwrap_or(0).min(255) as u8)
    }

    /// The directory is remade when missing: the value lives in the cma
    /// device and survives it.
    fn present(&self, at: Views, port: &RdmaPort) -> SettingResult<bool> {
        ensure_group(at.host, port).map(|()| true)
    }

    fn prepare(&self, at: Views, port: &RdmaPort) -> SettingResult<()> {
        ensure_group(at.host, port)
    }

    fn same(&self, a: Value, b: Value) -> bool {
        a.unwrap_or(0) == b.unwrap_or(0)
    }

    fn show_path(&self, at: Views, port: &RdmaPort) -> String {
        at.host.show(&tos_path(port))
    }

    /// Without the device's configfs directory there is nothing to read
    /// short of making it (`present`): `inspect` changes nothing.
    fn peek(&self, at: Views, port: &RdmaPort) -> SettingResult<Option<Value>> {
        if !is_safe_component(&port.device) || !at.host.exists(&group(port)) {
            return Ok(None);
        }
        self.read(at, port).map(Some)
    }
}

fn group(port: &RdmaPort) -> PathBuf {
    PathBuf::from("kernel/config/rdma_cm").join(&port.device)
}

pub fn tos_path(port: &RdmaPort) -> PathBuf {
    group(port).join(format!("ports/{}/default_roce_tos", port.port))
}

fn error(view: &View, port: &RdmaPort, what: &str, e: impl std::fmt::Display) -> SettingError {
    SettingError {
        code: code::RDMA_CM_TOS,
        msg: format!("{what} {}: {e}", view.show(&tos_path(port))),
    }
}

/// Make the device's configfs directory if nobody has. `view` is the host's:
/// configfs is one per node, whatever the RDMA netns mode.
pub fn ensure_group(view: &View, port: &RdmaPort) -> SettingResult<()> {
    if !is_safe_component(&port.device) {
        return Err(error(
            view,
            port,
            "rdma_cm",
            "the device name is not a file name",
        ));
    }
    match view.mkdir(&group(port)) {
        Ok(created) => {
            if created {
                crate::debug!("made the rdma_cm configfs directory of {}", port.device);
            }
            Ok(())
        }
        Err(SysfsError::Missing) => Err(SettingError {
            code: code::RDMA_CM_TOS,
            msg: format!(
                "{} does not exist: configfs is not mounted at {} or the rdma_cm module is not loaded (modprobe rdma_cm); remove rdmaCmTos or fix the node",
                view.show(&PathBuf::from("kernel/config/rdma_cm")),
                view.show(&PathBuf::from("kernel/config"))
            ),
        }),
        Err(e) => Err(error(view, port, "make the directory of", e)),
    }
}

/// The value in the file: a number from 0 to 255.
pub fn parse(content: &str) -> Result<u8, String> {
    content.trim().parse::<u8>().map_err(|_| {
        format!(
            "expected a number from 0 to 255, found {} bytes that are not one",
            content.len()
        )
    })
}

pub fn read(view: &View, port: &RdmaPort) -> SettingResult<u8> {
    let content = view
        .read(&tos_path(port))
        .map_err(|e| error(view, port, "read", e))?;
    parse(&content).map_err(|why| error(view, port, "read", why))
}

pub fn write(view: &View, port: &RdmaPort, tos: u8) -> SettingResult<()> {
    view.write(&tos_path(port), tos.to_string().as_bytes())
        .map_err(|e| error(view, port, &format!("write {tos} to"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_paths() {
        assert_eq!(parse("0\n"), Ok(0));
        assert_eq!(parse("106"), Ok(106));
        assert!(parse("256").is_err());
        assert!(parse("-1").is_err());
        assert!(!parse("root:$6$secret").unwrap_err().contains("secret"));
        let p = RdmaPort {
            device: "rxe0".into(),
            port: 1,
            pci: None,
            guid: None,
        };
        assert_eq!(
            tos_path(&p),
            PathBuf::from("kernel/config/rdma_cm/rxe0/ports/1/default_roce_tos")
        );
    }
}
