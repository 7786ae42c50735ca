//! One kubelet call per pod (issue 25). Each rail's ADD asked the kubelet
//! again (Get, then List where Get is unavailable): a 16-rail pod made 16
//! to 32 calls within a second, against the PodResources rate limit that
//! Multus's own call on every ADD shares (docs/design.md, "The kubelet's
//! PodResources API"), and judged the pod 16 times over.
//!
//! The first rail's ADD asks, judges the whole pod once (`placement::judge`
//! with no rail of its own, every rail named by the kubelet's ID), and
//! records both in `<stateDir>/pods/<sandbox>.<pod UID>`; the pod's other
//! rails read that record and take the verdict as their own
//! (`Judgement::for_rail`), which is what a judgement of their own would
//! give. A skip is recorded too (a kubelet past its bound, a pod without
//! GPUs), so a hostile kubelet costs one bound per pod, not one per rail;
//! a missing socket is not (finding it missing costs a failed `connect`).
//!
//! - **Fresh**: a record is used for [`FRESH`] after the call (CLOCK_BOOTTIME:
//!   a clock change does not stretch it); the devices of a pod do not change
//!   while its sandbox lives, so this only bounds how long a record can
//!   outlive a lost release.
//! - **One call, whoever comes first**: the call is made under the pod's
//!   lock (`<name>.lock`, `flock`); a rail that finds the lock held waits
//!   for it within its own `podResourcesTimeoutMs`, then reads the record
//!   the holder wrote, rather than make a call of its own.
//! - **Released** with the pod's last rail (DEL, GC, the orphan repair:
//!   `release_if_last`), and any record or lock older than [`EXPIRED`] goes
//!   when the next record is written, since a network with no owned
//!   settings leaves no entry for a DEL to find.
//! - **Guarded as entries are**: named only from validated identifiers (the
//!   sandbox by the CNI spec's rule, the UID by `PodRef`'s), 0600, opened
//!   with `O_NOFOLLOW`, at most [`RECORD_MAX`] bytes, and a record that does
//!   not decode, is not a regular file, or names another pod is ignored and
//!   replaced, never believed. The pod's UID comes from CNI_ARGS: tenant
//!   input, which chooses nothing but which of its own pod's records is read.

use crate::cni::env::PodRef;
use crate::node::NodeConfig;
use crate::placement::{self, Judgement, Skip};
use crate::podresources::{Device, PodDevices, Source};
use crate::state::StateDir;
use crate::sysfs::View;
use crate::topology::PathType;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the other rails of a pod take the first one's answer: Multus
/// runs a pod's delegates one after another, 16 rails in a second or two.
pub const FRESH: Duration = Duration::from_secs(5);
/// A record or lock file older than this is a pod's that was never
/// released (by modification time: the file's own age, whatever it says).
pub const EXPIRED: Duration = Duration::from_secs(60);
/// A record's size: a 16-rail, 8-GPU pod's is about 10 KiB.
pub const RECORD_MAX: u64 = 256 * 1024;
/// Names in `pods/` looked at when the expired ones are swept.
const SWEEP_MAX: usize = 256;
/// The record's format; another is ignored.
const FORMAT: u32 = 1;
const DIR: &str = "pods";

/// A record: whose, when, what the kubelet said, and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Record {
    version: u32,
    sandbox: String,
    uid: String,
    namespace: String,
    name: String,
    /// CLOCK_BOOTTIME at the call, ns.
    boot_ns: u64,
    /// The answer, when the kubelet gave one.
    answer: Option<Answer>,
    outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    source: Source,
    /// (resource, ID) in the kubelet's order.
    devices: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum Outcome {
    /// The pod judged once, at this GDR level, no rail its own.
    Judged { level: PathType, pod: Judgement },
    /// Why not, as the first rail said it.
    Skipped { untrusted: bool, why: String },
}

/// What a rail's ADD has of its pod: the kubelet's answer (asked now or
/// recorded by another rail), and the pod judged once.
pub struct PodAnswer {
    devices: PodDevices,
    pub source: Source,
    level: PathType,
    pod: Judgement,
}

/// The pod's answer, judged, within `node.pod_resources_timeout`: the
/// record of another rail of the pod when there is a fresh one, else asked
/// of the kubelet (once for the pod) and recorded. Without a state dir or
/// the pod's UID it is asked and judged for this rail alone, as before.
pub fn obtain(
    state: Option<&StateDir>,
    host: &View,
    node: &NodeConfig,
    pod: Option<&PodRef>,
    sandbox: &str,
    level: PathType,
) -> Result<PodAnswer, Skip> {
    let key = match (state, pod) {
        (Some(state), Some(pod)) => pod.uid.as_deref().map(|uid| Key {
            dir: state.path().join(DIR),
            sandbox,
            uid,
            pod,
        }),
        _ => None,
    };
    let Some(key) = key else {
        return judged(host, node, placement::pod_devices(node, pod)?, level);
    };
    let deadline = Instant::now() + node.pod_resources_timeout;
    if let Some(found) = key.read() {
        return found.into_answer(host, node, level);
    }
    if !key.make_dir() {
        return judged(host, node, placement::pod_devices(node, pod)?, level);
    }
    let _lock = key.lock(deadline).map_err(|why| {
        Skip::Kubelet(crate::podresources::Error::Timeout {
            timeout: node.pod_resources_timeout,
            stage: why,
        })
    })?;
    // Another rail may have asked while this one waited.
    if let Some(found) = key.read() {
        return found.into_answer(host, node, level);
    }
    let record = key.ask(host, node, level);
    let Some(record) = record else {
        // No socket: nothing worth recording.
        return Err(Skip::NoSocket);
    };
    key.write(&record);
    sweep_expired(&key.dir, sandbox, key.uid);
    Found(record).into_answer(host, node, level)
}

/// `devices` judged for the pod, no rail of the caller's.
fn judged(
    host: &View,
    node: &NodeConfig,
    (devices, source): (PodDevices, Source),
    level: PathType,
) -> Result<PodAnswer, Skip> {
    let pod = placement::judge(host, node, &devices, &[], level)?;
    Ok(PodAnswer {
        devices,
        source,
        level,
        pod,
    })
}

impl PodAnswer {
    /// The pod's verdict as this rail's ADD says it: the one judgement,
    /// this rail named by its interface; judged anew (from the same
    /// answer, no call) only when the rail is not among the pod's rails as
    /// the kubelet lists them (a network without a device-plugin resource),
    /// which a judgement of its own counts one rail more.
    pub fn for_rail(
        &self,
        host: &View,
        node: &NodeConfig,
        ifname: &str,
        vf: &str,
        level: PathType,
    ) -> Result<Judgement, Skip> {
        if level == self.level {
            if let Some(j) = self.pod.for_rail(ifname, vf) {
                return Ok(j);
            }
        }
        placement::judge(host, node, &self.devices, &[(ifname, vf)], level)
    }
}

/// The record of one pod's sandbox.
struct Key<'a> {
    dir: PathBuf,
    sandbox: &'a str,
    uid: &'a str,
    pod: &'a PodRef,
}

/// A record that is this pod's and fresh.
struct Found(Record);

impl Found {
    fn into_answer(
        self,
        host: &View,
        node: &NodeConfig,
        level: PathType,
    ) -> Result<PodAnswer, Skip> {
        let r = self.0;
        let answer = r.answer.map(|a| {
            let devices = a
                .devices
                .into_iter()
                .map(|(resource, id)| Device { resource, id })
                .collect();
            (PodDevices { devices }, a.source)
        });
        match (r.outcome, answer) {
            (
                Outcome::Skipped {
                    untrusted: true,
                    why,
                },
                _,
            ) => Err(Skip::Untrusted(why)),
            (Outcome::Skipped { why, .. }, _) => Err(Skip::Recorded(why)),
            (Outcome::Judged { level: l, pod }, Some((devices, source))) if l == level => {
                Ok(PodAnswer {
                    devices,
                    source,
                    level,
                    pod,
                })
            }
            // Judged at another level (another network of the pod): the
            // answer is reused, the pod judged again at this one.
            (Outcome::Judged { .. }, Some(answer)) => judged(host, node, answer, level),
            (Outcome::Judged { .. }, None) => Err(Skip::NoSocket),
        }
    }
}

impl Key<'_> {
    fn name(&self) -> String {
        format!("{}.{}", self.sandbox, self.uid)
    }

    /// The record, when it is a regular file of ours, decodes, names this
    /// pod and is fresh; anything else is as good as none.
    fn read(&self) -> Option<Found> {
        let path = self.dir.join(self.name());
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
            .open(&path)
            .ok()?;
        let record = decode(&file)?;
        let ours = record.version == FORMAT
            && record.sandbox == self.sandbox
            && record.uid == self.uid
            && record.namespace == self.pod.namespace
            && record.name == self.pod.name;
        let age = boot_ns().checked_sub(record.boot_ns)?;
        (ours && age <= FRESH.as_nanos() as u64).then_some(Found(record))
    }

    /// `<stateDir>/pods`, made 0700 when missing; false when it is not a
    /// directory (a link planted in its place is never followed).
    fn make_dir(&self) -> bool {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&self.dir);
        std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_dir())
    }

    /// The pod's lock, tried until `deadline`: a rail of the pod holds it
    /// while it asks the kubelet and judges the pod.
    fn lock(&self, deadline: Instant) -> Result<nix::fcntl::Flock<File>, &'static str> {
        let path = self.dir.join(format!("{}.lock", self.name()));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&path)
            .map_err(|_| "the pod's lock in the state dir")?;
        loop {
            match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(held) => return Ok(held),
                Err((f, nix::errno::Errno::EWOULDBLOCK | nix::errno::Errno::EINTR)) => {
                    if Instant::now() >= deadline {
                        return Err("another rail of the pod, asking the kubelet");
                    }
                    file = f;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => return Err("the pod's lock in the state dir"),
            }
        }
    }

    /// Ask the kubelet and judge the pod: the record to write; `None` when
    /// there is no socket (or no pod).
    fn ask(&self, host: &View, node: &NodeConfig, level: PathType) -> Option<Record> {
        let asked = placement::pod_devices(node, Some(self.pod));
        let (answer, outcome) = match asked {
            Err(Skip::NoSocket | Skip::NoPod) => return None,
            Err(skip) => (None, skipped(&skip)),
            Ok((devices, source)) => {
                let outcome = match placement::judge(host, node, &devices, &[], level) {
                    Ok(pod) => Outcome::Judged { level, pod },
                    Err(skip) => skipped(&skip),
                };
                let devices = devices
                    .devices
                    .into_iter()
                    .map(|d| (d.resource, d.id))
                    .collect();
                (Some(Answer { source, devices }), outcome)
            }
        };
        Some(Record {
            version: FORMAT,
            sandbox: self.sandbox.to_owned(),
            uid: self.uid.to_owned(),
            namespace: self.pod.namespace.clone(),
            name: self.pod.name.clone(),
            boot_ns: boot_ns(),
            answer,
            outcome,
        })
    }

    /// Best effort: a record that cannot be written costs the next rail a
    /// call of its own, nothing more.
    fn write(&self, record: &Record) {
        let written = serde_json::to_vec(record)
            .map_err(std::io::Error::other)
            .and_then(|body| crate::state::write_atomically(&self.dir, &self.name(), &body, false));
        if let Err(e) = written {
            crate::debug!("the pod's kubelet answer is not recorded: {e}");
        }
    }
}

fn skipped(skip: &Skip) -> Outcome {
    match skip {
        Skip::Untrusted(what) => Outcome::Skipped {
            untrusted: true,
            why: what.clone(),
        },
        other => Outcome::Skipped {
            untrusted: false,
            why: other.to_string(),
        },
    }
}

/// A record from an open file: a regular file of at most [`RECORD_MAX`]
/// bytes, root's, that decodes.
fn decode(file: &File) -> Option<Record> {
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || meta.len() > RECORD_MAX || meta.uid() != 0 {
        return None;
    }
    let body = crate::fs_read::whole(file, meta.len(), RECORD_MAX).ok()?;
    serde_json::from_slice(&body).ok()
}

/// CLOCK_BOOTTIME in ns: monotonic across processes of one boot, suspend
/// included; a record from another boot has another sandbox anyway.
fn boot_ns() -> u64 {
    let mut ts = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_BOOTTIME, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Whether `name` is a record or lock of `sandbox`: `<sandbox>.<uid>` or
/// that and `.lock`, the UID's shape as `PodRef` takes it (no dot), so a
/// sandbox whose ID merely starts the same is never matched.
fn of_sandbox(name: &str, sandbox: &str) -> bool {
    let Some(rest) = name.strip_prefix(sandbox).and_then(|r| r.strip_prefix('.')) else {
        return false;
    };
    let uid = rest.strip_suffix(".lock").unwrap_or(rest);
    uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// Drop the records (and locks) of `sandbox` once no entry of it is left
/// in `state`: the pod's last rail is gone (DEL, GC, the orphan repair).
/// A pod that still has a rail keeps its record for that rail's ADD.
pub fn release_if_last(state: &StateDir, sandbox: &str) {
    let dir = state.path().join(DIR);
    let Ok(names) = crate::fs_read::names_at(&dir) else {
        return;
    };
    let mine: Vec<String> = names
        .into_iter()
        .filter_map(|n| n.into_string().ok())
        .filter(|n| of_sandbox(n, sandbox))
        .collect();
    if mine.is_empty() {
        return;
    }
    let live = state
        .attachments()
        .map(|a| a.iter().any(|(cid, _)| cid == sandbox))
        .unwrap_or(true);
    if live {
        return;
    }
    for n in mine {
        let _ = std::fs::remove_file(dir.join(n));
    }
}

/// Records and locks older than [`EXPIRED`], other than this pod's: pods
/// that left no entry for a release to find. At most [`SWEEP_MAX`] names.
fn sweep_expired(dir: &Path, sandbox: &str, uid: &str) {
    let Ok(names) = crate::fs_read::names_at(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    let mine = format!("{sandbox}.{uid}");
    for name in names.into_iter().take(SWEEP_MAX) {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&mine) {
            continue;
        }
        let path = dir.join(name);
        let old = std::fs::symlink_metadata(&path)
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > EXPIRED);
        if old {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6f1b7d8e-1c2a-4b3c-8d4e-000000000001";

    #[test]
    fn a_sandbox_names_only_its_own_files() {
        assert!(of_sandbox(&format!("sb.{UID}"), "sb"));
        assert!(of_sandbox(&format!("sb.{UID}.lock"), "sb"));
        assert!(!of_sandbox(&format!("sb2.{UID}"), "sb"));
        // A sandbox ID may hold dots: "sb" is not "sb.x".
        assert!(!of_sandbox(&format!("sb.x.{UID}"), "sb"));
        assert!(of_sandbox(&format!("sb.x.{UID}"), "sb.x"));
        assert!(!of_sandbox(&format!("sb.{UID}.tmp1"), "sb"));
        assert!(!of_sandbox("sb.", "sb"));
    }

    /// A record is read only while fresh, of this pod, of this format, and
    /// a regular file.
    #[test]
    fn only_a_fresh_record_of_the_pod_is_read() {
        let dir = std::env::temp_dir().join(format!("rt-pod-answer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pod = PodRef {
            namespace: "ns".into(),
            name: "p".into(),
            uid: Some(UID.into()),
        };
        let key = Key {
            dir: dir.clone(),
            sandbox: "sb",
            uid: UID,
            pod: &pod,
        };
        let record = |age_ns: i64, edit: &dyn Fn(&mut Record)| {
            let mut r = Record {
                version: FORMAT,
                sandbox: "sb".into(),
                uid: UID.into(),
                namespace: "ns".into(),
                name: "p".into(),
                boot_ns: (boot_ns() as i64 - age_ns) as u64,
                answer: None,
                outcome: Outcome::Skipped {
                    untrusted: false,
                    why: "w".into(),
                },
            };
            edit(&mut r);
            key.write(&r);
        };
        let s = 1_000_000_000i64;
        record(0, &|_| {});
        assert!(key.read().is_some());
        record(FRESH.as_nanos() as i64 - s, &|_| {});
        assert!(key.read().is_some());
        record(FRESH.as_nanos() as i64 + s, &|_| {});
        assert!(key.read().is_none(), "stale");
        record(-s, &|_| {});
        assert!(key.read().is_none(), "from the future");
        for edit in [
            &|r: &mut Record| r.version = FORMAT + 1,
            &|r: &mut Record| r.sandbox = "other".into(),
            &|r: &mut Record| r.uid = "x".into(),
            &|r: &mut Record| r.namespace = "other".into(),
            &|r: &mut Record| r.name = "other".into(),
        ] as [&dyn Fn(&mut Record); 5]
        {
            record(0, edit);
            assert!(key.read().is_none());
        }
        std::fs::write(dir.join(key.name()), "{}").unwrap();
        assert!(key.read().is_none(), "not a record");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
