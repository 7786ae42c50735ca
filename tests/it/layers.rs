//! Imports only go down the layers. docs/design.md's "Module map" lists the
//! crate's modules from the base to the edges; this test reads that table and
//! fails when a module uses one on a later row (an import that goes up), when
//! a module of `src/lib.rs` is missing from the table or the table names one
//! that is not there. The table is the statement; this is its check. No root
//! needed: it reads source files.
//!
//! A use is any `crate::<module>` path, any name in a `use crate::{...}`
//! group, and the logging macros (`error!`, `warn!`, `info!`, `debug!`,
//! `log_at!`), which are `log`'s. Comments are dropped first: a comment may
//! point anywhere (`crate::agent` in orphans.rs says who calls it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The modules of the Module map, first row first: `quote.rs` and `cni/` as
/// `quote` and `cni`.
fn map_order() -> Vec<String> {
    let design = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let section = design
        .split("\n## Module map\n")
        .nth(1)
        .expect("docs/design.md has a \"## Module map\" section");
    let section = section.split("\n## ").next().unwrap();
    let mut order = Vec::new();
    for line in section.lines() {
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        let name = cell.split('`').next().unwrap();
        let module = name.trim_end_matches('/').trim_end_matches(".rs");
        order.push(module.to_string());
    }
    assert!(order.len() > 10, "Module map rows not found: {order:?}");
    order
}

/// `pub mod x;` lines of src/lib.rs.
fn lib_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

/// The source without comments: `//` to the end of the line (unless inside
/// a string literal on that line) and `/* ... */`.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut in_block = 0usize;
    for line in src.lines() {
        let mut in_str = false;
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if in_block > 0 {
                if b[i..].starts_with(b"*/") {
                    in_block -= 1;
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            match b[i] {
                b'\\' if in_str => {
                    out.push(b[i] as char);
                    if i + 1 < b.len() {
                        out.push(b[i + 1] as char);
                    }
                    i += 2;
                    continue;
                }
                b'"' => in_str = !in_str,
                b'/' if !in_str && b[i..].starts_with(b"//") => break,
                b'/' if !in_str && b[i..].starts_with(b"/*") => {
                    in_block += 1;
                    i += 2;
                    continue;
                }
                _ => {}
            }
            out.push(b[i] as char);
            i += 1;
        }
        out.push('\n');
    }
    out
}

fn idents_after(s: &str, prefix: &str) -> Vec<String> {
    s.match_indices(prefix)
        .filter(|(at, _)| {
            // `$crate::` and `roce_crate::` are not `crate::` paths of this file.
            !s[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
        })
        .map(|(at, _)| {
            s[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// The top-level names of every `crate::{a::b, c, d::{e}}` group.
fn grouped_names(s: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in s.match_indices("crate::{") {
        let body = &s[at + "crate::{".len()..];
        let (mut depth, mut item, mut at_top) = (0usize, String::new(), true);
        for c in body.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    at_top = true;
                    item.clear();
                    continue;
                }
                _ => {}
            }
            if depth == 0 && at_top {
                if c.is_alphanumeric() || c == '_' {
                    item.push(c);
                } else if !item.is_empty() {
                    names.push(std::mem::take(&mut item));
                    at_top = false;
                }
            }
        }
        if !item.is_empty() {
            names.push(item);
        }
    }
    names
}

fn uses_of(src: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code = strip_comments(src);
    let mut used: BTreeSet<String> = idents_after(&code, "crate::")
        .into_iter()
        .chain(grouped_names(&code))
        .filter(|m| modules.contains(m))
        .collect();
    let logs = ["error!(", "warn!(", "info!(", "debug!(", "log_at!("];
    if logs.iter().any(|m| {
        code.match_indices(m)
            .any(|(at, _)| !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
    }) {
        used.insert("log".to_string());
    }
    used
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Which top-level module a file of src/ belongs to (`rdma/nldev/mod.rs`: rdma).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let m = first.trim_end_matches(".rs").to_string();
    (m != "lib" && m != "main").then_some(m)
}

#[test]
fn module_map_lists_every_module_once() {
    let order = map_order();
    let listed: BTreeSet<String> = order.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        order.len(),
        "a module is listed twice: {order:?}"
    );
    let lib = lib_modules();
    let missing: Vec<_> = lib.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&lib).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/design.md's Module map and src/lib.rs disagree: not in the map {missing:?}, \
         not in lib.rs {stale:?}. Give a new module its row, at its layer."
    );
}

#[test]
fn imports_only_go_down_the_layers() {
    let order = map_order();
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let modules = lib_modules();
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut up = Vec::new();
    let mut seen = 0;
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(&mine) = rank.get(module.as_str()) else {
            continue; // reported by module_map_lists_every_module_once
        };
        seen += 1;
        let text = std::fs::read_to_string(file).unwrap();
        for used in uses_of(&text, &modules) {
            if used == module {
                continue;
            }
            let theirs = rank[used.as_str()];
            if theirs > mine {
                up.push(format!(
                    "{} ({module}, row {}) uses {used} (row {})",
                    file.strip_prefix(root()).unwrap().display(),
                    mine + 1,
                    theirs + 1
                ));
            }
        }
    }
    assert!(seen > 50, "only {seen} source files read");
    assert!(
        up.is_empty(),
        "imports that go up the layers of docs/design.md's Module map:\n  {}\n\
         Move the shared piece down, or pass it in from the caller.",
        up.join("\n  ")
    );
}

#[test]
fn the_reader_sees_every_kind_of_use() {
    // The parser itself, on the forms the crate writes: a test that always
    // found nothing would pass any layering.
    let modules: BTreeSet<String> = ["cni", "log", "rdma", "state", "agent"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let src = "use crate::cni::code;\n\
               use crate::{rdma::{gid, lookup}, state};\n\
               // crate::agent only in a comment\n\
               let s = \"// not a comment\"; crate::state::x();\n\
               /* crate::agent */ warn!(\"x\");\n\
               $crate::agent::y();\n";
    let got: Vec<String> = uses_of(src, &modules).into_iter().collect();
    assert_eq!(got, ["cni", "log", "rdma", "state"]);
}

#[test]
fn the_readme_lists_the_same_layers() {
    // The README's Layout states the order for a reader; it must be the map's.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let joined = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let list = joined
        .split("Layers, base first: ")
        .nth(1)
        .expect("README.md's Layout has a \"Layers, base first:\" line")
        .split('.')
        .next()
        .unwrap();
    let listed: Vec<String> = list
        .split(", ")
        .map(|m| m.trim_matches('`').to_string())
        .collect();
    assert_eq!(
        listed,
        map_order(),
        "README.md's layers and docs/design.md's Module map disagree"
    );
}
