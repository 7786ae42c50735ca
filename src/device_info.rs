//! Device info for the pod (k8snetworkplumbingwg device-info-spec): a chained
//! plugin that declares the `CNIDeviceInfoFile` capability gets, in
//! `runtimeConfig`, the path of the JSON file Multus turns into the
//! `device-info` of the pod's `network-status` annotation. roce-tune makes
//! sure its `pci.rdma-device` names the RDMA device it found, so a pod reads
//! its RDMA device from the downward API instead of scanning sysfs.
//!
//! The path is tenant input: libcni passes a `runtimeConfig` the network
//! config carries itself when the runtime fills none. So only THIS
//! attachment's file is written: directly inside the node's `deviceInfoDir`
//! (root's, closed to others), never through a link, and named as Multus 4.2
//! names it, `<NAD namespace>-<NAD name>-<container id>_<ifname>`
//! (multus-cni pkg/types/conf.go, `delegateRuntimeConfig`; `/` becomes `-`),
//! so its name ends in `-<CNI_CONTAINERID>_<CNI_IFNAME>`. A file whose
//! `pci-address` is not the PCI function roce-tune proved the pod's netdev
//! to be is never changed. A file roce-tune creates is recorded in the state
//! entry first and removed when the attachment is released; one sriov-cni
//! (or Multus, from the device plugin's) made is left to them.
//!
//! The file is read-only once written (0444) and the spec's library refuses
//! to overwrite it, so a new one is written beside it and renamed over it.

use crate::node::NodeConfig;
use crate::rdma::RdmaPort;
use crate::state::DeviceInfoFile;
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fstat, Mode};
use serde_json::{json, Value};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// A device-info file is a few hundred bytes.
const MAX_BYTES: u64 = 64 * 1024;

/// This attachment's file, by name inside the node's deviceInfoDir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub name: String,
}

/// Judge the requested path before anything is looked up: `Err` says why
/// it is not this attachment's file (logged; ADD goes on without it).
pub fn request(
    node: &NodeConfig,
    requested: &str,
    container_id: &str,
    ifname: &str,
) -> Result<Request, String> {
    let path = Path::new(requested);
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| is_file_name(n))
        .ok_or("it does not end in a plain file name")?;
    // Multus names the file by the configured path (`/var/run/...`); the
    // resolved one is the same directory. Any other is not the node's.
    let parent = path.parent();
    if parent != Some(node.device_info_dir_named.as_path())
        && parent != Some(node.device_info_dir.as_path())
    {
        return Err(format!(
            "it is not directly inside the node's deviceInfoDir {}",
            node.device_info_dir_named.display()
        ));
    }
    let own = format!("-{container_id}_{ifname}");
    if !name.ends_with(&own) || name.len() == own.len() {
        return Err(format!(
            "it is not this attachment's file: Multus names it <NAD namespace>-<NAD name>{own}"
        ));
    }
    Ok(Request {
        name: name.to_owned(),
    })
}

/// What ADD will do with the file, judged once the pod's device is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No file yet: roce-tune makes it (and records that first).
    Create,
    /// A file naming the proven PCI function (or none): set rdma-device.
    Update,
    /// It already names the device.
    Current,
}

/// Judge what the file holds against the PCI function roce-tune proved the
/// pod's netdev to be (`pci`). `Err` says why it is left alone.
pub fn plan(node: &NodeConfig, req: &Request, port: &RdmaPort, pci: &str) -> Result<Plan, String> {
    let dir = open_dir(node, false)?;
    let Some(dir) = dir else {
        return Ok(Plan::Create);
    };
    let Some(info) = read_at(&dir, &req.name)? else {
        return Ok(Plan::Create);
    };
    match info["pci"]["pci-address"].as_str() {
        Some(p) if p != pci => {
            return Err(format!(
                "it names the PCI function {}, not the pod's {pci}: it is another device's",
                if crate::cni::config::PciAddr::parse(p).is_some() {
                    p
                } else {
                    "(not a PCI address)"
                }
            ))
        }
        _ => {}
    }
    if info["pci"]["rdma-device"] == port.device.as_str() && info["pci"]["pci-address"] == pci {
        return Ok(Plan::Current);
    }
    Ok(Plan::Update)
}

/// Carry out `plan`: `pci.rdma-device` is `port`'s device and
/// `pci.pci-address` the pod's `pci`. Never fails the ADD: a failure is
/// logged (the pod works without it).
pub fn apply(node: &NodeConfig, req: &Request, plan: &Plan, port: &RdmaPort, pci: &str) {
    let done = match plan {
        Plan::Current => {
            crate::debug!("device info {} already names {}", req.name, port.device);
            return;
        }
        Plan::Create | Plan::Update => write(node, req, plan, port, pci),
    };
    match done {
        Ok(()) => crate::info!(
            "device info {}: pci.rdma-device is {} ({pci})",
            req.name,
            port.device
        ),
        Err(why) => crate::warn!("device info {}: not written: {why}", req.name),
    }
}

fn write(
    node: &NodeConfig,
    req: &Request,
    plan: &Plan,
    port: &RdmaPort,
    pci: &str,
) -> Result<(), String> {
    let dir = open_dir(node, *plan == Plan::Create)?.ok_or("deviceInfoDir is missing")?;
    let mut info = match read_at(&dir, &req.name)? {
        Some(v) if *plan == Plan::Update => v,
        Some(_) => return Err("it appeared meanwhile: left to whoever made it".into()),
        None if *plan == Plan::Create => json!({"type": "pci", "version": "1.1.0", "pci": {}}),
        None => return Err("it vanished meanwhile".into()),
    };
    if !info["pci"].is_object() {
        info["pci"] = json!({});
    }
    info["pci"]["rdma-device"] = json!(port.device);
    info["pci"]["pci-address"] = json!(pci);
    let tmp = format!(".{}.roce-tune.{}", req.name, std::process::id());
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
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO)))
        .and_then(|()| {
            if *plan == Plan::Create {
                // A file that appeared since the plan is someone else's.
                nix::fcntl::renameat2(
                    &dir,
                    tmp.as_str(),
                    &dir,
                    req.name.as_str(),
                    nix::fcntl::RenameFlags::RENAME_NOREPLACE,
                )
            } else {
                renameat(&dir, tmp.as_str(), &dir, req.name.as_str())
            }
        });
    if let Err(e) = written {
        let _ = nix::unistd::unlinkat(&dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(format!("it could not be written ({e})"));
    }
    Ok(())
}

/// The file this attachment's ADD created, at its release: removed while it
/// still names the recorded PCI function (else it is someone else's now).
pub fn remove(dir: &Path, rec: &DeviceInfoFile) {
    let gone = (|| -> Result<bool, String> {
        let Some(fd) = open_existing(dir)? else {
            return Ok(false);
        };
        match read_at(&fd, &rec.name)? {
            Some(info) if info["pci"]["pci-address"] == rec.pci.as_str() => {
                nix::unistd::unlinkat(
                    &fd,
                    rec.name.as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                )
                .map_err(|e| e.to_string())?;
                Ok(true)
            }
            Some(_) => Err("it no longer names the recorded PCI function: left alone".into()),
            None => Ok(false),
        }
    })();
    match gone {
        Ok(true) => crate::info!("device info {}: removed (roce-tune made it)", rec.name),
        Ok(false) => crate::debug!("device info {}: already gone", rec.name),
        Err(why) => crate::warn!("device info {}: {why}", rec.name),
    }
}

/// The node's deviceInfoDir, checked (and, for a file to create, made: root's,
/// 0700, when nothing on the node has made it yet).
fn open_dir(node: &NodeConfig, create: bool) -> Result<Option<OwnedFd>, String> {
    match crate::safe_dir::check_chain(&node.device_info_dir, create) {
        Ok(Some(_)) => {}
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("deviceInfoDir is refused: {e}")),
    }
    open_existing(&node.device_info_dir)
}

fn open_existing(dir: &Path) -> Result<Option<OwnedFd>, String> {
    let fd = match nix::fcntl::open(
        dir,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(format!("deviceInfoDir cannot be opened ({e})")),
    };
    let st = fstat(&fd).map_err(|e| e.to_string())?;
    if st.st_uid != 0 || st.st_mode & 0o022 != 0 {
        return Err("deviceInfoDir is not root's, or others can write it".into());
    }
    Ok(Some(fd))
}

/// The file's JSON object, `None` when there is no such file.
fn read_at(dir: &OwnedFd, name: &str) -> Result<Option<Value>, String> {
    let fd = match openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(Errno::ELOOP) => return Err("it is a symbolic link".into()),
        Err(e) => return Err(format!("it cannot be opened ({e})")),
    };
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
        Ok(v) if v.is_object() => Ok(Some(v)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_attachments_name_is_requested() {
        let node = NodeConfig::defaults("/etc/cni/roce-tune/node.json".into());
        let dir = node.device_info_dir.display().to_string();
        let ok = request(
            &node,
            &format!("{dir}/default-rail-1-c1_net1"),
            "c1",
            "net1",
        );
        assert_eq!(ok.unwrap().name, "default-rail-1-c1_net1");
        for (path, why) in [
            (
                format!("{dir}/default-rail-1-c2_net1"),
                "not this attachment's",
            ),
            (
                format!("{dir}/default-rail-1-c1_net10"),
                "not this attachment's",
            ),
            (format!("{dir}/-c1_net1"), "not this attachment's"),
            (
                format!("{dir}/sub/default-rail-1-c1_net1"),
                "directly inside",
            ),
            ("/etc/default-rail-1-c1_net1".into(), "directly inside"),
            (format!("{dir}/.."), "plain file name"),
        ] {
            let e = request(&node, &path, "c1", "net1").unwrap_err();
            assert!(e.contains(why), "{path}: {e}");
        }
    }
}
