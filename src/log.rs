//! Logging to stderr and, when `logFile` is set, to that file. Never to
//! stdout: libcni reads the result (or the error) from stdout alone.
//! Each line carries the command and attachment so a node's log explains
//! itself when 16 rails of several pods interleave.

use crate::cni::config::LogLevel;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

struct Logger {
    level: LogLevel,
    context: String,
    file: Option<File>,
}

static LOGGER: Mutex<Option<Logger>> = Mutex::new(None);

/// The most a line's message may hold, in bytes after escaping: a 16-rail
/// pod's starved verdict is about 4 KiB. Longer is cut at the sink, where
/// no caller can forget it (uncut, one line was 6.1 MB, from an answer of
/// 100,000 GPUs).
pub const LINE_MAX: usize = 8 * 1024;

/// Set (or reset) where and what to log. `context` prefixes each line, e.g.
/// `ADD c1/net1`. A log file that cannot be opened or is refused is reported
/// on stderr and ignored: logging must never fail a pod.
pub fn init(level: LogLevel, context: String, log_file: Option<&std::path::Path>) {
    let file = log_file.and_then(|p| {
        open_log_file(p)
            .map_err(|why| eprintln!("roce-tune: logFile {} is not used: {why}", p.display()))
            .ok()
    });
    *LOGGER.lock().unwrap_or_else(|e| e.into_inner()) = Some(Logger {
        level,
        context: escape(&context),
        file,
    });
}

/// Change the level once the network config is known (the node config's log
/// file is opened before, so errors in the network config are logged too).
pub fn set_level(level: LogLevel) {
    if let Some(l) = LOGGER.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        l.level = level;
    }
}

/// The log file is the node's (node config), yet it is opened as if a hostile
/// hand had placed it: never through a link (O_NOFOLLOW), created 0600, and
/// used only if it is a regular root-owned file with one link (a hard link
/// would make roce-tune append to another file). O_NONBLOCK: a FIFO nobody
/// reads would otherwise block the open, and the pod, forever.
fn open_log_file(p: &std::path::Path) -> Result<File, String> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(p)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => "it is a symbolic link".to_string(),
            _ => format!("it cannot be opened ({e})"),
        })?;
    let m = f.metadata().map_err(|e| e.to_string())?;
    if !m.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    if m.uid() != 0 {
        return Err(format!("it is owned by uid {}, not root", m.uid()));
    }
    if m.nlink() != 1 {
        return Err(format!("it has {} hard links, not 1", m.nlink()));
    }
    Ok(f)
}

/// Escape what could start a new line or move a terminal's cursor: every
/// control character (C0, DEL, C1) and the Unicode line and paragraph
/// separators. Applied to every line at the sink, so no logged value (a
/// network name, an interface, an error from a file) can forge a log line.
pub fn escape(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `msg` escaped and cut to [`LINE_MAX`] bytes, saying how much was cut. Cut
/// before it is escaped too, so a huge message costs no huge copy.
pub fn capped(msg: &str) -> String {
    let cut = |s: &str, at: usize| -> usize {
        let mut at = at.min(s.len());
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let head = &msg[..cut(msg, LINE_MAX)];
    let mut out = escape(head);
    if out.len() <= LINE_MAX && head.len() == msg.len() {
        return out;
    }
    // Room for the note, whatever was cut.
    let keep = cut(&out, LINE_MAX - 48);
    let dropped = msg.len() - head.len() + (out.len() - keep);
    out.truncate(keep);
    out.push_str(&format!("... ({dropped} bytes cut)"));
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
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
        "{} roce-tune[{}] {tag} {ctx}: {}\n",
        utc_timestamp(now),
        pid(),
        capped(msg)
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(f) = g.as_mut().and_then(|l| l.file.as_mut()) {
        let _ = f.write_all(line.as_bytes());
    }
}

/// This process's id, asked of the kernel once: a line each time was a
/// syscall per line, and the process never forks (the state dir's temporary
/// names use it too).
pub fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
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
    fn nothing_logged_can_start_a_line() {
        let e = super::escape("rdma-vf\n2026-01-01T00:00:00.000Z roce-tune[1] info ADD x: forged\u{2028}\u{1b}[2J\u{85}");
        assert!(
            !e.contains('\n')
                && !e.contains('\u{2028}')
                && !e.contains('\u{1b}')
                && !e.contains('\u{85}')
        );
        assert!(e.starts_with("rdma-vf\\n2026"), "{e}");
        assert_eq!(super::escape("plain é"), "plain é");
    }

    #[test]
    fn lines_are_cut_at_the_cap_and_say_so() {
        use super::{capped, LINE_MAX};
        assert_eq!(capped("short é"), "short é");
        let exact = "x".repeat(LINE_MAX);
        assert_eq!(capped(&exact), exact);
        let huge = "é".repeat(3_000_000);
        let c = capped(&huge);
        assert!(c.len() <= LINE_MAX, "{}", c.len());
        assert!(
            c.starts_with("éé") && c.ends_with(" bytes cut)"),
            "{}",
            &c[c.len() - 40..]
        );
        // Escaping can grow a message past the cap: cut after it too, and a
        // cut never splits an escape's character.
        let ctl = "\u{1}".repeat(LINE_MAX);
        let c = capped(&ctl);
        assert!(c.len() <= LINE_MAX && !c.contains('\u{1}'), "{}", c.len());
        let n: usize = c
            .rsplit('(')
            .next()
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(n > 0);
    }

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
