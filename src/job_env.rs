//! The job environment of a pod: the variables NCCL and UCX read to choose
//! the pod's rails, their GID index and their traffic class, computed from
//! what each rail's ADD verified and was asked (its state entry's rail
//! record), never from anything the pod says. The NRI plugin injects them at
//! CreateContainer; `roce-tune inspect --env` prints them. What each variable
//! means to NCCL and UCX, with file and line: docs/design.md, "NCCL's and
//! UCX's variables".
//!
//! A pod's rails are the entries that recorded its netns by nsfs identity,
//! each proved live through the path it recorded (an nsfs inode number is
//! reused once its netns is freed, so an orphan's identity alone could name
//! a new pod). They are ordered by their interface names as a person orders
//! them, net2 before net10: for Multus's names (net1, net2, ... by the
//! position in the pod's networks annotation) that is the order the pod asked
//! for them. The ifindex would not be: a netdev moved into a netns keeps the
//! index the host gave it (docs/design.md, "State entries").

use crate::cni::env::natural_cmp;
use crate::fs_read::{Changed, DirWatch};
use crate::netns::{NetNs, NsId};
pub use crate::node::EnvFamily as Family;
use crate::node::NodeConfig;
use crate::state::{parse_entry_name, Entry, Stamp, StateDir};
use std::cmp::Ordering;
use std::fmt;
use std::net::Ipv6Addr;
use std::path::Path;

/// How many `NCCL_IB_HCA` entries NCCL reads (`MAX_IB_DEVS`).
const NCCL_MAX_HCAS: usize = 32;

/// What the node config says about the environment: the families injected
/// (`jobEnvFamilies`, default `["nccl"]`), and single variables never
/// injected (`jobEnvOmit`) because another NRI plugin of the node sets them:
/// the runtime fails a container two plugins adjust the same variable of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPolicy {
    pub families: Vec<Family>,
    pub omit: Vec<String>,
}

impl EnvPolicy {
    pub fn from_node(node: &NodeConfig) -> EnvPolicy {
        EnvPolicy {
            families: node.job_env_families.clone(),
            omit: node.job_env_omit.clone(),
        }
    }
}

/// The variables a pod's containers get, in injection order, how many rails
/// they come from, and why a variable a reader might expect is absent (one
/// line each, for the log and `inspect --env`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEnv {
    pub vars: Vec<(String, String)>,
    pub rails: usize,
    pub notes: Vec<String>,
}

/// Why a pod gets nothing. Display is the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoEnv {
    /// No live entry records the pod's netns.
    NoRail,
    /// Rails, but the node config leaves out every variable they give.
    AllLeftOut { rails: usize },
    /// The state dir could not be read, and nothing was known before.
    StateDir(String),
}

impl fmt::Display for NoEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoEnv::NoRail => f.write_str(
                "no live rail: no state entry records this pod's network namespace (no RDMA interface of the pod went through roce-tune: a chain without roce-tune, or gidCheck off with nothing to set)",
            ),
            NoEnv::AllLeftOut { rails } => write!(
                f,
                "{rails} rails, but the node config's jobEnvOmit leaves out every variable they give"
            ),
            NoEnv::StateDir(why) => write!(f, "the rails are unknown: {why}"),
        }
    }
}

/// The address family of a rail's RoCE v2 GID: a v4-mapped GID is IPv4, as
/// NCCL's `getGidAddrFamily` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrFamily {
    V4,
    V6,
}

impl AddrFamily {
    fn of(gid: &Ipv6Addr) -> AddrFamily {
        match gid.to_ipv4_mapped() {
            Some(_) => AddrFamily::V4,
            None => AddrFamily::V6,
        }
    }

    /// `NCCL_IB_ADDR_FAMILY`'s spelling.
    fn nccl(self) -> &'static str {
        match self {
            AddrFamily::V4 => "AF_INET",
            AddrFamily::V6 => "AF_INET6",
        }
    }
}

/// One rail, as the environment needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rail {
    pub container_id: String,
    pub ifname: String,
    /// The recorded netns, proved live before the rail counts.
    pub netns: String,
    pub netns_id: Option<NsId>,
    pub device: String,
    pub port: u32,
    /// Where ADD verified (or found) the pod's RoCE v2 GID.
    pub gid_index: Option<u32>,
    pub family: Option<AddrFamily>,
    /// `trafficClass` where asked, else `rdmaCmTos`: the same byte, the
    /// RoCE v2 traffic class.
    pub class: Option<u8>,
}

impl Rail {
    /// An entry's rail. One written before format 4 has no rail record: its
    /// class is what it owns, and its GID index is unknown.
    pub fn of(e: &Entry) -> Rail {
        let owned = |key: &str| e.owned.get(key).and_then(|o| u8::try_from(o.written).ok());
        let (gid_index, class) = match &e.rail {
            Some(r) => (r.gid_index, r.traffic_class.or(r.rdma_cm_tos)),
            None => (None, owned("trafficClass").or_else(|| owned("rdmaCmTos"))),
        };
        Rail {
            container_id: e.container_id.clone(),
            ifname: e.ifname.clone(),
            netns: e.netns.clone(),
            netns_id: e.netns_id,
            device: e.device.clone(),
            port: e.port,
            gid_index,
            family: e
                .gid
                .as_deref()
                .and_then(|g| g.parse().ok())
                .map(|g| AddrFamily::of(&g)),
            class,
        }
    }

    fn hca(&self) -> String {
        format!("{}:{}", self.device, self.port)
    }
}

/// The value every rail gives, if they all give the same one.
fn common<T: PartialEq + Copy>(rails: &[&Rail], of: impl Fn(&Rail) -> Option<T>) -> Option<T> {
    let first = of(rails.first()?)?;
    rails.iter().all(|r| of(r) == Some(first)).then_some(first)
}

/// What each rail gives of one value, for a note: `net1 3, net2 none`.
fn each<T: fmt::Display>(rails: &[&Rail], of: impl Fn(&Rail) -> Option<T>) -> String {
    let parts: Vec<String> = rails
        .iter()
        .map(|r| match of(r) {
            Some(v) => format!("{} {v}", r.ifname),
            None => format!("{} none", r.ifname),
        })
        .collect();
    parts.join(", ")
}

/// The environment of one pod's rails (in any order: they are put in the
/// pod's), by the rules of docs/design.md, "NCCL's and UCX's variables".
pub fn env_of(rails: &[&Rail], policy: &EnvPolicy) -> Result<PodEnv, NoEnv> {
    let mut rails = rails.to_vec();
    // Insertion sort: a pod has tens of rails at most, and another instance
    // of the generic stable sort would add kilobytes to a binary copied to
    // every node.
    let order = |a: &Rail, b: &Rail| {
        natural_cmp(&a.ifname, &b.ifname).then_with(|| a.container_id.cmp(&b.container_id))
    };
    for i in 1..rails.len() {
        let mut j = i;
        while j > 0 && order(rails[j - 1], rails[j]) == Ordering::Greater {
            rails.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut notes = Vec::new();
    // Two interfaces on one device port (not a VF setup) name it once.
    let mut ports: Vec<String> = Vec::new();
    for r in &rails {
        let hca = r.hca();
        if ports.contains(&hca) {
            notes.push(format!("{} is {hca} again: named once", r.ifname));
        } else {
            ports.push(hca);
        }
    }
    if rails.is_empty() {
        return Err(NoEnv::NoRail);
    }
    if ports.len() > NCCL_MAX_HCAS {
        notes.push(format!(
            "{} rails: NCCL reads the first {NCCL_MAX_HCAS} entries of NCCL_IB_HCA",
            ports.len()
        ));
    }
    let index = common(&rails, |r| r.gid_index);
    let class = common(&rails, |r| r.class);
    let unchecked = "its GID check was off or found the GID nowhere";
    if rails.iter().all(|r| r.gid_index.is_none()) {
        notes.push(format!(
            "no rail recorded a GID index ({unchecked}): no index is set, the library selects each port's"
        ));
    } else if index.is_none() {
        let why = match rails.iter().any(|r| r.gid_index.is_none()) {
            true => format!("; none: {unchecked}"),
            false => String::new(),
        };
        notes.push(format!(
            "the rails do not all hold the pod's RoCE v2 GID at one index ({}{why}): no index is set, the library selects each port's",
            each(&rails, |r| r.gid_index)
        ));
    }
    if rails.iter().all(|r| r.class.is_none()) {
        notes.push(
            "no rail was asked a class (trafficClass or rdmaCmTos): none is set, the library's and the device's stand".into(),
        );
    } else if class.is_none() {
        notes.push(format!(
            "the rails were not all asked one class (trafficClass, else rdmaCmTos: {}): no class is set, the library's and the device's stand",
            each(&rails, |r| r.class)
        ));
    }
    let mut vars: Vec<(&str, String)> = Vec::new();
    for (i, family) in policy.families.iter().enumerate() {
        if policy.families[..i].contains(family) {
            continue;
        }
        match family {
            Family::Nccl => {
                // NCCL's exact-match form: `=` then device:port, each one.
                vars.push(("NCCL_IB_HCA", format!("={}", ports.join(","))));
                match index {
                    Some(i) => vars.push(("NCCL_IB_GID_INDEX", i.to_string())),
                    None => {
                        // NCCL 2.21+ selects per port the first RoCE v2 GID
                        // of the family it is told (AF_INET by default).
                        vars.push(("NCCL_IB_ROCE_VERSION_NUM", "2".into()));
                        match common(&rails, |r| r.family) {
                            Some(f) => vars.push(("NCCL_IB_ADDR_FAMILY", f.nccl().into())),
                            None => notes.push(format!(
                                "the rails' GIDs are not all of one address family: NCCL_IB_ADDR_FAMILY is left to NCCL (AF_INET) ({})",
                                each(&rails, |r| r.family.map(AddrFamily::nccl))
                            )),
                        }
                    }
                }
                if let Some(c) = class {
                    vars.push(("NCCL_IB_TC", c.to_string()));
                }
            }
            Family::Ucx => {
                vars.push(("UCX_NET_DEVICES", ports.join(",")));
                // Without it UCX picks a RoCE v2 GID itself, IPv4 first.
                if let Some(i) = index {
                    vars.push(("UCX_IB_GID_INDEX", i.to_string()));
                }
                if let Some(c) = class {
                    vars.push(("UCX_IB_TRAFFIC_CLASS", c.to_string()));
                }
            }
        }
    }
    vars.retain(|(k, _)| !policy.omit.iter().any(|o| o == k));
    if vars.is_empty() {
        return Err(NoEnv::AllLeftOut { rails: rails.len() });
    }
    Ok(PodEnv {
        vars: vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        rails: rails.len(),
        notes,
    })
}

/// What one refresh did: whether it listed the dir, the entries whose
/// stamp it took (one `fstatat` each), and those it read (new or changed),
/// kept unread, and dropped (gone from the dir).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refreshed {
    pub listed: bool,
    pub examined: usize,
    pub read: usize,
    pub kept: usize,
    pub dropped: usize,
}

/// How long before a listing the dir's mtime must be for an unchanged mtime
/// to prove nothing changed since: a file time comes from the coarse clock
/// (a tick late, up to 10 ms at HZ=100) and has a granularity of 1 s on ext4
/// with small inodes, so a change just after the listing can carry the same
/// mtime as one just before it (git's "racily clean" index entries).
const DIR_QUIET_NS: i128 = 2_000_000_000;

/// One entry file as the picture holds it: its attachment, its stamp, and
/// its rail (`None`: it does not read as an entry, and is not read again
/// until it changes).
#[derive(Debug)]
struct Seen {
    /// The entry file's name (`parse_entry_name` gives its attachment).
    name: String,
    stamp: Stamp,
    rail: Option<Rail>,
}

/// The rail an entry file holds, `None` when it does not read as one.
fn read_rail(state: &StateDir, name: &str) -> Option<Rail> {
    parse_entry_name(name)
        .and_then(|(cid, ifname)| state.read(&cid, &ifname).ok())
        .map(|e| Rail::of(&e))
}

/// A long-running process's picture of the node's rails: what the NRI
/// plugin holds between requests.
#[derive(Debug, Default)]
pub struct Rails {
    /// In the order the last listing gave, and the names the kernel told
    /// of since at the end: a dir that did not change lists in the same
    /// order, so each entry is found at its own place (a list, not a map: a
    /// map type is kilobytes of the static binary).
    seen: Vec<Seen>,
    /// Why the last refresh could not list the dir (the picture before it
    /// is kept: a passing error must not take a pod's rails away).
    failed: Option<String>,
    /// The dir's stamp before the last listing, and when that listing began
    /// (ns since the epoch): the same stamp, old enough, needs no listing.
    listed: Option<(Stamp, i128)>,
    /// What the kernel says changed in the dir since the last look
    /// (`follow_dir`); none before the first look, or once it could not
    /// tell.
    watch: Option<DirWatch>,
    /// Why the dir could not be watched, said once.
    unwatched: Option<String>,
}

impl Rails {
    pub fn new() -> Rails {
        Rails::default()
    }

    /// Catch up with the state dir: read only the entries that are new or
    /// changed since the last call (by name, inode, size and mtime: a write
    /// renames a new file into place), and drop the ones that are gone. A
    /// dir whose own stamp has not moved since a listing it was already
    /// quiet before is not listed again.
    pub fn refresh(&mut self, state: &StateDir) -> Refreshed {
        // One statx when nothing was written or released since the last
        // listing, instead of one per entry.
        if let (Ok(now), Some((was, at))) = (state.dir_stamp(), self.listed) {
            if now == was && was.mtime_ns < at - DIR_QUIET_NS && self.failed.is_none() {
                return Refreshed {
                    kept: self.seen.len(),
                    ..Refreshed::default()
                };
            }
        }
        self.relist(state)
    }

    /// List the dir whole: every entry's stamp against the picture's, the
    /// new and changed ones read, the ones gone dropped.
    fn relist(&mut self, state: &StateDir) -> Refreshed {
        let began = i128::from(crate::state::now_ns());
        let dir = state.dir_stamp().ok();
        let listed = match state.stamps() {
            Ok(l) => l,
            Err(e) => {
                self.failed = Some(e.to_string());
                self.listed = None;
                return Refreshed::default();
            }
        };
        self.failed = None;
        self.listed = dir.map(|d| (d, began));
        let mut old: Vec<Option<Seen>> = std::mem::take(&mut self.seen)
            .into_iter()
            .map(Some)
            .collect();
        let mut done = Refreshed {
            listed: true,
            examined: listed.len(),
            ..Refreshed::default()
        };
        // Where the previous name was found: a listing keeps its order but
        // for the names it adds or moves (a rename puts an entry at the head
        // of a tmpfs dir), and the picture keeps the order of its last
        // listing (`update` removes in place and adds at the end), so the
        // next name is most likely right after it. A name new since is
        // looked for in the whole picture: not a sort of it, whose code is
        // 4.4 KB of the CNI binary (`inspect --env` lists too).
        let mut last: Option<usize> = None;
        for (i, (name, stamp)) in listed.into_iter().enumerate() {
            let same = |at: &usize| {
                old.get(*at)
                    .is_some_and(|s| s.as_ref().is_some_and(|s| s.name == name))
            };
            let at = [last.map_or(i, |l| l + 1), i]
                .into_iter()
                .find(same)
                .or_else(|| (0..old.len()).find(same));
            last = at.or(last);
            let rail = match at.and_then(|at| old[at].take()) {
                Some(was) if was.stamp == stamp => {
                    done.kept += 1;
                    was.rail
                }
                _ => {
                    done.read += 1;
                    read_rail(state, &name)
                }
            };
            self.seen.push(Seen { name, stamp, rail });
        }
        done.dropped = old.iter().flatten().count();
        done
    }

    /// Look again at `changed` alone, the files the kernel says changed:
    /// each one's stamp taken, read when new or changed, dropped when gone.
    /// A version 1 name stays out while its attachment's current one is
    /// there, as in a listing (`StateDir::stamps`); it never outlives that
    /// one (`StateDir::write` and `remove` take it away), so a current
    /// entry's end uncovers none.
    fn update(&mut self, state: &StateDir, changed: &[std::ffi::OsString]) -> Refreshed {
        let names: Vec<String> = changed
            .iter()
            .filter_map(|n| n.to_str())
            .filter(|n| crate::state::is_entry_file(n))
            .map(str::to_owned)
            .collect();
        let mut done = Refreshed::default();
        for name in names.iter().cloned() {
            let stamp = match state.stamp(&name) {
                Ok(s) => s,
                Err(e) => {
                    // Unknown, not gone: the next look lists the dir.
                    self.failed = Some(e.to_string());
                    continue;
                }
            };
            done.examined += 1;
            let at = self.seen.iter().position(|s| s.name == name);
            match (stamp, at) {
                (None, Some(at)) => {
                    // In place: the order stays the last listing's.
                    self.seen.remove(at);
                    done.dropped += 1;
                }
                (None, None) => {}
                (Some(stamp), Some(at)) if self.seen[at].stamp == stamp => done.kept += 1,
                (Some(stamp), at) => {
                    done.read += 1;
                    let seen = Seen {
                        rail: read_rail(state, &name),
                        name,
                        stamp,
                    };
                    match at {
                        Some(at) => self.seen[at] = seen,
                        None => self.seen.push(seen),
                    }
                }
            }
        }
        // A current entry shadows its attachment's version 1 one.
        for name in &names {
            let Some((current, legacy)) = crate::state::both_entry_names(name) else {
                continue;
            };
            if self.seen.iter().any(|s| s.name == current) {
                if let Some(at) = self.seen.iter().position(|s| s.name == legacy) {
                    self.seen.remove(at);
                    done.dropped += 1;
                }
            }
        }
        done
    }

    /// `refresh` from the node's state dir: none at all means no rails.
    pub fn refresh_dir(&mut self, dir: &Path) -> Refreshed {
        match StateDir::existing(dir) {
            Ok(Some(state)) => self.refresh(&state),
            other => self.no_dir(other.err()),
        }
    }

    /// The state dir is not there (`why: None`), or not usable: the
    /// picture is emptied, or kept with the reason.
    fn no_dir(&mut self, why: Option<crate::state::StateError>) -> Refreshed {
        self.listed = None;
        self.watch = None;
        match why {
            None => {
                self.failed = None;
                let dropped = self.seen.len();
                self.seen.clear();
                Refreshed {
                    dropped,
                    ..Refreshed::default()
                }
            }
            Some(e) => {
                self.failed = Some(e.to_string());
                Refreshed::default()
            }
        }
    }

    /// The long-running reader's refresh (the NRI plugin's, at each
    /// CreateContainer): the kernel says which entries changed since the
    /// last call (`fs_read::DirWatch`), and only those are looked at, however many
    /// the dir holds (10,000 orphans stat'ed at every call took 35 ms at
    /// the median while the dir was busy). The first call, and one after
    /// the kernel could not tell (its queue overflowed, the dir was
    /// replaced) or a file could not be stat'ed, lists the dir whole, the
    /// watch made first. Where no watch can be made (the instances a user
    /// may have are spent), it is `refresh`, and that is said once.
    pub fn follow_dir(&mut self, dir: &Path) -> Refreshed {
        let state = match StateDir::existing(dir) {
            Ok(Some(state)) => state,
            other => return self.no_dir(other.err()),
        };
        if self.failed.is_none() {
            if let Some(Ok(Changed::Names(names))) = self.watch.as_mut().map(DirWatch::changed) {
                return self.update(&state, &names);
            }
        }
        self.watch = match DirWatch::new(dir) {
            Ok(w) => {
                self.unwatched = None;
                Some(w)
            }
            Err(e) => {
                let why = e.to_string();
                if self.unwatched.as_ref() != Some(&why) {
                    crate::warn!(
                        "cannot watch {} ({why}): each request compares the dir's stamp, and lists it while it is busy",
                        dir.display()
                    );
                    self.unwatched = Some(why);
                }
                None
            }
        };
        match self.watch {
            Some(_) => self.relist(&state),
            None => self.refresh(&state),
        }
    }

    /// How many entries the picture holds (readable or not).
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The environment of the pod whose network namespace is `netns`,
    /// matched by the nsfs identity the entries recorded, never by a name,
    /// and each recorded path proved to be that netns still.
    pub fn env_for(&self, netns: &NsId, policy: &EnvPolicy) -> Result<PodEnv, NoEnv> {
        let mut mine: Vec<&Rail> = self
            .seen
            .iter()
            .filter_map(|s| s.rail.as_ref())
            .filter(|r| r.netns_id == Some(*netns))
            .collect();
        if mine.is_empty() {
            return Err(match &self.failed {
                Some(why) => NoEnv::StateDir(why.clone()),
                None => NoEnv::NoRail,
            });
        }
        // A pod's rails name one path: proved once, not once a rail.
        let mut live: Vec<(&str, bool)> = Vec::new();
        mine.retain(|r| {
            if let Some((_, ok)) = live.iter().find(|(p, _)| *p == r.netns) {
                return *ok;
            }
            let ok = NetNs::still(Path::new(&r.netns), Some(*netns)).is_ok_and(|ns| ns.is_some());
            live.push((&r.netns, ok));
            ok
        });
        env_of(&mine, policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD_A: NsId = NsId {
        dev: 4,
        ino: 4026532001,
    };

    fn rail(ifname: &str, device: &str, index: Option<u32>, class: Option<u8>) -> Rail {
        Rail {
            container_id: "sandbox-a".into(),
            ifname: ifname.into(),
            netns: "/var/run/netns/a".into(),
            netns_id: Some(POD_A),
            device: device.into(),
            port: 1,
            gid_index: index,
            family: Some(AddrFamily::V4),
            class,
        }
    }

    fn nccl() -> EnvPolicy {
        EnvPolicy {
            families: vec![Family::Nccl],
            omit: vec![],
        }
    }

    fn both() -> EnvPolicy {
        EnvPolicy {
            families: vec![Family::Nccl, Family::Ucx],
            omit: vec![],
        }
    }

    fn lines(env: &PodEnv) -> Vec<String> {
        env.vars.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    fn env(rails: &[Rail], policy: &EnvPolicy) -> Result<PodEnv, NoEnv> {
        env_of(&rails.iter().collect::<Vec<_>>(), policy)
    }

    #[test]
    fn one_rail_names_its_port_index_and_class() {
        let e = env(&[rail("net1", "mlx5_2", Some(3), Some(41))], &nccl()).unwrap();
        assert_eq!(
            lines(&e),
            [
                "NCCL_IB_HCA==mlx5_2:1",
                "NCCL_IB_GID_INDEX=3",
                "NCCL_IB_TC=41"
            ]
        );
        assert_eq!((e.rails, e.notes.len()), (1, 0));
    }

    #[test]
    fn sixteen_rails_in_the_order_of_the_pods_interfaces() {
        // Recorded in any order (the state dir lists by name bytes: net10
        // before net2); named as the pod's networks are: net1..net16.
        let mut rails: Vec<Rail> = (1..=16)
            .rev()
            .map(|i| {
                rail(
                    &format!("net{i}"),
                    &format!("mlx5_{}", i + 1),
                    Some(3),
                    Some(106),
                )
            })
            .collect();
        rails.swap(0, 9);
        let e = env(&rails, &both()).unwrap();
        let list: Vec<String> = (1..=16).map(|i| format!("mlx5_{}:1", i + 1)).collect();
        assert_eq!(
            lines(&e),
            [
                format!("NCCL_IB_HCA=={}", list.join(",")),
                "NCCL_IB_GID_INDEX=3".into(),
                "NCCL_IB_TC=106".into(),
                format!("UCX_NET_DEVICES={}", list.join(",")),
                "UCX_IB_GID_INDEX=3".into(),
                "UCX_IB_TRAFFIC_CLASS=106".into(),
            ]
        );
        assert_eq!(e.rails, 16);
    }

    #[test]
    fn rails_that_disagree_on_the_index_leave_it_to_the_librarys_selection() {
        let rails = [
            rail("net1", "mlx5_0", Some(3), Some(41)),
            rail("net2", "mlx5_1", Some(5), Some(41)),
        ];
        let e = env(&rails, &both()).unwrap();
        assert_eq!(
            lines(&e),
            [
                "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1",
                "NCCL_IB_ROCE_VERSION_NUM=2",
                "NCCL_IB_ADDR_FAMILY=AF_INET",
                "NCCL_IB_TC=41",
                "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1",
                "UCX_IB_TRAFFIC_CLASS=41",
            ]
        );
        assert!(e.notes[0].contains("net1 3, net2 5"), "{:?}", e.notes);
        // An IPv6 pod's selection must be told its family.
        let mut v6 = rails.clone();
        for r in &mut v6 {
            r.family = Some(AddrFamily::V6);
        }
        let e = env(&v6, &nccl()).unwrap();
        assert!(lines(&e).contains(&"NCCL_IB_ADDR_FAMILY=AF_INET6".to_string()));
        // Families that differ: no family is right for all, NCCL's default stays.
        v6[0].family = Some(AddrFamily::V4);
        let e = env(&v6, &nccl()).unwrap();
        assert!(!lines(&e)
            .iter()
            .any(|l| l.starts_with("NCCL_IB_ADDR_FAMILY")));
        assert!(lines(&e).contains(&"NCCL_IB_ROCE_VERSION_NUM=2".to_string()));
        assert!(
            e.notes.iter().any(|n| n.contains("address family")),
            "{:?}",
            e.notes
        );
    }

    #[test]
    fn a_rail_without_an_index_gives_none_to_all() {
        // gidCheck off on one rail (or warn that found the GID nowhere): no
        // index is known for it, so none is claimed for the pod.
        let mut rails = [
            rail("net1", "mlx5_0", Some(3), None),
            rail("net2", "mlx5_1", None, None),
        ];
        rails[1].family = None;
        let e = env(&rails, &nccl()).unwrap();
        assert_eq!(
            lines(&e),
            [
                "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1",
                "NCCL_IB_ROCE_VERSION_NUM=2"
            ]
        );
        assert!(e.notes[0].contains("net2 none"), "{:?}", e.notes);
        assert!(e.notes.iter().any(|n| n.contains("class")), "{:?}", e.notes);
    }

    #[test]
    fn the_class_is_set_only_when_every_rail_was_asked_the_same() {
        let rails = [
            rail("net1", "mlx5_0", Some(3), Some(41)),
            rail("net2", "mlx5_1", Some(3), Some(96)),
        ];
        let e = env(&rails, &both()).unwrap();
        assert!(!lines(&e)
            .iter()
            .any(|l| l.contains("_TC") || l.contains("TRAFFIC_CLASS")));
        assert!(e.notes[0].contains("net1 41, net2 96"), "{:?}", e.notes);
        // trafficClass where set, else rdmaCmTos: the same byte.
        let mut entry = crate::state::tests::entry("c1");
        entry.rail = Some(crate::state::RailRecord {
            gid_index: Some(3),
            traffic_class: None,
            rdma_cm_tos: Some(106),
        });
        assert_eq!(Rail::of(&entry).class, Some(106));
        entry.rail.as_mut().unwrap().traffic_class = Some(41);
        assert_eq!(Rail::of(&entry).class, Some(41));
        // Before format 4: what it owns, and no index.
        entry.rail = None;
        let old = Rail::of(&entry);
        assert_eq!((old.class, old.gid_index), (Some(41), None));
        assert_eq!(old.family, Some(AddrFamily::V4));
    }

    #[test]
    fn omitted_variables_are_left_out_and_all_of_them_is_nothing() {
        let rails = [rail("net1", "mlx5_0", Some(3), Some(41))];
        let policy = EnvPolicy {
            families: vec![Family::Nccl],
            omit: vec!["NCCL_IB_TC".into()],
        };
        let e = env(&rails, &policy).unwrap();
        assert_eq!(lines(&e), ["NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_GID_INDEX=3"]);
        let policy = EnvPolicy {
            families: vec![Family::Nccl],
            omit: Family::Nccl
                .variables()
                .iter()
                .map(|v| v.to_string())
                .collect(),
        };
        assert_eq!(env(&rails, &policy), Err(NoEnv::AllLeftOut { rails: 1 }));
        assert_eq!(env(&[], &nccl()), Err(NoEnv::NoRail));
    }

    /// Every variable the rules can give is one the node config may omit.
    #[test]
    fn every_variable_given_is_one_jobenvomit_knows() {
        let mut cases = vec![
            vec![rail("net1", "mlx5_0", Some(3), Some(41))],
            vec![
                rail("net1", "mlx5_0", Some(3), None),
                rail("net2", "mlx5_1", Some(4), None),
            ],
        ];
        cases[1][1].family = Some(AddrFamily::V4);
        for rails in cases {
            for f in Family::ALL {
                let policy = EnvPolicy {
                    families: vec![f],
                    omit: vec![],
                };
                for (k, _) in env(&rails, &policy).unwrap().vars {
                    assert!(f.variables().contains(&k.as_str()), "{k} of {f:?}");
                }
            }
        }
    }

    /// In the shared RDMA netns mode every RDMA device of the node is
    /// visible in every pod; the list names the pod's own rails, found by
    /// its netns identity, and exclusive mode gives the same lines.
    #[test]
    fn the_list_names_only_the_pods_own_rails_in_either_mode() {
        let mut b = rail("net1", "mlx5_7", Some(3), Some(41));
        b.netns_id = Some(NsId {
            dev: 4,
            ino: 4026532999,
        });
        b.container_id = "sandbox-b".into();
        let a = rail("net1", "mlx5_2", Some(3), Some(41));
        let mut rails = Rails::new();
        for (i, r) in [&a, &b].into_iter().enumerate() {
            let stamp = Stamp {
                ino: i as u64,
                size: 1,
                mtime_ns: 1,
            };
            rails.seen.push(Seen {
                name: crate::state::entry_name(&r.container_id, &r.ifname),
                stamp,
                rail: Some(r.clone()),
            });
        }
        let mine: Vec<&Rail> = rails
            .seen
            .iter()
            .filter_map(|s| s.rail.as_ref())
            .filter(|r| r.netns_id == Some(POD_A))
            .collect();
        let shared = env_of(&mine, &nccl()).unwrap();
        assert_eq!(lines(&shared)[0], "NCCL_IB_HCA==mlx5_2:1");
        // Exclusive mode: the same record, reached through the pod's sysfs.
        let mut entry = crate::state::tests::entry("sandbox-a");
        let host = Rail::of(&entry);
        entry.reach = crate::rdma::reach::Reach::Pod;
        assert_eq!(Rail::of(&entry), host);
        // The netns of these records does not exist here: a rail is live
        // only while its recorded path is still its netns.
        assert_eq!(rails.env_for(&POD_A, &nccl()), Err(NoEnv::NoRail));
    }

    #[test]
    fn two_interfaces_on_one_port_name_it_once() {
        let rails = [
            rail("net1", "mlx5_0", Some(3), Some(41)),
            rail("net2", "mlx5_0", Some(3), Some(41)),
        ];
        let e = env(&rails, &nccl()).unwrap();
        assert_eq!(lines(&e)[0], "NCCL_IB_HCA==mlx5_0:1");
        assert!(e.notes[0].contains("named once"), "{:?}", e.notes);
    }
}
