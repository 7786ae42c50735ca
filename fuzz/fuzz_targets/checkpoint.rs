//! The kubelet's device manager checkpoint, the fallback where the socket
//! is not there. What the one-pass decoder takes keeps the bounds, and where
//! a plain reading of the same JSON (a `serde_json::Value`, the rules of
//! src/podresources/checkpoint.rs: entries of the UID, IDs by NUMA node in
//! order, each (resource, ID) once) takes it too, the devices are the same.
//! The plain reading refuses some JSON the decoder may take: a number past
//! f64's range in a field skipped unread (RFC 8259 §6 lets a reader limit
//! numbers; found by this target, kept as a unit test).
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::podresources::fuzz::checkpoint;
use roce_tune::podresources::{ID_MAX, POD_DEVICES_MAX};
use serde_json::Value;

type Pairs = Vec<(String, String)>;

/// The reference: the checkpoint read whole as a Value.
fn plain(buf: &[u8], uid: &str) -> Option<Option<Pairs>> {
    let v: Value = serde_json::from_slice(buf).ok()?;
    let entries = match v.as_object()?.get("Data")? {
        Value::Null => return Some(None),
        d => match d.as_object()?.get("PodDeviceEntries") {
            None | Some(Value::Null) => return Some(None),
            Some(e) => e.as_array()?,
        },
    };
    let mut found = None;
    for e in entries {
        let e = e.as_object()?;
        if e.get("PodUID").and_then(Value::as_str) != Some(uid) {
            continue;
        }
        let resource = e.get("ResourceName")?.as_str()?;
        let pairs: &mut Pairs = found.get_or_insert_with(Vec::new);
        let ids: Vec<&Value> = match e.get("DeviceIDs") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) => a.iter().collect(),
            Some(Value::Object(m)) => {
                let mut nodes: Vec<(i64, &Vec<Value>)> = Vec::new();
                for (k, ids) in m {
                    nodes.push((k.parse().ok()?, ids.as_array()?));
                }
                nodes.sort_by_key(|(n, _)| *n);
                nodes.into_iter().flat_map(|(_, ids)| ids).collect()
            }
            Some(_) => return None,
        };
        for id in ids {
            let pair = (resource.to_owned(), id.as_str()?.to_owned());
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    Some(found)
}

fuzz_target!(|data: &[u8]| {
    // The UID: up to the first NUL, the file after it.
    let (uid, file) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"u"[..], data),
    };
    let Ok(uid) = std::str::from_utf8(uid) else {
        return;
    };
    if let Ok(found) = checkpoint(file, uid) {
        if let Some(d) = &found {
            assert!(d.len() <= POD_DEVICES_MAX);
            assert!(d.iter().all(|(r, id)| r.len() <= ID_MAX && id.len() <= ID_MAX));
        }
        if let Some(p) = plain(file, uid) {
            assert_eq!(p, found);
        }
    }
});
