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

use super::{dedup, Error, PodDevices, MAX_RESPONSE};
use serde_json::Value;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The pod's device-plugin devices by pod UID, read from the checkpoint
/// `file`. `Ok(None)`: the file holds no entry for that UID.
pub fn from_checkpoint(file: &Path, uid: &str) -> Result<Option<PodDevices>, Error> {
    // Non-blocking, and a regular file only: a FIFO in its place would
    // otherwise hold the ADD past its bound at the open.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(file)
        .map_err(|e| Error::Io {
            op: "open the checkpoint",
            err: e,
        })?;
    let regular = f.metadata().map(|m| m.is_file()).map_err(|e| Error::Io {
        op: "examine the checkpoint",
        err: e,
    })?;
    if !regular {
        return Err(Error::Io {
            op: "read the checkpoint",
            err: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        });
    }
    let mut buf = Vec::new();
    f.take(MAX_RESPONSE as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::Io {
            op: "read the checkpoint",
            err: e,
        })?;
    if buf.len() > MAX_RESPONSE {
        return Err(Error::TooLarge {
            size: buf.len() as u64,
            limit: MAX_RESPONSE as u64,
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
    let v: Value =
        serde_json::from_slice(buf).map_err(|_| not_checkpoint(buf.len(), "not JSON"))?;
    entries_of(&v, uid, buf.len())
}

fn entries_of<'a>(v: &'a Value, uid: &str, len: usize) -> Result<Option<PodDevices>, Error> {
    let bad = |why: &str| not_checkpoint(len, why);
    let entries = match v.get("Data").map(|d| d.get("PodDeviceEntries")) {
        Some(Some(Value::Array(a))) => a.as_slice(),
        // A Go nil slice marshals as null: a node with no pods holding devices.
        Some(Some(Value::Null)) | Some(None) => &[],
        _ => return Err(bad("no Data.PodDeviceEntries list")),
    };
    let mut found = false;
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for e in entries {
        if e.get("PodUID").and_then(Value::as_str) != Some(uid) {
            continue;
        }
        found = true;
        let resource = e
            .get("ResourceName")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("an entry without ResourceName"))?;
        let mut push = |ids: &'a [Value]| push_ids(&mut pairs, resource, ids, len);
        match e.get("DeviceIDs") {
            Some(Value::Object(per_numa)) => {
                // Ordered by NUMA node, so the result does not depend on the
                // map's order in the file.
                let mut nodes: Vec<(i64, &Vec<Value>)> = Vec::new();
                for (k, ids) in per_numa {
                    let node = k
                        .parse()
                        .map_err(|_| bad("a NUMA key that is not a number"))?;
                    let ids = ids
                        .as_array()
                        .ok_or_else(|| bad("DeviceIDs of a NUMA node is not a list"))?;
                    nodes.push((node, ids));
                }
                nodes.sort_by_key(|(n, _)| *n);
                for (_, ids) in nodes {
                    push(ids)?;
                }
            }
            Some(Value::Array(ids)) => push(ids)?,
            Some(Value::Null) | None => {}
            Some(_) => return Err(bad("DeviceIDs is neither a map nor a list")),
        }
    }
    Ok(found.then(|| dedup(pairs)))
}

fn push_ids<'a>(
    pairs: &mut Vec<(&'a str, &'a str)>,
    resource: &'a str,
    ids: &'a [Value],
    len: usize,
) -> Result<(), Error> {
    for id in ids {
        let id = id
            .as_str()
            .ok_or_else(|| not_checkpoint(len, "a device ID that is not a string"))?;
        pairs.push((resource, id));
    }
    Ok(())
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
