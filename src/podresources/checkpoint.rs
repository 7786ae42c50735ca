//! The kubelet's device manager checkpoint, the fallback Multus takes when
//! the PodResources socket is not there (multus-cni `pkg/checkpoint/
//! checkpoint.go` at 95a0932, lines 27-112; `pkg/kubeletclient/
//! kubeletclient.go` lines 64-72).
//!
//! This is the kubelet's internal state, not an API: its shape is whatever
//! kubernetes `pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go` writes
//! (`Data{Data{PodDeviceEntries, RegisteredDevices}, Checksum, BootID}`,
//! each entry `{PodUID, ContainerName, ResourceName, DeviceIDs, AllocResp}`).
//! `DeviceIDs` maps a NUMA node (a JSON object key, "-1" when unknown) to
//! IDs since 1.20; 1.19 and older wrote a plain list (`checkpointv1.go`,
//! `PodDevicesEntryV1`). Both are read. Entries are keyed by pod UID only:
//! no name, no namespace. The checksum (FNV-32a of a Go-spew dump of the
//! data) is not verified: it cannot be recomputed outside Go, and Multus
//! does not either.

use super::{dedup, Error, PodDevices, ID_MAX, POD_DEVICES_MAX};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The bounds of a read, each checked before the read or the loop it guards
/// (without them, a 16 MiB checkpoint, read whole into a `serde_json::Value`,
/// took 0.70 s and 217 MB). The file is decoded in one pass that keeps only
/// the entries of the pod asked for; `AllocResp`, the bulk of a real file,
/// is skipped unread.
///
/// A node's file: 110 pods with three device-plugin resources each, every
/// entry's `AllocResp` a few hundred bytes of base64, is about 300 KiB.
pub const CHECKPOINT_MAX: u64 = 4 << 20;
/// Entries (one per pod, container and resource).
pub const ENTRIES_MAX: usize = 16_384;
/// NUMA nodes of one entry's `DeviceIDs`.
pub const NUMA_NODES_MAX: usize = 64;

/// The pod's device-plugin devices by pod UID, read from the checkpoint
/// `file`. `Ok(None)`: the file holds no entry for that UID.
///
/// The kubelet writes it as root, 0600 (`checkpointmanager`); a file
/// another uid owns, that group or others can write, or a link (whoever
/// made it chose the file) decides nothing: `Untrusted`.
pub fn from_checkpoint(file: &Path, uid: &str) -> Result<Option<PodDevices>, Error> {
    // Non-blocking, and a regular file only: a FIFO in its place would
    // otherwise hold the ADD past its bound at the open.
    let untrusted = |why: String| {
        Error::Untrusted(format!(
            "the kubelet's checkpoint {} is {why}",
            file.display()
        ))
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(file)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => untrusted("a symbolic link".into()),
            _ => Error::Io {
                op: "open the checkpoint",
                err: e,
            },
        })?;
    let meta = f.metadata().map_err(|e| Error::Io {
        op: "examine the checkpoint",
        err: e,
    })?;
    if !meta.is_file() {
        return Err(Error::Io {
            op: "read the checkpoint",
            err: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        });
    }
    if meta.uid() != 0 {
        return Err(untrusted(format!("owned by uid {}, not root", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(format!(
            "writable by group or others (mode {:04o})",
            meta.mode() & 0o7777
        )));
    }
    if meta.len() > CHECKPOINT_MAX {
        return Err(Error::TooLarge {
            size: meta.len(),
            limit: CHECKPOINT_MAX,
        });
    }
    let buf = crate::fs_read::whole(&f, meta.len(), CHECKPOINT_MAX + 1).map_err(|e| Error::Io {
        op: "read the checkpoint",
        err: e,
    })?;
    if buf.len() as u64 > CHECKPOINT_MAX {
        return Err(Error::TooLarge {
            size: buf.len() as u64,
            limit: CHECKPOINT_MAX,
        });
    }
    parse(&buf, uid)
}

fn not_checkpoint(len: usize, why: &str) -> Error {
    Error::Protocol(format!(
        "checkpoint ({len} bytes) is not the kubelet's device manager checkpoint: {why}"
    ))
}

pub(crate) fn parse(buf: &[u8], uid: &str) -> Result<Option<PodDevices>, Error> {
    // JSON is UTF-8 (RFC 8259 §8.1), and serde_json checks only the strings
    // it keeps: a byte that is not, in a key or value skipped unread, made
    // a file no JSON reader takes pass (found by the fuzz target).
    let text = std::str::from_utf8(buf).map_err(|_| not_checkpoint(buf.len(), "not UTF-8 JSON"))?;
    let why = Cell::new(None);
    let seek = Seek { uid, why: &why };
    let mut de = serde_json::Deserializer::from_str(text);
    let found = seek
        .deserialize(&mut de)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|e| {
            // serde_json's own messages may quote the file: only ours, or
            // what kind of failure, is said.
            let kind = match e.classify() {
                serde_json::error::Category::Data => "not the checkpoint's shape",
                _ => "not JSON",
            };
            not_checkpoint(buf.len(), why.get().unwrap_or(kind))
        })?;
    Ok(found.map(|pairs| {
        dedup(
            pairs
                .iter()
                .map(|(r, id)| (r.as_str(), id.as_str()))
                .collect(),
        )
    }))
}

/// The (resource, ID) pairs of one pod, in file order; `None`: no entry.
type Found = Option<Vec<(String, String)>>;

/// Why the decode stopped, in this module's words (never the file's).
type Why<'w> = &'w Cell<Option<&'static str>>;

fn refuse<E: de::Error>(why: Why, what: &'static str) -> E {
    why.set(Some(what));
    E::custom(what)
}

/// The whole file: `{"Data": {"PodDeviceEntries": [...], ...}, ...}`.
struct Seek<'u, 'w> {
    uid: &'u str,
    why: Why<'w>,
}

impl<'de> DeserializeSeed<'de> for Seek<'_, '_> {
    type Value = Found;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seek<'_, '_> {
    type Value = Found;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the checkpoint object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Found, A::Error> {
        let mut found = None;
        let mut data = false;
        while let Some(key) = m.next_key::<Key>()? {
            if key.is("Data") {
                data = true;
                found = m.next_value_seed(Section {
                    uid: self.uid,
                    why: self.why,
                })?;
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        if !data {
            return Err(refuse(self.why, "no Data.PodDeviceEntries list"));
        }
        Ok(found)
    }
}

/// `Data`: its `PodDeviceEntries` list (a Go nil slice marshals as null: a
/// node with no pods holding devices; absent, the same).
struct Section<'u, 'w> {
    uid: &'u str,
    why: Why<'w>,
}

impl<'de> DeserializeSeed<'de> for Section<'_, '_> {
    type Value = Found;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Section<'_, '_> {
    type Value = Found;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the checkpoint's Data object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Found, A::Error> {
        let mut found = None;
        while let Some(key) = m.next_key::<Key>()? {
            if key.is("PodDeviceEntries") {
                found = m.next_value_seed(Entries {
                    uid: self.uid,
                    why: self.why,
                })?;
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Found, E> {
        Ok(None)
    }
}

/// `PodDeviceEntries`: at most [`ENTRIES_MAX`], the pod's kept.
struct Entries<'u, 'w> {
    uid: &'u str,
    why: Why<'w>,
}

impl<'de> DeserializeSeed<'de> for Entries<'_, '_> {
    type Value = Found;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Entries<'_, '_> {
    type Value = Found;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the PodDeviceEntries list")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Found, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Found, A::Error> {
        Err(refuse(self.why, "no Data.PodDeviceEntries list"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Found, A::Error> {
        let (mut count, mut found): (usize, Found) = (0, None);
        loop {
            if count == ENTRIES_MAX {
                if s.next_element::<IgnoredAny>()?.is_some() {
                    return Err(refuse(self.why, "more than 16384 PodDeviceEntries"));
                }
                return Ok(found);
            }
            let seed = Entry {
                why: self.why,
                kept: found.as_ref().map_or(0, Vec::len),
            };
            let Some(entry) = s.next_element_seed(seed)? else {
                return Ok(found);
            };
            count += 1;
            if entry.uid.as_deref() != Some(self.uid) {
                continue;
            }
            let resource = entry
                .resource
                .ok_or_else(|| refuse(self.why, "an entry without ResourceName"))?;
            let pairs = found.get_or_insert_with(Vec::new);
            pairs.extend(entry.ids.into_iter().map(|id| (resource.clone(), id)));
        }
    }
}

/// One entry, its IDs ordered by NUMA node (so the result does not depend
/// on the map's order in the file). `kept`: the pod's IDs already taken,
/// which count toward [`POD_DEVICES_MAX`] with this entry's.
struct Entry<'w> {
    why: Why<'w>,
    kept: usize,
}

struct Parsed {
    uid: Option<String>,
    resource: Option<String>,
    ids: Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = Parsed;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Entry<'_> {
    type Value = Parsed;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a PodDeviceEntries entry")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Parsed, A::Error> {
        let mut p = Parsed {
            uid: None,
            resource: None,
            ids: Vec::new(),
        };
        while let Some(key) = m.next_key::<Key>()? {
            if key.is("PodUID") {
                p.uid = m.next_value_seed(Text(self.why))?;
            } else if key.is("ResourceName") {
                p.resource = m.next_value_seed(Text(self.why))?;
            } else if key.is("DeviceIDs") {
                p.ids = m.next_value_seed(Ids {
                    why: self.why,
                    kept: self.kept,
                })?;
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        Ok(p)
    }
}

/// `DeviceIDs`: `{"<NUMA node>": [ids]}` since 1.20, a plain list before
/// (`checkpointv1.go`), null for none.
struct Ids<'w> {
    why: Why<'w>,
    kept: usize,
}

impl<'de> DeserializeSeed<'de> for Ids<'_> {
    type Value = Vec<String>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Ids<'_> {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("DeviceIDs")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Vec<String>, A::Error> {
        let mut out = Vec::new();
        IdList {
            why: self.why,
            room: POD_DEVICES_MAX.saturating_sub(self.kept),
            out: &mut out,
        }
        .visit_seq(s)?;
        Ok(out)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Vec<String>, A::Error> {
        let mut nodes: Vec<(i64, Vec<String>)> = Vec::new();
        let mut taken = 0;
        while let Some(key) = m.next_key::<NumaKey>()? {
            let node = key
                .0
                .ok_or_else(|| refuse(self.why, "a NUMA key that is not a number"))?;
            if nodes.len() == NUMA_NODES_MAX {
                return Err(refuse(self.why, "DeviceIDs of more than 64 NUMA nodes"));
            }
            // Go's json.Marshal of a map writes each key once; a second is
            // no kubelet's, and which one Go would keep is not to guess at.
            if nodes.iter().any(|(n, _)| *n == node) {
                return Err(refuse(self.why, "a NUMA node twice in DeviceIDs"));
            }
            let mut ids = Vec::new();
            m.next_value_seed(IdList {
                why: self.why,
                room: POD_DEVICES_MAX.saturating_sub(self.kept + taken),
                out: &mut ids,
            })?;
            taken += ids.len();
            nodes.push((node, ids));
        }
        nodes.sort_by_key(|(n, _)| *n);
        Ok(nodes.into_iter().flat_map(|(_, ids)| ids).collect())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Vec<String>, E> {
        Err(refuse(self.why, "DeviceIDs is neither a map nor a list"))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Vec<String>, E> {
        Err(refuse(self.why, "DeviceIDs is neither a map nor a list"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Vec<String>, E> {
        Err(refuse(self.why, "DeviceIDs is neither a map nor a list"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Vec<String>, E> {
        Err(refuse(self.why, "DeviceIDs is neither a map nor a list"))
    }
}

/// A list of device IDs, at most `room` more for the pod.
struct IdList<'w, 'o> {
    why: Why<'w>,
    room: usize,
    out: &'o mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for IdList<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IdList<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of device IDs")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        loop {
            if self.out.len() == self.room {
                if s.next_element::<IgnoredAny>()?.is_some() {
                    return Err(refuse(self.why, "a pod of more than 1024 device IDs"));
                }
                return Ok(());
            }
            match s.next_element_seed(Text(self.why))? {
                Some(Some(id)) => self.out.push(id),
                Some(None) => return Err(refuse(self.why, "a device ID that is not a string")),
                None => return Ok(()),
            }
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(refuse(self.why, "DeviceIDs of a NUMA node is not a list"))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(refuse(self.why, "DeviceIDs of a NUMA node is not a list"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(refuse(self.why, "DeviceIDs of a NUMA node is not a list"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(refuse(self.why, "DeviceIDs of a NUMA node is not a list"))
    }
}

/// A string of at most [`ID_MAX`] bytes; `None` for any other JSON value
/// (the caller says which field was wrong).
struct Text<'w>(Why<'w>);

impl<'de> DeserializeSeed<'de> for Text<'_> {
    type Value = Option<String>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Text<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<String>, E> {
        if v.len() > ID_MAX {
            return Err(refuse(self.0, "a name or device ID over 320 bytes"));
        }
        Ok(Some(v.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Option<String>, A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Option<String>, A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// An object key: one of the few names looked for, or another (not kept).
struct Key(Option<&'static str>);

impl Key {
    fn is(&self, name: &str) -> bool {
        self.0 == Some(name)
    }
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                const NAMES: [&str; 5] = [
                    "Data",
                    "PodDeviceEntries",
                    "PodUID",
                    "ResourceName",
                    "DeviceIDs",
                ];
                Ok(Key(NAMES.iter().find(|n| **n == v).copied()))
            }
        }
        d.deserialize_str(V)
    }
}

/// A NUMA node key, `Some` when it is a number ("-1" when unknown).
struct NumaKey(Option<i64>);

impl<'de> de::Deserialize<'de> for NumaKey {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<NumaKey, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = NumaKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a NUMA node")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NumaKey, E> {
                Ok(NumaKey(v.parse().ok()))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(p: &PodDevices) -> Vec<(&str, &str)> {
        p.devices
            .iter()
            .map(|d| (d.resource.as_str(), d.id.as_str()))
            .collect()
    }

    /// The shape of Multus's own test sample (pkg/checkpoint/checkpoint_test.go)
    /// and of a 1.20+ kubelet: NUMA-keyed IDs, two containers, another pod.
    const V2: &str = r#"{
      "Data": {
        "PodDeviceEntries": [
          {"PodUID": "970a395d-bb3b-11e8-89df-408d5c537d23", "ContainerName": "appcntr1",
           "ResourceName": "intel.com/sriov_net_A",
           "DeviceIDs": {"1": ["0000:03:02.5"], "-1": ["0000:03:02.3", "0000:03:02.0"]},
           "AllocResp": "CikKC3NyaW92X25ldF9BEhogMDAwMDowMzowMi4zIDAwMDA6MDM6MDIuMA=="},
          {"PodUID": "970a395d-bb3b-11e8-89df-408d5c537d23", "ContainerName": "appcntr2",
           "ResourceName": "nvidia.com/gpu", "DeviceIDs": {"0": ["GPU-a", "0000:03:02.3"]},
           "AllocResp": ""},
          {"PodUID": "970a395d-bb3b-11e8-89df-408d5c537d23", "ContainerName": "sidecar",
           "ResourceName": "intel.com/sriov_net_A", "DeviceIDs": {"-1": ["0000:03:02.3"]}},
          {"PodUID": "aaaaaaaa-0000-0000-0000-000000000000", "ContainerName": "x",
           "ResourceName": "nvidia.com/gpu", "DeviceIDs": {"0": ["GPU-other"]}}
        ],
        "RegisteredDevices": {"intel.com/sriov_net_A": ["0000:03:02.0"]}
      },
      "Checksum": 3854436589,
      "BootID": "x"
    }"#;

    #[test]
    fn numa_keyed_entries_of_one_uid() {
        let got = parse(V2.as_bytes(), "970a395d-bb3b-11e8-89df-408d5c537d23")
            .unwrap()
            .unwrap();
        assert_eq!(
            ids(&got),
            [
                ("intel.com/sriov_net_A", "0000:03:02.3"),
                ("intel.com/sriov_net_A", "0000:03:02.0"),
                ("intel.com/sriov_net_A", "0000:03:02.5"),
                ("nvidia.com/gpu", "GPU-a"),
                // Same ID, another resource: a distinct device.
                ("nvidia.com/gpu", "0000:03:02.3"),
            ]
        );
        assert!(parse(V2.as_bytes(), "unknown-uid").unwrap().is_none());
        // A prefix of a UID is not that UID.
        assert!(parse(V2.as_bytes(), "970a395d").unwrap().is_none());
    }

    #[test]
    fn v1_list_entries_and_empty_nodes() {
        let v1 = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c",
            "ResourceName":"r","DeviceIDs":["d1","d2"],"AllocResp":null}],
            "RegisteredDevices":null},"Checksum":1}"#;
        let got = parse(v1.as_bytes(), "u").unwrap().unwrap();
        assert_eq!(ids(&got), [("r", "d1"), ("r", "d2")]);
        for empty in [
            r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":0}"#,
            r#"{"Data":{"PodDeviceEntries":[]},"Checksum":0}"#,
            r#"{"Data":{}}"#,
        ] {
            assert!(parse(empty.as_bytes(), "u").unwrap().is_none(), "{empty}");
        }
    }

    #[test]
    fn malformed_files_are_described_by_size() {
        for bad in [
            "not json at all: secret",
            r#"{"Data":{"PodDeviceEntries":{}}}"#,
            r#"["Data"]"#,
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","DeviceIDs":["d"]}]}}"#,
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ResourceName":"r","DeviceIDs":{"x":["d"]}}]}}"#,
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ResourceName":"r","DeviceIDs":[7]}]}}"#,
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ResourceName":"r","DeviceIDs":"d"}]}}"#,
        ] {
            let e = parse(bad.as_bytes(), "u").unwrap_err();
            let s = e.to_string();
            assert!(matches!(e, Error::Protocol(_)), "{bad}: {s}");
            assert!(s.contains(&format!("{} bytes", bad.len())), "{s}");
            assert!(!s.contains("secret"), "{s}");
        }
    }

    #[test]
    fn every_bound_of_a_read_is_checked() {
        let entry = |uid: &str, ids: &str| {
            format!(
                r#"{{"PodUID":"{uid}","ResourceName":"r","DeviceIDs":{ids},"AllocResp":"QUJD"}}"#
            )
        };
        let file = |entries: &[String]| {
            format!(
                r#"{{"Data":{{"PodDeviceEntries":[{}]}}}}"#,
                entries.join(",")
            )
        };
        // Entries: ENTRIES_MAX are read, one more refuses the file.
        let others = vec![entry("o", "[]"); ENTRIES_MAX - 1];
        let mut ok = others.clone();
        ok.push(entry("u", r#"["d"]"#));
        assert_eq!(
            parse(file(&ok).as_bytes(), "u")
                .unwrap()
                .unwrap()
                .devices
                .len(),
            1
        );
        ok.push(entry("o", "[]"));
        let e = parse(file(&ok).as_bytes(), "u").unwrap_err().to_string();
        assert!(e.contains("more than 16384"), "{e}");
        // The pod's IDs, over its entries and NUMA nodes; an ID's length.
        let ids = |n: usize, tag: char| {
            let v: Vec<String> = (0..n).map(|i| format!("\"{tag}{i}\"")).collect();
            format!(r#"{{"0":[{}]}}"#, v.join(","))
        };
        let half = POD_DEVICES_MAX / 2;
        let two = [entry("u", &ids(half, 'a')), entry("u", &ids(half, 'b'))];
        let got = parse(file(&two).as_bytes(), "u").unwrap().unwrap();
        assert_eq!(got.devices.len(), POD_DEVICES_MAX);
        let three = [two[0].clone(), two[1].clone(), entry("u", &ids(1, 'c'))];
        let e = parse(file(&three).as_bytes(), "u").unwrap_err().to_string();
        assert!(e.contains("more than 1024 device IDs"), "{e}");
        let long = entry("u", &format!(r#"["{}"]"#, "x".repeat(ID_MAX + 1)));
        assert!(parse(file(&[long]).as_bytes(), "u").is_err());
        let nodes: Vec<String> = (0..=NUMA_NODES_MAX)
            .map(|n| format!(r#""{n}":[]"#))
            .collect();
        let wide = entry("u", &format!("{{{}}}", nodes.join(",")));
        let e = parse(file(&[wide]).as_bytes(), "u")
            .unwrap_err()
            .to_string();
        assert!(e.contains("64 NUMA nodes"), "{e}");
        // The file's size, before a byte is read.
        let dir = std::env::temp_dir().join(format!("rt-ckpt-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("ckpt");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(CHECKPOINT_MAX + 1)
            .unwrap();
        assert!(matches!(
            from_checkpoint(&big, "u"),
            Err(Error::TooLarge { size, limit }) if size == CHECKPOINT_MAX + 1 && limit == CHECKPOINT_MAX
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Found by fuzz/fuzz_targets/checkpoint.rs: a byte that is not UTF-8
    /// in what is skipped unread (an `AllocResp`, another section) passed,
    /// where every JSON reader refuses the file; so did one in a key.
    #[test]
    fn a_file_that_is_not_utf8_is_refused_wherever_the_byte_is() {
        let good = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ResourceName":"r","DeviceIDs":["d"],"AllocResp":"QUJD"}],"RegisteredDevices":{"x":["y"]}}}"#;
        assert!(parse(good.as_bytes(), "u").unwrap().is_some());
        for at in ["QUJD", "\"y\"", "AllocResp", "\"r\""] {
            let i = good.find(at).unwrap() + 1;
            let mut bad = good.as_bytes().to_vec();
            bad[i] = 0xd2;
            let e = parse(&bad, "u").unwrap_err().to_string();
            assert!(e.contains("not UTF-8"), "{at}: {e}");
        }
    }

    /// Found by fuzz/fuzz_targets/checkpoint.rs against its plain reading
    /// (`serde_json::Value`, which refuses a number past f64's range): such a
    /// number in a field skipped unread is valid JSON (RFC 8259 §6 lets a
    /// reader limit numbers) and decides nothing, so the file is read.
    #[test]
    fn a_number_past_f64_in_a_skipped_field_is_no_reason_to_refuse() {
        let file = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ResourceName":"r","DeviceIDs":["d"]}]},"Checksum":38e54436179}"#;
        assert!(serde_json::from_str::<serde_json::Value>(file).is_err());
        let got = parse(file.as_bytes(), "u").unwrap().unwrap();
        assert_eq!(ids(&got), [("r", "d")]);
    }

    #[test]
    fn file_errors() {
        let dir = std::env::temp_dir().join(format!("rt-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = from_checkpoint(&dir.join("missing"), "u").unwrap_err();
        assert!(
            matches!(&missing, Error::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound),
            "{missing}"
        );
        let f = dir.join("kubelet_internal_checkpoint");
        std::fs::write(&f, V2).unwrap();
        let got = from_checkpoint(&f, "970a395d-bb3b-11e8-89df-408d5c537d23").unwrap();
        assert_eq!(got.unwrap().devices.len(), 5);
        // A FIFO in the checkpoint's place: refused at once, not waited on.
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = from_checkpoint(&fifo, "u").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
