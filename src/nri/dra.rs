//! DRA rails: the netdevs a DRA driver (dranet, at NRI index
//! `00`) moved into a pod at RunPodSandbox, which no CNI chain runs for,
//! tuned with the node config's `draRails` profile exactly as a CNI ADD
//! tunes a rail: the same lookup from inside the pod netns, the same
//! `rail::tune` (sysctls, class, ToS, GID check, state entry, undo), and given back at StopPodSandbox by the same `release_entry` a
//! DEL uses (docs/design.md, "DRA rails").
//!
//! The runtime holds one lock across every plugin's answer and drops a
//! plugin that outlasts its request timeout, so every wait of a pod event,
//! GID wait, device locks and rollback included, ends by one deadline the
//! caller gives (`answer::Plugin::pod_event_budget`). What a pass cannot
//! finish by then it hands back to the caller ([`Pass::left`],
//! [`Failed::give_back`], [`DraRails::stop`]'s entries), which finishes it
//! after the answer, off the request path (`super::catch_up`).

use crate::cni::config::{GidCheck, NetConf};
use crate::cni::{code, CniError};
use crate::netlink::Netlink;
use crate::netns::{Lookup, NetNs, NsId};
use crate::node::NodeConfig;
use crate::ownership::{self, Done, Place};
use crate::rail::{self, Expect, Failure, Rail, TuneExtras};
use crate::rdma::lookup::{self, CrossCheck, LookupError, Names};
use crate::rdma::reach::{PodSide, Sysfs};
use crate::rdma::RdmaPort;
use crate::state::{Entry, LockWait, PodRecord, StateDir, DRA_NETWORK};
use crate::wire::nri_messages::Pod;
use std::path::Path;
use std::time::{Duration, Instant};

/// The annotation a pod picks its class with, within the profile's
/// `podTrafficClasses` (as `args.cni.trafficClass` for a CNI rail).
pub const CLASS_ANNOTATION: &str = "roce-tune.io/traffic-class";

/// The pod's primary interface by name; whichever link holds the pod's
/// default route is primary too.
const PRIMARY: &str = "eth0";

/// What a pass keeps of its deadline: no rail or release is begun within
/// this of it, and its lock and GID waits end this much before it (the GID
/// wait keeps `add`'s 100 ms more for the take after it). Two shares: the
/// take of the rail in hand (the sysfs writes, an entry written and
/// fsynced with its directory: 1 to 17 ms a rail with the debug build on
/// this machine's ext4, a single fsync up to 100 ms, about 1.3 ms with the
/// release build on a tmpfs; docs/performance.md, "DRA rails under one
/// deadline"), and the answer's own margin, [`ANSWER_MARGIN`].
pub const RAIL_RESERVE: Duration = Duration::from_millis(200);

/// How long before its deadline a pod event's answer goes, whatever the
/// pass in hand (`catch_up::within`): the request thread must still be
/// scheduled to write it, and a container under a CPU limit can be stopped
/// for the rest of a CFS period, 100 ms by default (`cpu.cfs_period_us`;
/// an answer 137 ms past the deadline was measured here at a load of 14).
pub const ANSWER_MARGIN: Duration = Duration::from_millis(100);

/// The events a pod's rails are given back at, as lines name them.
pub const STOP: &str = "StopPodSandbox";
pub const REMOVE: &str = "RemovePodSandbox";

/// The DRA rails of the node: its profile and where entries go.
pub struct DraRails {
    node: NodeConfig,
    profile: serde_json::Value,
    /// The profile's `gidCheck` is enforce: a rail not verified within an
    /// answer fails its sandbox.
    enforce: bool,
    /// The host's netns (`/proc/1/ns/net`) and the plugin's own (the agent
    /// runs in the host's netns; where init's cannot be opened, as in a
    /// container of another user namespace, it is the one known): a pod
    /// netns that is one of them is no netns of the pod's own.
    host: Vec<NsId>,
}

/// What the DRA rails read of a pod, owned: a pass after the answer (the
/// catch-up thread's) needs it once the request's bytes are gone. The
/// class annotation is the only annotation kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub netns: Option<String>,
    pub class: Option<String>,
}

impl Sandbox {
    pub fn of(pod: &Pod<'_>) -> Sandbox {
        Sandbox {
            id: pod.id.to_owned(),
            name: pod.name.to_owned(),
            namespace: pod.namespace.to_owned(),
            uid: pod.uid.to_owned(),
            netns: pod.netns.map(str::to_owned),
            class: pod.annotation(CLASS_ANNOTATION).map(str::to_owned),
        }
    }

    /// How the pod is named in every line: escaped, it is the runtime's
    /// input, and its id cut short (a sandbox id of any length reaches
    /// this line).
    pub fn who(&self) -> String {
        let id: String = self.id.chars().take(80).collect();
        format!(
            "pod {}/{} ({})",
            crate::log::escape(&self.namespace),
            crate::log::escape(&self.name),
            crate::log::escape(&id)
        )
    }
}

/// Who runs a pass: the answer to RunPodSandbox, which can still refuse the
/// sandbox, or a pass after it (the catch-up thread's), whose sandbox runs
/// already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Answer,
    Running,
}

/// A netdev of the pod the kernel shows with an RDMA port no entry of its
/// sandbox holds.
struct Candidate {
    ifname: String,
    port: RdmaPort,
}

/// What one pass over a pod's rails did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Rails tuned by this pass.
    pub tuned: usize,
    /// Ports of the pod that an entry of its sandbox held already (a CNI
    /// rail's, or a DRA rail tuned before): left as they are.
    pub held: usize,
    /// Rails this pass could not tune by its deadline (not reached, or
    /// their device's lock held past it): nothing of them was changed, and
    /// the next pass takes them.
    pub left: usize,
}

/// A pass that failed: why (the sandbox fails at RunPodSandbox), and the
/// entries its rollback could not give back by the deadline (their device
/// locks held), which the caller gives back after the answer.
#[derive(Debug, Default)]
pub struct Failed {
    pub why: String,
    pub give_back: Vec<Entry>,
}

impl Failed {
    fn nothing(why: String) -> Failed {
        Failed {
            why,
            give_back: Vec::new(),
        }
    }
}

/// When a pass's waits must end: [`RAIL_RESERVE`] before its deadline.
fn waits_end(deadline: Instant) -> Instant {
    deadline.checked_sub(RAIL_RESERVE).unwrap_or(deadline)
}

impl DraRails {
    /// `None` when the node config has no `draRails` profile.
    pub fn new(node: &NodeConfig) -> Option<DraRails> {
        let profile = node.dra_rails.clone()?;
        let host = ["/proc/1/ns/net", "/proc/self/ns/net"]
            .iter()
            .filter_map(|p| match NetNs::lookup(Path::new(p)) {
                Ok(Lookup::Netns(ns)) => Some(ns.id()),
                _ => None,
            })
            .collect();
        let enforce = NetConf::from_profile(&profile, DRA_NETWORK, None)
            .is_ok_and(|c| c.gid_check == GidCheck::Enforce);
        Some(DraRails {
            node: node.clone(),
            profile,
            enforce,
            host,
        })
    }

    /// Whether the profile's `gidCheck` is enforce.
    pub fn enforces(&self) -> bool {
        self.enforce
    }

    /// One pass over the pod's rails, RunPodSandbox's (`Stage::Answer`)
    /// and every later one's alike. A rail is any port of the pod that no
    /// entry of its sandbox holds (a CNI rail's, a DRA rail's tuned
    /// before), told by the device's identity, so a pass tunes what an
    /// earlier one left and never a port a renamed interface still holds.
    ///
    /// Every wait ends by `deadline` less [`RAIL_RESERVE`], and no rail is
    /// begun after that: what is left is counted in [`Pass::left`], or,
    /// under `gidCheck: enforce` at RunPodSandbox, fails the sandbox (a
    /// rail not verified is not promised). A failure gives back what the
    /// pass took, within the same deadline ([`Failed::give_back`]: the
    /// rest).
    pub fn tune(&self, pod: &Sandbox, deadline: Instant, stage: Stage) -> Result<Pass, Failed> {
        let started = Instant::now();
        let until = waits_end(deadline);
        let who = pod.who();
        sandbox_id(&pod.id)
            .map_err(|why| Failed::nothing(format!("{who}: {why}: nothing was changed")))?;
        let Some(netns) = self.own_netns(pod, &who) else {
            return Ok(Pass::default());
        };
        let class = pod
            .class
            .as_deref()
            .map(|v| ("annotation roce-tune.io/traffic-class", v));
        let fail = |e: CniError| Failed::nothing(format!("{who}: {}: nothing was changed", e.msg));
        let conf = NetConf::from_profile(&self.profile, DRA_NETWORK, class).map_err(fail)?;
        let state = StateDir::create(&self.node.state_dir).map_err(|e| fail(e.into()))?;
        let sysfs = rail::sysfs(&self.node).map_err(fail)?;
        let held = sandbox_entries(&state, &pod.id);
        let (rails, held) = candidates(&conf, &netns, &sysfs, &held, &who).map_err(fail)?;
        if rails.is_empty() {
            if held == 0 {
                crate::info!("{who}: no DRA rail (no netdev of the pod's own with an RDMA port beside its primary and the ports its entries hold)");
            }
            return Ok(Pass {
                held,
                ..Pass::default()
            });
        }
        for r in &rails {
            crate::sysctl::check_allowlist(&conf.sysctls, &r.ifname, &self.node)
                .map_err(|e| fail(e.into()))?;
        }
        let rails = free_first(&state, rails);
        let record = pod_record(pod);
        let mut tuned: Vec<rail::Tuned> = Vec::new();
        let mut left: Vec<&str> = Vec::new();
        let lock_held_fails = stage == Stage::Answer && conf.gid_check == GidCheck::Enforce;
        for (r, was_held) in &rails {
            if Instant::now() >= until {
                left.push(&r.ifname);
                continue;
            }
            // A lock held a moment ago is waited for before the trip into
            // the pod netns: held past the deadline, the rail costs no
            // sysctls written and put back.
            if *was_held && !comes_free(&state, &r.port, until) {
                let held = format!(
                    "DRA rail {}: another process holds the lock of {} port {} past the answer's budget",
                    r.ifname, r.port.device, r.port.port
                );
                if lock_held_fails {
                    let why = format!("{who}: {held}: gidCheck is enforce, so the sandbox fails and nothing was changed");
                    return Err(self.roll_back(&state, &sysfs, &netns, tuned, &who, why, until));
                }
                crate::info!("{who}: {held}: not tuned yet");
                left.push(&r.ifname);
                continue;
            }
            let rail = Rail {
                conf: &conf,
                node: &self.node,
                network: DRA_NETWORK,
                container_id: &pod.id,
                ifname: &r.ifname,
                netns: &netns,
                state: &state,
                sysfs: &sysfs,
                expect: Expect::FromLink,
                pod: record.clone(),
                deadline: Some(until),
                dcb: &crate::rail_qos::HOST_DCB,
                sys: &crate::syscall::KERNEL,
            };
            match rail::tune(&rail, TuneExtras::default()) {
                Ok(t) => {
                    crate::info!(
                        "{who}: DRA rail {} on {} port {} tuned (class {}, ToS {}, GID index {})",
                        r.ifname,
                        t.entry.device,
                        t.entry.port,
                        show(conf.traffic_class),
                        show(conf.rdma_cm_tos),
                        t.entry
                            .rail
                            .and_then(|x| x.gid_index)
                            .map_or("none".into(), |i| i.to_string())
                    );
                    tuned.push(t);
                }
                // Its device's lock was held past the deadline: nothing of
                // this rail was changed.
                Err(e) if e.failure == Failure::Busy && !lock_held_fails => {
                    crate::info!("{who}: DRA rail {} not tuned yet: {}", r.ifname, e.msg);
                    left.push(&r.ifname);
                }
                Err(e) => {
                    // Most rail errors already end by what was changed.
                    let tail = if e.msg.contains("nothing was changed") {
                        ""
                    } else {
                        ": nothing was changed"
                    };
                    let why = format!("{who}: DRA rail {}: {}{tail}", r.ifname, e.msg);
                    return Err(self.roll_back(&state, &sysfs, &netns, tuned, &who, why, until));
                }
            }
        }
        let spent = started.elapsed().as_millis();
        let budget = deadline.saturating_duration_since(started).as_millis();
        if !left.is_empty() && stage == Stage::Answer && conf.gid_check == GidCheck::Enforce {
            let why = format!(
                "{who}: DRA rails {} not tuned within the answer's budget ({budget} ms): gidCheck is enforce, so the sandbox fails and nothing was changed",
                names(&left)
            );
            return Err(self.roll_back(&state, &sysfs, &netns, tuned, &who, why, until));
        }
        let after = if left.is_empty() {
            String::new()
        } else {
            format!(
                "; {} left for after the answer, off the request path ({})",
                left.len(),
                names(&left)
            )
        };
        crate::info!(
            "{who}: {} of {} DRA rails tuned in {spent} ms (budget {budget} ms){after}",
            tuned.len(),
            rails.len()
        );
        Ok(Pass {
            tuned: tuned.len(),
            held,
            left: left.len(),
        })
    }

    /// A pass failed: the rails it tuned are given back (their entries say
    /// what), newest first, each while its device's lock comes by `until`;
    /// their sysctls are put back in one trip into the pod netns (no lock
    /// guards them). What could not be given back by then is returned,
    /// for after the answer.
    #[allow(clippy::too_many_arguments)]
    fn roll_back(
        &self,
        state: &StateDir,
        sysfs: &Sysfs,
        netns: &NetNs,
        tuned: Vec<rail::Tuned>,
        who: &str,
        why: String,
        until: Instant,
    ) -> Failed {
        let place = Place {
            state,
            sysfs,
            device_info_dir: &self.node.device_info_dir,
            lock_wait: LockWait::Until(until),
        };
        let mut give_back = Vec::new();
        for t in tuned.iter().rev() {
            if Instant::now() >= until {
                give_back.push(t.entry.clone());
                continue;
            }
            match ownership::release_entry(place, &t.entry) {
                Done::Released(_) => {}
                Done::Busy(_) => give_back.push(t.entry.clone()),
                done @ Done::Kept(_) => {
                    crate::error!("{who}: the rollback of DRA rail {}: {done}", t.entry.ifname)
                }
            }
        }
        if let Err(e) = netns.run_there(&mut || {
            for t in tuned.iter().rev() {
                crate::sysctl::revert(&t.sysctls);
            }
        }) {
            crate::error!("{who}: the sysctls of its DRA rails could not be put back: {e}");
        }
        after_the_answer(who, &give_back, tuned.len());
        let why = match give_back.len() {
            0 => why,
            n => format!(
                "{why} once the {n} rails whose device locks are held past the deadline are given back, after the answer"
            ),
        };
        Failed { why, give_back }
    }

    /// StopPodSandbox ([`STOP`]), and RemovePodSandbox for what is left
    /// (and a failed RunPodSandbox's rails tuned after its answer, `event`
    /// naming which): every DRA rail of the sandbox given back where its
    /// device shows now (dranet, at index 00, has moved it back to the host
    /// already), each while its device's lock comes by the deadline (less
    /// [`RAIL_RESERVE`]). Never fails the event. Returns the entries the
    /// deadline cut (a lock held, or not reached), to be given back after
    /// the answer; what no view shows stays for the agent's repair.
    pub fn stop(&self, pod: &Sandbox, deadline: Instant, event: &str) -> Vec<Entry> {
        let until = waits_end(deadline);
        let who = pod.who();
        if let Err(why) = sandbox_id(&pod.id) {
            crate::warn!("{event} {who}: {why}: nothing done");
            return Vec::new();
        }
        let Some(state) = self.existing_state(&format!("{event} {who}")) else {
            return Vec::new();
        };
        let entries: Vec<Entry> = sandbox_entries(&state, &pod.id)
            .into_iter()
            .filter(|e| e.network == DRA_NETWORK)
            .collect();
        if entries.is_empty() {
            let line = format!("{event} {who}: no DRA rail recorded for this sandbox (never seen, or given back already): nothing to do");
            if event == STOP {
                crate::info!("{line}");
            } else {
                crate::debug!("{line}");
            }
            return Vec::new();
        }
        if Instant::now() < until {
            renamed(&entries, &who, event);
        }
        let who = format!("{event} {who}");
        let left = self.release(&state, &entries, until, &who);
        after_the_answer(&who, &left, entries.len());
        left
    }

    /// A rollback's or a stop's entries that the deadline cut, given back
    /// after the answer (the catch-up thread's turn): each read again first
    /// (gone, or taken again since under the same name: not this one's to
    /// give back). Returns what is still left.
    pub fn give_back(&self, who: &str, entries: &[Entry], deadline: Instant) -> Vec<Entry> {
        let Some(state) = self.existing_state(who) else {
            return Vec::new();
        };
        let still: Vec<Entry> = entries
            .iter()
            .filter(|e| {
                state
                    .read(&e.container_id, &e.ifname)
                    .is_ok_and(|now| now.created_ns == e.created_ns)
            })
            .cloned()
            .collect();
        self.release(&state, &still, waits_end(deadline), who)
    }

    /// The state dir, when there is one to give back from; a state dir that
    /// cannot be opened is a line, its entries left to the agent's repair.
    fn existing_state(&self, who: &str) -> Option<StateDir> {
        match StateDir::existing(&self.node.state_dir) {
            Ok(s) => s,
            Err(e) => {
                crate::error!(
                    "{who}: {e}: nothing given back now; its DRA rails stay for the agent's repair"
                );
                None
            }
        }
    }

    /// Each of `entries` released (`ownership::release_entry`, the DEL
    /// path) while its device's lock comes by `until`; none begun after
    /// it. Returns those the deadline cut.
    fn release(
        &self,
        state: &StateDir,
        entries: &[Entry],
        until: Instant,
        who: &str,
    ) -> Vec<Entry> {
        let sysfs = match Sysfs::open(&self.node.sysfs_root) {
            Ok(s) => s,
            Err(e) => {
                crate::error!(
                    "{who}: sysfs root {}: {e}: the DRA rails stay for the agent's repair",
                    self.node.sysfs_root.display()
                );
                return Vec::new();
            }
        };
        let place = Place {
            state,
            sysfs: &sysfs,
            device_info_dir: &self.node.device_info_dir,
            lock_wait: LockWait::Until(until),
        };
        let mut left = Vec::new();
        for e in entries {
            if Instant::now() >= until {
                left.push(e.clone());
                continue;
            }
            match ownership::release_entry(place, e) {
                done @ Done::Released(_) => {
                    crate::info!("{who}: DRA rail {} on {}: {done}", e.ifname, e.device)
                }
                Done::Busy(_) => left.push(e.clone()),
                done @ Done::Kept(_) => crate::warn!(
                    "{who}: DRA rail {} on {}: {done}; the agent's repair finishes it",
                    e.ifname,
                    e.device
                ),
            }
        }
        left
    }

    /// The pod's netns, when it has one of its own; each skip is a line.
    fn own_netns(&self, pod: &Sandbox, who: &str) -> Option<NetNs> {
        let Some(path) = pod.netns.as_deref() else {
            crate::info!("{who}: no network namespace of its own (hostNetwork): no DRA rail");
            return None;
        };
        let shown = crate::quote::input(path);
        match NetNs::lookup(Path::new(path)) {
            Ok(Lookup::Netns(ns)) if self.host.contains(&ns.id()) => {
                crate::info!("{who}: its netns {shown} is the host's: no DRA rail");
                None
            }
            Ok(Lookup::Netns(ns)) => Some(ns),
            Ok(Lookup::Missing) => {
                crate::info!("{who}: its netns {shown} is gone: no DRA rail");
                None
            }
            Ok(Lookup::NotNetns) => {
                crate::warn!("{who}: {shown} is not a network namespace: no DRA rail");
                None
            }
            Err(e) => {
                crate::warn!("{who}: {e}: no DRA rail");
                None
            }
        }
    }
}

/// The pod as its entries record it; without a UID the runtime gave in a
/// valid form, without one.
fn pod_record(pod: &Sandbox) -> Option<PodRecord> {
    let record = PodRecord {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
    };
    if record.is_valid() {
        Some(record)
    } else {
        Some(PodRecord {
            uid: None,
            ..record
        })
        .filter(PodRecord::is_valid)
    }
}

/// The rails in the kernel's order, but those whose device lock another
/// process holds now last, each with whether it was held: a held lock (a
/// stuck ADD or DEL, the agent's pass) does not keep the free rails behind
/// it from the answer. A try of each lock, let go at once (a few system
/// calls a rail).
fn free_first(state: &StateDir, rails: Vec<Candidate>) -> Vec<(Candidate, bool)> {
    let (free, held): (Vec<_>, Vec<_>) = rails
        .into_iter()
        .map(|r| {
            let held = matches!(
                state.lock_waiting(&r.port.lock_key(), LockWait::Within(Duration::ZERO)),
                Err(crate::state::StateError::Busy { .. })
            );
            (r, held)
        })
        .partition(|(_, held)| !held);
    free.into_iter().chain(held).collect()
}

/// Whether the lock of `port` comes free by `until` (taken and let go at
/// once: the take locks it again).
fn comes_free(state: &StateDir, port: &RdmaPort, until: Instant) -> bool {
    !matches!(
        state.lock_waiting(&port.lock_key(), LockWait::Until(until)),
        Err(crate::state::StateError::Busy { .. })
    )
}

/// The line of the rails a rollback or a stop leaves, of `of`, for after
/// the answer (nothing for none).
fn after_the_answer(who: &str, left: &[Entry], of: usize) {
    if !left.is_empty() {
        crate::warn!(
            "{who}: {} of {of} DRA rails are given back after the answer (their device locks held past its deadline, or not reached): {}",
            left.len(),
            names(&left.iter().map(|e| e.ifname.as_str()).collect::<Vec<_>>())
        );
    }
}

/// Interface names for a line: the first eight, and how many more.
fn names(list: &[&str]) -> String {
    let mut s = list.iter().take(8).copied().collect::<Vec<_>>().join(", ");
    if list.len() > 8 {
        s.push_str(&format!(" and {} more", list.len() - 8));
    }
    s
}

fn show(v: Option<u8>) -> String {
    v.map_or("unset".into(), |v| v.to_string())
}

/// The sandbox id names the pod's state entries (`<id>:<ifname>.state`):
/// refused before it reaches a file name, by CNI_CONTAINERID's rule.
fn sandbox_id(id: &str) -> Result<(), String> {
    crate::cni::env::validate_container_id(id).map_err(|_| {
        format!(
            "its sandbox id is refused: it must start with a letter or digit, hold only letters, digits, '_', '.', '-', and be at most 255 long (it is {} long)",
            id.len()
        )
    })
}

/// The entries of the sandbox `id`, by their names (an entry's
/// containerId is its sandbox's, a CNI rail's and a DRA rail's alike).
fn sandbox_entries(state: &StateDir, id: &str) -> Vec<Entry> {
    state
        .attachments()
        .unwrap_or_default()
        .into_iter()
        .filter(|(cid, _)| cid == id)
        .filter_map(|(cid, ifname)| state.read(&cid, &ifname).ok())
        .collect()
}

/// The pod's netdevs that the kernel shows, from inside the pod netns, with
/// an RDMA port, leaving out its primary (`eth0`, and whatever holds its
/// default route) and every port an entry of its sandbox holds (`held`: a
/// CNI rail's, a DRA rail's tuned before), matched by the device's
/// identity as the entries record it (`Entry::records`), never by the
/// interface's name, which a pod with CAP_NET_ADMIN can change; in the
/// kernel's order (the entries' names order them for the job environment).
/// Also how many of its ports were held. Two netdevs on one port fail the
/// answer before anything changes.
fn candidates(
    conf: &NetConf,
    netns: &NetNs,
    sysfs: &Sysfs,
    held: &[Entry],
    who: &str,
) -> Result<(Vec<Candidate>, usize), CniError> {
    let mut found = Ok((Vec::new(), 0));
    netns
        .run_there(&mut || found = scan(conf, netns, sysfs, held, who))
        .map_err(rail::ns_error)?;
    let (found, held) = found?;
    for (i, a) in found.iter().enumerate() {
        if let Some(b) = found[i + 1..]
            .iter()
            .find(|b| b.port.device == a.port.device && b.port.port == a.port.port)
        {
            return Err(CniError::new(
                code::RDMA_DEVICE,
                format!(
                    "{} and {} both claim {} port {}: a port is one rail's, so neither is tuned",
                    a.ifname, b.ifname, a.port.device, a.port.port
                ),
            ));
        }
    }
    Ok((found, held))
}

/// `candidates`' look at the pod netns, on a thread inside it.
fn scan(
    conf: &NetConf,
    netns: &NetNs,
    sysfs: &Sysfs,
    held: &[Entry],
    who: &str,
) -> Result<(Vec<Candidate>, usize), CniError> {
    let reach = sysfs.reach();
    let mut nl = Netlink::open()?;
    let links = nl.links()?;
    let primary = nl.default_route_links()?;
    let label = format!("<sysfs of netns {}>", netns.path().display());
    let mut side = PodSide::new(sysfs, netns.id(), label);
    let cross = CrossCheck {
        device_id: None,
        rdma_port: conf.rdma_port,
        names: Names::Config,
    };
    let (mut out, mut taken) = (Vec::new(), 0);
    for link in &links {
        if link.name == "lo" {
            continue;
        }
        if link.name == PRIMARY || primary.contains(&link.index) {
            crate::debug!("{who}: {} is the pod's primary: left alone", link.name);
            continue;
        }
        match lookup::locate(&crate::syscall::KERNEL, &mut side, reach, link, &cross) {
            Ok(f) => {
                let p = &f.port;
                match held
                    .iter()
                    .find(|e| e.records(&p.device, p.port, p.pci.as_deref()))
                {
                    Some(e) => {
                        taken += 1;
                        crate::debug!(
                            "{who}: {} is on {} port {}, which the entry of {} ({}) holds: left alone",
                            link.name,
                            p.device,
                            p.port,
                            e.ifname,
                            e.network
                        );
                    }
                    None => out.push(Candidate {
                        ifname: link.name.clone(),
                        port: f.port,
                    }),
                }
            }
            Err(LookupError::NotAVf { .. }) => {
                crate::debug!("{who}: {} has no RDMA port: left alone", link.name)
            }
            Err(e) => crate::warn!("{who}: {} left alone: {e}", link.name),
        }
    }
    Ok((out, taken))
}

/// A recorded rail whose interface the pod netns no longer shows by its
/// name (renamed, or moved out already): said once; its device is given
/// back by its identity, never by the name.
fn renamed(entries: &[Entry], who: &str, event: &str) {
    let Some(first) = entries.first() else {
        return;
    };
    let Ok(Some(ns)) = NetNs::still(Path::new(&first.netns), first.netns_id) else {
        return;
    };
    let names: Vec<String> = entries.iter().map(|e| e.ifname.clone()).collect();
    let mut missing = Vec::new();
    let _ = ns.run_there(&mut || {
        if let Ok(mut nl) = Netlink::open() {
            missing = names
                .iter()
                .filter(|n| nl.link_by_name(n).ok().flatten().is_none())
                .cloned()
                .collect();
        }
    });
    for n in missing {
        crate::info!(
            "{event} {who}: DRA rail {n} is no longer in the pod netns by that name (renamed or moved out): its device is given back by its identity"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_id_that_cannot_name_an_entry_is_refused() {
        assert!(sandbox_id("4b1c2f0e6a53").is_ok());
        for bad in ["a/b", "../x", "", ":x", "x:y", "-x", "a\nb"] {
            assert!(sandbox_id(bad).is_err(), "{bad:?}");
        }
        let why = sandbox_id(&"s".repeat(300)).unwrap_err();
        assert!(why.contains("300 long"), "{why}");
        assert!(sandbox_id(&"s".repeat(255)).is_ok());
    }

    #[test]
    fn a_line_names_the_pod_escaped_and_cut_short() {
        let p = Sandbox {
            id: format!("{}\n", "s".repeat(300)),
            name: "a\u{1b}[31mb".into(),
            namespace: "team-a".into(),
            ..Sandbox::default()
        };
        let line = p.who();
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.len() < 200, "{}", line.len());
    }

    #[test]
    fn a_sandbox_keeps_of_its_pod_only_what_a_later_pass_reads() {
        let wire = crate::wire::nri_messages::tests::pod_bytes(
            "sb1",
            Some("/var/run/netns/p"),
            &[("a", "b"), (CLASS_ANNOTATION, "106")],
        );
        let p = Sandbox::of(&crate::wire::nri_messages::pod(wire.as_bytes()).unwrap());
        assert_eq!(
            p,
            Sandbox {
                id: "sb1".into(),
                name: "train-0".into(),
                namespace: "team-a".into(),
                uid: "uid-1".into(),
                netns: Some("/var/run/netns/p".into()),
                class: Some("106".into()),
            }
        );
    }

    #[test]
    fn a_line_lists_eight_names_and_counts_the_rest() {
        let many: Vec<String> = (1..=10).map(|i| format!("net{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(names(&refs[..2]), "net1, net2");
        assert_eq!(
            names(&refs),
            "net1, net2, net3, net4, net5, net6, net7, net8 and 2 more"
        );
    }

    #[test]
    fn without_a_profile_there_are_no_dra_rails() {
        let node = NodeConfig::defaults("/etc/cni/roce-tune/node.json".into());
        assert!(DraRails::new(&node).is_none());
        let mut with = node.clone();
        with.dra_rails = Some(serde_json::json!({"trafficClass": 41}));
        let dra = DraRails::new(&with).unwrap();
        assert!(!dra.host.is_empty(), "this process's own netns at least");
    }
}
