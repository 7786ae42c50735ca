//! What the one-shot CNI processes hand to the agent: how many requests of
//! each command ended with each code, and how long they took. A request
//! counts itself in `<stateDir>/tally`, a fixed-size file of counters that
//! every process maps shared and adds to with atomic instructions:
//!
//! - nothing is lost: an increment is one atomic add on the shared page, so
//!   16 parallel ADDs count 16, and a process killed after its add has
//!   counted (the page is the kernel's, in the node's tmpfs `/run`);
//! - nothing grows: the file's size is fixed by its layout;
//! - nothing waits: no lock, no fsync, one open and one mmap per request
//!   (`make bench`: about 0.02 ms).
//!
//! The agent reads the same counters; they restart from zero when the file
//! is new (a reboot empties `/run`), which Prometheus reads as a counter
//! reset. The layout is versioned by its magic: a file that is not this
//! layout is replaced by a new one, never trusted, and never truncated
//! under the processes that map it (`Mapping::open`).

use crate::cni::code;
use crate::cni::env::Command;
use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the duration buckets (the last, +Inf, is implicit): an
/// ADD takes about 1 ms, and may wait for the kernel's GID up to
/// `gidTimeoutMs` (3 s by default, 60 s at most).
pub const BUCKETS: [Duration; 16] = [
    Duration::from_micros(500),
    Duration::from_millis(1),
    Duration::from_micros(2500),
    Duration::from_millis(5),
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_millis(2500),
    Duration::from_secs(5),
    Duration::from_secs(10),
    Duration::from_secs(30),
    Duration::from_secs(60),
];

/// Counters per command for the codes a request ends with: success in the
/// first, each code of `code::ALL` in the next by its order there, and
/// every other code (`OTHER`) in the last. Fixed, with room to spare, so a
/// code added to the table takes a free counter and the file's layout
/// (its size, every counter's place) stays as it is.
pub const CODE_SLOTS: usize = 64;
pub const OTHER: u32 = u32::MAX;
const _: () = assert!(
    code::ALL.len() + 2 <= CODE_SLOTS,
    "the tally needs a new layout"
);

/// The counter of `code` among a command's code counters.
fn slot(code: u32) -> usize {
    if code == 0 {
        return 0;
    }
    code::ALL
        .iter()
        .position(|&(_, c)| c == code)
        .map_or(CODE_SLOTS - 1, |i| i + 1)
}

/// The code a counter counts (`None`: a free one).
fn code_of(slot: usize) -> Option<u32> {
    match slot {
        0 => Some(0),
        s if s == CODE_SLOTS - 1 => Some(OTHER),
        s => code::ALL.get(s - 1).map(|&(_, c)| c),
    }
}

/// The commands' counters, in this order: the file's layout.
pub const COMMANDS: [Command; 6] = Command::ALL;

/// A new layout takes a new magic AND a new file name (`path`): binaries
/// older than this rule re-laid out a file of another layout in place, so during
/// a rollout they would cut a new layout's file short under the new
/// processes that map it.
const MAGIC: u64 = u64::from_le_bytes(*b"rt-tal02");
/// Per command: one counter per code, then one per bucket (+Inf), then the
/// sum of durations in nanoseconds.
const PER_COMMAND: usize = CODE_SLOTS + BUCKETS.len() + 1 + 1;
const WORDS: usize = 1 + COMMANDS.len() * PER_COMMAND;
const SIZE: usize = WORDS * 8;

/// The tally file of a state dir.
pub fn path(state_dir: &Path) -> std::path::PathBuf {
    state_dir.join(FILE_NAME)
}

/// The file's name, new with each layout (`MAGIC`): `tally` held the
/// layout of 21 code counters, whose size changed with each new code.
const FILE_NAME: &str = "tally-2";

/// Count one request, as a CNI process exits. Never fails the request: a tally that cannot be had
/// (no state dir yet, a refused file) is skipped.
pub fn count(state_dir: &Path, command: Command, code: u32, took: Duration) {
    let Some(map) = Mapping::open(&path(state_dir), true) else {
        return;
    };
    let Some(c) = COMMANDS.iter().position(|&x| x == command) else {
        return;
    };
    let base = 1 + c * PER_COMMAND;
    let bucket = BUCKETS
        .iter()
        .position(|b| took <= *b)
        .unwrap_or(BUCKETS.len());
    map.add(base + slot(code), 1);
    map.add(base + CODE_SLOTS + bucket, 1);
    map.add(
        base + CODE_SLOTS + BUCKETS.len() + 1,
        took.as_nanos().min(u64::MAX as u128) as u64,
    );
    // Left mapped: a CNI process counts once, as it exits, and the exit
    // unmaps. An munmap in a process whose pod thread ran on the other core
    // is a TLB shootdown there; under a hypervisor, an exit of each vCPU.
    std::mem::forget(map);
}

/// Every counter of one command, as the agent reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// `(code, requests)` for every code seen at least once.
    pub by_code: Vec<(u32, u64)>,
    /// Requests per bucket (not cumulative), `BUCKETS.len() + 1` of them.
    pub buckets: Vec<u64>,
    pub sum: Duration,
}

/// The tally of a state dir, per command (`None`: no tally yet).
pub fn read(state_dir: &Path) -> Option<Vec<(Command, Counts)>> {
    let map = Mapping::open(&path(state_dir), false)?;
    Some(
        COMMANDS
            .iter()
            .enumerate()
            .map(|(c, &cmd)| {
                let base = 1 + c * PER_COMMAND;
                let by_code = (0..CODE_SLOTS)
                    .filter_map(|i| Some((code_of(i)?, map.get(base + i))))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                let buckets = (0..=BUCKETS.len())
                    .map(|i| map.get(base + CODE_SLOTS + i))
                    .collect();
                let sum = Duration::from_nanos(map.get(base + CODE_SLOTS + BUCKETS.len() + 1));
                (
                    cmd,
                    Counts {
                        by_code,
                        buckets,
                        sum,
                    },
                )
            })
            .collect(),
    )
}

fn errno(e: std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO))
}

/// What `Mapping::open` found at the path.
enum Existing {
    Ours(Mapping),
    Missing,
    /// Another layout's file, unlinked (or already replaced by another process).
    Replaced,
    /// Not a file of ours, or not this layout where nothing may be made.
    Refused,
}

/// The file, mapped shared.
struct Mapping {
    ptr: *mut AtomicU64,
}

impl Mapping {
    /// Map the tally; with `create`, make it (0600, zeroed, this layout) when
    /// it is missing or not this layout. The file must be a regular file of
    /// ours (root's, on a node) with one link: the state dir is root's, but a
    /// planted link or a hard link to another file must not become a write
    /// target.
    ///
    /// A file is never cut short or rewritten in place: other processes may
    /// have it mapped, and a mapped page past the end of its file is SIGBUS
    /// (one DEL in 600 died so, before this rule). A new file is laid out unnamed
    /// (`O_TMPFILE`) and linked into place only when whole, which fails if a
    /// file appeared meanwhile, so every process maps the one inode the first
    /// of them linked and no add is lost. A file of another layout is
    /// unlinked first, under its own flock and only while the path still
    /// names it, so two processes never replace each other's new file.
    fn open(path: &Path, create: bool) -> Option<Mapping> {
        // Each turn is a race lost to another process that linked or
        // unlinked the file meanwhile; a few are plenty.
        for _ in 0..4 {
            match Self::open_existing(path, create) {
                Existing::Ours(map) => return Some(map),
                Existing::Refused => return None,
                Existing::Missing if !create => return None,
                Existing::Missing | Existing::Replaced => {}
            }
            match Self::create_new(path) {
                Ok(map) => return Some(map),
                Err(Errno::EEXIST) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    fn open_existing(path: &Path, create: bool) -> Existing {
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Existing::Missing,
            Err(_) => return Existing::Refused,
        };
        let Ok(meta) = file.metadata() else {
            return Existing::Refused;
        };
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { nix::libc::geteuid() };
        if !meta.file_type().is_file() || meta.uid() != me || meta.nlink() != 1 {
            return Existing::Refused;
        }
        // The fast path: laid out already (a file is linked only when whole).
        if meta.len() == SIZE as u64 {
            if let Some(map) = Self::map(&file) {
                if map.get(0) == MAGIC {
                    return Existing::Ours(map);
                }
            }
        }
        if !create {
            return Existing::Refused;
        }
        let Ok(locked) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive) else {
            return Existing::Refused;
        };
        // Under the lock, again: a binary older than this rule lays a new
        // file out in place under this lock, and its file is this layout.
        if locked.metadata().is_ok_and(|m| m.len() == SIZE as u64) {
            if let Some(map) = Self::map(&locked) {
                if map.get(0) == MAGIC {
                    return Existing::Ours(map);
                }
            }
        }
        let still = std::fs::symlink_metadata(path)
            .is_ok_and(|now| now.dev() == meta.dev() && now.ino() == meta.ino());
        if still && std::fs::remove_file(path).is_err() {
            return Existing::Refused;
        }
        // Unlinked, or someone else's new file is there now: either way the
        // next turn looks again.
        Existing::Replaced
    }

    /// A new file of this layout linked in at `path`, `EEXIST` when another
    /// process linked one first.
    fn create_new(path: &Path) -> Result<Mapping, Errno> {
        let dir = path.parent().ok_or(Errno::EINVAL)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_TMPFILE | nix::libc::O_CLOEXEC)
            .open(dir)
            .map_err(errno)?;
        file.set_len(SIZE as u64).map_err(errno)?;
        let map = Self::map(&file).ok_or(Errno::ENOMEM)?;
        map.word(0).store(MAGIC, Ordering::Release);
        // An unnamed file is linked through its /proc/self/fd entry
        // (open(2), O_TMPFILE); AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH.
        let fd = format!("/proc/self/fd/{}", file.as_raw_fd());
        nix::unistd::linkat(
            nix::fcntl::AT_FDCWD,
            fd.as_str(),
            nix::fcntl::AT_FDCWD,
            path,
            nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
        )?;
        Ok(map)
    }

    fn map(file: &File) -> Option<Mapping> {
        // SAFETY: a shared mapping of SIZE bytes of a file that is SIZE bytes
        // long; it stays valid after the file is closed, until munmap (Drop).
        let ptr = unsafe {
            nix::libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                nix::libc::PROT_READ | nix::libc::PROT_WRITE,
                // MAP_POPULATE: the one page is mapped now, not at a fault.
                nix::libc::MAP_SHARED | nix::libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != nix::libc::MAP_FAILED).then(|| Mapping {
            ptr: ptr.cast::<AtomicU64>(),
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < WORDS);
        // SAFETY: i is within the mapping; mmap returns page-aligned memory,
        // so every 8-byte word is aligned for AtomicU64, and every process
        // touches the words only atomically.
        unsafe { &*self.ptr.add(i) }
    }

    fn add(&self, i: usize, n: u64) {
        self.word(i).fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self, i: usize) -> u64 {
        self.word(i).load(Ordering::Relaxed)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe {
            nix::libc::munmap(self.ptr.cast(), SIZE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rt-tally-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_layout_holds_its_slots_and_size() {
        // The file is shared by CNI processes of different versions until
        // the node's next reboot: each code's counter, their order and the
        // size are its layout, the magic and the name say which. The codes
        // of the table keep their places (a new one is appended: this
        // prefix still holds), and the size does not depend on how many
        // codes there are.
        let values: Vec<u32> = code::ALL.iter().map(|&(_, c)| c).collect();
        let pinned = [
            1, 3, 4, 5, 6, 7, 11, 50, 100, 101, 102, 103, 104, 105, 106, 107, 108,
        ];
        assert_eq!(values[..pinned.len()], pinned);
        for (i, c) in pinned.iter().enumerate() {
            assert_eq!((slot(*c), code_of(i + 1)), (i + 1, Some(*c)), "{c}");
        }
        assert_eq!((slot(0), slot(OTHER), slot(999)), (0, 63, 63));
        assert_eq!(code_of(pinned.len() + 1), None, "a free counter");
        assert_eq!(SIZE, 8 * (1 + 6 * (64 + 16 + 2)));
        assert_eq!(MAGIC, u64::from_le_bytes(*b"rt-tal02"));
        assert_eq!(
            path(Path::new("/run/roce-tune")),
            Path::new("/run/roce-tune/tally-2")
        );
    }

    #[test]
    fn a_counter_no_code_holds_yet_is_never_read_as_another_code() {
        // During a rollout a newer CNI binary counts a code appended to its
        // table in a counter this binary's table leaves free: the agent of
        // this version reads nothing there rather than another code, and no
        // counter it knows moves.
        let d = dir("append");
        count(
            &d,
            Command::Add,
            code::QOS_PRIORITY,
            Duration::from_millis(1),
        );
        let map = Mapping::open(&path(&d), false).unwrap();
        let add = 1 + COMMANDS.iter().position(|&c| c == Command::Add).unwrap() * PER_COMMAND;
        let free = code::ALL.len() + 1;
        map.add(add + free, 2);
        std::mem::forget(map);
        let all = read(&d).unwrap();
        let counts = &all.iter().find(|(c, _)| *c == Command::Add).unwrap().1;
        assert_eq!(counts.by_code, [(108, 1)], "a free counter is no code yet");
        assert_eq!(code_of(free), None);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn counts_are_exact_across_threads() {
        // Each thread maps the file anew, as each CNI process does.
        let d = dir("threads");
        std::thread::scope(|s| {
            for t in 0..16u64 {
                let d = &d;
                s.spawn(move || {
                    for i in 0..50u64 {
                        let code = if (t + i) % 5 == 0 { code::GID_CHECK } else { 0 };
                        count(d, Command::Add, code, Duration::from_micros(800 + i));
                    }
                });
            }
        });
        let all = read(&d).unwrap();
        let add = &all.iter().find(|(c, _)| *c == Command::Add).unwrap().1;
        let total: u64 = add.by_code.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 800);
        assert_eq!(add.by_code.iter().find(|(c, _)| *c == 101).unwrap().1, 160);
        assert_eq!(add.buckets.iter().sum::<u64>(), 800);
        assert_eq!(add.buckets[1], 800, "0.8 ms is in the 1 ms bucket");
        assert!(add.sum >= Duration::from_micros(800 * 800));
        let del = &all.iter().find(|(c, _)| *c == Command::Del).unwrap().1;
        assert!(del.by_code.is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_of_another_layout_is_replaced_not_trusted() {
        let d = dir("layout");
        std::fs::write(path(&d), vec![0xffu8; SIZE]).unwrap();
        assert!(read(&d).is_none(), "not this layout: no counts");
        count(&d, Command::Del, 999, Duration::from_secs(100));
        let all = read(&d).unwrap();
        let del = &all.iter().find(|(c, _)| *c == Command::Del).unwrap().1;
        assert_eq!(del.by_code, [(OTHER, 1)], "an unknown code is OTHER");
        assert_eq!(*del.buckets.last().unwrap(), 1, "past 60 s is +Inf");
        std::fs::write(d.join("elsewhere"), "x").unwrap();
        std::fs::remove_file(path(&d)).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), path(&d)).unwrap();
        count(&d, Command::Add, 0, Duration::ZERO);
        assert_eq!(
            std::fs::read_to_string(d.join("elsewhere")).unwrap(),
            "x",
            "a link is no tally"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_of_another_layout_is_never_truncated_under_its_mappers() {
        // A process of another layout has the file mapped (this layout's
        // size, so a reader maps it before it can see the magic): cutting
        // that file short, even for a moment, is SIGBUS in that process.
        let d = dir("mapped");
        let mut theirs = vec![0x5au8; SIZE];
        theirs[..8].copy_from_slice(b"rt-tal00");
        std::fs::write(path(&d), &theirs).unwrap();
        let held = File::open(path(&d)).unwrap();
        let held_ino = held.metadata().unwrap().ino();
        count(&d, Command::Add, 0, Duration::from_millis(1));
        let mut now = Vec::new();
        std::io::Read::read_to_end(&mut &held, &mut now).unwrap();
        assert!(
            now == theirs,
            "the other layout's file was rewritten in place"
        );
        let ours = std::fs::metadata(path(&d)).unwrap();
        assert_ne!(ours.ino(), held_ino, "a new file took its place");
        assert_eq!(ours.nlink(), 1);
        let all = read(&d).unwrap();
        let add = &all.iter().find(|(c, _)| *c == Command::Add).unwrap().1;
        assert_eq!(add.by_code, [(0, 1)]);
        // Nothing left behind beside it.
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FILE_NAME]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
