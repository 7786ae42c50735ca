//! Reading an entry of any format: this binary's straight into its type,
//! formats 1 to 3 converted, a newer one recognised by its version and left
//! alone (a rollback must not lose a restore).

use super::entry::{Entry, Owned, FORMAT};
use crate::netns::NsId;
use crate::rdma::is_safe_component;
use crate::rdma::reach::Reach;
use crate::settings::by_key;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Why an entry could not be read.
#[derive(Debug)]
pub enum ReadError {
    Missing,
    /// Present but not trustworthy: not a regular file, too large, or not an
    /// entry. The reason never quotes the file.
    Corrupt(String),
    /// Written by a newer roce-tune: left alone, never quarantined.
    /// What is newer: "format 4", or a setting this binary does not know.
    Newer(String),
    /// The OS error, kept so DEL can tell a passing failure from a lasting one.
    Io(std::io::Error),
}

/// Decode an entry, by its version first so a newer one is recognised even
/// when this binary cannot read the rest.
pub fn decode(bytes: &[u8]) -> Result<Entry, ReadError> {
    // This format straight into its type: the common case, and half the
    // work of a `Value` first (the orphan sweep reads up to 16 per ADD).
    let direct = serde_json::from_slice::<Entry>(bytes)
        .ok()
        .filter(|e| e.version == FORMAT);
    let entry = match direct {
        Some(e) => e,
        None => decode_any(bytes)?,
    };
    // A setting only a newer roce-tune knows: it alone can give it back.
    if let Some(k) = entry.owned.keys().find(|k| by_key(k).is_none()) {
        return Err(ReadError::Newer(if is_safe_component(k) {
            format!("the setting {k}")
        } else {
            "a setting this binary does not know".into()
        }));
    }
    entry.validate().map_err(ReadError::Corrupt)?;
    Ok(entry)
}

/// serde's message can quote the content: give only where it broke.
fn not_entry(e: serde_json::Error) -> ReadError {
    ReadError::Corrupt(format!(
        "it is not a state entry ({:?} error at line {}, column {})",
        e.classify(),
        e.line(),
        e.column()
    ))
}

/// Any format, by its version: the older ones converted, a newer one left.
fn decode_any(bytes: &[u8]) -> Result<Entry, ReadError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(not_entry)?;
    let version = v
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| ReadError::Corrupt("it has no format version".into()))?;
    Ok(match version {
        1 => Entry::from(serde_json::from_value::<EntryV1>(v).map_err(not_entry)?),
        2 => Entry::from(serde_json::from_value::<EntryV2>(v).map_err(not_entry)?),
        // Format 3 is format 4 without `rail`.
        3 => serde_json::from_value::<Entry>(v).map_err(not_entry)?,
        n if n == u64::from(FORMAT) => serde_json::from_value::<Entry>(v).map_err(not_entry)?,
        n if n > u64::from(FORMAT) => return Err(ReadError::Newer(format!("format {n}"))),
        _ => return Err(ReadError::Corrupt("its format version is 0".into())),
    })
}

/// Formats 1 and 2 kept each setting in a field of its own, as a byte.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OwnedV2 {
    original: Option<u8>,
    written: u8,
}

impl From<OwnedV2> for Owned {
    fn from(v: OwnedV2) -> Owned {
        Owned {
            original: v.original.map(u32::from),
            written: u32::from(v.written),
        }
    }
}

/// The owned settings of a format 1 or 2 entry, by their keys.
fn owned_of(class: Option<OwnedV2>, tos: Option<OwnedV2>) -> BTreeMap<String, Owned> {
    [("trafficClass", class), ("rdmaCmTos", tos)]
        .into_iter()
        .filter_map(|(k, o)| o.map(|o| (k.to_owned(), Owned::from(o))))
        .collect()
}

/// The version 2 layout (0.1.0's successor), read so an upgrade loses no
/// restore.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryV2 {
    #[allow(dead_code)]
    version: u32,
    network: String,
    container_id: String,
    ifname: String,
    netns: String,
    netns_id: Option<NsId>,
    exclusive: bool,
    device: String,
    port: u32,
    pci: Option<String>,
    guid: Option<String>,
    traffic_class: Option<OwnedV2>,
    rdma_cm_tos: Option<OwnedV2>,
    created_ns: u64,
}

impl From<EntryV2> for Entry {
    fn from(v: EntryV2) -> Entry {
        Entry {
            version: 2,
            network: v.network,
            container_id: v.container_id,
            ifname: v.ifname,
            netns: v.netns,
            netns_id: v.netns_id,
            reach: reach_of(v.exclusive),
            device: v.device,
            port: v.port,
            pci: v.pci,
            guid: v.guid,
            owned: owned_of(v.traffic_class, v.rdma_cm_tos),
            device_info: None,
            pod: None,
            placement: None,
            gid: None,
            rail: None,
            created_ns: v.created_ns,
        }
    }
}

/// Formats 1 and 2 said `exclusive` (recorded only on the real /sys).
fn reach_of(exclusive: bool) -> Reach {
    if exclusive {
        Reach::Pod
    } else {
        Reach::Host
    }
}

/// The version 1 layout (0.1.0), read so an upgrade loses no restore.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryV1 {
    #[allow(dead_code)]
    version: u32,
    network: String,
    container_id: String,
    ifname: String,
    netns: String,
    /// Ignored: where sysfs is comes from the node config, never an entry.
    #[allow(dead_code)]
    sysfs_root: PathBuf,
    exclusive: bool,
    device: String,
    port: u32,
    original: Option<u8>,
    written: u8,
    created: u64,
}

impl From<EntryV1> for Entry {
    fn from(v: EntryV1) -> Entry {
        Entry {
            version: 1,
            network: v.network,
            container_id: v.container_id,
            ifname: v.ifname,
            netns: v.netns,
            netns_id: None,
            reach: reach_of(v.exclusive),
            device: v.device,
            port: v.port,
            pci: None,
            guid: None,
            owned: owned_of(
                Some(OwnedV2 {
                    original: v.original,
                    written: v.written,
                }),
                None,
            ),
            device_info: None,
            pod: None,
            placement: None,
            gid: None,
            rail: None,
            created_ns: v.created.saturating_mul(1_000_000_000),
        }
    }
}
