//! A directory of the node's own: it and every parent owned by root, not
//! writable by group or others, none a symbolic link. A parent that others
//! can write lets them swap what is below it; ownership alone proves little
//! (docs/design.md, "Who writes what"). The state dir and the device-info
//! dir are held to this rule.

use std::fmt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// Why a directory is not the node's own, or could not be checked.
#[derive(Debug)]
pub enum DirError {
    /// Not a clean absolute path (relative, or with `..`).
    NotClean,
    Link(PathBuf),
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
            DirError::Link(p) => write!(f, "{} is a symbolic link", p.display()),
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
            return Err(DirError::Link(path));
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
