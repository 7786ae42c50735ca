//! A directory of the node's own: it and every parent owned by root, not
//! writable by group or others, none a symbolic link. A parent that others
//! can write lets them swap what is below it; ownership alone proves little
//! (docs/design.md, "Who writes what"). The state dir and the device-info
//! dir are held to this rule.
//!
//! Real nodes put links above such directories: `/var/run` is root's link to
//! `/run` on Debian, Ubuntu and RHEL (docs/design.md, "Who writes what"), and the
//! shipped `deviceInfoDir` is under it. So a node config path is resolved
//! once, when the node config is read (`Resolver`): a link above its last
//! component is followed only when root owns it and it sits in a directory
//! that root owns and nobody else can write, as does every directory above.
//! The resolved path then meets the no-follow rules here unchanged.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// The most symbolic links one path may pass through: the kernel's own
/// bound (`MAXSYMLINKS`, include/linux/namei.h; path_resolution(7)), past
/// which a walk is a loop.
pub const MAX_LINKS: usize = 40;

/// Why a directory is not the node's own, or could not be checked.
#[derive(Debug)]
pub enum DirError {
    /// Not a clean absolute path (relative, or with `..`).
    NotClean,
    /// A link where a real directory must be (the dir itself), and its owner.
    Link(PathBuf, u32),
    /// A link above the last component that root does not own, and its owner.
    LinkOwner(PathBuf, u32),
    /// A link in a directory that is not the node's own (`Owner`, `Writable`
    /// or `NotADir` of that directory or one above it): others could replace it.
    LinkIn(PathBuf, Box<DirError>),
    /// More than `MAX_LINKS` links on the way: a loop, or as good as one.
    TooManyLinks(PathBuf),
    NotADir(PathBuf),
    Owner(PathBuf, u32),
    Writable(PathBuf, u32),
    /// An OS error while checking or creating, kept for the caller.
    Io {
        what: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirError::NotClean => f.write_str("it is not a clean absolute path"),
            DirError::Link(p, uid) => write!(
                f,
                "{} is a symbolic link (owned by uid {uid}) where the directory itself must be: links are followed only above it; name the directory it points to",
                p.display()
            ),
            DirError::LinkOwner(p, uid) => write!(
                f,
                "{} is a symbolic link owned by uid {uid}, not root, who can point it anywhere: name the real path, or chown -h root {}",
                p.display(),
                p.display()
            ),
            DirError::LinkIn(p, why) => {
                let fix = match why.as_ref() {
                    DirError::Owner(d, _) => format!("chown root {}", d.display()),
                    DirError::Writable(d, _) => format!("chmod go-w {}", d.display()),
                    _ => "make it a directory of root's".into(),
                };
                write!(
                    f,
                    "{} is a symbolic link that others could replace, as {why}: name the real path, or {fix}",
                    p.display()
                )
            }
            DirError::TooManyLinks(p) => write!(
                f,
                "{} passes through more than {MAX_LINKS} symbolic links (a loop?): name the real path",
                p.display()
            ),
            DirError::NotADir(p) => write!(f, "{} is not a directory", p.display()),
            DirError::Owner(p, uid) => write!(f, "{} is owned by uid {uid}, not root", p.display()),
            DirError::Writable(p, mode) => write!(
                f,
                "{} is writable by group or others (mode {mode:o})",
                p.display()
            ),
            DirError::Io { what, path, err } => write!(f, "{what} {}: {err}", path.display()),
        }
    }
}

impl std::error::Error for DirError {}

/// Check `dir` and every ancestor, from the root down. A missing one is made
/// (0700) when `create`, else the answer is `Ok(None)`. The answer is what
/// the check saw of `dir` itself, so a caller need not stat it again.
pub fn check_chain(dir: &Path, create: bool) -> Result<Option<std::fs::Metadata>, DirError> {
    if !dir.is_absolute() || dir.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(DirError::NotClean);
    }
    let mut path = PathBuf::new();
    let mut last = None;
    for c in dir.components() {
        path.push(c);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    return Ok(None);
                }
                match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => {
                        return Err(DirError::Io {
                            what: "create",
                            path,
                            err,
                        })
                    }
                }
                std::fs::symlink_metadata(&path).map_err(|err| DirError::Io {
                    what: "stat",
                    path: path.clone(),
                    err,
                })?
            }
            Err(err) => {
                return Err(DirError::Io {
                    what: "stat",
                    path,
                    err,
                })
            }
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let uid = meta.uid();
            return Err(DirError::Link(path, uid));
        }
        if !ft.is_dir() {
            return Err(DirError::NotADir(path));
        }
        if meta.uid() != 0 {
            return Err(DirError::Owner(path, meta.uid()));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(DirError::Writable(path, meta.mode() & 0o7777));
        }
        last = Some(meta);
    }
    Ok(last)
}

/// Resolves the host paths of one node config (`resolve`). Most hold no
/// link: one `openat2(RESOLVE_NO_SYMLINKS)` of a path's directory proves it,
/// and only a directory where it meets a link is walked, one `lstat` a
/// component (docs/performance.md, "Host paths").
#[derive(Default)]
pub struct Resolver {
    /// Directories already resolved, and what they resolved to (bytes): a
    /// node config's paths often share one.
    dirs: Vec<(Vec<u8>, Vec<u8>)>,
    /// `/` as `lstat` saw it, once a link needed it.
    root: Option<(u32, u32)>,
}

impl Resolver {
    pub fn new() -> Resolver {
        Resolver::default()
    }

    /// `path` with every link above its last component replaced by where it
    /// points, each such link trusted: owned by root, in a directory that
    /// root owns and group and others cannot write, as is every directory
    /// above it (a link's own mode says nothing). The last component is
    /// never followed: it stays for the no-follow rules of whoever opens it
    /// (`check_chain` refuses a directory that is a link). A path without a
    /// link comes back as it is, and so does the rest of a path after a
    /// component that does not exist yet (nothing there can be a link).
    pub fn resolve(&mut self, path: &Path) -> Result<PathBuf, DirError> {
        // Bytes rather than `Path`'s components, parent and join, which
        // parse the path again at each call (most of this function's
        // instructions, measured).
        let bytes = path.as_os_str().as_encoded_bytes();
        if bytes.first() != Some(&b'/') || bytes.split(|&b| b == b'/').any(|c| c == b"..") {
            return Err(DirError::NotClean);
        }
        let trimmed = bytes.len() - bytes.iter().rev().take_while(|&&b| b == b'/').count();
        let Some(cut) = bytes[..trimmed].iter().rposition(|&b| b == b'/') else {
            return Ok(path.to_owned());
        };
        let dir = &bytes[..cut];
        let dir = &dir[..dir.len() - dir.iter().rev().take_while(|&&b| b == b'/').count()];
        let name = &bytes[cut..trimmed];
        if dir.is_empty() {
            return Ok(path.to_owned());
        }
        let real = match self.dirs.iter().find(|(d, _)| d.as_slice() == dir) {
            Some((_, real)) => real,
            None => {
                let d = Path::new(std::ffi::OsStr::from_bytes(dir));
                let real = if has_link(d) {
                    self.walk(path, d)?.into_os_string().into_vec()
                } else {
                    dir.to_vec()
                };
                self.dirs.push((dir.to_vec(), real));
                &self.dirs[self.dirs.len() - 1].1
            }
        };
        let mut joined = Vec::with_capacity(real.len() + name.len());
        if real != b"/" {
            joined.extend_from_slice(real);
        }
        joined.extend_from_slice(name);
        Ok(PathBuf::from(OsString::from_vec(joined)))
    }

    /// The real directory `dir` names (`path` is the whole path, for errors).
    /// `done` is what is resolved so far, real directories only, with the
    /// owner and mode of each (`chain`); `rest` what is left to walk.
    fn walk(&mut self, path: &Path, dir: &Path) -> Result<PathBuf, DirError> {
        let mut done: Vec<u8> = Vec::with_capacity(dir.as_os_str().len() + 32);
        let mut chain: Vec<Level> = Vec::new();
        let mut rest: Vec<u8> = dir.as_os_str().as_encoded_bytes().to_vec();
        let mut at = 0;
        let mut links = 0;
        loop {
            while rest.get(at) == Some(&b'/') {
                at += 1;
            }
            if at == rest.len() {
                break;
            }
            let end = rest[at..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(rest.len(), |n| at + n);
            let name = &rest[at..end];
            at = end;
            match name {
                b"." => continue,
                b".." => {
                    // `done` holds real directories only: `..` is its parent.
                    if let Some(up) = chain.pop() {
                        done.truncate(up.start);
                    }
                    continue;
                }
                _ => {}
            }
            let start = done.len();
            done.push(b'/');
            done.extend_from_slice(name);
            let here = Path::new(std::ffi::OsStr::from_bytes(&done));
            // nix's lstat, not std's symlink_metadata (statx and its
            // conversions): the walk's main cost.
            let st = match nix::sys::stat::lstat(here) {
                Ok(st) => st,
                // ENOTDIR too: whatever is below a file is missing, and the
                // rest cannot hold a link yet.
                Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => {
                    done.extend_from_slice(&rest[at..]);
                    return Ok(PathBuf::from(OsString::from_vec(done)));
                }
                Err(e) => return Err(io("examine", here, e.into())),
            };
            if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFLNK {
                chain.push(Level {
                    start,
                    uid: st.st_uid,
                    mode: st.st_mode,
                });
                continue;
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(DirError::TooManyLinks(path.to_owned()));
            }
            let link = PathBuf::from(here);
            let target = std::fs::read_link(&link).map_err(|e| io("read link", &link, e))?;
            done.truncate(start);
            self.closed_to_others(&done, &chain)
                .map_err(|why| DirError::LinkIn(link.clone(), Box::new(why)))?;
            if st.st_uid != 0 {
                return Err(DirError::LinkOwner(link, st.st_uid));
            }
            let target = target.as_os_str().as_encoded_bytes();
            if target.first() == Some(&b'/') {
                done.clear();
                chain.clear();
            }
            let mut next = Vec::with_capacity(target.len() + 1 + rest.len() - at);
            next.extend_from_slice(target);
            next.push(b'/');
            next.extend_from_slice(&rest[at..]);
            rest = next;
            at = 0;
        }
        if done.is_empty() {
            done.push(b'/');
        }
        Ok(PathBuf::from(OsString::from_vec(done)))
    }

    /// `/` and every directory of `chain` (which `done` spells): root's, not
    /// writable by group or others. A fault is named for the highest
    /// directory that has it.
    fn closed_to_others(&mut self, done: &[u8], chain: &[Level]) -> Result<(), DirError> {
        let (uid, mode) = match self.root {
            Some(r) => r,
            None => {
                let m = std::fs::symlink_metadata("/").map_err(|e| io("examine", "/", e))?;
                *self.root.insert((m.uid(), m.mode()))
            }
        };
        let dir = |end: usize| PathBuf::from(std::ffi::OsStr::from_bytes(&done[..end]));
        let ends = chain
            .iter()
            .skip(1)
            .map(|l| l.start)
            .chain(std::iter::once(done.len()));
        let levels = std::iter::once((PathBuf::from("/"), uid, mode, true)).chain(
            chain
                .iter()
                .zip(ends)
                .map(|(l, end)| (dir(end), l.uid, l.mode, l.mode & 0o170000 == 0o040000)),
        );
        for (d, uid, mode, is_dir) in levels {
            if !is_dir {
                return Err(DirError::NotADir(d));
            }
            if uid != 0 {
                return Err(DirError::Owner(d, uid));
            }
            if mode & 0o022 != 0 {
                return Err(DirError::Writable(d, mode & 0o7777));
            }
        }
        Ok(())
    }
}

/// One real directory of a walk: where its name starts in `done`, and what
/// `lstat` said of it.
struct Level {
    start: usize,
    uid: u32,
    mode: u32,
}

fn io(what: &'static str, path: impl AsRef<Path>, err: std::io::Error) -> DirError {
    DirError::Io {
        what,
        path: path.as_ref().to_owned(),
        err,
    }
}

/// Whether the walk to `dir` meets a link. No answer for sure (a kernel
/// before 5.6, or valgrind 3.19, which has no openat2; an odd error) counts
/// as yes: the walk decides.
fn has_link(dir: &Path) -> bool {
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    match openat2(AT_FDCWD, dir, how) {
        Ok(_fd) => false,
        // The kernel's walk stops at the first component that is missing or
        // not a directory: no link came before it, and nothing after exists.
        Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// A tree under `/run` whose every directory is root's and closed to
    /// others, as a node's are; removed on drop. `None` (said on stderr, a
    /// failure under ROCE_TUNE_REQUIRE_ROOT=1) when not root: only root's
    /// links and directories are trusted, so only root can make them.
    struct Tree(PathBuf);

    impl Tree {
        fn new(tag: &str) -> Option<Tree> {
            let test = format!("safe_dir::{tag}");
            if !crate::process::test_runs_as_root(&test, "root-owned links and directories") {
                return None;
            }
            let base = Path::new("/run/roce-tune-tests");
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(base)
                .unwrap();
            let d = base.join(format!("safe-dir-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::DirBuilder::new().mode(0o755).create(&d).unwrap();
            Some(Tree(d))
        }

        fn dir(&self, rel: &str) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(&p)
                .unwrap();
            p
        }

        fn link(&self, rel: &str, to: impl AsRef<Path>) -> PathBuf {
            let p = self.0.join(rel);
            symlink(to, &p).unwrap();
            p
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn resolve(p: &Path) -> Result<PathBuf, DirError> {
        Resolver::new().resolve(p)
    }

    #[test]
    fn a_root_link_in_a_root_dir_is_followed() {
        let Some(t) = Tree::new("root-link") else {
            return;
        };
        t.dir("run/devinfo");
        t.dir("var");
        // systemd's tmpfiles.d link, and Debian's.
        let rel = t.link("var/run", "../run");
        assert_eq!(
            resolve(&rel.join("devinfo/cni")).unwrap(),
            t.0.join("run/devinfo/cni")
        );
        std::fs::remove_file(&rel).unwrap();
        t.link("var/run", t.0.join("run"));
        assert_eq!(
            resolve(&rel.join("devinfo/cni")).unwrap(),
            t.0.join("run/devinfo/cni")
        );
        // A link to a link, a `..` in a target, and a tail that does not
        // exist yet (made later by check_chain, as a real directory).
        t.link("again", "var/run");
        t.dir("deep/er");
        t.link("deep/er/up", "../../again");
        assert_eq!(
            resolve(&t.0.join("deep/er/up/new/state")).unwrap(),
            t.0.join("run/new/state")
        );
        // A link to `/`, and a trailing slash.
        t.link("top", "/");
        assert_eq!(
            resolve(&t.0.join("top/run/x/")).unwrap(),
            Path::new("/run/x")
        );
        // No link: the path as it is, whether the kernel's openat2 says so
        // or the walk does (where there is no openat2).
        let plain = t.0.join("run/devinfo/cni");
        assert_eq!(resolve(&plain).unwrap(), plain);
        let dir = plain.parent().unwrap();
        assert_eq!(Resolver::new().walk(&plain, dir).unwrap(), dir);
        let missing = t.0.join("run/not/yet");
        assert_eq!(Resolver::new().walk(&missing, &missing).unwrap(), missing);
        assert_eq!(resolve(Path::new("/sys")).unwrap(), Path::new("/sys"));
        assert!(matches!(
            resolve(Path::new("run/x")),
            Err(DirError::NotClean)
        ));
    }

    #[test]
    fn a_link_another_uid_owns_is_refused() {
        let Some(t) = Tree::new("other-uid") else {
            return;
        };
        t.dir("run");
        t.dir("var");
        let link = t.link("var/run", "../run");
        std::os::unix::fs::lchown(&link, Some(1000), None).unwrap();
        let e = resolve(&link.join("devinfo/cni")).unwrap_err();
        assert!(
            matches!(&e, DirError::LinkOwner(p, 1000) if *p == link),
            "{e}"
        );
        let msg = e.to_string();
        assert!(msg.contains("owned by uid 1000"), "{msg}");
        assert!(
            msg.contains(&format!("chown -h root {}", link.display())),
            "{msg}"
        );
    }

    #[test]
    fn a_link_in_a_dir_others_can_write_is_refused() {
        let Some(t) = Tree::new("group-writable") else {
            return;
        };
        t.dir("run");
        let var = t.dir("var");
        let link = t.link("var/run", "../run");
        std::fs::set_permissions(&var, std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = resolve(&link.join("state")).unwrap_err();
        assert!(
            matches!(&e, DirError::LinkIn(l, why)
                if *l == link && matches!(why.as_ref(), DirError::Writable(d, 0o775) if *d == var)),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains(&format!("chmod go-w {}", var.display())),
            "{e}"
        );
        // A directory higher up that others can write is as bad, and named.
        std::fs::set_permissions(&var, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = resolve(&link.join("state")).unwrap_err();
        assert!(
            matches!(&e, DirError::LinkIn(_, why)
                if matches!(why.as_ref(), DirError::Writable(d, 0o1777) if *d == t.0)),
            "{e}"
        );
        // So is one another uid owns.
        std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&var, Some(1000), None).unwrap();
        let e = resolve(&link.join("state")).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("{} is owned by uid 1000", var.display())),
            "{e}"
        );
    }

    #[test]
    fn a_link_at_the_last_component_is_not_followed_and_the_dir_check_refuses_it() {
        let Some(t) = Tree::new("last") else {
            return;
        };
        t.dir("real-state");
        let link = t.link("state", "real-state");
        assert_eq!(resolve(&link).unwrap(), link, "never followed");
        let e = check_chain(&link, false).unwrap_err();
        assert!(matches!(&e, DirError::Link(p, 0) if *p == link), "{e}");
        assert!(
            e.to_string().contains("name the directory it points to"),
            "{e}"
        );
    }

    #[test]
    fn a_link_loop_is_refused_after_the_kernels_bound() {
        let Some(t) = Tree::new("loop") else {
            return;
        };
        t.link("a", "b");
        t.link("b", "a");
        let e = resolve(&t.0.join("a/state")).unwrap_err();
        assert!(matches!(e, DirError::TooManyLinks(_)), "{e}");
        t.link("self", "self");
        assert!(matches!(
            resolve(&t.0.join("self/x")),
            Err(DirError::TooManyLinks(_))
        ));
        // 40 links on the way are followed, as the kernel follows them; 41 are not.
        t.dir("end");
        for i in 0..41 {
            let next = if i == 40 {
                "end".to_string()
            } else {
                format!("l{}", i + 1)
            };
            t.link(&format!("l{i}"), next);
        }
        assert_eq!(resolve(&t.0.join("l1/x")).unwrap(), t.0.join("end/x"));
        assert!(matches!(
            resolve(&t.0.join("l0/x")),
            Err(DirError::TooManyLinks(_))
        ));
    }
}
