//! DRA rails (issue 27): the netdevs a DRA driver (dranet, at NRI index
//! `00`) moved into a pod at RunPodSandbox, which no CNI chain runs for,
//! tuned with the node config's `draRails` profile exactly as a CNI ADD
//! tunes a rail: the same lookup from inside the pod netns, the same
//! `commands::add::tune` (sysctls, class, ToS, GID check, state entry,
//! undo), and given back at StopPodSandbox by the same `release_entry` a
//! DEL uses (docs/design.md, "DRA rails").
//!
//! The runtime holds one lock across every plugin's answer, so the whole
//! RunPodSandbox answer, GID wait and device locks included, ends by the
//! deadline the caller gives (`answer::Plugin::pod_event_budget`): never a
//! timed-out answer, which gets the plugin dropped.

use super::messages::Pod;
use crate::cni::config::{GidCheck, NetConf};
use crate::cni::{code, CniError};
use crate::commands::add::{self, AddExtras, Expect, Rail};
use crate::netlink::Netlink;
use crate::netns::{Lookup, NetNs, NsId};
use crate::node::NodeConfig;
use crate::ownership::{self, Done, Place};
use crate::rdma::lookup::{self, CrossCheck, LookupError, Names};
use crate::rdma::reach::{PodSide, Reach, Sysfs};
use crate::rdma::setting::{PodIface, Views};
use crate::rdma::RdmaPort;
use crate::state::{Entry, LockWait, PodRecord, StateDir, DRA_NETWORK};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The annotation a pod picks its class with, within the profile's
/// `podTrafficClasses` (as `args.cni.trafficClass` for a CNI rail).
pub const CLASS_ANNOTATION: &str = "roce-tune.io/traffic-class";

/// The pod's primary interface by name; whichever link holds the pod's
/// default route is primary too.
const PRIMARY: &str = "eth0";

/// The DRA rails of the node: its profile and where entries go.
pub struct DraRails {
    node: NodeConfig,
    profile: serde_json::Value,
    /// The host's netns (`/proc/1/ns/net`) and the plugin's own (the agent
    /// runs in the host's netns; where init's cannot be opened, as in a
    /// container of another user namespace, it is the one known): a pod
    /// netns that is one of them is no netns of the pod's own.
    host: Vec<NsId>,
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
        Some(DraRails {
            node: node.clone(),
            profile,
            host,
        })
    }

    /// RunPodSandbox: tune every DRA rail of the pod, or none (`Err`: the
    /// runtime fails the sandbox, and the node is as it was).
    pub fn run(&self, pod: &Pod<'_>, deadline: Instant) -> Result<(), String> {
        self.tune(pod, deadline).map(|_| ())
    }

    /// `run`, saying what it did: RunPodSandbox's path and the catch-up's
    /// alike. A rail is any port of the pod that no entry of its sandbox
    /// holds (a CNI rail's, a DRA rail's tuned before), told by the
    /// device's identity, so a pass tunes what an earlier one left and
    /// never a port a renamed interface still holds.
    fn tune(&self, pod: &Pod<'_>, deadline: Instant) -> Result<Pass, String> {
        let started = Instant::now();
        let who = who(pod);
        sandbox_id(pod).map_err(|why| format!("{who}: {why}: nothing was changed"))?;
        let Some(netns) = self.own_netns(pod, &who) else {
            return Ok(Pass::default());
        };
        let class = pod
            .annotation(CLASS_ANNOTATION)
            .map(|v| ("annotation roce-tune.io/traffic-class", v));
        let conf = NetConf::from_profile(&self.profile, DRA_NETWORK, class)
            .map_err(|e| format!("{who}: {}: nothing was changed", e.msg))?;
        let fail = |e: CniError| format!("{who}: {}: nothing was changed", e.msg);
        let state = StateDir::create(&self.node.state_dir).map_err(|e| fail(e.into()))?;
        let sysfs = crate::commands::sysfs(&self.node).map_err(fail)?;
        let held = sandbox_entries(&state, pod.id);
        let (rails, held) = candidates(&conf, &netns, &sysfs, &held, &who).map_err(fail)?;
        if rails.is_empty() {
            if held == 0 {
                crate::info!("{who}: no DRA rail (no netdev of the pod's own with an RDMA port beside its primary and the ports its entries hold)");
            }
            return Ok(Pass { tuned: 0, held });
        }
        for r in &rails {
            crate::sysctl::check_allowlist(&conf.sysctls, &r.ifname, &self.node)
                .map_err(|e| fail(e.into()))?;
        }
        let record = PodRecord {
            namespace: pod.namespace.to_owned(),
            name: pod.name.to_owned(),
            uid: Some(pod.uid.to_owned()).filter(|u| !u.is_empty()),
        };
        let record = if record.is_valid() {
            Some(record)
        } else {
            Some(PodRecord {
                uid: None,
                ..record
            })
            .filter(PodRecord::is_valid)
        };
        let mut tuned: Vec<add::Tuned> = Vec::new();
        for r in &rails {
            if Instant::now() >= deadline && conf.gid_check != GidCheck::Enforce {
                crate::warn!(
                    "{who}: DRA rail {} on {} port {} not tuned: the answer's budget is spent (gidCheck is not enforce: the sandbox goes on without it)",
                    r.ifname,
                    r.port.device,
                    r.port.port
                );
                continue;
            }
            let rail = Rail {
                conf: &conf,
                node: &self.node,
                network: DRA_NETWORK,
                container_id: pod.id,
                ifname: &r.ifname,
                netns: &netns,
                state: &state,
                sysfs: &sysfs,
                expect: Expect::FromLink,
                pod: record.clone(),
                deadline: Some(deadline),
            };
            match add::tune(&rail, AddExtras::default()) {
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
                Err(e)
                    if e.code == code::TRY_AGAIN_LATER && conf.gid_check != GidCheck::Enforce =>
                {
                    // Its device's lock was held past the budget: nothing of
                    // this rail was changed.
                    crate::warn!(
                        "{who}: DRA rail {} not tuned: {} (gidCheck is not enforce: the sandbox goes on without it)",
                        r.ifname,
                        e.msg
                    );
                }
                Err(e) => {
                    self.roll_back(&state, &sysfs, &netns, tuned, &who);
                    return Err(format!(
                        "{who}: DRA rail {}: {}: nothing was changed",
                        r.ifname, e.msg
                    ));
                }
            }
        }
        crate::info!(
            "{who}: {} of {} DRA rails tuned in {} ms (budget {} ms)",
            tuned.len(),
            rails.len(),
            started.elapsed().as_millis(),
            deadline.saturating_duration_since(started).as_millis()
        );
        Ok(Pass {
            tuned: tuned.len(),
            held,
        })
    }

    /// A later rail failed: the ones tuned before it are given back (their
    /// entries say what), newest first, and their sysctls put back.
    fn roll_back(
        &self,
        state: &StateDir,
        sysfs: &Sysfs,
        netns: &NetNs,
        tuned: Vec<add::Tuned>,
        who: &str,
    ) {
        for t in tuned.into_iter().rev() {
            // Where the take wrote: the pod's view of an exclusive-mode
            // device, the host's otherwise (ADD's own undo uses the same).
            let pod_view = match t.entry.reach {
                Reach::Pod => sysfs.pod_side_of(netns).ok().flatten(),
                Reach::Host => None,
            };
            let views = Views {
                device: pod_view.as_ref().unwrap_or(sysfs.host()),
                host: sysfs.host(),
                pod: Some(PodIface {
                    netns,
                    ifname: &t.entry.ifname,
                }),
            };
            ownership::undo_take(
                state,
                views,
                &t.found.port,
                &t.entry.container_id,
                &t.entry.ifname,
                LockWait::REPAIR,
            );
            if let Err(e) = netns.run_there(&mut || crate::sysctl::revert(&t.sysctls)) {
                crate::error!(
                    "{who}: the sysctls of {} could not be put back: {e}",
                    t.entry.ifname
                );
            }
        }
    }

    /// StopPodSandbox, and RemovePodSandbox for what is left: every DRA
    /// rail of the sandbox given back where its device shows now (dranet,
    /// at index 00, has moved it back to the host already); what nothing
    /// shows yet stays for the agent's repair. Never fails the event.
    pub fn stop(&self, pod: &Pod<'_>, deadline: Instant, removing: bool) {
        let who = who(pod);
        let event = if removing {
            "RemovePodSandbox"
        } else {
            "StopPodSandbox"
        };
        if let Err(why) = sandbox_id(pod) {
            crate::warn!("{event} {who}: {why}: nothing done");
            return;
        }
        let state = match StateDir::existing(&self.node.state_dir) {
            Ok(Some(s)) => s,
            Ok(None) => return,
            Err(e) => {
                crate::error!("{event} {who}: {e}: nothing restored now; any entry stays for the agent's repair");
                return;
            }
        };
        let entries: Vec<Entry> = sandbox_entries(&state, pod.id)
            .into_iter()
            .filter(|e| e.network == DRA_NETWORK)
            .collect();
        if entries.is_empty() {
            let line = format!("{event} {who}: no DRA rail recorded for this sandbox (never seen, or given back already): nothing to do");
            if removing {
                crate::debug!("{line}");
            } else {
                crate::info!("{line}");
            }
            return;
        }
        let sysfs = match Sysfs::open(&self.node.sysfs_root) {
            Ok(s) => s,
            Err(e) => {
                crate::error!(
                    "{event} {who}: sysfs root {}: {e}: the DRA rails stay for the agent's repair",
                    self.node.sysfs_root.display()
                );
                return;
            }
        };
        renamed(&entries, &who, event);
        let place = Place {
            state: &state,
            sysfs: &sysfs,
            device_info_dir: &self.node.device_info_dir,
            lock_wait: LockWait::Until(deadline),
        };
        for e in &entries {
            match ownership::release_entry(place, e) {
                done @ Done::Released(_) => crate::info!(
                    "{event} {who}: DRA rail {} on {}: {done}",
                    e.ifname,
                    e.device
                ),
                done => crate::warn!(
                    "{event} {who}: DRA rail {} on {}: {done}; the agent's repair finishes it",
                    e.ifname,
                    e.device
                ),
            }
        }
    }

    /// The pod's netns, when it has one of its own; each skip is a line.
    fn own_netns(&self, pod: &Pod<'_>, who: &str) -> Option<NetNs> {
        let Some(path) = pod.netns else {
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

/// How a pod is named in every line: escaped, it is the runtime's input.
fn who(pod: &Pod<'_>) -> String {
    // Cut short: a sandbox id of any length reaches this line.
    let id: String = pod.id.chars().take(80).collect();
    format!(
        "pod {}/{} ({})",
        crate::log::escape(pod.namespace),
        crate::log::escape(pod.name),
        crate::log::escape(&id)
    )
}

fn show(v: Option<u8>) -> String {
    v.map_or("unset".into(), |v| v.to_string())
}

/// The sandbox id names the pod's state entries (`<id>:<ifname>.state`):
/// refused before it reaches a file name, by CNI_CONTAINERID's rule.
fn sandbox_id(pod: &Pod<'_>) -> Result<(), String> {
    crate::cni::env::validate_container_id(pod.id).map_err(|_| {
        format!(
            "its sandbox id is refused: it must start with a letter or digit, hold only letters, digits, '_', '.', '-', and be at most 255 long (it is {} long)",
            pod.id.len()
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
        .map_err(crate::commands::ns_error)?;
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
        match lookup::locate(&mut side, reach, link, &cross) {
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

// ------------------------------------------------------------ catch-up

/// The longest one pod's catch-up may take (its GID wait and device locks
/// included): the pod runs already, so nothing waits on it but a stop of
/// the plugin, which waits at most [`STOP_WAIT`] for the pod in hand.
pub const CATCH_UP_POD_BOUND: Duration = Duration::from_millis(500);
/// How long the plugin's stop waits for the catch-up thread: past one
/// pod's bound, within the agent's second from SIGTERM to exit.
pub const STOP_WAIT: Duration = Duration::from_millis(700);

/// The DRA rails of pods that started while the plugin was not connected
/// (a rolling update of the agent, a runtime restart): after each
/// Synchronize, every pod it lists that has a netns of its own and no DRA
/// entry yet is tuned by [`DraRails::run`]'s own path, once its answer is
/// sent (docs/design.md, "DRA rails").
///
/// Where: one thread of the plugin's, not the request path. Interleaving
/// pods between requests would hold a CreateContainer answer (100 ms) up
/// to a pod's whole tuning (a GID wait, a device lock); on a thread of its
/// own no answer ever waits on it, a pod at a time, each bounded by
/// [`CATCH_UP_POD_BOUND`]. What it shares with the request path is the
/// state dir and its device locks (as concurrent CNI ADDs do) and the ids
/// of pods stopped meanwhile: a pod stopped before its turn is skipped,
/// and one stopped while it was being tuned is given back right after.
/// A newer Synchronize (a reconnect) replaces a list not finished.
pub struct CatchUp {
    dra: Arc<DraRails>,
    shared: Arc<Shared>,
    /// Started at the first list, so a runtime without pods costs none.
    done: Option<std::sync::mpsc::Receiver<()>>,
}

#[derive(Default)]
struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
}

#[derive(Default)]
struct Slot {
    /// The parts of the last Synchronize not yet taken, and the budget of
    /// its pods.
    job: Option<(Vec<Vec<u8>>, Duration)>,
    quit: bool,
    /// A list is in hand (taken or waiting): stops are remembered.
    busy: bool,
    /// Sandboxes stopped or removed while a list was in hand.
    stopped: HashSet<String>,
}

/// At most this many stopped sandboxes remembered during one catch-up.
const STOPPED_MAX: usize = 65_536;

#[derive(Default)]
struct Tally {
    pods: usize,
    rails: usize,
    already: usize,
    without: usize,
    failed: usize,
    stopped: usize,
    listed: usize,
    undecodable: usize,
}

impl CatchUp {
    pub fn new(dra: Arc<DraRails>) -> CatchUp {
        CatchUp {
            dra,
            shared: Arc::new(Shared::default()),
            done: None,
        }
    }

    /// The rails it catches up, the node's.
    pub fn rails(&self) -> &DraRails {
        &self.dra
    }

    fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Slot> {
        shared.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A whole Synchronize (every part, its answers sent): its pods are
    /// tuned on the catch-up thread, each within `min(budget,
    /// CATCH_UP_POD_BOUND)`. Returns at once.
    pub fn submit(&mut self, parts: Vec<Vec<u8>>, budget: Duration) {
        {
            let mut slot = CatchUp::lock(&self.shared);
            slot.job = Some((parts, budget.min(CATCH_UP_POD_BOUND)));
            slot.busy = true;
        }
        self.shared.wake.notify_one();
        if self.done.is_none() {
            let (tx, rx) = std::sync::mpsc::channel();
            let (dra, shared) = (self.dra.clone(), self.shared.clone());
            let started = std::thread::Builder::new()
                .name("nri-catch-up".into())
                .spawn(move || {
                    work(&dra, &shared);
                    let _ = tx.send(());
                });
            match started {
                Ok(_) => self.done = Some(rx),
                Err(e) => {
                    crate::error!("cannot start the DRA rails' catch-up thread: {e}: the pods of this Synchronize keep their DRA rails untuned");
                    let mut slot = CatchUp::lock(&self.shared);
                    slot.job = None;
                    slot.busy = false;
                }
            }
        }
    }

    /// StopPodSandbox or RemovePodSandbox of `id` (before it is given
    /// back): a catch-up in hand skips it, or gives back what it tuned.
    pub fn stopping(&self, id: &str) {
        let mut slot = CatchUp::lock(&self.shared);
        if slot.busy && slot.stopped.len() < STOPPED_MAX {
            slot.stopped.insert(id.to_owned());
        }
    }
}

impl Drop for CatchUp {
    /// The plugin stops: the thread ends after the pod in hand (bounded);
    /// waited for at most [`STOP_WAIT`].
    fn drop(&mut self) {
        CatchUp::lock(&self.shared).quit = true;
        self.shared.wake.notify_one();
        if let Some(done) = &self.done {
            // Disconnected: the thread is gone already (a panic ends it too).
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(STOP_WAIT) {
                crate::warn!(
                    "the DRA rails' catch-up did not end within {} ms: left to the process's exit (the agent's repair finishes a rail it left half done)",
                    STOP_WAIT.as_millis()
                );
            }
        }
    }
}

/// The catch-up thread: a list at a time until the plugin stops.
fn work(dra: &DraRails, shared: &Shared) {
    loop {
        let (parts, each) = {
            let mut slot = CatchUp::lock(shared);
            loop {
                if slot.quit {
                    return;
                }
                if let Some(job) = slot.job.take() {
                    break job;
                }
                slot.busy = false;
                slot.stopped.clear();
                slot = shared.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
        };
        catch_up(dra, shared, &parts, each);
    }
}

/// What a pod of the list needs next, asked before its turn.
enum Turn {
    Go,
    Skip,
    /// The plugin stops, or a newer list came.
    End(&'static str),
}

fn turn(shared: &Shared, id: &str) -> Turn {
    let slot = CatchUp::lock(shared);
    if slot.quit {
        Turn::End("the plugin stops")
    } else if slot.job.is_some() {
        Turn::End("a newer Synchronize replaces it")
    } else if slot.stopped.contains(id) {
        Turn::Skip
    } else {
        Turn::Go
    }
}

/// One Synchronize's pods, in its order; one summary line.
fn catch_up(dra: &DraRails, shared: &Shared, parts: &[Vec<u8>], each: Duration) {
    let started = Instant::now();
    let mut n = Tally::default();
    let mut ended = None;
    'parts: for part in parts {
        // Decoded and judged one at a time: a pod that does not decode is
        // skipped alone, never its neighbours.
        for pod in super::messages::synchronize_pods(part) {
            let pod = match pod {
                Ok(p) => p,
                Err(e) => {
                    n.listed += 1;
                    n.undecodable += 1;
                    crate::warn!(
                        "catch-up after Synchronize: a pod ({}) does not decode ({}): skipped, its DRA rails as they are",
                        e.id.map_or("id unknown".into(), |id| format!(
                            "sandbox {}",
                            crate::quote::input(id)
                        )),
                        e.error
                    );
                    continue;
                }
            };
            let pod = &pod;
            match turn(shared, pod.id) {
                Turn::Go => {}
                Turn::Skip => {
                    n.listed += 1;
                    n.stopped += 1;
                    continue;
                }
                Turn::End(why) => {
                    ended = Some(why);
                    break 'parts;
                }
            }
            n.listed += 1;
            // Per rail: a pod some of whose ports are held (a plugin killed
            // mid-answer, a budget spent) has the others tuned now.
            let got = dra.tune(pod, Instant::now() + each);
            match &got {
                Ok(Pass { tuned: 0, held: 0 }) => n.without += 1,
                Ok(Pass { tuned: 0, .. }) => {
                    crate::debug!(
                        "{}: every RDMA port of its own is held by an entry already: nothing to tune",
                        who(pod)
                    );
                    n.already += 1;
                }
                Ok(p) => {
                    n.pods += 1;
                    n.rails += p.tuned;
                }
                Err(why) => {
                    n.failed += 1;
                    crate::warn!("catch-up after Synchronize: {why}; the pod runs on with its DRA rails untuned");
                }
            }
            // A stop that came while it was tuned found part of it, or
            // none: what is left is given back now.
            if matches!(got, Ok(p) if p.tuned > 0) && CatchUp::lock(shared).stopped.contains(pod.id)
            {
                dra.stop(pod, Instant::now() + each, false);
            }
        }
    }
    crate::info!(
        "caught up {} pods' DRA rails after Synchronize: {} rails tuned; of {} pods walked, {} tuned already, {} with no DRA rail or netns of their own, {} failed (untuned), {} stopped meanwhile, {} that do not decode; in {} ms{}",
        n.pods,
        n.rails,
        n.listed,
        n.already,
        n.without,
        n.failed,
        n.stopped,
        n.undecodable,
        started.elapsed().as_millis(),
        ended.map_or(String::new(), |why| format!(", cut short: {why}"))
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(id: &str) -> Pod<'_> {
        Pod {
            id,
            name: "train-0",
            namespace: "team-a",
            ..Pod::default()
        }
    }

    #[test]
    fn a_sandbox_id_that_cannot_name_an_entry_is_refused() {
        assert!(sandbox_id(&pod("4b1c2f0e6a53")).is_ok());
        for bad in ["a/b", "../x", "", ":x", "x:y", "-x", "a\nb"] {
            assert!(sandbox_id(&pod(bad)).is_err(), "{bad:?}");
        }
        let long = "s".repeat(300);
        let why = sandbox_id(&pod(&long)).unwrap_err();
        assert!(why.contains("300 long"), "{why}");
        assert!(sandbox_id(&pod(&"s".repeat(255))).is_ok());
    }

    #[test]
    fn a_line_names_the_pod_escaped_and_cut_short() {
        let long = format!("{}\n", "s".repeat(300));
        let p = Pod {
            name: "a\u{1b}[31mb",
            ..pod(&long)
        };
        let line = who(&p);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.len() < 200, "{}", line.len());
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
