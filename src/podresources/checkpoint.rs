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

use super::{dedup, Error, PodDevices};
use crate::wire::checkpoint;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The bounds of a read, each checked before the read or the loop it guards
/// (without them, a 16 MiB checkpoint, read whole into a `serde_json::Value`,
/// took 0.70 s and 217 MB). The file is decoded in one pass that keeps only
/// the entries of the pod asked for (`crate::wire::checkpoint`);
/// `AllocResp`, the bulk of a real file, is skipped unread.
///
/// A node's file: 110 pods with three device-plugin resources each, every
/// entry's `AllocResp` a few hundred bytes of base64, is about 300 KiB.
pub const CHECKPOINT_MAX: u64 = 4 << 20;

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

pub(crate) fn parse(buf: &[u8], uid: &str) -> Result<Option<PodDevices>, Error> {
    let found = checkpoint::decode(buf, uid).map_err(|e| Error::Protocol(e.to_string()))?;
    Ok(found.map(|pairs| {
        dedup(
            pairs
                .iter()
                .map(|(r, id)| (r.as_str(), id.as_str()))
                .collect(),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::checkpoint::{ENTRIES_MAX, NUMA_NODES_MAX};
    use crate::wire::podresources::{ID_MAX, POD_DEVICES_MAX};

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
        if !crate::process::test_runs_as_root(
            "podresources::checkpoint::every_bound_of_a_read_is_checked",
            "a checkpoint is read only when root wrote it",
        ) {
            return;
        }
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
        if !crate::process::test_runs_as_root(
            "podresources::checkpoint::file_errors",
            "a checkpoint is read only when root wrote it",
        ) {
            return;
        }
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
