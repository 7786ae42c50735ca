//! Reading one key of a config by its type and bounds, and the rules of
//! the values that are not one number or word: a network's name, sysctls,
//! GC's attachments.

use super::{Attachment, PciAddr, SysctlSetting};
use crate::cni::error::{CniError, CniResult};
use crate::cni::json;
use crate::cni::keys::Key;
use serde_json::{Map, Value};
use std::path::Path;

/// Keys as a message lists them.
pub(super) fn names(keys: &[Key]) -> String {
    keys.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// A host-path key in a network config: where it belongs instead.
pub(super) fn node_key(key: &str, node_config: &Path) -> CniError {
    CniError::config(format!(
        "{key} is a node setting, and a network config may not name host paths (any namespace user may write one); set {key} in the node config, {}, and remove it here",
        node_config.display()
    ))
}

/// The CNI spec's rule for a network name (SPEC.md, "Network configuration"):
/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`. It also keeps the name, which reaches
/// every log line and state entry, free of anything that could forge a line.
pub fn validate_name(name: &str) -> CniResult<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && name.len() <= 253;
    if ok {
        Ok(())
    } else {
        Err(CniError::config(format!(
            "name {:?} is not a network name: it must start with a letter or digit and hold only letters, digits, '_', '.', '-' (at most 253)",
            name.chars().take(64).collect::<String>()
        )))
    }
}

pub(super) fn wrong_type(key: &str, want: &str, got: &Value) -> CniError {
    CniError::config(format!(
        "{key} must be {want}, got {}",
        crate::quote::input_json(got)
    ))
}

/// The value of `key`: the parser reads no key but through this (or the
/// helpers below), so every key it reads is one of `Key::ALL`.
pub(super) fn get(obj: &Map<String, Value>, key: Key) -> Option<&Value> {
    obj.get(key.name())
}

/// A config string: an empty one is kept (and judged by its key's rules).
pub(super) fn opt_str(obj: &Map<String, Value>, key: Key) -> CniResult<Option<String>> {
    let key = key.name();
    json::str_field(obj, key)
        .map(|s| s.map(str::to_owned))
        .map_err(|v| wrong_type(key, "a string", v))
}

pub(super) fn opt_int(
    obj: &Map<String, Value>,
    key: Key,
    min: u64,
    max: u64,
) -> CniResult<Option<u64>> {
    let key = key.name();
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(x) if (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(CniError::config(format!(
                "{key} is {n}: it must be a whole number from {min} to {max}"
            ))),
        },
        Some(other) => Err(wrong_type(
            key,
            &format!("a whole number from {min} to {max}"),
            other,
        )),
    }
}

pub(super) fn opt_pci(obj: &Map<String, Value>, key: Key) -> CniResult<Option<PciAddr>> {
    match opt_str(obj, key)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => PciAddr::parse(&s).map(Some).ok_or_else(|| {
            CniError::config(format!(
                "{} {:?} is not a PCI address of the form DDDD:BB:DD.F (e.g. 0000:0c:00.2)",
                key.name(),
                s.chars().take(64).collect::<String>()
            ))
        }),
    }
}

/// The most sysctls one rail could want; more is a config bug.
const MAX_SYSCTLS: usize = 64;

pub(super) fn parse_sysctls(m: &Map<String, Value>) -> CniResult<Vec<SysctlSetting>> {
    if m.len() > MAX_SYSCTLS {
        return Err(CniError::config(format!(
            "sysctl has {} keys, more than {MAX_SYSCTLS}",
            m.len()
        )));
    }
    let mut out = Vec::with_capacity(m.len());
    for (key, value) in m {
        let value = match value {
            Value::String(s) => s.clone(),
            other => return Err(wrong_type(&format!("sysctl {key:?}"), "a string", other)),
        };
        validate_sysctl_key(key)?;
        validate_sysctl_value(key, &value)?;
        out.push(SysctlSetting {
            key: key.clone(),
            value,
        });
    }
    Ok(out)
}

/// Keys are dotted and must stay under `net.` (the netns's own sysctls): each
/// component is non-empty, holds no '/' and is not '.' or '..', so the key can
/// only name a file below /proc/sys/net of the pod's netns.
pub fn validate_sysctl_key(key: &str) -> CniResult<()> {
    let bad = |why: &str| {
        CniError::config(format!(
            "sysctl key {:?} {why}: keys are dotted names under net., e.g. net.ipv4.conf.IFNAME.arp_ignore",
            key.chars().take(128).collect::<String>()
        ))
    };
    if key.len() > 256 {
        return Err(bad("is too long"));
    }
    let mut parts = key.split('.');
    if parts.next() != Some("net") {
        return Err(bad("is outside net."));
    }
    let mut n = 1;
    for p in parts {
        n += 1;
        if p.is_empty() {
            return Err(bad("has an empty component (\"..\" or a trailing dot)"));
        }
        if p.contains('/') {
            return Err(bad("has a '/' in a component"));
        }
        if p.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(bad("has a space, control or non-ASCII character"));
        }
    }
    if n < 2 {
        return Err(bad("names no setting"));
    }
    Ok(())
}

fn validate_sysctl_value(key: &str, value: &str) -> CniResult<()> {
    // Multi-word values ("4096 87380 6291456") are legal; control characters
    // would let one setting write a second line.
    if value.is_empty() || value.len() > 256 || value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(CniError::config(format!(
            "sysctl {key:?} has value {:?}: give 1 to 256 printable characters",
            value.chars().take(64).collect::<String>()
        )));
    }
    Ok(())
}

pub(super) fn parse_attachments(v: &Value) -> CniResult<Vec<Attachment>> {
    let arr = v
        .as_array()
        .ok_or_else(|| wrong_type(Key::ValidAttachments.name(), "an array", v))?;
    arr.iter()
        .enumerate()
        .map(|(i, a)| {
            let field = |k: &str| {
                a.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        CniError::config(format!(
                            "cni.dev/valid-attachments[{i}] has no string {k}"
                        ))
                    })
            };
            Ok(Attachment {
                container_id: field("containerID")?,
                ifname: field("ifname")?,
            })
        })
        .collect()
}
