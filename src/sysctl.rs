//! The rail sysctls, applied in the pod's netns. /proc/sys/net shows the netns
//! of the task that opens the file, so every function here must run on a
//! thread that entered the pod netns (see `netns`).

use crate::cni::config::SysctlSetting;
use crate::node::{pattern_matches, NodeConfig};
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Why a sysctl could not be set or does not hold its value. The CNI edge
/// gives each kind its code: 7 (the config names what is not there or not
/// allowed), 5 (I/O), 103 (CHECK: drifted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysctlError {
    /// The key is not in the node's allowlist, or not in the pod's netns.
    Config(String),
    Io(String),
    Drifted(String),
}

impl fmt::Display for SysctlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SysctlError::Config(m) | SysctlError::Io(m) | SysctlError::Drifted(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SysctlError {}

pub type SysctlResult<T> = Result<T, SysctlError>;

/// A sysctl with `IFNAME` resolved and its /proc/sys path built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSysctl {
    /// Dotted key as configured, `IFNAME` replaced (for messages).
    pub key: String,
    pub path: PathBuf,
    pub value: String,
}

/// Resolve keys against the interface name. The key was validated as dotted
/// components (config::validate_sysctl_key); `IFNAME` is replaced as a whole
/// component so an interface name holding a dot (a VLAN, `net1.100`) stays one
/// path component, unlike a dots-to-slashes rewrite of the whole string.
/// `proc_sys` is where the calling thread's `/proc/sys` is
/// (`Syscall::proc_sys`).
pub fn resolve(proc_sys: &Path, settings: &[SysctlSetting], ifname: &str) -> Vec<ResolvedSysctl> {
    settings
        .iter()
        .map(|s| {
            let parts: Vec<&str> = s
                .key
                .split('.')
                .map(|p| if p == "IFNAME" { ifname } else { p })
                .collect();
            let mut path = proc_sys.to_path_buf();
            path.extend(&parts);
            ResolvedSysctl {
                key: parts.join("."),
                path,
                value: s.value.clone(),
            }
        })
        .collect()
}

/// The node's allowlist (node config `sysctlAllowlist`), when it has one, must
/// match every key of every network: the role of the reference tuning
/// plugin's /etc/cni/tuning/allowlist.conf, but with component globs.
pub fn check_allowlist(
    settings: &[SysctlSetting],
    ifname: &str,
    node: &NodeConfig,
) -> SysctlResult<()> {
    let Some(patterns) = &node.sysctl_allowlist else {
        return Ok(());
    };
    for s in settings {
        if !patterns.iter().any(|p| pattern_matches(p, &s.key, ifname)) {
            return Err(SysctlError::Config(format!(
                "sysctl {} is not allowed on this node: no pattern of sysctlAllowlist in {} matches it; ask the node admin, or remove it from sysctl",
                s.key,
                node.source.display()
            )));
        }
    }
    Ok(())
}

/// Kernel output separates multi-value sysctls with tabs; compare by words.
pub fn same_value(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

pub fn read(s: &ResolvedSysctl) -> SysctlResult<String> {
    let f = std::fs::File::open(&s.path).map_err(|e| error(s, "read", e))?;
    read_from(&f).map_err(|e| error(s, "read", e))
}

/// The value of an open sysctl file, read from offset 0. procfs answers a
/// sysctl read whole, so a read shorter than the buffer is the end: one
/// `pread` where `read_to_string` makes four calls (statx, read, read); a
/// page holds any rail value in that one read.
fn read_from(f: &std::fs::File) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        let n = f.read_at(&mut buf[len..], len as u64)?;
        len += n;
        if n == 0 || len < buf.len() {
            break;
        }
        buf.resize(buf.len() * 2, 0);
    }
    buf.truncate(len);
    String::from_utf8(buf)
        .map(|v| v.trim_end().to_string())
        .map_err(|_| std::io::Error::new(ErrorKind::InvalidData, "not UTF-8"))
}

/// The sysctl file open for reading, and for writing where /proc lets us.
fn open_for_apply(s: &ResolvedSysctl) -> SysctlResult<(std::fs::File, bool)> {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&s.path)
    {
        Ok(f) => Ok((f, true)),
        // A read-only /proc (or a read-only key) still passes when nothing
        // has to change: read it, and write only where it differs.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(nix::libc::EROFS | nix::libc::EACCES | nix::libc::EPERM)
            ) =>
        {
            std::fs::File::open(&s.path)
                .map(|f| (f, false))
                .map_err(|e| error(s, "read", e))
        }
        Err(e) => Err(error(s, "read", e)),
    }
}

/// Write `value` at offset 0 of the file `apply` opened (or, when it could
/// only read it, through a new descriptor, for the kernel's own error).
fn write_value(s: &ResolvedSysctl, f: &std::fs::File, writable: bool) -> SysctlResult<()> {
    use std::os::unix::fs::FileExt;
    if !writable {
        return std::fs::write(&s.path, s.value.as_bytes()).map_err(|e| error(s, "write", e));
    }
    match f.write_at(s.value.as_bytes(), 0) {
        Ok(n) if n == s.value.len() => Ok(()),
        Ok(n) => Err(SysctlError::Io(format!(
            "write sysctl {} ({}): the kernel took {n} of {} bytes",
            s.key,
            s.path.display(),
            s.value.len()
        ))),
        Err(e) => Err(error(s, "write", e)),
    }
}

fn error(s: &ResolvedSysctl, what: &str, e: std::io::Error) -> SysctlError {
    if e.kind() == ErrorKind::NotFound {
        SysctlError::Config(format!(
            "sysctl {} does not exist in the pod netns ({}): check the key and that the interface exists",
            s.key,
            s.path.display()
        ))
    } else {
        SysctlError::Io(format!(
            "{what} sysctl {} ({}): {e}",
            s.key,
            s.path.display()
        ))
    }
}

/// What was there before `apply` changed it, to undo a failed ADD.
pub type Undo = Vec<(ResolvedSysctl, String)>;

/// Write each sysctl whose live value differs (reading first keeps a
/// read-only /proc working when nothing has to change). On failure, what was
/// already written is put back before the error is returned.
pub fn apply(list: &[ResolvedSysctl]) -> SysctlResult<Undo> {
    let mut undo: Undo = Vec::new();
    for s in list {
        // One open for both the read and the write: this runs six times in
        // every ADD's pod thread.
        let step = open_for_apply(s).and_then(|(f, writable)| {
            let old = read_from(&f).map_err(|e| error(s, "read", e))?;
            if same_value(&old, &s.value) {
                return Ok(None);
            }
            write_value(s, &f, writable)?;
            Ok(Some(old))
        });
        match step {
            Ok(Some(old)) => undo.push((s.clone(), old)),
            Ok(None) => {}
            Err(e) => {
                revert(&undo);
                return Err(e);
            }
        }
    }
    Ok(undo)
}

/// Best effort: put back values recorded by `apply`, newest first.
pub fn revert(undo: &Undo) {
    for (s, old) in undo.iter().rev() {
        if let Err(e) = std::fs::write(&s.path, old.as_bytes()) {
            crate::warn!("could not put back sysctl {} to {old:?}: {e}", s.key);
        }
    }
}

/// CHECK: the first sysctl whose live value differs, as an error naming it.
pub fn verify(list: &[ResolvedSysctl]) -> SysctlResult<()> {
    for s in list {
        let live = read(s)?;
        if !same_value(&live, &s.value) {
            return Err(SysctlError::Drifted(format!(
                "sysctl {} is {} in the pod, expected {:?}",
                s.key,
                crate::quote::file(&live, 64),
                s.value
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifname_replaced_as_a_component() {
        let r = resolve(
            Path::new("/proc/sys"),
            &[SysctlSetting {
                key: "net.ipv4.conf.IFNAME.arp_ignore".into(),
                value: "1".into(),
            }],
            "net1.100",
        );
        assert_eq!(r[0].key, "net.ipv4.conf.net1.100.arp_ignore");
        assert_eq!(
            r[0].path,
            PathBuf::from("/proc/sys/net/ipv4/conf/net1.100/arp_ignore")
        );
    }

    #[test]
    fn tab_and_space_separated_values_compare_equal() {
        assert!(same_value("4096\t87380\t6291456", "4096 87380 6291456"));
        assert!(!same_value("1", "0"));
    }
}
