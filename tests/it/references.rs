//! References resolve inside the repository. Code and docs point at each
//! other by section (`docs/design.md, "The GID table"`, `README, "Try
//! it"`), by path (`src/rdma/lookup.rs`, `integration/kernel/scenarios.sh`) and
//! by Markdown link (`[x](docs/deploy.md#uninstall)`). A rename or a moved
//! file leaves such a pointer dangling without any build noticing; this test
//! notices. No root needed: it reads files.
//!
//! The same holds for a test command a comment or a doc tells the reader to
//! run (`cargo test --test it inspect::`): its binary and its filter must
//! name tests that exist. And every file a reader meets is read: the fuzz
//! workspace, the make fragments and the requirement lists too (a path in
//! `fuzz/run.sh`'s comment and one in a `.txt` once pointed at test files
//! that had moved into `tests/it/`).

use crate::common::repo;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The files whose text may cite: source, tests, docs, scripts, configs.
/// Not generated output (`bench/results/`), not build trees.
fn citing_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                let skip = name.starts_with('.') && name != ".ci"
                    || [
                        "target",
                        "results",
                        "testdata",
                        "node_modules",
                        "__pycache__",
                        // The fuzz workspace's build tree, its corpus and
                        // crash inputs (.gitignore): not ours to cite from.
                        "corpus",
                        "artifacts",
                    ]
                    .contains(&name.as_str());
                if !skip {
                    walk(&p, out);
                }
            } else {
                let ext = p.extension().map(|x| x.to_string_lossy().to_string());
                let texty = matches!(
                    ext.as_deref(),
                    Some(
                        "rs" | "md" | "sh" | "py" | "yaml" | "yml" | "json" | "toml" | "mk" | "txt"
                    )
                ) || ["Makefile", "run", "Containerfile"].contains(&name.as_str());
                if texty {
                    out.push(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    for top in [
        "src",
        "tests",
        "docs",
        "integration",
        "bench",
        "conf",
        ".ci",
        "fuzz",
        "mk",
    ] {
        walk(&repo().join(top), &mut out);
    }
    for f in ["README.md", "Makefile", "Cargo.toml"] {
        out.push(repo().join(f));
    }
    out.sort();
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(repo()).unwrap().display().to_string()
}

/// The headings of a Markdown file, without their `#`s.
fn headings(doc: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(doc).unwrap_or_default();
    let mut in_fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            out.push(line.trim_start_matches('#').trim().to_string());
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to '-', punctuation
/// other than '-' and '_' dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The document a citation names: `README`, `README.md` or a file of docs/.
fn cited_doc(name: &str) -> PathBuf {
    if name.starts_with("README") {
        repo().join("README.md")
    } else {
        repo().join(name)
    }
}

/// Every `<doc>, "<section>"` in `text`, doc being README or docs/*.md.
fn section_citations(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(", \"") {
        let before = &text[..at];
        let doc_start = before
            .char_indices()
            .rfind(|&(_, c)| !(c.is_alphanumeric() || "/._-".contains(c)))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let doc = &before[doc_start..];
        let is_doc = doc == "README"
            || doc == "README.md"
            || doc.starts_with("docs/") && doc.ends_with(".md");
        if !is_doc {
            continue;
        }
        let after = &text[at + 3..];
        let Some(end) = after.find('"') else { continue };
        // A section name is one line; a quote left open is not a citation.
        let section = after[..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !section.is_empty() && end < 80 {
            out.push((doc.to_string(), section));
        }
    }
    out
}

/// A file's text with its lines joined and comment markers dropped: a
/// citation or a command may wrap inside a comment.
fn joined_text(file: &Path) -> String {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            l.trim_start()
                .trim_start_matches("//!")
                .trim_start_matches("///")
                .trim_start_matches("//")
                .trim_start_matches('#')
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_cited_section_exists() {
    let mut dangling = Vec::new();
    let mut seen = 0;
    for file in citing_files() {
        for (doc, section) in section_citations(&joined_text(&file)) {
            seen += 1;
            let heads = headings(&cited_doc(&doc));
            // "Who writes what" names "Who writes what (the trust boundary)".
            if !heads.iter().any(|h| h.starts_with(&section)) {
                dangling.push(format!("{}: {doc}, \"{section}\"", rel(&file)));
            }
        }
    }
    assert!(
        seen > 30,
        "only {seen} section citations found: the reader is broken"
    );
    assert!(
        dangling.is_empty(),
        "citations of sections that do not exist (no heading starts so):\n  {}",
        dangling.join("\n  ")
    );
}

/// Paths into the repository named in text: a run of path characters
/// starting at a top directory, ending in a file name with an extension or
/// a '/'. Placeholders (`<dev>`), globs and host paths are not paths here.
fn repo_paths(text: &str) -> BTreeSet<String> {
    const TOPS: [&str; 9] = [
        "src/",
        "tests/",
        "docs/",
        "integration/",
        "bench/",
        "conf/",
        ".ci/",
        "fuzz/",
        "mk/",
    ];
    let is_path_char = |c: char| c.is_alphanumeric() || "/._-".contains(c);
    let mut out = BTreeSet::new();
    for top in TOPS {
        for (at, _) in text.match_indices(top) {
            if text[..at].ends_with(|c: char| is_path_char(c) || c == '$' || c == '}') {
                continue; // inside a longer path (/sys/.../src/) or a variable
            }
            let rest = &text[at..];
            let end = rest.find(|c: char| !is_path_char(c)).unwrap_or(rest.len());
            let next = rest[end..].chars().next();
            if matches!(next, Some('<' | '*' | '{' | '$')) {
                continue;
            }
            let path = rest[..end].trim_end_matches(['.', ',']);
            let last = path.rsplit('/').next().unwrap();
            if path.ends_with('/') || last.contains('.') {
                out.insert(path.to_string());
            }
        }
    }
    out
}

/// Paths of other repositories that the code cites as sources, by the
/// prefix they start with. Each prefix must not exist here, so this list
/// can never hide a path of our own.
const EXTERNAL: [(&str, &str); 11] = [
    ("src/graph/", "NVIDIA/nccl (docs/topology.md)"),
    ("src/include/graph.h", "NVIDIA/nccl"),
    (
        "src/misc/",
        "NVIDIA/nccl (docs/design.md, NCCL's and UCX's variables)",
    ),
    ("src/ucp/", "openucx/ucx"),
    ("src/uct/", "openucx/ucx"),
    ("docs/source/", "openucx/ucx"),
    ("src/os/linux.cc", "NVIDIA/nccl"),
    ("src/transport/", "NVIDIA/nccl"),
    ("docs/instrumenting/", "prometheus/docs"),
    ("docs/practices/", "prometheus/docs"),
    ("docs/thick-plugin.md", "k8snetworkplumbingwg/multus-cni"),
];

/// Paths a test writes into a copy of the tree, named before they exist.
const WRITTEN_BY_TESTS: [&str; 1] = [
    // check-conf-negative.py adds it to a copy to prove a stray overlay fails.
    "conf/deploy/nvidia-network-operator/namespace.yaml",
];

#[test]
fn external_paths_are_not_ours() {
    for (prefix, owner) in EXTERNAL {
        assert!(
            !repo().join(prefix).exists(),
            "{prefix} is listed as {owner}'s but exists here: take it off EXTERNAL"
        );
    }
}

#[test]
fn every_named_path_exists() {
    let mut missing = Vec::new();
    let mut seen = 0;
    for file in citing_files() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for path in repo_paths(&text) {
            seen += 1;
            let here = repo().join(&path);
            // Build products and per-run outputs are named before they exist.
            let generated = path.contains(".build")
                || path.starts_with("bench/results")
                || path.starts_with("fuzz/corpus")
                || path.starts_with("fuzz/artifacts")
                || path.ends_with(".log")
                || path.starts_with("integration/kernel/.cache");
            let external = EXTERNAL.iter().any(|(prefix, _)| path.starts_with(prefix))
                || WRITTEN_BY_TESTS.contains(&path.as_str());
            if !generated && !external && !here.exists() {
                missing.push(format!("{}: {path}", rel(&file)));
            }
        }
    }
    assert!(seen > 50, "only {seen} paths found: the reader is broken");
    assert!(
        missing.is_empty(),
        "paths named that are not in the repository:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_markdown_link_resolves() {
    let mut broken = Vec::new();
    let mut seen = 0;
    for file in citing_files() {
        if file.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            seen += 1;
            let (path, frag) = target.split_once('#').unwrap_or((target, ""));
            let doc = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !doc.exists() {
                broken.push(format!("{}: {target} (no such file)", rel(&file)));
            } else if !frag.is_empty() && !headings(&doc).iter().any(|h| anchor(h) == frag) {
                broken.push(format!("{}: {target} (no such heading)", rel(&file)));
            }
        }
    }
    assert!(seen > 5, "only {seen} links found: the reader is broken");
    assert!(
        broken.is_empty(),
        "Markdown links that do not resolve:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn the_readers_find_what_they_should() {
    let c = section_citations(
        "see docs/design.md, \"The GID table\" and (README, \"Error codes\"); \
         not foo.rs, \"x\"",
    );
    assert_eq!(
        c,
        [
            ("docs/design.md".to_string(), "The GID table".to_string()),
            ("README".to_string(), "Error codes".to_string())
        ]
    );
    let p: Vec<String> = repo_paths(
        "`src/rdma/lookup.rs`, src/cni/ and /sys/bus/pci/src/x.rs, \
         integration/kernel/*.sh, docs/<x>.md, $ROOT/src/a.rs",
    )
    .into_iter()
    .collect();
    assert_eq!(p, ["src/cni/", "src/rdma/lookup.rs"]);
    assert_eq!(
        anchor("Who writes what (the trust boundary)"),
        "who-writes-what-the-trust-boundary"
    );
    assert_eq!(anchor("`roce-tune inspect`"), "roce-tune-inspect");
}

/// The integration binary's tests, as `cargo test` names them
/// (`inspect::help_and_bad_options`): every `#[test]` fn of each module of
/// tests/it/main.rs.
fn it_test_names() -> Vec<String> {
    let it = repo().join("tests/it");
    let main = std::fs::read_to_string(it.join("main.rs")).unwrap();
    let mut names = Vec::new();
    for module in main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';'))
    {
        let text = std::fs::read_to_string(it.join(format!("{module}.rs")))
            .or_else(|_| std::fs::read_to_string(it.join(module).join("mod.rs")))
            .unwrap_or_default();
        let mut after_test = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[test]") {
                after_test = true;
            } else if after_test {
                if let Some(rest) = line.strip_prefix("fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.push(format!("{module}::{name}"));
                    after_test = false;
                } else if !line.starts_with("#[") {
                    after_test = false;
                }
            }
        }
    }
    names
}

/// Every `--test <binary> [filter]` of a `cargo test` command in `text`:
/// the binary and the first argument after it, if that is a filter (not an
/// option, not `--`).
fn test_commands(text: &str) -> Vec<(String, Option<String>)> {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || "_:".contains(*c))
            .collect()
    };
    let mut out = Vec::new();
    for (at, _) in text.match_indices("cargo test") {
        // One command: up to the end of its line or of its code span.
        let rest = &text[at..];
        let end = rest.find(['\n', '`', '"', ')']).unwrap_or(rest.len());
        let cmd = &rest[..end];
        let Some(i) = cmd.find("--test ") else {
            continue;
        };
        let after = cmd[i + "--test ".len()..].trim_start();
        let binary = word(after);
        let next = after[binary.len()..].split_whitespace().next();
        let filter = next
            .filter(|n| !n.starts_with('-') && !n.starts_with('<'))
            .map(word)
            .filter(|f| !f.is_empty());
        out.push((binary, filter));
    }
    out
}

#[test]
fn every_cited_test_command_runs_tests_that_exist() {
    let names = it_test_names();
    assert!(
        names.len() > 100,
        "only {} tests found in tests/it: the reader is broken",
        names.len()
    );
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in citing_files() {
        for (binary, filter) in test_commands(&joined_text(&file)) {
            seen += 1;
            // One [[test]] target: tests/it (Cargo.toml's autotests find
            // tests/<name>.rs or tests/<name>/main.rs).
            let target = repo().join("tests").join(&binary);
            if !target.join("main.rs").exists() && !target.with_extension("rs").exists() {
                wrong.push(format!(
                    "{}: --test {binary}: no such test binary (the integration tests are one, `--test it`)",
                    rel(&file)
                ));
                continue;
            }
            if let Some(f) = filter.filter(|_| binary == "it") {
                if !names.iter().any(|n| n.contains(&f)) {
                    wrong.push(format!(
                        "{}: --test it {f}: the filter names no test of tests/it",
                        rel(&file)
                    ));
                }
            }
        }
    }
    assert!(
        seen > 5,
        "only {seen} test commands found: the reader is broken"
    );
    assert!(
        wrong.is_empty(),
        "test commands that run nothing:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_command_reader_finds_binary_and_filter() {
    // Built with concat!: this file is read too, and a literal of a wrong
    // command would be one.
    let text = concat!(
        "run `cargo",
        " test --test inspect -- --nocapture` or\n",
        "cargo",
        " test --locked --test it -- --test-threads=2 x, and `cargo",
        " test --test it placement::cost -- --ignored`"
    );
    let got = test_commands(text);
    assert_eq!(
        got,
        [
            ("inspect".to_string(), None),
            ("it".to_string(), None),
            ("it".to_string(), Some("placement::cost".to_string())),
        ]
    );
}

/// The table of error codes (`cni::error::code::ALL`, declared once in
/// src/cni/error.rs) and the reader's tables agree: every code has its row
/// in docs/errors.md and no row names a code the source cannot give; every
/// code of roce-tune's own (100 and up) has its section in
/// docs/troubleshooting.md ("### 108: ..."), where a runbook lands from the
/// event. A code added without its docs, or a row left for a code gone,
/// fails here.
#[test]
fn every_error_code_has_its_row_and_every_row_a_code() {
    let root = repo();
    let codes: BTreeSet<u32> = roce_tune::cni::error::code::ALL
        .iter()
        .map(|&(_, c)| c)
        .collect();
    let errors = std::fs::read_to_string(root.join("docs/errors.md")).unwrap();
    let rows: BTreeSet<u32> = errors
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split(" |").next()?.parse().ok())
        .collect();
    assert_eq!(rows, codes, "docs/errors.md's rows against code::ALL");
    let fixes = std::fs::read_to_string(root.join("docs/troubleshooting.md")).unwrap();
    let sections: BTreeSet<u32> = fixes
        .lines()
        .filter_map(|l| l.strip_prefix("### ")?.split(':').next()?.parse().ok())
        .collect();
    let own: BTreeSet<u32> = codes.iter().copied().filter(|&c| c >= 100).collect();
    assert_eq!(
        sections, own,
        "docs/troubleshooting.md's code sections against code::ALL"
    );
}
