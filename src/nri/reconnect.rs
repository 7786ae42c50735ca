//! The loop that keeps a session (`super::session`) up: connect, serve,
//! and when it ends connect again; how another thread stops it (`Quit`).
//!
//! A runtime that restarts is back within a moment, its socket gone
//! meanwhile: the loop polls the socket (25 ms doubling to 400 ms) and the
//! plugin is back within 60 ms of the new socket (tests/it/nri.rs). A
//! runtime that takes the registration and drops the connection at once
//! (a crash loop, a proxy with nothing behind it) must not be answered
//! with a reconnect storm: 38,207 connections and 76,414 lines in 5 s,
//! before this back-off. So a session shorter than [`SHORT_SESSION`]
//! makes the next wait grow, and the lines about it are held to one per
//! [`QUIET`] (docs/design.md, "NRI").

use super::answer::Plugin;
use super::session::{connect, serve, Settings, PLUGIN_NAME};
use super::Stats;
use std::os::unix::net::UnixStream;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Waits while the socket is missing or refuses: 25 ms doubling to 400 ms,
/// cheap (one failed connect) and short, so a restarted runtime has its
/// plugin back within 400 ms of its socket.
pub const POLL_FIRST: Duration = Duration::from_millis(25);
pub const POLL_CAP: Duration = Duration::from_millis(400);
/// A session that ended sooner than this was dropped by its runtime at
/// once: the next connect is not at once.
pub const SHORT_SESSION: Duration = Duration::from_secs(1);
/// Waits after sessions under [`SHORT_SESSION`], the second in a row on:
/// 25 ms doubling to 5 s, each between half and all of its step (equal
/// jitter, so plugins dropped together do not come back together).
pub const BACKOFF_FIRST: Duration = Duration::from_millis(25);
pub const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// While sessions keep ending under a second, the loop says at most one
/// line per this, counting the lines it leaves out.
pub const QUIET: Duration = Duration::from_secs(10);

/// How another thread stops [`run`]: it asks, and the connection being
/// served is shut down, so the blocked read returns at once, and a wait
/// between connections ends at once.
#[derive(Debug, Default)]
pub struct Quit {
    asked: std::sync::atomic::AtomicBool,
    serving: Mutex<Option<UnixStream>>,
    woken: Condvar,
}

impl Quit {
    pub fn ask(&self) {
        self.asked.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(s) = self
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        self.woken.notify_all();
    }

    pub fn asked(&self) -> bool {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The connection about to be served; shut down at once if a stop was
    /// asked meanwhile.
    fn hold(&self, s: &UnixStream) {
        *self.serving.lock().unwrap_or_else(|e| e.into_inner()) = s.try_clone().ok();
        if self.asked() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Wait `d`, or less when a stop is asked: whether it was.
    fn wait(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        // The flag is read under the lock `ask` takes before it notifies,
        // so a stop asked between the two is never missed.
        let mut guard = self.serving.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.asked() {
                return true;
            }
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                return false;
            };
            guard = self
                .woken
                .wait_timeout(guard, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// When to connect next.
#[derive(Debug, Default)]
struct Backoff {
    /// Sessions in a row that ended under [`SHORT_SESSION`].
    short: u32,
    /// The last wait while the socket was missing or refused.
    poll: Duration,
}

impl Backoff {
    /// A session ended after `lasted`: the wait before the next connect.
    /// The first short one is reconnected at once, as a long one: a
    /// runtime that restarts drops its plugins, and its socket is gone
    /// meanwhile, so the next connect fails and polling begins.
    fn after_session(&mut self, lasted: Duration) -> Duration {
        self.poll = Duration::ZERO;
        if lasted >= SHORT_SESSION {
            self.short = 0;
            return Duration::ZERO;
        }
        self.short = self.short.saturating_add(1);
        if self.short == 1 {
            return Duration::ZERO;
        }
        let doublings = (self.short - 2).min(16);
        jitter(
            BACKOFF_FIRST
                .saturating_mul(1 << doublings)
                .min(BACKOFF_CAP),
        )
    }

    /// The socket is missing or refused: the wait before the next try.
    fn after_failed_connect(&mut self) -> Duration {
        self.poll = (self.poll * 2).clamp(POLL_FIRST, POLL_CAP);
        self.poll
    }

    /// Sessions keep ending at once: their lines are held to one per
    /// [`QUIET`].
    fn flapping(&self) -> bool {
        self.short >= 2
    }
}

/// Between half of `step` and all of it, at random: equal jitter, which
/// keeps every wait at least half its step (so the bound on reconnects
/// holds) and spreads plugins that a runtime dropped together.
fn jitter(step: Duration) -> Duration {
    let half = step / 2;
    let span = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
    half + Duration::from_micros(random() % span)
}

/// 64 random bits: the kernel's (getrandom(2), which never blocks once the
/// pool is initialised at boot, and here is asked not to), else the clock's
/// nanoseconds. A reconnect's spread needs no more; no crate for it.
fn random() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: `b` is 8 writable bytes; getrandom writes at most that many.
    let got =
        unsafe { nix::libc::getrandom(b.as_mut_ptr().cast(), b.len(), nix::libc::GRND_NONBLOCK) };
    if got == 8 {
        return u64::from_ne_bytes(b);
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()))
}

/// The loop's lines: all of them while sessions last, at most one per
/// [`QUIET`] while they keep ending at once, with the count of those left
/// out.
#[derive(Debug, Default)]
struct Said {
    last: Option<Instant>,
    left_out: usize,
}

impl Said {
    /// Whether the next line is said, and what it ends with (the count of
    /// the lines left out since the last one said).
    fn next(&mut self, flapping: bool) -> Option<String> {
        let now = Instant::now();
        let since = self.last.map(|t| now.duration_since(t));
        if flapping && since.is_some_and(|s| s < QUIET) {
            self.left_out += 1;
            return None;
        }
        self.last = Some(now);
        Some(match (std::mem::take(&mut self.left_out), since) {
            (0, _) | (_, None) => String::new(),
            (n, Some(s)) => format!(
                " ({n} reconnect lines not logged in the last {} s)",
                s.as_secs().max(1)
            ),
        })
    }
}

/// What the next connect waits, in words.
fn in_words(d: Duration) -> String {
    if d.is_zero() {
        "at once".into()
    } else {
        format!("in {} ms", d.as_millis())
    }
}

/// Keep a session up until `quit` is asked: connect, serve, and when it
/// ends connect again after the wait [`Backoff`] gives. Each change
/// (connected, lost, waiting for a runtime that is not up) is logged once,
/// not every attempt, and held to one line per [`QUIET`] while sessions
/// keep ending at once.
pub fn run(settings: &Settings, plugin: &mut Plugin, stats: &Stats, quit: &Quit) {
    let mut backoff = Backoff::default();
    let mut said = Said::default();
    let mut delay = Duration::ZERO;
    let mut last_failure = String::new();
    while !quit.asked() {
        if !delay.is_zero() && quit.wait(delay) {
            break;
        }
        match connect(settings) {
            Ok(stream) => {
                quit.hold(&stream);
                last_failure.clear();
                let began = Instant::now();
                let mut registered = false;
                let flapping = backoff.flapping();
                let ended = serve(stream, settings, plugin, stats, || {
                    registered = true;
                    stats.set_connected(true);
                    if let Some(tail) = said.next(flapping) {
                        crate::info!(
                            "registered as {}-{PLUGIN_NAME} on {}{tail}",
                            settings.index,
                            settings.socket.display()
                        );
                    }
                });
                stats.set_connected(false);
                if quit.asked() {
                    break;
                }
                delay = backoff.after_session(began.elapsed());
                let Some(tail) = said.next(backoff.flapping()) else {
                    continue;
                };
                if registered {
                    crate::warn!(
                        "disconnected: {ended}; reconnecting {}{tail}",
                        in_words(delay)
                    );
                } else {
                    crate::warn!(
                        "not registered: {ended}; retrying {}{tail}",
                        in_words(delay)
                    );
                }
            }
            Err(why) => {
                delay = backoff.after_failed_connect();
                if why != last_failure {
                    if let Some(tail) = said.next(backoff.flapping()) {
                        crate::info!(
                            "{why}; retrying every {} ms at most until the runtime is there (containers start without the environment meanwhile){tail}",
                            POLL_CAP.as_millis()
                        );
                    }
                    last_failure = why;
                }
            }
        }
    }
    crate::info!("the NRI plugin stops");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_under_a_second_back_off_from_25_ms_to_5_s_and_a_long_one_resets() {
        let mut b = Backoff::default();
        let short = Duration::from_millis(10);
        assert_eq!(b.after_session(short), Duration::ZERO, "the first at once");
        let mut steps = Vec::new();
        for _ in 0..12 {
            let d = b.after_session(short);
            steps.push(d);
        }
        for (i, d) in steps.iter().enumerate() {
            let step = (BACKOFF_FIRST * (1 << i.min(16))).min(BACKOFF_CAP);
            assert!(
                *d >= step / 2 && *d <= step,
                "wait {i}: {d:?} outside [{:?}, {step:?}]",
                step / 2
            );
        }
        assert!(b.flapping());
        // What 5 s of sessions that end at once can hold, at the shortest
        // waits jitter gives: at most 20 connections.
        let mut b = Backoff::default();
        let (mut t, mut n) = (Duration::ZERO, 1);
        while t < Duration::from_secs(5) {
            t += b.after_session(Duration::ZERO);
            n += 1;
        }
        assert!(n <= 20, "{n} connections in 5 s");
        assert_eq!(b.after_session(SHORT_SESSION), Duration::ZERO);
        assert!(!b.flapping());
        // A missing socket is polled at most 400 ms apart.
        let polls: Vec<u128> = (0..6)
            .map(|_| b.after_failed_connect().as_millis())
            .collect();
        assert_eq!(polls, [25, 50, 100, 200, 400, 400]);
    }

    #[test]
    fn lines_while_flapping_are_one_per_quiet_spell_with_the_count_left_out() {
        let mut s = Said::default();
        assert_eq!(s.next(false).as_deref(), Some(""));
        assert_eq!(
            s.next(false).as_deref(),
            Some(""),
            "sessions that last: all"
        );
        assert_eq!(s.next(true), None);
        assert_eq!(s.next(true), None);
        s.last = Some(Instant::now() - QUIET);
        assert_eq!(
            s.next(true).as_deref(),
            Some(" (2 reconnect lines not logged in the last 10 s)")
        );
        assert_eq!(s.next(true), None);
        assert_eq!(
            s.next(false).as_deref(),
            Some(" (1 reconnect lines not logged in the last 1 s)"),
            "a session that lasted says what was left out"
        );
    }

    #[test]
    fn a_wait_ends_when_a_stop_is_asked() {
        let quit = std::sync::Arc::new(Quit::default());
        let asker = quit.clone();
        let t = Instant::now();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            asker.ask();
        });
        assert!(quit.wait(Duration::from_secs(30)));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        h.join().unwrap();
        assert!(!Quit::default().wait(Duration::from_millis(1)));
    }
}
