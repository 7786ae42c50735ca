//! What both binaries were built from: Cargo.toml's version and the git
//! revision, so that `--version` and the agent's `roce_tune_build_info` say
//! which build a node runs.
//!
//! The revision comes from the environment of the build, `ROCE_TUNE_REVISION`,
//! which `make release` sets (12 hex digits of `git rev-parse HEAD`, then
//! `-dirty` when tracked files had uncommitted changes); a build without it
//! (plain `cargo build`, a source tarball without `.git`) says `unknown`. Not
//! a build script running git: its `rerun-if-changed` on `.git/HEAD` and the
//! branch's ref would rebuild the whole crate after every commit and checkout
//! in every profile (tests, fuzz, release), for a line only the shipped
//! binaries need; and a tarball without `.git` would leave it watching files
//! that are not there. The cost of this way: a binary built by plain cargo
//! from a checkout says `unknown` too. rustc records the variable as an input
//! of the crate, so a new revision rebuilds `make release` and nothing else.

/// Cargo.toml's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git revision the build was made from: 12 lowercase hex digits, with
/// `-dirty` when the tree had uncommitted changes, or `unknown`.
pub const REVISION: &str = match option_env!("ROCE_TUNE_REVISION") {
    Some(r) => r,
    None => UNKNOWN,
};

/// What `REVISION` is without a revision.
pub const UNKNOWN: &str = "unknown";

// A malformed value is the Makefile's mistake: it fails the build, it never
// reaches a node's `--version`.
const _: () = assert!(
    is_revision(REVISION),
    "ROCE_TUNE_REVISION must be 12 lowercase hex digits, optionally followed by -dirty, or unknown"
);

/// Whether `s` is what `REVISION` may hold.
pub const fn is_revision(s: &str) -> bool {
    let b = s.as_bytes();
    if eq(b, UNKNOWN.as_bytes()) {
        return true;
    }
    let hex = match b.len() {
        12 => b,
        18 if eq(tail(b, 12), b"-dirty") => head(b, 12),
        _ => return false,
    };
    let mut i = 0;
    while i < hex.len() {
        if !matches!(hex[i], b'0'..=b'9' | b'a'..=b'f') {
            return false;
        }
        i += 1;
    }
    true
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn head(b: &[u8], n: usize) -> &[u8] {
    b.split_at(n).0
}

const fn tail(b: &[u8], n: usize) -> &[u8] {
    b.split_at(n).1
}

/// `<binary> <version> (revision <revision>[; <more>])`: the first line of
/// both binaries' `--version`.
pub fn version_line(binary: &str, more: Option<&str>) -> String {
    match more {
        Some(m) => format!("{binary} {VERSION} (revision {REVISION}; {m})"),
        None => format!("{binary} {VERSION} (revision {REVISION})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_twelve_hex_digits_maybe_dirty_or_unknown() {
        for ok in ["0123456789ab", "0123456789ab-dirty", "unknown"] {
            assert!(is_revision(ok), "{ok}");
        }
        for bad in [
            "",
            "0123456789a",
            "0123456789abc",
            "0123456789AB",
            "0123456789ag",
            "0123456789ab-",
            "0123456789ab-dirtx",
            "0123456789ab-dirty-dirty",
            "0123456789abcdef0123456789abcdef01234567",
            "Unknown",
        ] {
            assert!(!is_revision(bad), "{bad:?}");
        }
        assert!(is_revision(REVISION), "{REVISION}");
    }

    #[test]
    fn the_version_line_names_version_and_revision() {
        assert_eq!(
            version_line("roce-tune-agent", None),
            format!("roce-tune-agent {VERSION} (revision {REVISION})")
        );
        assert_eq!(
            version_line("roce-tune", Some("CNI 1.1.0")),
            format!("roce-tune {VERSION} (revision {REVISION}; CNI 1.1.0)")
        );
    }
}
