//! Every file roce-tune reads or writes under the sysfs root goes through a
//! `View`: a directory file descriptor, never a path string. Two reasons.
//!
//! - Safety. A file is opened with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_MAGICLINKS)` relative to the view's root and `O_NOFOLLOW` on
//!   its last component, so no path can leave the root and no symbolic link
//!   can stand in for an attribute. On the real sysfs the opened file must
//!   also be on sysfs (configfs under `kernel/config`), checked with `fstatfs`
//!   on the descriptor that is then read or written. A test tree keeps the
//!   same no-follow rules without the filesystem check (docs/design.md,
//!   "Who writes what"). That check, and every other difference between the
//!   kernel and a test tree, is the host seam's (`host.rs`), chosen once
//!   when the root is opened.
//! - Namespaces without thread tricks. A sysfs instance shows the network
//!   namespace of whoever created it. The pod's view in exclusive RDMA mode is
//!   a detached sysfs created on a thread inside the pod netns
//!   (`fsopen`/`fsmount`, see `netns.rs`); its descriptor then works from any
//!   thread, so no thread ever changes its `/sys`.

mod host;

pub use host::{netns_dir, Host};

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use std::fmt;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// How often an `openat2` that a concurrent rename made EAGAIN is retried:
/// each retry is a fresh path walk of microseconds, and a rename storm long
/// enough to lose 64 of them in a row is no state to read sysfs in.
const OPENAT2_RETRIES: u32 = 64;
/// A sysfs attribute is at most one page; anything larger is not one.
const MAX_ATTR_BYTES: u64 = 64 * 1024;

/// Why a sysfs file could not be used. The cause is kept, not flattened into
/// text, so callers branch on it (a missing file is not an unreadable one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysfsError {
    /// ENOENT (or ENOTDIR on the way).
    Missing,
    /// The last component is a symbolic link (`O_NOFOLLOW`).
    Link,
    /// Resolution would leave the view's root (`RESOLVE_BENEATH`: `..`, an
    /// absolute link, a magic link).
    Escapes,
    /// On the real sysfs, the file lives on another filesystem.
    WrongFilesystem { expected: &'static str },
    /// Not a regular attribute (a directory, a FIFO) or larger than a page.
    NotAnAttribute,
    /// Any other OS error, with its errno.
    Os(Errno),
    /// A file only root may have written (`read_root_owned`) is another
    /// uid's, or group or others may write it.
    NotRootOnly { uid: u32, mode: u32 },
}

impl SysfsError {
    fn from_errno(e: Errno) -> SysfsError {
        match e {
            Errno::ENOENT | Errno::ENOTDIR => SysfsError::Missing,
            Errno::ELOOP => SysfsError::Link,
            Errno::EXDEV => SysfsError::Escapes,
            other => SysfsError::Os(other),
        }
    }

    fn from_io(e: std::io::Error) -> SysfsError {
        match e.raw_os_error() {
            Some(n) => SysfsError::from_errno(Errno::from_raw(n)),
            None => SysfsError::Os(Errno::EIO),
        }
    }

    pub fn errno(&self) -> Option<Errno> {
        match self {
            SysfsError::Os(e) => Some(*e),
            _ => None,
        }
    }
}

impl fmt::Display for SysfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SysfsError::Missing => f.write_str("it does not exist"),
            SysfsError::Link => f.write_str(
                "it is a symbolic link, and roce-tune opens sysfs attributes only, never a link",
            ),
            SysfsError::Escapes => f.write_str("its path leaves the sysfs root"),
            SysfsError::WrongFilesystem { expected } => {
                write!(
                    f,
                    "it is not on {expected}, so it is not a kernel attribute"
                )
            }
            SysfsError::NotAnAttribute => {
                f.write_str("it is not a regular attribute file of at most one page")
            }
            SysfsError::Os(e) => write!(f, "{} ({})", e.desc(), e),
            SysfsError::NotRootOnly { uid, mode } if *uid != 0 => {
                write!(f, "it is owned by uid {uid}, not root")
            }
            SysfsError::NotRootOnly { mode, .. } => write!(
                f,
                "it is writable by group or others (mode {:04o})",
                mode & 0o7777
            ),
        }
    }
}

pub type SysfsResult<T> = Result<T, SysfsError>;

/// One view of sysfs: the host's, a pod's, or a test tree standing for both.
#[derive(Debug)]
pub struct View {
    dir: OwnedFd,
    /// What stands behind the root, chosen when it was opened: the kernel
    /// (host `/sys`, or a pod's detached sysfs) or a test tree.
    host: Host,
    /// How messages name this view's root: `/sys`, `<pod sysfs>`, or the tree.
    label: String,
}

impl View {
    /// The view at `root`: the real sysfs when `root` is `/sys`, else a test
    /// tree (docs/design.md, "Test trees").
    pub fn open(root: &Path) -> SysfsResult<View> {
        let dir = nix::fcntl::open(
            root,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(SysfsError::from_errno)?;
        let host = Host::of_root(root);
        host.verify(&dir, Path::new(""))?;
        Ok(View {
            dir,
            host,
            label: root.display().to_string(),
        })
    }

    /// A fresh sysfs instance showing the CALLING thread's network namespace,
    /// detached (mounted nowhere), so no mount namespace changes. Call it on a
    /// thread inside the pod netns (`NetNs::run`); the view then works from
    /// any thread. Needs CAP_SYS_ADMIN and Linux 5.2 (fsopen).
    pub fn fresh_sysfs(label: &str) -> SysfsResult<View> {
        use nix::libc::{c_char, syscall, SYS_fsconfig, SYS_fsmount, SYS_fsopen};
        const FSCONFIG_CMD_CREATE: i32 = 6;
        const FSOPEN_CLOEXEC: u32 = 1;
        const FSMOUNT_CLOEXEC: u32 = 1;
        let name = c"sysfs";
        // SAFETY: plain syscalls with valid pointers; each returned fd is
        // owned exactly once below.
        let fs = unsafe { syscall(SYS_fsopen, name.as_ptr() as *const c_char, FSOPEN_CLOEXEC) };
        let fs = Errno::result(fs).map_err(SysfsError::Os)? as i32;
        let fs = unsafe { OwnedFd::from_raw_fd(fs) };
        let r = unsafe {
            syscall(
                SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<c_char>(),
                std::ptr::null::<c_char>(),
                0,
            )
        };
        Errno::result(r).map_err(SysfsError::Os)?;
        let m = unsafe { syscall(SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0) };
        let m = Errno::result(m).map_err(SysfsError::Os)? as i32;
        Ok(View {
            dir: unsafe { OwnedFd::from_raw_fd(m) },
            host: Host::kernel(),
            label: label.to_owned(),
        })
    }

    /// The directory `rel` beneath this view as a view of its own (a test
    /// tree's `netns/<inode>/`: the sysfs a pod netns sees, docs/design.md
    /// "Test trees"). Resolved like every path here; `Missing` when absent.
    pub fn open_beneath(&self, rel: &Path) -> SysfsResult<View> {
        let dir = self.open_at(rel, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        Ok(View {
            dir,
            host: self.host,
            label: self.show(rel),
        })
    }

    pub fn try_clone(&self) -> SysfsResult<View> {
        Ok(View {
            dir: self.dir.try_clone().map_err(SysfsError::from_io)?,
            host: self.host,
            label: self.label.clone(),
        })
    }

    /// What stands behind this view: the seam every difference between
    /// the kernel and a test tree goes through (`host.rs`).
    pub fn host(&self) -> Host {
        self.host
    }

    /// `rel` as messages show it: `/sys/class/infiniband/...`.
    pub fn show(&self, rel: &Path) -> String {
        format!("{}/{}", self.label.trim_end_matches('/'), rel.display())
    }

    /// Open `rel` beneath the root. A file's last component is never
    /// followed; a directory's may be a link (sysfs's `class/infiniband/<dev>`
    /// is one), as long as it resolves beneath the root.
    fn open_at(&self, rel: &Path, flags: OFlag) -> SysfsResult<OwnedFd> {
        let flags = if flags.contains(OFlag::O_DIRECTORY) {
            flags | OFlag::O_CLOEXEC
        } else {
            flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
        };
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        // EAGAIN: a ".." was resolved (every `bus/pci/devices/<bdf>` link is
        // `../../../devices/...`) while a rename or mount happened anywhere
        // on the system, so the kernel cannot prove it stayed beneath; it
        // asks the caller to retry (openat2(2), fs/namei.c `follow_dotdot`).
        // Any ADD's atomic state write is such a rename.
        let mut tries = 0;
        let fd = loop {
            match openat2(&self.dir, rel, how) {
                Err(Errno::EAGAIN) if tries < OPENAT2_RETRIES => tries += 1,
                // Kernels before 5.6 have no openat2: O_NOFOLLOW still guards
                // the last component, and the filesystem check below still applies.
                Err(Errno::ENOSYS) => {
                    break nix::fcntl::openat(&self.dir, rel, flags, Mode::empty())
                }
                other => break other,
            }
        }
        .map_err(SysfsError::from_errno)?;
        self.host.verify(&fd, rel)?;
        Ok(fd)
    }

    fn open_attr(&self, rel: &Path, flags: OFlag) -> SysfsResult<File> {
        self.open_attr_meta(rel, flags).map(|(f, _)| f)
    }

    fn open_attr_meta(&self, rel: &Path, flags: OFlag) -> SysfsResult<(File, std::fs::Metadata)> {
        // O_NONBLOCK: a FIFO planted in a test tree must not hang the pod.
        let file = File::from(self.open_at(rel, flags | OFlag::O_NONBLOCK)?);
        let meta = file.metadata().map_err(SysfsError::from_io)?;
        if !meta.file_type().is_file() || meta.len() > MAX_ATTR_BYTES {
            return Err(SysfsError::NotAnAttribute);
        }
        Ok((file, meta))
    }

    /// The attribute's content (at most a page).
    pub fn read(&self, rel: &Path) -> SysfsResult<String> {
        read_open(self.open_attr(rel, OFlag::O_RDONLY)?)
    }

    /// `read`, of a file only root may have written: root's, and not
    /// writable by group or others (what the NVIDIA driver's proc files
    /// are, 0444), checked on the descriptor that is then read.
    pub fn read_root_owned(&self, rel: &Path) -> SysfsResult<String> {
        use std::os::unix::fs::MetadataExt;
        let (file, meta) = self.open_attr_meta(rel, OFlag::O_RDONLY)?;
        if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            return Err(SysfsError::NotRootOnly {
                uid: meta.uid(),
                mode: meta.mode(),
            });
        }
        read_open(file)
    }

    /// The attribute's content trimmed, `None` when unreadable or empty.
    pub fn read_trimmed(&self, rel: &Path) -> Option<String> {
        self.read(rel)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }

    /// Write `data` in one `write` (an attribute parses one write), truncating
    /// as `echo >` does; never creates a file.
    pub fn write(&self, rel: &Path, data: &[u8]) -> SysfsResult<()> {
        let mut file = self.open_attr(rel, OFlag::O_WRONLY | OFlag::O_TRUNC)?;
        file.write_all(data).map_err(SysfsError::from_io)
    }

    /// Whether `rel` exists (a link counts: it is not followed).
    pub fn exists(&self, rel: &Path) -> bool {
        !matches!(
            self.open_at(rel, OFlag::O_PATH),
            Err(SysfsError::Missing | SysfsError::Escapes)
        )
    }

    /// The names in a directory, sorted.
    pub fn list(&self, rel: &Path) -> SysfsResult<Vec<String>> {
        let fd = self.open_at(rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        let mut names: Vec<String> = crate::fs_read::names(&fd)
            .map_err(SysfsError::from_io)?
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// The last component of a symbolic link's target: sysfs links a device
    /// to its parent (`class/infiniband/<dev>/device` -> `.../0000:0c:00.2`).
    /// Only the link itself is read; the path to it is resolved beneath the
    /// root like every other.
    pub fn link_name(&self, rel: &Path) -> SysfsResult<String> {
        let (parent, name) = split(rel)?;
        let dir = self.open_at(&parent, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        let target =
            nix::fcntl::readlinkat(&dir, name.as_path()).map_err(SysfsError::from_errno)?;
        Path::new(&target)
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_owned)
            .ok_or(SysfsError::NotAnAttribute)
    }

    /// Where a symbolic link points, as a path relative to the root: sysfs
    /// places a PCI function by its link `bus/pci/devices/<bdf>` ->
    /// `../../../devices/pci0000:00/.../<bdf>`, and the bridges named in that
    /// target are the function's place in the PCIe tree. As in `link_name`,
    /// only the link itself is read, never followed. The target must be
    /// relative and made of `..` and names of printable ASCII; it is resolved
    /// against the link's directory (whose own components must be plain
    /// names; a directory reached through a link would mislead the `..`
    /// steps, and sysfs's `bus/pci/devices` is none) and must stay beneath
    /// the root. The result is only a path for
    /// further reads through this view, each resolved beneath the root again,
    /// so a planted link can at worst misplace a device, never reach outside.
    pub fn link_target(&self, rel: &Path) -> SysfsResult<PathBuf> {
        let (parent, name) = split(rel)?;
        let dir = self.open_at(&parent, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        let target =
            nix::fcntl::readlinkat(&dir, name.as_path()).map_err(SysfsError::from_errno)?;
        resolve_beneath(&parent, Path::new(&target))
    }

    /// The links of the directory `rel`, read one after another through
    /// one descriptor of it (`link_target` opens the link's directory each
    /// time: placing the functions of a node reads every
    /// `bus/pci/devices/<bdf>`).
    pub fn links(&self, rel: &Path) -> SysfsResult<Links> {
        Ok(Links {
            dir: self.open_at(rel, OFlag::O_PATH | OFlag::O_DIRECTORY)?,
            rel: rel.to_owned(),
        })
    }

    /// `mkdir` of the last component under an existing directory (configfs
    /// groups are made this way); `Ok(false)` when it already exists.
    pub fn mkdir(&self, rel: &Path) -> SysfsResult<bool> {
        let (parent, name) = split(rel)?;
        let dir = self.open_at(&parent, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        match nix::sys::stat::mkdirat(&dir, name.as_path(), Mode::from_bits_truncate(0o755)) {
            Ok(()) => Ok(true),
            Err(Errno::EEXIST) => Ok(false),
            Err(e) => Err(SysfsError::from_errno(e)),
        }
    }

    /// `rmdir` of the last component (a configfs group roce-tune made).
    pub fn rmdir(&self, rel: &Path) -> SysfsResult<()> {
        let (parent, name) = split(rel)?;
        let dir = self.open_at(&parent, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        nix::unistd::unlinkat(&dir, name.as_path(), nix::unistd::UnlinkatFlags::RemoveDir)
            .map_err(SysfsError::from_errno)
    }
}

/// A directory of links, open (`View::links`).
pub struct Links {
    dir: OwnedFd,
    rel: PathBuf,
}

impl Links {
    /// `View::link_target` of the link `name` of this directory: one plain
    /// name, never a path.
    pub fn target(&self, name: &str) -> SysfsResult<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(SysfsError::Escapes);
        }
        let target = nix::fcntl::readlinkat(&self.dir, name).map_err(SysfsError::from_errno)?;
        resolve_beneath(&self.rel, Path::new(&target))
    }
}

/// An open attribute's content (at most a page).
fn read_open(mut file: File) -> SysfsResult<String> {
    // A sysfs attribute answers a read whole (at most a page), and a
    // regular file short only at its end: a read shorter than the buffer
    // is the end, with no second read to see 0.
    let mut buf = vec![0u8; 256];
    let mut len = 0;
    while len < MAX_ATTR_BYTES as usize {
        let n = loop {
            match file.read(&mut buf[len..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other.map_err(SysfsError::from_io)?,
            }
        };
        len += n;
        if n == 0 || len < buf.len() {
            break;
        }
        buf.resize((buf.len() * 2).min(MAX_ATTR_BYTES as usize), 0);
    }
    buf.truncate(len);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn split(rel: &Path) -> SysfsResult<(PathBuf, PathBuf)> {
    match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) => Ok((p.to_owned(), PathBuf::from(n))),
        _ => Err(SysfsError::Escapes),
    }
}

/// `target` resolved lexically against `dir` (both beneath the root), or why
/// not: an absolute target or one climbing above the root escapes; `.`, empty
/// or non-printable names, or a name longer than NAME_MAX, are no sysfs link.
fn resolve_beneath(dir: &Path, target: &Path) -> SysfsResult<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::path::Component;
    fn plain(name: &std::ffi::OsStr) -> bool {
        let b = name.as_bytes();
        !b.is_empty() && b.len() <= 255 && b.iter().all(|c| (0x21..0x7f).contains(c))
    }
    let mut out: Vec<&std::ffi::OsStr> = Vec::new();
    for c in dir.components() {
        match c {
            Component::Normal(n) if plain(n) => out.push(n),
            _ => return Err(SysfsError::Escapes),
        }
    }
    for c in target.components() {
        match c {
            Component::ParentDir => {
                out.pop().ok_or(SysfsError::Escapes)?;
            }
            Component::Normal(n) if plain(n) => out.push(n),
            Component::RootDir | Component::Prefix(_) => return Err(SysfsError::Escapes),
            _ => return Err(SysfsError::NotAnAttribute),
        }
    }
    if out.is_empty() {
        return Err(SysfsError::NotAnAttribute);
    }
    Ok(out.iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rt-sysfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("class/infiniband/mlx5_2/tc/1")).unwrap();
        d
    }

    #[test]
    fn links_and_escapes_are_refused_in_a_test_tree() {
        let d = tree("links");
        let outside = d.with_extension("outside");
        std::fs::write(&outside, "secret\n").unwrap();
        let tc = d.join("class/infiniband/mlx5_2/tc/1/traffic_class");
        std::os::unix::fs::symlink(&outside, &tc).unwrap();
        let v = View::open(&d).unwrap();
        let rel = Path::new("class/infiniband/mlx5_2/tc/1/traffic_class");
        assert_eq!(v.read(rel), Err(SysfsError::Link));
        assert_eq!(v.write(rel, b"tclass=7"), Err(SysfsError::Link));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
        // An intermediate link that leaves the root is refused too.
        std::os::unix::fs::symlink("/etc", d.join("class/infiniband/evil")).unwrap();
        assert_eq!(
            v.read(Path::new("class/infiniband/evil/hostname")),
            Err(SysfsError::Escapes)
        );
        assert_eq!(v.read(Path::new("../x")), Err(SysfsError::Escapes));
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_file(&outside).unwrap();
    }

    #[test]
    fn read_write_list_in_a_test_tree() {
        let d = tree("rw");
        let v = View::open(&d).unwrap();
        let rel = Path::new("class/infiniband/mlx5_2/tc/1/traffic_class");
        assert_eq!(v.write(rel, b"tclass=41"), Err(SysfsError::Missing));
        std::fs::write(d.join(rel), "").unwrap();
        v.write(rel, b"tclass=41").unwrap();
        assert_eq!(v.read(rel).unwrap(), "tclass=41");
        assert_eq!(
            v.list(Path::new("class/infiniband")).unwrap(),
            vec!["mlx5_2".to_string()]
        );
        assert!(v.exists(rel));
        assert!(!v.exists(Path::new("class/infiniband/mlx5_9")));
        assert_eq!(
            v.read(Path::new("class/infiniband")),
            Err(SysfsError::NotAnAttribute)
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_real_sysfs_is_checked_by_filesystem() {
        let v = View::open(Path::new("/sys")).unwrap();
        assert!(v.read(Path::new("kernel/uevent_seqnum")).is_ok());
        // /sys/kernel/config is configfs only when mounted; if it is not,
        // the empty sysfs dir there must not pass for configfs.
        let _ = v.list(Path::new("kernel/config"));
    }

    /// A ".." resolved while anything on the system is renamed makes
    /// openat2 fail with EAGAIN; an ADD's state entry is written by rename,
    /// so a parallel ADD's lookup through `bus/pci/devices/<bdf>` (a
    /// `../../../devices/...` link) met it (tests/it/placement.rs, 16 rails).
    #[test]
    fn a_rename_elsewhere_does_not_fail_a_walk_through_dotdot() {
        let d = tree("rename");
        let dev = d.join("devices/pci0000:00/0000:00:01.0");
        std::fs::create_dir_all(dev.join("infiniband/mlx5_0")).unwrap();
        std::fs::create_dir_all(d.join("bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:01.0",
            d.join("bus/pci/devices/0000:00:01.0"),
        )
        .unwrap();
        let churn = d.join("churn");
        std::fs::write(&churn, "").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let renamer = {
            let (stop, a, b) = (stop.clone(), churn.clone(), d.join("churn2"));
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::rename(&a, &b);
                    let _ = std::fs::rename(&b, &a);
                }
            })
        };
        let v = View::open(&d).unwrap();
        let rel = Path::new("bus/pci/devices/0000:00:01.0/infiniband");
        let failed = (0..20_000).filter(|_| v.list(rel).is_err()).count();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        renamer.join().unwrap();
        assert_eq!(failed, 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn link_targets_resolve_beneath_the_root_without_following() {
        let d = tree("target");
        let dev = d.join("devices/pci0000:00/0000:00:01.1/0000:01:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(d.join("bus/pci/devices")).unwrap();
        let link = |name: &str, to: &str| {
            std::os::unix::fs::symlink(to, d.join("bus/pci/devices").join(name)).unwrap()
        };
        link(
            "0000:01:00.0",
            "../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0",
        );
        link("up", "../../../../etc");
        link("abs", "/etc");
        link("dot", "./x");
        link("ctl", "../a\u{1b}b");
        let v = View::open(&d).unwrap();
        let at = |n: &str| v.link_target(&Path::new("bus/pci/devices").join(n));
        assert_eq!(
            at("0000:01:00.0").unwrap(),
            PathBuf::from("devices/pci0000:00/0000:00:01.1/0000:01:00.0")
        );
        assert_eq!(at("up"), Err(SysfsError::Escapes));
        assert_eq!(at("abs"), Err(SysfsError::Escapes));
        assert_eq!(at("dot"), Err(SysfsError::NotAnAttribute));
        assert_eq!(at("ctl"), Err(SysfsError::NotAnAttribute));
        assert_eq!(at("absent"), Err(SysfsError::Missing));
        // A directory is not a link: readlinkat says EINVAL.
        assert_eq!(
            v.link_target(Path::new("devices/pci0000:00")),
            Err(SysfsError::Os(Errno::EINVAL))
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
