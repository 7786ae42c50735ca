//! `GET /healthz`: whether the agent still does its work, for the kubelet's
//! liveness probe (the DaemonSet's container `agent`). The server answering
//! is not enough: it runs on a thread of its own, and would go on answering
//! while the repair passes had stopped (a pass stuck in the kernel on a
//! wedged device, a bug) or while the NRI plugin's thread had ended, and
//! with them every repair and every container's job environment.
//!
//! Only what a restart can mend makes it 503, and nothing a busy or a badly
//! configured node shows: a failed pass (an unreadable state dir, no sysfs)
//! is still a pass, counted in `roce_tune_repair_pass_failures_total`; a
//! runtime with NRI off (the plugin waiting for its socket) is a live
//! plugin. Stale means no pass has ended for [`STALE_PERIODS`] periods: a
//! pass takes milliseconds (docs/deploy.md, "The agent") and waits at most
//! `LockWait::REPAIR` for each rail's lock, so one period late is a slow
//! pass and three are a stall. Until the first pass ends, the agent's start
//! counts as one: a probe never fails an agent that has just started.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many periods without a pass make the agent stale.
pub const STALE_PERIODS: u32 = 3;

/// What the passes and the NRI plugin's thread last said, shared with the
/// server's thread: atomics, so an answer never waits on a pass.
#[derive(Debug)]
pub struct Health {
    started: Instant,
    /// Milliseconds from `started` to the end of the last pass (0: none yet).
    last_pass_ms: AtomicU64,
    stale_after: Duration,
    /// Set when the NRI plugin's thread has ended (`nri::Running::ended`);
    /// `None` without `--nri`.
    nri_ended: Option<Arc<AtomicBool>>,
}

/// Why the agent is not healthy, or that it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Live,
    /// No pass has ended for `since`, more than `bound`.
    Stale {
        since: Duration,
        bound: Duration,
    },
    NriEnded,
}

impl Health {
    /// The health of an agent that starts now and passes every `every`.
    pub fn new(every: Duration, nri_ended: Option<Arc<AtomicBool>>) -> Health {
        Health {
            started: Instant::now(),
            last_pass_ms: AtomicU64::new(0),
            stale_after: every.saturating_mul(STALE_PERIODS),
            nri_ended,
        }
    }

    /// A pass has ended (failed or not).
    pub fn pass_done(&self) {
        self.pass_done_at(Instant::now());
    }

    fn pass_done_at(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.started).as_millis();
        self.last_pass_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub fn verdict(&self) -> Verdict {
        self.verdict_at(Instant::now())
    }

    fn verdict_at(&self, now: Instant) -> Verdict {
        if self
            .nri_ended
            .as_ref()
            .is_some_and(|e| e.load(Ordering::Relaxed))
        {
            return Verdict::NriEnded;
        }
        let last = self.started + Duration::from_millis(self.last_pass_ms.load(Ordering::Relaxed));
        let since = now.saturating_duration_since(last);
        if since > self.stale_after {
            Verdict::Stale {
                since,
                bound: self.stale_after,
            }
        } else {
            Verdict::Live
        }
    }
}

impl Verdict {
    /// The body of `/healthz`: one line a person reads in `kubectl describe
    /// pod` (the kubelet quotes the start of a failed probe's body).
    pub fn say(self) -> String {
        match self {
            Verdict::Live => "ok\n".into(),
            Verdict::Stale { since, bound } => format!(
                "stale: no repair pass has ended for {} s, more than {STALE_PERIODS} periods ({} s): the passes are stuck\n",
                since.as_secs(),
                bound.as_secs()
            ),
            Verdict::NriEnded => {
                "the NRI plugin's thread is not running: containers get no job environment\n"
                    .into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: Duration = Duration::from_secs(10);

    #[test]
    fn live_until_three_periods_pass_without_a_pass() {
        let h = Health::new(EVERY, None);
        let t0 = h.started;
        // Just started: the start counts as a pass.
        assert_eq!(h.verdict_at(t0), Verdict::Live);
        assert_eq!(h.verdict_at(t0 + EVERY * 3), Verdict::Live);
        let late = t0 + EVERY * 3 + Duration::from_millis(1);
        assert_eq!(
            h.verdict_at(late),
            Verdict::Stale {
                since: EVERY * 3 + Duration::from_millis(1),
                bound: EVERY * 3
            }
        );
        // A pass ends: live again, for three periods from then.
        h.pass_done_at(t0 + EVERY * 5);
        assert_eq!(h.verdict_at(t0 + EVERY * 5), Verdict::Live);
        assert_eq!(h.verdict_at(t0 + EVERY * 8), Verdict::Live);
        assert!(matches!(
            h.verdict_at(t0 + EVERY * 8 + Duration::from_secs(1)),
            Verdict::Stale { .. }
        ));
    }

    #[test]
    fn the_nri_thread_ended_is_unhealthy_whatever_the_passes_say() {
        let ended = Arc::new(AtomicBool::new(false));
        let h = Health::new(EVERY, Some(ended.clone()));
        h.pass_done();
        assert_eq!(h.verdict(), Verdict::Live);
        ended.store(true, Ordering::Relaxed);
        assert_eq!(h.verdict(), Verdict::NriEnded);
    }

    #[test]
    fn each_verdict_says_why_in_one_line() {
        assert_eq!(Verdict::Live.say(), "ok\n");
        let stale = Verdict::Stale {
            since: Duration::from_millis(31_400),
            bound: EVERY * 3,
        }
        .say();
        assert!(
            stale.contains("for 31 s") && stale.contains("(30 s)"),
            "{stale}"
        );
        for s in [stale, Verdict::NriEnded.say()] {
            assert_eq!(s.lines().count(), 1, "{s}");
            assert!(s.ends_with('\n'));
        }
    }
}
