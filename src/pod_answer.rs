//! One kubelet call per pod. Each rail's ADD asked the kubelet
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
use crate::placement::{self, Said, Skip};
use crate::podresources::{Device, PodDevices, Source};
use crate::state::{PlacementRecord, StateDir};
use crate::sysfs::View;
use crate::topology::{Bdf, PathType};
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
/// A record's size: a 16-rail, 8-GPU pod's is 5 KiB clean, about 50 KiB
/// starved (each rail's line names the starved GPUs).
pub const RECORD_MAX: u64 = 512 * 1024;
/// Names in `pods/` looked at when the expired ones are swept.
const SWEEP_MAX: usize = 256;
/// The record's first line; any other is not a record of this format.
const HEADER: &str = "roce-tune pod answer 1";
const DIR: &str = "pods";

/// What a rail's ADD has of its pod: the kubelet's answer (asked now or
/// recorded by another rail), and the pod judged once.
pub struct PodAnswer {
    pub source: Source,
    level: PathType,
    held: Held,
}

enum Held {
    /// Judged now: the devices, and what each listed rail's ADD says, its
    /// name left out (`Said::NAME`).
    Judged {
        devices: PodDevices,
        said: Vec<(Bdf, Said)>,
    },
    /// Another rail's record, read line by line as asked: a rail's ADD
    /// decodes its own line only.
    Recorded(Found),
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
        return found.answer(host, node, level);
    }
    // No socket (a node without a kubelet, the bench's): nothing to share,
    // and nothing made in the state dir for it (a lock file there cost each
    // DEL a listing of the state dir, 0.1 ms with 128 entries).
    if !node.pod_resources_socket.exists() || !key.make_dir() {
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
        return found.answer(host, node, level);
    }
    let asked = match placement::pod_devices(node, Some(pod.expect("a key has a pod"))) {
        // No socket: nothing worth recording.
        Err(skip @ (Skip::NoSocket | Skip::NoPod)) => return Err(skip),
        other => other,
    };
    let answer = asked.and_then(|found| judged(host, node, found, level));
    key.write(&answer);
    sweep_expired(&key.dir, sandbox, key.uid);
    answer
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
        source,
        level,
        held: Held::Judged {
            said: pod.said_by_each(),
            devices,
        },
    })
}

impl PodAnswer {
    /// What this rail's ADD says: the pod's one judgement, this rail named
    /// by its interface; judged anew (from the same answer, no call) only
    /// when the rail is not among the pod's rails as the kubelet lists them
    /// (a network without a device-plugin resource), which a judgement of
    /// its own counts one rail more, or at another GDR level.
    pub fn for_rail(
        &self,
        host: &View,
        node: &NodeConfig,
        ifname: &str,
        vf: &str,
        level: PathType,
    ) -> Result<Said, Skip> {
        let bdf = Bdf::parse(&vf.to_ascii_lowercase()).filter(|_| level == self.level);
        let anew = |devices: &PodDevices| {
            placement::judge(host, node, devices, &[(ifname, vf)], level).map(|j| j.said())
        };
        match &self.held {
            Held::Judged { said, devices } => match said.iter().find(|(b, _)| Some(*b) == bdf) {
                Some((_, s)) => Ok(s.clone().named(ifname, vf)),
                None => anew(devices),
            },
            Held::Recorded(f) => match bdf.and_then(|b| f.rail(b)) {
                Some(said) => Ok(said.named(ifname, vf)),
                None => anew(&f.devices().ok_or_else(|| {
                    Skip::Recorded("the pod's recorded answer does not decode".into())
                })?),
            },
        }
    }
}

/// The record of one pod's sandbox.
struct Key<'a> {
    dir: PathBuf,
    sandbox: &'a str,
    uid: &'a str,
    pod: &'a PodRef,
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
        let text = read_record(&file)?;
        let found = Found::parse(text)?;
        let age = boot_ns().checked_sub(found.boot_ns)?;
        let ours = found.sandbox == self.sandbox
            && found.uid == self.uid
            && found.namespace == self.pod.namespace
            && found.name == self.pod.name;
        (ours && age <= FRESH.as_nanos() as u64).then_some(found)
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
        let file =
            crate::state::open_lock_file(&path).map_err(|_| "the pod's lock in the state dir")?;
        let left = deadline.saturating_duration_since(Instant::now());
        crate::state::flock_within(file, Some(left)).map_err(|e| match e {
            crate::state::Flocked::Busy(_) => "another rail of the pod, asking the kubelet",
            crate::state::Flocked::Os(_) => "the pod's lock in the state dir",
        })
    }

    /// Best effort: a record that cannot be written costs the next rail a
    /// call of its own, nothing more.
    fn write(&self, answer: &Result<PodAnswer, Skip>) {
        let body = encode(self, boot_ns(), answer);
        if let Err(e) =
            crate::state::write_atomically(&self.dir, &self.name(), body.as_bytes(), false)
        {
            crate::debug!("the pod's kubelet answer is not recorded: {e}");
        }
    }
}

/// A record, one field a line (`key value`), every value escaped
/// (`escape_field`):
///
/// ```text
/// roce-tune pod answer 1
/// sandbox <CNI_CONTAINERID>
/// uid <K8S_POD_UID>
/// namespace <namespace>
/// name <name>
/// boot <CLOCK_BOOTTIME at the call, ns>
/// source Get|List|Checkpoint         the answer, when there is one,
/// device <resource>\t<ID>             its devices in the kubelet's order;
/// skipped <0|1>\t<why>                then why the check did not run (1:
///                                     untrusted), or the pod judged:
/// level <GDR level>
/// rail <VF>\t<near 0|1>\t<starved GPUs>\t<starved 0|1>\t<line>   each rail
/// ```
///
/// A rail's line is what its own ADD logs, its name left as `Said::NAME`:
/// the rail's ADD reads the header and its own line, nothing else.
fn encode(key: &Key, boot: u64, answer: &Result<PodAnswer, Skip>) -> String {
    let mut out = String::with_capacity(4096);
    let mut line = |k: &str, v: &str| {
        out.push_str(k);
        out.push(' ');
        out.push_str(v);
        out.push('\n');
    };
    line("roce-tune", "pod answer 1");
    line("sandbox", &escape_field(key.sandbox));
    line("uid", &escape_field(key.uid));
    line("namespace", &escape_field(&key.pod.namespace));
    line("name", &escape_field(&key.pod.name));
    line("boot", &boot.to_string());
    match answer {
        Err(Skip::Untrusted(what)) => line("skipped", &format!("1\t{}", escape_field(what))),
        Err(skip) => line(
            "skipped",
            &format!("0\t{}", escape_field(&skip.to_string())),
        ),
        // An answer read from a record is never written again.
        Ok(PodAnswer {
            held: Held::Recorded(_),
            ..
        }) => {}
        Ok(PodAnswer {
            source,
            level,
            held: Held::Judged { devices, said },
        }) => {
            line("source", source_name(*source));
            for d in &devices.devices {
                line(
                    "device",
                    &format!("{}\t{}", escape_field(&d.resource), escape_field(&d.id)),
                );
            }
            line("level", level.name());
            for (bdf, s) in said {
                line(
                    "rail",
                    &format!(
                        "{bdf}\t{}\t{}\t{}\t{}",
                        u8::from(s.record.near),
                        s.record.starved_gpus,
                        u8::from(s.starved),
                        escape_field(&s.line)
                    ),
                );
            }
        }
    }
    out
}

fn source_name(s: Source) -> &'static str {
    match s {
        Source::Get => "Get",
        Source::List => "List",
        Source::Checkpoint => "Checkpoint",
    }
}

/// `%`, tab and newline as `%25`, `%09`, `%0A`: a value never ends its
/// field or its line.
fn escape_field(s: &str) -> String {
    if !s.bytes().any(|b| matches!(b, b'%' | b'\t' | b'\n')) {
        return s.to_owned();
    }
    s.replace('%', "%25")
        .replace('\t', "%09")
        .replace('\n', "%0A")
}

fn unescape_field(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let c = match rest.get(i + 1..i + 3)? {
            "25" => '%',
            "09" => '\t',
            "0A" => '\n',
            _ => return None,
        };
        out.push(c);
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// A record as read: the header decoded, the devices and rails kept as
/// their lines until one is asked for.
struct Found {
    text: String,
    sandbox: String,
    uid: String,
    namespace: String,
    name: String,
    boot_ns: u64,
    source: Option<Source>,
    skipped: Option<(bool, String)>,
    level: Option<PathType>,
}

impl Found {
    /// Every line must be one of the format's, in its order; a record that
    /// is not is none.
    fn parse(text: String) -> Option<Found> {
        let mut lines = text.lines();
        if lines.next()? != HEADER {
            return None;
        }
        let mut field = |k: &str| -> Option<String> {
            let (key, v) = lines.next()?.split_once(' ')?;
            (key == k).then_some(())?;
            unescape_field(v)
        };
        let (sandbox, uid) = (field("sandbox")?, field("uid")?);
        let (namespace, name) = (field("namespace")?, field("name")?);
        let boot_ns = field("boot")?.parse().ok()?;
        let mut f = Found {
            text: String::new(),
            sandbox,
            uid,
            namespace,
            name,
            boot_ns,
            source: None,
            skipped: None,
            level: None,
        };
        let (mut devices, mut rails) = (0, 0);
        for l in lines {
            let (key, v) = l.split_once(' ')?;
            match key {
                "source" if f.source.is_none() && f.level.is_none() && f.skipped.is_none() => {
                    f.source = Some(match v {
                        "Get" => Source::Get,
                        "List" => Source::List,
                        "Checkpoint" => Source::Checkpoint,
                        _ => return None,
                    })
                }
                "device" if f.source.is_some() && f.level.is_none() => {
                    devices += 1;
                    (devices <= crate::podresources::POD_DEVICES_MAX && v.contains('\t'))
                        .then_some(())?;
                }
                "skipped" if f.source.is_none() && f.skipped.is_none() => {
                    let (flag, why) = v.split_once('\t')?;
                    f.skipped = Some((flag == "1", unescape_field(why)?));
                }
                "level" if f.source.is_some() && f.level.is_none() => {
                    f.level = Some(PathType::parse_level(v).filter(|l| l.name() == v)?)
                }
                "rail" if f.level.is_some() => {
                    rails += 1;
                    (rails <= placement::RAIL_IDS_MAX).then_some(())?;
                }
                _ => return None,
            }
        }
        // An answer is judged; without one, a skip says why.
        (f.level.is_some() || f.skipped.is_some()).then_some(())?;
        f.text = text;
        Some(f)
    }

    fn lines<'t>(&'t self, key: &'t str) -> impl Iterator<Item = &'t str> + 't {
        self.text
            .lines()
            .filter_map(move |l| l.strip_prefix(key)?.strip_prefix(' '))
    }

    /// The recorded rails, each `(VF, Said)` with its name left out.
    #[cfg(test)]
    fn said(&self) -> Option<Vec<(Bdf, Said)>> {
        self.lines("rail").map(|v| self.rail_of(v)).collect()
    }

    /// What the rail of `bdf` says, when the record has it (and it decodes).
    fn rail(&self, bdf: Bdf) -> Option<Said> {
        let at = format!("{bdf}\t");
        let v = self.lines("rail").find(|v| v.starts_with(&at))?;
        self.rail_of(v).map(|(_, s)| s)
    }

    fn rail_of(&self, v: &str) -> Option<(Bdf, Said)> {
        let level = self.level?;
        let mut p = v.splitn(5, '\t');
        let bdf = Bdf::parse(p.next()?)?;
        let near = flag(p.next()?)?;
        let starved_gpus = p.next()?.parse().ok()?;
        let starved = flag(p.next()?)?;
        let line = unescape_field(p.next()?)?;
        let record = PlacementRecord {
            near,
            starved_gpus,
            level: level.name().to_owned(),
        };
        let said = Said {
            line,
            record,
            starved,
        };
        Some((bdf, said))
    }

    fn devices(&self) -> Option<PodDevices> {
        let devices = self
            .lines("device")
            .map(|v| {
                let (r, id) = v.split_once('\t')?;
                Some(Device {
                    resource: unescape_field(r)?,
                    id: unescape_field(id)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(PodDevices { devices })
    }

    /// What the record says for a rail at `level`: the recorded skip, or
    /// the answer and its judgement (judged again where the level differs:
    /// another network of the pod).
    fn answer(self, host: &View, node: &NodeConfig, level: PathType) -> Result<PodAnswer, Skip> {
        if let Some((untrusted, why)) = self.skipped {
            return Err(if untrusted {
                Skip::Untrusted(why)
            } else {
                Skip::Recorded(why)
            });
        }
        let broken = || Skip::Recorded("the pod's recorded answer does not decode".into());
        let source = self.source.ok_or_else(broken)?;
        if self.level != Some(level) {
            let devices = self.devices().ok_or_else(broken)?;
            return judged(host, node, (devices, source), level);
        }
        Ok(PodAnswer {
            source,
            level,
            held: Held::Recorded(self),
        })
    }
}

fn flag(s: &str) -> Option<bool> {
    match s {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// A record's text from an open file: a regular file of at most
/// [`RECORD_MAX`] bytes, root's, UTF-8.
fn read_record(file: &File) -> Option<String> {
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || meta.len() > RECORD_MAX || meta.uid() != 0 {
        return None;
    }
    let body = crate::fs_read::whole(file, meta.len(), RECORD_MAX).ok()?;
    String::from_utf8(body).ok()
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

    #[test]
    fn fields_never_end_a_field_or_a_line() {
        for s in ["plain", "a\tb", "a\nb", "100%", "%09", "\t\n%", ""] {
            let e = escape_field(s);
            assert!(!e.contains(['\t', '\n']), "{e:?}");
            assert_eq!(unescape_field(&e).as_deref(), Some(s));
        }
        assert_eq!(unescape_field("%zz"), None);
        assert_eq!(unescape_field("%2"), None);
    }

    /// The key of sandbox "sb" of `pod`, its records in `dir`.
    fn key_of(dir: PathBuf, pod: &PodRef) -> Key<'_> {
        Key {
            dir,
            sandbox: "sb",
            uid: UID,
            pod,
        }
    }

    fn pod() -> PodRef {
        PodRef {
            namespace: "ns".into(),
            name: "p".into(),
            uid: Some(UID.into()),
        }
    }

    fn answer() -> PodAnswer {
        let record = |near| PlacementRecord {
            near,
            starved_gpus: 2,
            level: "PXB".into(),
        };
        let devices = PodDevices {
            devices: vec![
                Device {
                    resource: "nvidia.com/gpu".into(),
                    id: "GPU-0".into(),
                },
                Device {
                    resource: "r\twith\ttabs".into(),
                    id: "0000:0c:00.2".into(),
                },
            ],
        };
        let said = vec![
            (
                Bdf::parse("0000:0c:00.2").unwrap(),
                Said {
                    line: format!("rail {} is far\nand 100% starved", Said::NAME),
                    record: record(false),
                    starved: true,
                },
            ),
            (
                Bdf::parse("0000:47:00.4").unwrap(),
                Said {
                    line: format!("rail {} is near", Said::NAME),
                    record: record(true),
                    starved: true,
                },
            ),
        ];
        PodAnswer {
            source: Source::List,
            level: PathType::Pxb,
            held: Held::Judged { devices, said },
        }
    }

    /// What a record keeps comes back as it was, and a rail reads its own.
    #[test]
    fn a_record_reads_back_what_it_recorded() {
        let pod = pod();
        let key = key_of(PathBuf::new(), &pod);
        let a = answer();
        let f = Found::parse(encode(&key, 7, &Ok(answer()))).unwrap();
        assert_eq!(
            (f.sandbox.as_str(), f.uid.as_str(), f.boot_ns),
            ("sb", UID, 7)
        );
        let Held::Judged { devices, said } = &a.held else {
            unreachable!()
        };
        assert_eq!(&f.devices().unwrap(), devices);
        assert_eq!(&f.said().unwrap(), said);
        let far = f.rail(said[0].0).unwrap().named("net1", "0000:0c:00.2");
        assert_eq!(far.line, "rail net1 is far\nand 100% starved");
        assert_eq!(f.rail(Bdf::parse("0000:0c:00.3").unwrap()), None);
        for skip in [
            Skip::Untrusted("x\ty".into()),
            Skip::Recorded("the kubelet's answer".into()),
        ] {
            let f = Found::parse(encode(&key, 7, &Err(skip))).unwrap();
            assert!(f.skipped.is_some() && f.source.is_none());
        }
    }

    /// Anything but the format, line for line, is no record.
    #[test]
    fn a_record_out_of_its_format_is_none() {
        let pod = pod();
        let key = key_of(PathBuf::new(), &pod);
        let good = encode(&key, 7, &Ok(answer()));
        assert!(Found::parse(good.clone()).is_some());
        let edits: [(&str, &str); 8] = [
            ("roce-tune pod answer 1", "roce-tune pod answer 2"),
            ("uid ", "pod "),
            ("boot 7", "boot seven"),
            ("source List", "source Later"),
            ("level PXB", "level pxb"),
            ("level PXB\n", ""),
            ("device nvidia.com/gpu\tGPU-0\n", "device nvidia.com/gpu\n"),
            ("\nrail ", "\nrail% "),
        ];
        for (from, to) in edits {
            assert!(good.contains(from), "{from}");
            assert!(
                Found::parse(good.replacen(from, to, 1)).is_none(),
                "{from} -> {to}"
            );
        }
        // A rail line that does not decode: the header reads, the rails not.
        let bad = good.replacen("\t0\t2\t1\t", "\tno\t2\t1\t", 1);
        assert!(Found::parse(bad).unwrap().said().is_none());
    }

    /// A record is read only while fresh, of this pod, and a regular file.
    #[test]
    fn only_a_fresh_record_of_the_pod_is_read() {
        if !crate::process::test_runs_as_root(
            "pod_answer::only_a_fresh_record_of_the_pod_is_read",
            "a record is believed only when root wrote it",
        ) {
            return;
        }
        let dir = std::env::temp_dir().join(format!("rt-pod-answer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pod = pod();
        let key = key_of(dir.clone(), &pod);
        let write = |age_ns: i64, pod: &PodRef| {
            let k = key_of(dir.clone(), pod);
            let body = encode(&k, (boot_ns() as i64 - age_ns) as u64, &Ok(answer()));
            std::fs::write(dir.join(key.name()), body).unwrap();
        };
        let s = 1_000_000_000i64;
        write(0, &pod);
        assert!(key.read().is_some());
        write(FRESH.as_nanos() as i64 - s, &pod);
        assert!(key.read().is_some());
        write(FRESH.as_nanos() as i64 + s, &pod);
        assert!(key.read().is_none(), "stale");
        write(-s, &pod);
        assert!(key.read().is_none(), "from the future");
        let other = PodRef {
            name: "q".into(),
            ..pod.clone()
        };
        write(0, &other);
        assert!(key.read().is_none(), "another pod's");
        std::fs::write(dir.join(key.name()), "{}").unwrap();
        assert!(key.read().is_none(), "not a record");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
