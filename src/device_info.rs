//! Device info for the pod (k8snetworkplumbingwg device-info-spec): a chained
//! plugin that declares the `CNIDeviceInfoFile` capability gets, in
//! `runtimeConfig`, the path of the JSON file Multus turns into the
//! `device-info` of the pod's `network-status` annotation. roce-tune makes
//! sure its `pci.rdma-device` names the RDMA device it found, so a pod reads
//! its RDMA device from the downward API instead of scanning sysfs.
//!
//! The path is tenant input: libcni passes a `runtimeConfig` the network
//! config carries itself when the runtime fills none. So it is honoured only
//! when it names a file directly inside the node's `deviceInfoDir`, that dir
//! is root's and closed to others, and the file (when there) is a regular
//! file, not a link. Otherwise roce-tune logs why and writes nothing. The
//! file is read-only once written (0444) and the spec's library refuses to
//! overwrite it, so a new one is written beside it and renamed over it.

use crate::node::NodeConfig;
use crate::rdma::RdmaPort;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fstat, Mode};
use serde_json::{json, Value};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// A device-info file is a few hundred bytes.
const MAX_BYTES: u64 = 64 * 1024;

/// Make `requested`'s `pci.rdma-device` name `port`'s device. Never fails the
/// ADD: the pod works without it; a refusal or failure is logged.
pub fn update(node: &NodeConfig, requested: &str, port: &RdmaPort) {
    match write(node, requested, port) {
        Ok(true) => crate::info!(
            "device info {requested}: pci.rdma-device is {}",
            port.device
        ),
        Ok(false) => crate::debug!("device info {requested} already names {}", port.device),
        Err(why) => crate::warn!(
            "device info {}: not written: {why}",
            crate::log::escape(requested)
        ),
    }
}

/// `Ok(true)` when the file was (re)written.
fn write(node: &NodeConfig, requested: &str, port: &RdmaPort) -> Result<bool, String> {
    let path = Path::new(requested);
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| is_file_name(n))
        .ok_or("it does not end in a plain file name")?;
    if path.parent() != Some(node.device_info_dir.as_path()) {
        return Err(format!(
            "it is not directly inside the node's deviceInfoDir {}",
            node.device_info_dir.display()
        ));
    }
    let dir = nix::fcntl::open(
        &node.device_info_dir,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("deviceInfoDir cannot be opened ({e})"))?;
    let st = fstat(&dir).map_err(|e| e.to_string())?;
    if st.st_uid != 0 || st.st_mode & 0o022 != 0 {
        return Err("deviceInfoDir is not root's, or others can write it".into());
    }
    let mut info = match openat(
        &dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => read_info(fd)?,
        Err(nix::errno::Errno::ENOENT) => json!({"type": "pci", "version": "1.1.0", "pci": {}}),
        Err(nix::errno::Errno::ELOOP) => return Err("it is a symbolic link".into()),
        Err(e) => return Err(format!("it cannot be opened ({e})")),
    };
    if info["pci"]["rdma-device"] == port.device.as_str() {
        return Ok(false);
    }
    if !info["pci"].is_object() {
        info["pci"] = json!({});
    }
    info["pci"]["rdma-device"] = json!(port.device);
    if info["pci"].get("pci-address").is_none() {
        if let Some(pci) = &port.pci {
            info["pci"]["pci-address"] = json!(pci);
        }
    }
    let tmp = format!(".{name}.roce-tune.{}", std::process::id());
    let fd = openat(
        &dir,
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o444),
    )
    .map_err(|e| format!("a new file cannot be made beside it ({e})"))?;
    let body = serde_json::to_vec(&info).map_err(|e| e.to_string())?;
    let written = File::from(fd)
        .write_all(&body)
        .and_then(|()| renameat(&dir, tmp.as_str(), &dir, name).map_err(std::io::Error::from));
    if let Err(e) = written {
        let _ = nix::unistd::unlinkat(&dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(format!("it could not be replaced ({e})"));
    }
    Ok(true)
}

fn read_info(fd: OwnedFd) -> Result<Value, String> {
    let st = fstat(fd.as_fd()).map_err(|e| e.to_string())?;
    if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
        return Err("it is not a regular file".into());
    }
    let mut buf = Vec::new();
    File::from(fd)
        .take(MAX_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    match serde_json::from_slice::<Value>(&buf) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(format!(
            "it holds {} bytes that are not a device-info object",
            buf.len()
        )),
    }
}

/// One path component of printable ASCII, no `/`, not `.` or `..`.
fn is_file_name(n: &str) -> bool {
    n.len() <= 255 && n != "." && n != ".." && n.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}
