//! What the DRA rails (`super::dra`) do after an answer, on one thread of
//! the plugin's, never on the request path (docs/design.md, "DRA rails"):
//!
//! - the pods a Synchronize lists (a pod whose sandbox started while the
//!   plugin was not connected: the agent's rolling update, a runtime
//!   restart), each through RunPodSandbox's own pass;
//! - what an answer's deadline cut: the rails a RunPodSandbox could not
//!   reach or lock by then (tuned now, the sandbox runs already), and the
//!   entries a failed answer's rollback or a StopPodSandbox could not give
//!   back (given back now).
//!
//! Why a thread: a pod's tuning may wait on a GID or a device lock, and
//! interleaved between requests it would hold the next answer (a
//! CreateContainer's 100 ms) that long; here no answer waits on it, a pod
//! at a time, each pass bounded by [`CATCH_UP_POD_BOUND`]. It shares with
//! the request path what concurrent CNI ADDs share (the state dir and its
//! device locks) plus this queue and the ids of pods stopped meanwhile: a
//! pod stopped before its turn is skipped, one stopped while it was being
//! tuned is given back right after. The queue lives in memory: what a
//! crash loses is found again by the next Synchronize's per-rail pass (a
//! rail left untuned) or by the agent's orphan repair (an entry of a pod
//! gone).

use super::dra::{DraRails, Failed, Pass, Sandbox, Stage, ANSWER_MARGIN, STOP};
use crate::state::Entry;
use crate::wire::nri_messages::Pod;
use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest one pass may take on the thread (its GID wait and device
/// locks included): the pod runs already, so nothing waits on it but a
/// stop of the plugin, which waits at most [`STOP_WAIT`] for the pass in
/// hand.
pub const CATCH_UP_POD_BOUND: Duration = Duration::from_millis(500);
/// How long the plugin's stop waits for the thread: past one pass's
/// bound, within the agent's second from SIGTERM to exit.
pub const STOP_WAIT: Duration = Duration::from_millis(700);
/// What an answer left is tried again at once, then after delays doubling
/// from the first to the cap: a lock another process holds for a moment
/// is caught within the first delays, a stuck one costs a try each cap.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_CAP: Duration = Duration::from_secs(5);
/// Past this since it was left, the thread gives up with a line: a rail
/// still untuned waits for the next Synchronize's pass, an entry not
/// given back for the agent's orphan repair.
const GIVE_UP: Duration = Duration::from_secs(60);
/// At most this many things left at once (a pod's rails, a pod's
/// entries): each is a pod's few strings and entries.
const LATER_MAX: usize = 1024;
/// At most this many stopped sandboxes remembered while work is in hand.
const STOPPED_MAX: usize = 65_536;

/// The thread's door: the plugin's pod events and Synchronize come through
/// it, so what their deadline cut is queued here.
pub struct CatchUp {
    dra: Arc<DraRails>,
    shared: Arc<Shared>,
    /// Started at the first work, so a runtime without pods costs none.
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
    /// What answers left, each due at its time.
    later: Vec<Queued>,
    quit: bool,
    /// Work is in hand (taken or waiting): stops are remembered.
    busy: bool,
    /// Sandboxes stopped or removed while work was in hand.
    stopped: HashSet<String>,
    /// Sandboxes whose RunPodSandbox pass goes on after its answer.
    in_flight: HashSet<String>,
}

/// What an answer's deadline left.
enum Later {
    /// A running pod whose rails a pass did not all tune.
    Rails(Sandbox),
    /// Entries of a pod (`who`) to give back.
    GiveBack { who: String, entries: Vec<Entry> },
}

struct Queued {
    what: Later,
    due: Instant,
    delay: Duration,
    since: Instant,
}

impl Queued {
    fn now(what: Later) -> Queued {
        let now = Instant::now();
        Queued {
            what,
            due: now,
            delay: Duration::ZERO,
            since: now,
        }
    }
}

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
    left: usize,
}

fn lock(shared: &Shared) -> MutexGuard<'_, Slot> {
    shared.slot.lock().unwrap_or_else(|e| e.into_inner())
}

impl CatchUp {
    pub fn new(dra: Arc<DraRails>) -> CatchUp {
        CatchUp {
            dra,
            shared: Arc::new(Shared::default()),
            done: None,
        }
    }

    /// RunPodSandbox: the pod's rails tuned within `deadline`, what that
    /// cut (rails not reached or locked, a rollback's entries) queued for
    /// the thread. `Err` fails the sandbox.
    ///
    /// The pass runs on a thread of its own and the answer waits for it
    /// until [`ANSWER_MARGIN`] before `deadline` at most: a rail's take
    /// begun before that may outlast it (a lock, sysfs writes, an entry
    /// fsynced with its directory: one took 600 ms on this loaded
    /// machine's disk), and the answer then goes without it. The pass goes on; what it ends
    /// with is handled as what a deadline cut: under `gidCheck: enforce`
    /// the sandbox failed, so every rail it tuned is given back; otherwise
    /// the rails it left are tuned by the thread.
    pub fn run(&mut self, pod: &Pod<'_>, deadline: Instant) -> Result<(), String> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let pod = Sandbox::of(pod);
        let enforce = self.dra.enforces();
        if !self.started() {
            return self.answer_run(&pod, self.dra.tune(&pod, deadline, Stage::Answer));
        }
        let (dra, mine) = (self.dra.clone(), pod.clone());
        let (late_dra, late_shared, late_pod) =
            (self.dra.clone(), self.shared.clone(), pod.clone());
        lock(&self.shared).in_flight.insert(pod.id.clone());
        let got = within(
            answer_by(deadline),
            move || dra.tune(&mine, deadline, Stage::Answer),
            move |got| {
                ran_late(&late_dra, &late_shared, late_pod, got, enforce);
            },
        );
        match got {
            Some(got) => {
                lock(&self.shared).in_flight.remove(&pod.id);
                self.answer_run(&pod, got)
            }
            None if enforce => Err(format!(
                "{}: its DRA rails were not all tuned within the answer's budget ({} ms): gidCheck is enforce, so the sandbox fails; what was tuned is given back after the answer",
                pod.who(),
                budget.as_millis()
            )),
            None => {
                crate::warn!(
                    "{}: the answer's budget ended with a DRA rail in hand: the answer goes, the pass goes on and the rest is finished after it",
                    pod.who()
                );
                Ok(())
            }
        }
    }

    /// The answer of a pass that ended in time, and what it left queued.
    fn answer_run(&mut self, pod: &Sandbox, got: Result<Pass, Failed>) -> Result<(), String> {
        match got {
            Ok(Pass { left: 0, .. }) => Ok(()),
            Ok(_) => {
                self.queue(Later::Rails(pod.clone()));
                Ok(())
            }
            Err(f) => {
                if !f.give_back.is_empty() {
                    self.queue(Later::GiveBack {
                        who: pod.who(),
                        entries: f.give_back,
                    });
                }
                Err(f.why)
            }
        }
    }

    /// StopPodSandbox or RemovePodSandbox (`event`): what the thread holds
    /// of the pod is dropped (or, in hand, given back right after), its
    /// rails are given back within `deadline` on a thread of their own, as
    /// [`CatchUp::run`]'s pass, and what that cut is queued.
    pub fn stop(&mut self, pod: &Pod<'_>, deadline: Instant, event: &'static str) {
        let pod = Sandbox::of(pod);
        self.stopping(&pod.id);
        if !self.started() {
            let left = self.dra.stop(&pod, deadline, event);
            give_back_later(&self.shared, left, pod.who());
            return;
        }
        let (dra, mine) = (self.dra.clone(), pod.clone());
        let (late_shared, who) = (self.shared.clone(), pod.who());
        let got = within(
            answer_by(deadline),
            move || dra.stop(&mine, deadline, event),
            move |left| give_back_later(&late_shared, left, who),
        );
        match got {
            Some(left) => give_back_later(&self.shared, left, pod.who()),
            None => crate::warn!(
                "{event} {}: the answer's budget ended with a DRA rail in hand: the answer goes, the rest is given back after it",
                pod.who()
            ),
        }
    }

    /// A whole Synchronize (every part, its answers sent): its pods are
    /// tuned on the thread, each within `min(budget, CATCH_UP_POD_BOUND)`.
    /// Returns at once.
    pub fn submit(&mut self, parts: Vec<Vec<u8>>, budget: Duration) {
        {
            let mut slot = lock(&self.shared);
            slot.job = Some((parts, budget.min(CATCH_UP_POD_BOUND)));
            slot.busy = true;
        }
        self.shared.wake.notify_one();
        if !self.started() {
            crate::error!("the pods of this Synchronize keep their DRA rails untuned");
            let mut slot = lock(&self.shared);
            slot.job = None;
            slot.busy = false;
        }
    }

    fn queue(&mut self, what: Later) {
        if self.started() {
            push(&self.shared, what);
        } else {
            crate::error!(
                "{}: what its answer left is left to the next Synchronize and the agent's repair",
                what.who()
            );
        }
    }

    /// The thread, started at the first work; `false` when it cannot be.
    fn started(&mut self) -> bool {
        if self.done.is_some() {
            return true;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (dra, shared) = (self.dra.clone(), self.shared.clone());
        let spawned = std::thread::Builder::new()
            .name("nri-catch-up".into())
            .spawn(move || {
                work(&dra, &shared);
                let _ = tx.send(());
            });
        match spawned {
            Ok(_) => {
                self.done = Some(rx);
                true
            }
            Err(e) => {
                crate::error!("cannot start the DRA rails' catch-up thread: {e}");
                false
            }
        }
    }

    /// A stop of `id` (before it is given back): a pass of it in hand gives
    /// back what it tuned, and its rails queued are dropped.
    fn stopping(&self, id: &str) {
        let mut slot = lock(&self.shared);
        slot.later
            .retain(|q| !matches!(&q.what, Later::Rails(p) if p.id == id));
        if (slot.busy || slot.in_flight.contains(id)) && slot.stopped.len() < STOPPED_MAX {
            slot.stopped.insert(id.to_owned());
        }
    }
}

impl Later {
    fn who(&self) -> String {
        match self {
            Later::Rails(p) => p.who(),
            Later::GiveBack { who, .. } => who.clone(),
        }
    }
}

impl Drop for CatchUp {
    /// The plugin stops: the thread ends after the pass in hand (bounded);
    /// waited for at most [`STOP_WAIT`].
    fn drop(&mut self) {
        lock(&self.shared).quit = true;
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

/// What a RunPodSandbox pass ended with after its answer went without it:
/// under `gidCheck: enforce` the answer failed the sandbox, so every rail
/// of it goes back; otherwise what it left (or, stopped meanwhile, all)
/// is queued for the thread.
fn ran_late(
    dra: &DraRails,
    shared: &Shared,
    pod: Sandbox,
    got: Result<Pass, Failed>,
    enforce: bool,
) {
    let stopped = {
        let mut slot = lock(shared);
        slot.in_flight.remove(&pod.id);
        slot.stopped.contains(&pod.id)
    };
    let bound = Instant::now() + CATCH_UP_POD_BOUND;
    match got {
        Ok(p) if enforce || stopped => {
            if p.tuned > 0 {
                let left = dra.stop(&pod, bound, "after its RunPodSandbox answer");
                give_back_later(shared, left, pod.who());
            }
        }
        Ok(Pass { left: 0, .. }) => {}
        Ok(_) => push(shared, Later::Rails(pod)),
        Err(f) => {
            if !enforce {
                crate::warn!(
                    "after its answer: {}; the pod runs on with those DRA rails untuned",
                    f.why
                );
            }
            give_back_later(shared, f.give_back, pod.who());
        }
    }
}

/// When a pod event's answer goes at the latest: [`ANSWER_MARGIN`] before
/// its deadline.
fn answer_by(deadline: Instant) -> Instant {
    deadline.checked_sub(ANSWER_MARGIN).unwrap_or(deadline)
}

/// A pass run on a thread of its own, waited for until `by`: its result if
/// it ended by then; else `None`, and `late` gets the result when it ends,
/// on that thread. A thread that cannot be started runs the pass here.
fn within<T: Send + 'static>(
    by: Instant,
    pass: impl FnOnce() -> T + Send + 'static,
    late: impl FnOnce(T) + Send + 'static,
) -> Option<T> {
    enum Meet<T> {
        Waiting,
        Done(T),
        Gone,
    }
    let meet = Arc::new((Mutex::new(Meet::Waiting), Condvar::new()));
    let theirs = meet.clone();
    // The pass is handed over only once the thread runs: a spawn that fails
    // leaves it here.
    let pass = Arc::new(Mutex::new(Some((pass, late))));
    let handed = pass.clone();
    let spawned = std::thread::Builder::new()
        .name("nri-pod-event".into())
        .spawn(move || {
            let taken = handed.lock().unwrap_or_else(|e| e.into_inner()).take();
            let Some((pass, late)) = taken else {
                return;
            };
            let got = pass();
            let (m, cv) = &*theirs;
            let mut state = m.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(*state, Meet::Gone) {
                drop(state);
                late(got);
            } else {
                *state = Meet::Done(got);
                cv.notify_one();
            }
        });
    if let Err(e) = spawned {
        crate::warn!("cannot start a thread for the pod event ({e}): it runs on the request path");
        let taken = pass.lock().unwrap_or_else(|e| e.into_inner()).take();
        return taken.map(|(pass, _)| pass());
    }
    let (m, cv) = &*meet;
    let mut state = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        match std::mem::replace(&mut *state, Meet::Waiting) {
            Meet::Done(got) => return Some(got),
            Meet::Gone => unreachable!("only this side gives up"),
            Meet::Waiting => {}
        }
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            *state = Meet::Gone;
            return None;
        }
        state = match cv.wait_timeout(state, left) {
            Ok((s, _)) => s,
            Err(e) => e.into_inner().0,
        };
    }
}

/// Queue `what` for the thread and wake it.
fn push(shared: &Shared, what: Later) {
    {
        let mut slot = lock(shared);
        if slot.later.len() >= LATER_MAX {
            drop(slot);
            crate::warn!(
                "{LATER_MAX} things are left for after their answers already: {} is not queued (the next Synchronize's pass or the agent's repair finds it)",
                what.who()
            );
            return;
        }
        slot.later.push(Queued::now(what));
    }
    shared.wake.notify_one();
}

/// Entries left to give back, queued (nothing for none).
fn give_back_later(shared: &Shared, entries: Vec<Entry>, who: String) {
    if !entries.is_empty() {
        push(shared, Later::GiveBack { who, entries });
    }
}

/// What the thread takes next.
enum Work {
    List((Vec<Vec<u8>>, Duration)),
    Later(Queued),
}

/// The first queued thing that is due, taken out.
fn take_due(slot: &mut Slot, now: Instant) -> Option<Queued> {
    let i = slot.later.iter().position(|q| q.due <= now)?;
    Some(slot.later.swap_remove(i))
}

/// The thread: a Synchronize's list, or what answers left, as each comes
/// due, until the plugin stops.
fn work(dra: &DraRails, shared: &Shared) {
    loop {
        let next = {
            let mut slot = lock(shared);
            loop {
                if slot.quit {
                    return;
                }
                if let Some(job) = slot.job.take() {
                    slot.busy = true;
                    break Work::List(job);
                }
                let now = Instant::now();
                if let Some(q) = take_due(&mut slot, now) {
                    slot.busy = true;
                    break Work::Later(q);
                }
                slot.busy = false;
                if slot.in_flight.is_empty() {
                    slot.stopped.clear();
                }
                slot = match slot.later.iter().map(|q| q.due).min() {
                    Some(due) => {
                        let wait = due.saturating_duration_since(now);
                        match shared.wake.wait_timeout(slot, wait) {
                            Ok((s, _)) => s,
                            Err(e) => e.into_inner().0,
                        }
                    }
                    None => shared.wake.wait(slot).unwrap_or_else(|e| e.into_inner()),
                };
            }
        };
        match next {
            Work::List((parts, each)) => catch_up(dra, shared, &parts, each),
            Work::Later(q) => finish(dra, shared, q),
        }
    }
}

/// One thing an answer left, tried once; queued again (later, up to
/// [`GIVE_UP`]) while something of it is still left.
fn finish(dra: &DraRails, shared: &Shared, mut q: Queued) {
    let deadline = Instant::now() + CATCH_UP_POD_BOUND;
    let again = match &mut q.what {
        Later::Rails(pod) => {
            let got = dra.tune(pod, deadline, Stage::Running);
            if lock(shared).stopped.contains(&pod.id) {
                // Stopped while it was tuned: what it took goes back now.
                if matches!(got, Ok(p) if p.tuned > 0) {
                    let left = dra.stop(pod, Instant::now() + CATCH_UP_POD_BOUND, STOP);
                    give_back_later(shared, left, pod.who());
                }
                false
            } else {
                match got {
                    Ok(Pass { left: 0, tuned, .. }) => {
                        crate::info!(
                            "{}: its DRA rails are finished after the answer ({tuned} tuned now)",
                            pod.who()
                        );
                        false
                    }
                    Ok(_) => true,
                    Err(f) => {
                        crate::warn!(
                            "after the answer: {}; the pod runs on with those DRA rails untuned",
                            f.why
                        );
                        give_back_later(shared, f.give_back, pod.who());
                        false
                    }
                }
            }
        }
        Later::GiveBack { who, entries } => {
            *entries = dra.give_back(who, entries, deadline);
            if entries.is_empty() {
                crate::info!("{who}: its DRA rails left by an answer are given back");
            }
            !entries.is_empty()
        }
    };
    if !again {
        return;
    }
    if q.since.elapsed() >= GIVE_UP {
        match &q.what {
            Later::Rails(p) => crate::warn!(
                "{}: DRA rails still untuned {} s after its answer (a device lock held all along): left for the next Synchronize's pass",
                p.who(),
                GIVE_UP.as_secs()
            ),
            Later::GiveBack { who, entries } => crate::warn!(
                "{who}: {} DRA rails not given back {} s after the answer (their device locks held all along): left for the agent's orphan repair",
                entries.len(),
                GIVE_UP.as_secs()
            ),
        }
        return;
    }
    q.delay = (q.delay * 2).clamp(RETRY_FIRST, RETRY_CAP);
    q.due = Instant::now() + q.delay;
    lock(shared).later.push(q);
}

/// What a pod of the list needs next, asked before its turn.
enum Turn {
    Go,
    Skip,
    /// The plugin stops, or a newer list came.
    End(&'static str),
}

fn turn(shared: &Shared, id: &str) -> Turn {
    let slot = lock(shared);
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

/// What answers left and is due now, done between the pods of a list: a
/// pod started a moment ago does not wait behind a long list.
fn due_meanwhile(dra: &DraRails, shared: &Shared) {
    loop {
        let q = {
            let mut slot = lock(shared);
            if slot.quit {
                return;
            }
            take_due(&mut slot, Instant::now())
        };
        match q {
            Some(q) => finish(dra, shared, q),
            None => return,
        }
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
        for pod in crate::wire::nri_messages::synchronize_pods(part) {
            due_meanwhile(dra, shared);
            let pod = match pod {
                Ok(p) => Sandbox::of(&p),
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
            match turn(shared, &pod.id) {
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
            let got = dra.tune(&pod, Instant::now() + each, Stage::Running);
            match &got {
                Ok(Pass {
                    tuned: 0,
                    held: 0,
                    left: 0,
                }) => n.without += 1,
                Ok(Pass {
                    tuned: 0, left: 0, ..
                }) => {
                    crate::debug!(
                        "{}: every RDMA port of its own is held by an entry already: nothing to tune",
                        pod.who()
                    );
                    n.already += 1;
                }
                Ok(p) => {
                    n.pods += usize::from(p.tuned > 0);
                    n.rails += p.tuned;
                    n.left += p.left;
                }
                Err(f) => {
                    n.failed += 1;
                    crate::warn!(
                        "catch-up after Synchronize: {}; the pod runs on with its DRA rails untuned",
                        f.why
                    );
                }
            }
            let stopped = lock(shared).stopped.contains(&pod.id);
            match got {
                // A stop that came while it was tuned found part of it, or
                // none: what is left is given back now.
                Ok(p) if p.tuned > 0 && stopped => {
                    let left = dra.stop(&pod, Instant::now() + each, STOP);
                    give_back_later(shared, left, pod.who());
                }
                Ok(p) if p.left > 0 && !stopped => push(shared, Later::Rails(pod)),
                Err(f) => give_back_later(shared, f.give_back, pod.who()),
                _ => {}
            }
        }
    }
    crate::info!(
        "caught up {} pods' DRA rails after Synchronize: {} rails tuned; of {} pods walked, {} tuned already, {} with no DRA rail or netns of their own, {} failed (untuned), {} stopped meanwhile, {} that do not decode; {} rails left for a later pass; in {} ms{}",
        n.pods,
        n.rails,
        n.listed,
        n.already,
        n.without,
        n.failed,
        n.stopped,
        n.undecodable,
        n.left,
        started.elapsed().as_millis(),
        ended.map_or(String::new(), |why| format!(", cut short: {why}"))
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_pass_that_ends_in_time_is_the_answer_and_late_never_runs() {
        let (tx, rx) = mpsc::channel();
        let got = within(
            Instant::now() + Duration::from_secs(5),
            || 7,
            move |v| tx.send(v).unwrap(),
        );
        assert_eq!(got, Some(7));
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_pass_past_its_deadline_is_left_behind_and_hands_its_result_to_late() {
        let (tx, rx) = mpsc::channel();
        let started = Instant::now();
        let got = within(
            started + Duration::from_millis(50),
            || {
                std::thread::sleep(Duration::from_millis(2000));
                8
            },
            move |v| tx.send(v).unwrap(),
        );
        let waited = started.elapsed();
        assert_eq!(got, None);
        assert!(
            waited >= Duration::from_millis(50) && waited < Duration::from_millis(1500),
            "{waited:?}"
        );
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(8));
    }
}
