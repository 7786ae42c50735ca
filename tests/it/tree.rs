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
            // `(#106-placement--the-pod-is-starved)`: a markdown anchor
            // of a heading that starts with a number (an error code).
            let anchor = b.get(end) == Some(&b'-');
            if all_digits && !named && !anchor {
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
        "([106](#106-placement--the-pod-is-starved))",
        "stop 31.5 and 58.0; stopped 3; nonstop 4; #[cfg(test)]; #!/bin/sh; # 1.",
    ];
    for s in spared {
        assert_eq!(hits(s), Vec::<String>::new(), "{s}");
    }
}

/// The most code lines a source file of src/ may hold before its tests: a
/// file past it holds more than one concern (docs/contributing.md, "Layout").
const MAX_CODE_LINES: usize = 650;

/// A file's code lines before its tests: the lines that are neither blank
/// nor a comment (`//`, `///`, `//!`, and the lines of a `/* */` that starts
/// a line), up to the first `#[cfg(test)]` that opens an inline module
/// (`mod tests {`). An out-of-line `#[cfg(test)] mod tests;` ends nothing:
/// the file's tests are in the file it names, which is not counted.
fn code_lines(src: &str) -> usize {
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    let mut n = 0;
    let mut in_block = false;
    for (i, l) in lines.iter().enumerate() {
        if in_block {
            in_block = !l.contains("*/");
            continue;
        }
        if *l == "#[cfg(test)]"
            && lines[i + 1..]
                .iter()
                .find(|l| !l.is_empty() && !l.starts_with("#[") && !l.starts_with("//"))
                .is_some_and(|next| {
                    let next = next
                        .trim_start_matches("pub(crate) ")
                        .trim_start_matches("pub ");
                    next.starts_with("mod ") && next.ends_with('{')
                })
        {
            break;
        }
        if l.is_empty() || l.starts_with("//") {
            continue;
        }
        if l.starts_with("/*") {
            in_block = !l.contains("*/");
            continue;
        }
        n += 1;
    }
    n
}

/// Whether `file` is itself a test module: declared `#[cfg(test)] mod
/// <name>;` by its parent (the `mod.rs`, `lib.rs` or `<dir>.rs` that
/// declares it), or opening with `#![cfg(test)]`.
fn is_test_module(src_dir: &Path, file: &Path, text: &str) -> bool {
    if text.lines().any(|l| l.trim() == "#![cfg(test)]") {
        return true;
    }
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    let (name, dir) = if stem == "mod" {
        let d = file.parent().unwrap();
        (
            d.file_name().unwrap().to_string_lossy().into_owned(),
            d.parent().unwrap(),
        )
    } else {
        (stem, file.parent().unwrap())
    };
    let mut parents = vec![dir.join("mod.rs"), dir.with_extension("rs")];
    if dir == src_dir {
        parents = vec![dir.join("lib.rs"), dir.join("main.rs")];
    }
    let decl = format!("mod {name};");
    parents.iter().any(|p| {
        let Ok(parent) = std::fs::read_to_string(p) else {
            return false;
        };
        let lines: Vec<&str> = parent.lines().map(str::trim).collect();
        lines.iter().enumerate().any(|(i, l)| {
            l.ends_with(&decl)
                && (l.starts_with("#[cfg(test)]")
                    || lines[..i]
                        .iter()
                        .rev()
                        .find(|l| !l.is_empty())
                        .is_some_and(|prev| *prev == "#[cfg(test)]"))
        })
    })
}

/// Every source file of src/ and its code lines, test modules left out,
/// most first.
fn sizes() -> Vec<(usize, String)> {
    let src = repo().join("src");
    let mut files = Vec::new();
    files_under(&src, &mut files);
    let mut out: Vec<(usize, String)> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "rs"))
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            (!is_test_module(&src, f, &text)).then(|| {
                (
                    code_lines(&text),
                    f.strip_prefix(repo()).unwrap().display().to_string(),
                )
            })
        })
        .collect();
    out.sort_by(|a, b| b.cmp(a));
    out
}

#[test]
fn no_source_file_holds_more_than_650_code_lines_before_its_tests() {
    let sizes = sizes();
    assert!(sizes.len() > 80, "only {} source files found", sizes.len());
    // Measured with the rule above: `cargo test --test it tree:: -- --nocapture`.
    println!("largest source files, code lines before their tests:");
    for (n, f) in sizes.iter().take(10) {
        println!("  {n:5} {f}");
    }
    let over: Vec<String> = sizes
        .iter()
        .filter(|(n, _)| *n > MAX_CODE_LINES)
        .map(|(n, f)| format!("{f}: {n}"))
        .collect();
    assert!(
        over.is_empty(),
        "source files past {MAX_CODE_LINES} code lines before their tests:\n  {}\n\
         Split each where its concerns part (a folder of one concern per file, its mod.rs \
         re-exporting what callers name).",
        over.join("\n  ")
    );
}

#[test]
fn the_line_counter_counts_code_and_knows_a_test_module() {
    let src = "//! doc\n\nuse x;\n/* a\n b */\nfn a() {}\n#[cfg(test)]\nmod tests;\n\
               fn b() {\n    // c\n    1\n}\n#[cfg(test)]\n#[allow(dead_code)]\n\
               pub(crate) mod tests2 {\n    fn t() {}\n}\n";
    // use, fn a, the out-of-line `#[cfg(test)]` and its `mod`, fn b's three
    // lines: the inline test module ends the count.
    assert_eq!(code_lines(src), 7);
    // A module `m` of a scratch crate, its files named piece by piece.
    let dir = std::env::temp_dir().join(crate::common::unique("rt-tree-"));
    let src_dir = dir.join("src");
    let m = src_dir.join("m");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join("mod.rs"), "mod a;\n#[cfg(test)]\nmod tests;\n").unwrap();
    assert!(is_test_module(&src_dir, &m.join("tests.rs"), ""));
    assert!(!is_test_module(&src_dir, &m.join("a.rs"), ""));
    assert!(is_test_module(&src_dir, &m.join("b.rs"), "#![cfg(test)]\n"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Where a file's unit tests are, or `Err` naming what breaks the one
/// convention (docs/contributing.md, "Layout"): a `#[cfg(test)]` module is
/// named `tests`, and an inline one is the file's last item.
fn test_home(text: &str) -> Result<(), String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] != "#[cfg(test)]" {
            i += 1;
            continue;
        }
        let Some((at, item)) = lines[i + 1..]
            .iter()
            .enumerate()
            .find(|(_, l)| !l.trim().is_empty() && !l.starts_with("#[") && !l.starts_with("//"))
        else {
            return Ok(());
        };
        let at = i + 1 + at;
        let item = item
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ");
        let Some(name) = item.strip_prefix("mod ") else {
            // A test-only item at the top of a file (a helper the tests
            // share): not a module, no home to check.
            i = at + 1;
            continue;
        };
        let name = name.trim_end_matches([';', '{', ' ']);
        if name != "tests" {
            return Err(format!(
                "line {}: a test module named `{name}`, not `tests`",
                at + 1
            ));
        }
        if item.ends_with('{') {
            let Some(end) = lines[at..].iter().position(|l| *l == "}") else {
                return Err(format!("line {}: `mod tests {{` never closes", at + 1));
            };
            let after = lines[at + end + 1..]
                .iter()
                .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//"));
            if let Some(k) = after {
                return Err(format!(
                    "line {}: code after the inline test module, which must be the file's \
                     last item",
                    at + end + 2 + k
                ));
            }
            return Ok(());
        }
        i = at + 1;
    }
    Ok(())
}

#[test]
fn unit_tests_live_in_one_place() {
    let src = repo().join("src");
    let mut files = Vec::new();
    files_under(&src, &mut files);
    let mut wrong = Vec::new();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "rs"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.strip_prefix(repo()).unwrap().display().to_string();
        if is_test_module(&src, f, &text) {
            if f.file_name().is_some_and(|n| n != "tests.rs") {
                wrong.push(format!("{name}: a test-only file not named tests.rs"));
            }
            continue;
        }
        if let Err(e) = test_home(&text) {
            wrong.push(format!("{name}: {e}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "unit tests out of their one place (docs/contributing.md: a file's own at its end in \
         `#[cfg(test)] mod tests {{ ... }}`, a folder's in its tests.rs):\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_test_home_reader_finds_each_misplaced_module() {
    let ok = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    assert_eq!(test_home(ok), Ok(()));
    assert_eq!(
        test_home("mod a;\n#[cfg(test)]\nmod tests;\nfn b() {}\n"),
        Ok(())
    );
    let named = "fn a() {}\n#[cfg(test)]\nmod unit {\n}\n";
    assert!(test_home(named).unwrap_err().contains("named `unit`"));
    let after = "#[cfg(test)]\nmod tests {\n}\n\nfn late() {}\n";
    assert!(test_home(after).unwrap_err().contains("line 5: code after"));
    // A test-only helper above the code is no module.
    assert_eq!(
        test_home("#[cfg(test)]\nfn helper() {}\nfn a() {}\n"),
        Ok(())
    );
}
