//! Logging to stderr and, when `logFile` is set, to that file. Never to
//! stdout: libcni reads the result (or the error) from stdout alone.
//! Each line carries the command and attachment so a node's log explains
//! itself when 16 rails of several pods interleave.

use crate::cni::config::LogLevel;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

struct Logger {
    level: LogLevel,
    context: String,
    file: Option<File>,
}

static LOGGER: Mutex<Option<Logger>> = Mutex::new(None);

/// Set (or reset) where and what to log. `context` prefixes each line, e.g.
/// `ADD c1/net1`. A log file that cannot be opened is reported on stderr and
/// ignored: logging must never fail a pod.
pub fn init(level: LogLevel, context: String, log_file: Option<&std::path::Path>) {
    let file = log_file.and_then(|p| {
        // O_NONBLOCK: a FIFO nobody reads would otherwise block the open,
        // and the pod, forever; on a regular file it changes nothing.
        OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(p)
            .map_err(|e| eprintln!("roce-tune: cannot open logFile {}: {e}", p.display()))
            .ok()
    });
    *LOGGER.lock().unwrap_or_else(|e| e.into_inner()) = Some(Logger {
        level,
        context,
        file,
    });
}

pub fn enabled(level: LogLevel) -> bool {
    let g = LOGGER.lock().unwrap_or_else(|e| e.into_inner());
    level <= g.as_ref().map_or(LogLevel::Info, |l| l.level)
}

pub fn log(level: LogLevel, msg: &str) {
    let mut g = LOGGER.lock().unwrap_or_else(|e| e.into_inner());
    let (max, ctx) = match g.as_ref() {
        Some(l) => (l.level, l.context.as_str()),
        None => (LogLevel::Info, ""),
    };
    if level > max {
        return;
    }
    let tag = match level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let line = format!(
        "{} roce-tune[{}] {tag} {ctx}: {msg}\n",
        utc_timestamp(now),
        std::process::id()
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(f) = g.as_mut().and_then(|l| l.file.as_mut()) {
        let _ = f.write_all(line.as_bytes());
    }
}

#[macro_export]
macro_rules! log_at {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) { $crate::log::log($lvl, &format!($($arg)*)) }
    };
}
#[macro_export]
macro_rules! error { ($($arg:tt)*) => { $crate::log_at!($crate::cni::config::LogLevel::Error, $($arg)*) }; }
#[macro_export]
macro_rules! warn { ($($arg:tt)*) => { $crate::log_at!($crate::cni::config::LogLevel::Warn, $($arg)*) }; }
#[macro_export]
macro_rules! info { ($($arg:tt)*) => { $crate::log_at!($crate::cni::config::LogLevel::Info, $($arg)*) }; }
#[macro_export]
macro_rules! debug { ($($arg:tt)*) => { $crate::log_at!($crate::cni::config::LogLevel::Debug, $($arg)*) }; }

/// `2026-11-30T18:09:52.142Z`, without a date crate: days-from-civil inverse
/// (Howard Hinnant's algorithm) on the seconds since the epoch.
fn utc_timestamp(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_timestamps() {
        use std::time::Duration;
        assert_eq!(
            super::utc_timestamp(Duration::from_millis(0)),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            super::utc_timestamp(Duration::from_millis(1_796_062_192_142)),
            "2026-11-30T18:09:52.142Z"
        );
        assert_eq!(
            super::utc_timestamp(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
    }
}
