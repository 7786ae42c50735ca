//! The agent's one stop. SIGTERM and SIGINT are blocked in every thread of
//! the agent and taken by a thread of their own (`roce-tune-signal`), which
//! turns them into [`Stop::request`]; every loop of the agent asks
//! [`Stop::requested`] between two steps, or sleeps in [`Stop::wait`]. So a
//! signal never interrupts a repair halfway, and each step is bounded (a
//! device lock is waited for at most `LockWait::REPAIR`), which is what
//! stops the agent within a second whatever another process holds. A thread
//! the agent adds (the NRI plugin's) takes a clone and stops with the rest.

use nix::sys::signal::{SigSet, Signal};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A stop asked for once, seen by every clone.
#[derive(Clone, Debug, Default)]
pub struct Stop {
    asked: Arc<(Mutex<bool>, Condvar)>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Ask every holder to stop; wakes those in [`Stop::wait`].
    pub fn request(&self) {
        let (asked, woken) = &*self.asked;
        *asked.lock().unwrap_or_else(|e| e.into_inner()) = true;
        woken.notify_all();
    }

    pub fn requested(&self) -> bool {
        *self.asked.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sleep for `d`, or less once a stop is asked; whether one was.
    pub fn wait(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        let (asked, woken) = &*self.asked;
        let mut stop = asked.lock().unwrap_or_else(|e| e.into_inner());
        while !*stop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stop = woken
                .wait_timeout(stop, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *stop
    }
}

/// The signals that stop the agent.
fn signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set
}

/// Block SIGTERM and SIGINT in the calling thread, so that every thread it
/// starts afterwards inherits the block (call it first), and start the
/// thread that waits for them and asks `stop`. A process-directed signal
/// goes to a thread that does not block it, and then none does but that one
/// (sigwait takes a signal pending for the process: signal(7)).
pub fn on_signals(stop: &Stop) -> std::io::Result<()> {
    let set = signals();
    set.thread_block().map_err(std::io::Error::from)?;
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("roce-tune-signal".into())
        .spawn(move || loop {
            match set.wait() {
                Ok(sig) => {
                    crate::info!("signal {}: the agent stops", sig as i32);
                    stop.request();
                    return;
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    crate::error!("cannot wait for SIGTERM: {e}; the agent stops");
                    stop.request();
                    return;
                }
            }
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_wakes_every_waiter_at_once_and_stays() {
        let stop = Stop::new();
        assert!(!stop.requested());
        let t = Instant::now();
        assert!(!stop.wait(Duration::from_millis(30)), "nothing asked");
        assert!(t.elapsed() >= Duration::from_millis(30));
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = stop.clone();
                std::thread::spawn(move || {
                    let t = Instant::now();
                    (s.wait(Duration::from_secs(60)), t.elapsed())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        stop.request();
        for w in waiters {
            let (asked, took) = w.join().unwrap();
            assert!(asked);
            assert!(took < Duration::from_secs(30), "{took:?}");
        }
        assert!(stop.requested());
        assert!(stop.wait(Duration::from_secs(60)), "a stop stays asked");
    }
}
