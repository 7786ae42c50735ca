//! The kubelet's device manager checkpoint, decoded in one pass that keeps
//! only the entries of the pod asked for. Reading the file (and whether to
//! believe it) is `podresources::checkpoint`'s; the shape and its history
//! are told there too.
//!
//! Each bound is checked before the read or the loop it guards (a 16 MiB
//! checkpoint, read whole into a `serde_json::Value`, took 0.70 s and 217
//! MB); `AllocResp`, the bulk of a real file, is skipped unread.

use super::podresources::{ID_MAX, POD_DEVICES_MAX};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;

/// Entries (one per pod, container and resource).
pub const ENTRIES_MAX: usize = 16_384;
/// NUMA nodes of one entry's `DeviceIDs`.
pub const NUMA_NODES_MAX: usize = 64;

/// Why a file is not the checkpoint: its size and this module's words,
/// never the file's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotCheckpoint {
    pub len: usize,
    pub why: &'static str,
}

impl fmt::Display for NotCheckpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "checkpoint ({} bytes) is not the kubelet's device manager checkpoint: {}",
            self.len, self.why
        )
    }
}

impl std::error::Error for NotCheckpoint {}

fn not_checkpoint(len: usize, why: &'static str) -> NotCheckpoint {
    NotCheckpoint { len, why }
}

/// The (resource, ID) pairs of pod `uid`'s entries, in file order (a pair
/// two containers list comes twice); `None`: the file has no entry for it.
pub fn decode(buf: &[u8], uid: &str) -> Result<Found, NotCheckpoint> {
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
    Ok(found)
}

/// The (resource, ID) pairs of one pod, in file order; `None`: no entry.
pub type Found = Option<Vec<(String, String)>>;

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
