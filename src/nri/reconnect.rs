//! The loop that keeps a session (`super::session`) up: connect, serve,
//! and when it ends connect again; how another thread stops it (`Quit`).

use super::answer::Plugin;
use super::session::{connect, serve, Settings, PLUGIN_NAME};
use super::Stats;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Reconnect delays: the first attempt at once, then doubling from the
/// first step up to the cap, so a restarted runtime has its plugin back
/// within the cap of its socket coming back.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(25);
pub const BACKOFF_CAP: Duration = Duration::from_millis(400);

/// How another thread stops [`run`]: it asks, and the connection being
/// served is shut down, so the blocked read returns at once.
#[derive(Debug, Default)]
pub struct Quit {
    asked: std::sync::atomic::AtomicBool,
    serving: std::sync::Mutex<Option<UnixStream>>,
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
}

/// Keep a session up until `quit` is asked: connect, serve, and when it
/// ends reconnect at once, then with a delay doubling from
/// [`BACKOFF_FIRST`] to [`BACKOFF_CAP`] (so a stop is seen within the cap).
/// Each change (connected, lost, waiting for a runtime that is not up) is
/// logged once, not every attempt.
pub fn run(settings: &Settings, plugin: &mut Plugin, stats: &Stats, quit: &Quit) {
    let mut delay = Duration::ZERO;
    let mut last_failure = String::new();
    while !quit.asked() {
        if !delay.is_zero() {
            std::thread::sleep(delay);
            if quit.asked() {
                break;
            }
        }
        match connect(settings) {
            Ok(stream) => {
                quit.hold(&stream);
                last_failure.clear();
                let mut registered = false;
                let ended = serve(stream, settings, plugin, stats, || {
                    registered = true;
                    stats.set_connected(true);
                    crate::info!(
                        "registered as {}-{PLUGIN_NAME} on {}",
                        settings.index,
                        settings.socket.display()
                    );
                });
                stats.set_connected(false);
                if quit.asked() {
                    break;
                }
                if registered {
                    crate::warn!("disconnected: {ended}; reconnecting at once");
                    delay = Duration::ZERO;
                    continue;
                }
                crate::warn!("not registered: {ended}; retrying");
            }
            Err(why) => {
                if why != last_failure {
                    crate::info!(
                        "{why}; retrying every {} ms until the runtime is there (containers start without the environment meanwhile)",
                        BACKOFF_CAP.as_millis()
                    );
                    last_failure = why;
                }
            }
        }
        delay = (delay * 2).clamp(BACKOFF_FIRST, BACKOFF_CAP);
    }
    crate::info!("the NRI plugin stops");
}
