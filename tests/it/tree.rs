//! The tree a reader meets: no comment or page points to a tracker the
//! reader does not have. No root needed: it reads files.
//!
//! A tracker reference, as this test finds it (case aside):
//! - `issue` or `issues`, then a number: `issue 27`, `issues 25 to 28`,
//!   `issue #4`, `issue-20`, and across a line break and its comment leader
//!   (`issue` at the end of one `//!` line, `25` at the start of the next);
//! - `#` and a number after a space or `(` (`see #12`): not an upstream
//!   pull request named with its project (`containerd PR #9744`,
//!   `owner/repo#12`), a shell pattern (`${x#0000:}`) or a format (`%s#0`);
//! - `stop` and a whole number (`stop 3`): not a measure (`stop 31.5`).
//!
//! RFC numbers, kernel commit ids, error codes (`code 104`) and section
//! numbers of the brief docs/design.md names (`2.4, the kernel lane`) are
//! none of these. Where it looks: `TREES` and `FILES` below, every UTF-8
//! file, skipping what is fetched or built (`SKIPPED`, and any directory
//! whose name starts with a dot: `integration/.build`), and this file,
//! which names the forms to test the reader.

use crate::common::repo;
use std::path::{Path, PathBuf};

/// The trees a reader reads: the code, its docs, its tests, the bench, the
/// integration harness with the kernel lane, the fuzz targets, the shipped
/// manifests, the make fragments and the examples.
const TREES: &[&str] = &[
    "src",
    "docs",
    "tests",
    "bench",
    "integration",
    "fuzz",
    "conf",
    "mk",
    "examples",
];
const FILES: &[&str] = &["Makefile", "README.md", "CHANGELOG.md", "Cargo.toml"];
/// Directories that are fetched or built, not written here.
const SKIPPED: &[&str] = &[
    "target",
    "corpus",
    "artifacts",
    "__pycache__",
    "node_modules",
];

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            if !name.starts_with('.') && !SKIPPED.contains(&name.as_str()) {
                files_under(&p, out);
            }
        } else if ty.is_file() {
            out.push(p);
        }
    }
}

fn word_before(b: &[u8], at: usize) -> &[u8] {
    let end = b[..at]
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let start = b[..end]
        .iter()
        .rposition(|c| c.is_ascii_whitespace() || *c == b'(')
        .map_or(0, |i| i + 1);
    &b[start..end]
}

/// The tracker references of `text`, each as the line it starts on and the
/// words found.
fn tracker_refs(text: &str) -> Vec<(usize, String)> {
    let lower = text.to_ascii_lowercase();
    let b = lower.as_bytes();
    let line_of = |at: usize| b[..at].iter().filter(|c| **c == b'\n').count() + 1;
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || !is_word(b[i - 1]);
        // `issue`/`issues`, then a number, maybe past a line break.
        if starts_word && b[i..].starts_with(b"issue") {
            let mut j = i + "issue".len();
            if b.get(j) == Some(&b's') {
                j += 1;
            }
            let mut k = j;
            let mut new_line = false;
            while k < b.len() {
                match b[k] {
                    b' ' | b'\t' | b'\r' => k += 1,
                    b'\n' => {
                        new_line = true;
                        k += 1
                    }
                    b'/' | b'!' | b'#' | b'*' if new_line => k += 1,
                    b'#' => k += 1,
                    b'-' if k == j => k += 1,
                    _ => break,
                }
            }
            if k > j && b.get(k).is_some_and(u8::is_ascii_digit) {
                let end = (k..b.len())
                    .find(|&e| !b[e].is_ascii_digit())
                    .unwrap_or(b.len());
                found.push((
                    line_of(i),
                    text[i..end]
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                ));
            }
        }
        // `#` and a number, after a space or `(`, not an upstream PR.
        if b[i] == b'#'
            && (i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n' | b'('))
            && b.get(i + 1).is_some_and(u8::is_ascii_digit)
        {
            let end = (i + 1..b.len())
                .find(|&k| !is_word(b[k]))
                .unwrap_or(b.len());
            let all_digits = b[i + 1..end].iter().all(u8::is_ascii_digit);
            let before = word_before(b, i);
            let named = matches!(before, b"pr" | b"issue" | b"issues") || before.contains(&b'/');
            if all_digits && !named {
                found.push((line_of(i), text[i..end].to_owned()));
            }
        }
        // `stop` and a whole number.
        if starts_word && b[i..].starts_with(b"stop ") {
            let j = i + "stop ".len();
            let end = (j..b.len())
                .find(|&k| !b[k].is_ascii_digit())
                .unwrap_or(b.len());
            let whole = end > j
                && !(b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit));
            if whole && !b.get(end).copied().is_some_and(is_word) {
                found.push((line_of(i), text[i..end].to_owned()));
            }
        }
        i += 1;
    }
    found
}

#[test]
fn no_comment_or_page_names_a_tracker_number() {
    let root = repo();
    let mut files = Vec::new();
    for t in TREES {
        files_under(&root.join(t), &mut files);
    }
    files.extend(FILES.iter().map(|f| root.join(f)));
    files.sort();
    let mut read = 0;
    let mut refs = Vec::new();
    // This file names the forms it finds, to test the reader.
    let me = root.join("tests/it/tree.rs");
    for f in files.iter().filter(|f| **f != me) {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue; // not UTF-8: a capture, an image
        };
        read += 1;
        for (line, what) in tracker_refs(&text) {
            refs.push(format!(
                "{}:{line}: {what:?}",
                f.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(read > 300, "only {read} files read: the walk is broken");
    assert!(
        refs.is_empty(),
        "references to a tracker the reader does not have:\n  {}\n\
         Say the why in its own words (what was measured, what broke, what the rule is).",
        refs.join("\n  ")
    );
}

#[test]
fn the_tracker_reader_sees_every_form_and_spares_the_rest() {
    let hits = |s: &str| -> Vec<String> { tracker_refs(s).into_iter().map(|(_, w)| w).collect() };
    assert_eq!(hits("DRA rails (issue 27): the netdevs"), ["issue 27"]);
    assert_eq!(hits("Issues 25 to 28"), ["Issues 25"]);
    assert_eq!(hits("see issue #4 and issue-20"), ["issue #4", "issue-20"]);
    assert_eq!(hits("guards (issue\n//! 25: a 1.4 MB"), ["issue //! 25"]);
    assert_eq!(hits("as in #12."), ["#12"]);
    assert_eq!(hits("(#3)"), ["#3"]);
    assert_eq!(hits("after stop 3, go"), ["stop 3"]);
    let spared = [
        "RFC 7541, section 4.1; code 104; commit 8f2a1c0",
        "containerd PR #9744; containerd/nri#12",
        "slot=\"${slot#0000:00:}\"; \"%s#0:%d\"; r#\"x\"#",
        "the issue is that; tissue 3; issued 4",
        "stop 31.5 and 58.0; stopped 3; nonstop 4; #[cfg(test)]; #!/bin/sh; # 1.",
    ];
    for s in spared {
        assert_eq!(hits(s), Vec::<String>::new(), "{s}");
    }
}
