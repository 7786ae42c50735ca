//! Directories and small regular files read in the fewest system calls: on
//! the hot path of every ADD and DEL each call is about a microsecond of a
//! budget (docs/performance.md).
//!
//! A directory's names come from `getdents64` straight into a buffer on the
//! stack: glibc's `opendir` (behind `std::fs::read_dir` and nix's `Dir`) adds
//! an `fstat` and a 32 KiB heap buffer per listing, and `fdopendir` two
//! `fcntl`s and a rewind. A small regular file is read into a buffer sized to
//! it and ends at its first short read, not at a second read that returns 0.
//!
//! Which names of a directory changed since the last look comes from the
//! kernel (`DirWatch`, inotify(7)), so a reader that keeps a picture of a
//! directory (`job_env::Rails`, the NRI plugin's) looks again at those
//! names alone, not at every entry. The kernel queues each change as it
//! happens, for the directory's own entries (not a subdirectory's: the
//! state dir's `locks/`). What it cannot tell is `Changed::Lost`: its
//! queue overflowed (`fs.inotify.max_queued_events`, 16,384 by default:
//! IN_Q_OVERFLOW), or the directory itself was removed, moved or unmounted
//! (its watch then ends: IN_IGNORED). The reader lists it whole again.

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The names in the directory `dir` is open on, "." and ".." left out, in
/// the order the filesystem gives them.
pub fn names(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    // u64s: the kernel writes 8-byte-aligned records (struct linux_dirent64).
    let mut buf = [0u64; 512];
    let mut out = Vec::new();
    loop {
        // SAFETY: the buffer is ours and its length is what the kernel is told.
        let n = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(out);
        }
        // SAFETY: the kernel wrote n bytes; reading them as bytes is sound.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
        records(bytes, &mut out)?;
    }
}

/// `names` of the directory at `path` (opened O_DIRECTORY: a file is ENOTDIR).
pub fn names_at(path: &Path) -> io::Result<Vec<OsString>> {
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
        .open(path)?;
    names(&OwnedFd::from(dir))
}

/// A regular file's content, at most `max` bytes (as `take(max)` would give),
/// read into a buffer of `size` (what fstat said) + 1. A read of a regular
/// file returns fewer bytes than asked only at its end (read(2)), so the
/// first short read ends it; a file that grew since fstat is read on.
pub fn whole(file: &File, size: u64, max: u64) -> io::Result<Vec<u8>> {
    let mut file = file;
    let max = usize::try_from(max).unwrap_or(usize::MAX - 1);
    let mut buf = vec![0u8; usize::try_from(size).unwrap_or(max).min(max) + 1];
    let mut len = 0;
    while len <= max {
        if len == buf.len() {
            buf.resize(len.saturating_mul(2).min(max + 1), 0);
        }
        let asked = buf.len() - len;
        match file.read(&mut buf[len..]) {
            Ok(n) => {
                len += n;
                if n < asked {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len.min(max));
    Ok(buf)
}

/// The names in one `getdents64` answer: records of d_ino (8 bytes), d_off
/// (8), d_reclen (2), d_type (1) and the NUL-terminated name, each d_reclen
/// long (getdents64(2)).
fn records(mut bytes: &[u8], out: &mut Vec<OsString>) -> io::Result<()> {
    const NAME_AT: usize = 19;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed getdents64 record");
    while !bytes.is_empty() {
        let reclen = bytes
            .get(16..18)
            .map(|b| usize::from(u16::from_ne_bytes([b[0], b[1]])))
            .ok_or_else(bad)?;
        let rec = bytes
            .get(..reclen)
            .filter(|_| reclen > NAME_AT)
            .ok_or_else(bad)?;
        let name = &rec[NAME_AT..];
        let name = &name[..name.iter().position(|&b| b == 0).ok_or_else(bad)?];
        if name != b"." && name != b".." {
            out.push(OsString::from_vec(name.to_vec()));
        }
        bytes = &bytes[reclen..];
    }
    Ok(())
}

/// What was asked of the kernel: every way an entry comes, goes or is
/// rewritten (an atomic write is a create then a rename onto its name; a
/// write in place closes its file), and the directory's own end.
const WATCHED: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    // The directory itself, never through a link (the state dir's rule).
    .union(AddWatchFlags::IN_ONLYDIR)
    .union(AddWatchFlags::IN_DONT_FOLLOW);

/// The events that end what a watch can tell.
const ENDS: AddWatchFlags = AddWatchFlags::IN_Q_OVERFLOW
    .union(AddWatchFlags::IN_IGNORED)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_UNMOUNT);

/// What changed since the last look.
#[derive(Debug, PartialEq, Eq)]
pub enum Changed {
    /// These names (each once, in no order), maybe none.
    Names(Vec<OsString>),
    /// More than the kernel could tell: list the directory again, and watch
    /// it anew (this watch is spent).
    Lost,
}

/// A watch on one directory, read without blocking.
#[derive(Debug)]
pub struct DirWatch {
    fd: Inotify,
    lost: bool,
}

impl DirWatch {
    /// Watch `dir` from now on. Make it before listing the directory, so a
    /// change during the listing is told at the next look.
    pub fn new(dir: &Path) -> std::io::Result<DirWatch> {
        let fd = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        fd.add_watch(dir, WATCHED)?;
        Ok(DirWatch { fd, lost: false })
    }

    /// What changed since the last call (or since [`DirWatch::new`]).
    pub fn changed(&mut self) -> std::io::Result<Changed> {
        let mut names: Vec<OsString> = Vec::new();
        while !self.lost {
            let events = match self.fd.read_events() {
                Ok(e) => e,
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            for e in events {
                if e.mask.intersects(ENDS) {
                    self.lost = true;
                } else if let Some(name) = e.name {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        Ok(if self.lost {
            Changed::Lost
        } else {
            Changed::Names(names)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> Vec<u8> {
        let len = (19 + name.len() + 1).next_multiple_of(8);
        let mut r = vec![0u8; len];
        r[16..18].copy_from_slice(&(len as u16).to_ne_bytes());
        r[19..19 + name.len()].copy_from_slice(name.as_bytes());
        r
    }

    #[test]
    fn records_skip_dot_entries_and_keep_the_rest() {
        let bytes: Vec<u8> = [".", "..", "mlx5_0", "a:b.state"]
            .iter()
            .flat_map(|n| record(n))
            .collect();
        let mut out = Vec::new();
        records(&bytes, &mut out).unwrap();
        assert_eq!(out, ["mlx5_0", "a:b.state"]);
    }

    #[test]
    fn a_truncated_or_unterminated_record_is_an_error_not_a_loop() {
        let mut r = record("mlx5_0");
        let mut out = Vec::new();
        assert!(records(&r[..r.len() - 1], &mut out).is_err());
        r[16..18].copy_from_slice(&0u16.to_ne_bytes());
        assert!(
            records(&r, &mut out).is_err(),
            "a zero d_reclen would never advance"
        );
        let mut r = record("x");
        let len = r.len();
        r[19..len].fill(b'x');
        assert!(records(&r, &mut out).is_err(), "no NUL in the record");
    }

    #[test]
    fn whole_reads_to_the_end_whatever_fstat_said_and_stops_at_max() {
        let path = std::env::temp_dir().join(format!("rt-whole-{}", std::process::id()));
        let body: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        std::fs::write(&path, &body).unwrap();
        let read = |size, max| whole(&File::open(&path).unwrap(), size, max).unwrap();
        assert_eq!(read(5000, 1 << 20), body, "sized right");
        assert_eq!(read(10, 1 << 20), body, "the file grew since fstat");
        assert_eq!(read(0, 1 << 20), body, "fstat said empty");
        assert_eq!(read(9000, 1 << 20), body, "the file shrank");
        assert_eq!(read(5000, 4096), &body[..4096], "at most max, as take(max)");
        std::fs::write(&path, b"").unwrap();
        assert!(read(0, 100).is_empty());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn lists_a_directory_bigger_than_one_buffer() {
        let dir = std::env::temp_dir().join(format!("rt-dirents-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // 300 names of 40 bytes are about 17 KiB of records: several calls.
        let want: Vec<String> = (0..300).map(|i| format!("{i:040}")).collect();
        for n in &want {
            std::fs::write(dir.join(n), "").unwrap();
        }
        let mut got: Vec<String> = names_at(&dir)
            .unwrap()
            .into_iter()
            .map(|n| n.into_string().unwrap())
            .collect();
        got.sort();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(got, want);
        assert_eq!(
            names_at(Path::new("/proc/self/status"))
                .unwrap_err()
                .raw_os_error(),
            Some(nix::libc::ENOTDIR)
        );
    }

    #[test]
    fn names_come_once_and_the_directorys_end_is_lost() {
        let dir = std::env::temp_dir().join(format!("dir-watch-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let mut w = DirWatch::new(&dir).unwrap();
        assert_eq!(w.changed().unwrap(), Changed::Names(vec![]));
        std::fs::write(dir.join("a.tmp"), b"x").unwrap();
        std::fs::rename(dir.join("a.tmp"), dir.join("a")).unwrap();
        std::fs::write(dir.join("a"), b"y").unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/inner"), b"z").unwrap();
        let Changed::Names(mut names) = w.changed().unwrap() else {
            panic!("lost")
        };
        names.sort();
        assert_eq!(
            names,
            ["a", "a.tmp", "sub"],
            "not what a subdirectory holds"
        );
        assert_eq!(w.changed().unwrap(), Changed::Names(vec![]));
        std::fs::remove_file(dir.join("a")).unwrap();
        assert_eq!(w.changed().unwrap(), Changed::Names(vec!["a".into()]));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(w.changed().unwrap(), Changed::Lost);
        assert_eq!(w.changed().unwrap(), Changed::Lost, "spent");
        assert!(DirWatch::new(&dir).is_err(), "gone");
    }
}
