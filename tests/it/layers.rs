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
//!
//! Inside a module the map says nothing, so a second rule holds there: the
//! files of one module import each other in no circle (`rdma/setting.rs`
//! once listed the settings that `traffic_class.rs` and `rdma_cm.rs`
//! implement, and each of those imported it). A file's uses of its own
//! `mod.rs` (`super::RdmaPort`) and a `mod.rs`'s of its own files are the
//! module's face, not a circle.

use crate::common::{doc_section, repo};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules of the Module map, first row first: `quote.rs` and `cni/` as
/// `quote` and `cni`.
fn map_order() -> Vec<String> {
    let section = doc_section("docs/design.md", "## Module map");
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
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
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

/// Which top-level module a file of src/ belongs to (`netlink/nldev/mod.rs`: netlink).
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
    let src = repo().join("src");
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
                    file.strip_prefix(repo()).unwrap().display(),
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
fn the_contributors_page_lists_the_same_layers() {
    // The contributors' page states the order for a reader; it must be the map's.
    let layout = doc_section("docs/contributing.md", "## Layout");
    let joined = layout.split_whitespace().collect::<Vec<_>>().join(" ");
    let list = joined
        .split("Layers, base first: ")
        .nth(1)
        .expect("docs/contributing.md's Layout has a \"Layers, base first:\" line")
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
        "docs/contributing.md's layers and docs/design.md's Module map disagree"
    );
}

/// The module path of a file of src/: `rdma/setting.rs` is `rdma::setting`,
/// `netlink/nldev/mod.rs` is `netlink::nldev`, `lib.rs` the crate root.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The paths a `use` tree or an expression path names, from the text just
/// after its `crate::`, `super::` or `self::`: `rdma::{gid, lookup::Found}`
/// is `rdma::gid` and `rdma::lookup::Found`. `self` in a group is the group's
/// own path; a rename (`as x`) and a glob end a path.
fn use_tree(s: &[u8], i: &mut usize) -> Vec<Vec<String>> {
    let skip_ws = |i: &mut usize| {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(i);
    match s.get(*i) {
        Some(b'{') => {
            *i += 1;
            let mut out = Vec::new();
            loop {
                skip_ws(i);
                match s.get(*i) {
                    Some(b'}') => {
                        *i += 1;
                        break;
                    }
                    None => break,
                    _ => {}
                }
                let before = *i;
                out.extend(use_tree(s, i));
                skip_ws(i);
                match s.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b'}') => {
                        *i += 1;
                        break;
                    }
                    _ if *i == before => break,
                    _ => {}
                }
            }
            out
        }
        Some(b'*') => {
            *i += 1;
            vec![Vec::new()]
        }
        _ => {
            let start = *i;
            while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
                *i += 1;
            }
            let id = String::from_utf8_lossy(&s[start..*i]).into_owned();
            if id.is_empty() {
                return vec![Vec::new()];
            }
            let head = if id == "self" { Vec::new() } else { vec![id] };
            if s[*i..].starts_with(b"::") {
                *i += 2;
                use_tree(s, i)
                    .into_iter()
                    .map(|tail| head.iter().cloned().chain(tail).collect())
                    .collect()
            } else {
                vec![head]
            }
        }
    }
}

/// Every path `code` (comments stripped) names through `crate::`, `super::`
/// or `self::`, as written in the file of module `me`.
fn named_paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let s = code.as_bytes();
    // `self` is the module the file is; `super` its parent.
    let here: Vec<String> = me.to_vec();
    let mut out = Vec::new();
    for prefix in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(prefix) {
            if code[..at]
                .ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$' || c == ':')
            {
                continue; // `$crate::`, `super::super::`'s second half, a longer path
            }
            let mut i = at + prefix.len();
            let mut base: Vec<String> = match prefix {
                "crate::" => Vec::new(),
                "self::" => here.clone(),
                _ => here[..here.len().saturating_sub(1)].to_vec(),
            };
            while code[i..].starts_with("super::") {
                base.pop();
                i += "super::".len();
            }
            for tail in use_tree(s, &mut i) {
                out.push(base.iter().cloned().chain(tail).collect());
            }
        }
    }
    out
}

/// Module path to the module paths it uses.
type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// The import graph between sibling files (and sibling folders) of each
/// module: an edge from `rdma::setting` to `rdma::traffic_class` for every
/// name one takes from the other. A use between a file and its own `mod.rs`
/// is dropped (the face); a use that crosses into another folder is lifted
/// to the two siblings it joins (`netlink::nldev::socket` using `netlink::route`
/// is `netlink::nldev` using `netlink::route`).
fn sibling_edges(files: &[(Vec<String>, String)]) -> Graph {
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges = Graph::new();
    for (me, text) in files {
        let code = strip_comments(text);
        for path in named_paths(&code, me) {
            // The longest prefix that is a module of the crate.
            let Some(target) = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| known.contains(p))
            else {
                continue;
            };
            let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == me.len() || common == target.len() {
                continue; // one contains the other: a file and its own mod.rs
            }
            edges
                .entry(me[..=common].to_vec())
                .or_default()
                .insert(target[..=common].to_vec());
        }
    }
    edges
}

/// A circle of the graph, if there is one, as the modules along it.
fn a_circle(edges: &Graph) -> Option<Vec<String>> {
    fn visit(
        at: &Vec<String>,
        edges: &Graph,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == at) {
            let mut circle: Vec<String> = path[start..].iter().map(|p| p.join("::")).collect();
            circle.push(at.join("::"));
            return Some(circle);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.clone());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(at.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|k| visit(k, edges, &mut Vec::new(), &mut done))
}

/// Every file of src/, by its module path, with its text.
fn src_files() -> Vec<(Vec<String>, String)> {
    let src = repo().join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    paths
        .iter()
        .map(|p| (module_path(&src, p), std::fs::read_to_string(p).unwrap()))
        .collect()
}

#[test]
fn the_files_of_a_module_import_each_other_in_no_circle() {
    let files = src_files();
    let edges = sibling_edges(&files);
    let inside: usize = edges
        .iter()
        .filter(|(from, _)| from.len() > 1)
        .map(|(_, to)| to.len())
        .sum();
    assert!(
        inside > 30,
        "only {inside} uses between sibling files: the reader is broken"
    );
    if let Some(circle) = a_circle(&edges) {
        panic!(
            "files that import each other in a circle: {}. Move what they share into a file \
             of its own below them, or what needs them all (a registry) into a module above them",
            circle.join(" -> ")
        );
    }
}

#[test]
fn the_circle_reader_sees_groups_super_and_self() {
    let me = vec!["rdma".to_string(), "setting".to_string()];
    let code = "use super::{traffic_class::CLASS, RdmaPort};\n\
                use crate::rdma::{gid, lookup::{self, Found}};\n\
                let x = self::inner::f(); super::super::quote::x();\n";
    let got: Vec<String> = named_paths(code, &me)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        got,
        [
            "rdma::gid",
            "rdma::lookup",
            "rdma::lookup::Found",
            "rdma::traffic_class::CLASS",
            "rdma::RdmaPort",
            "quote::x",
            "rdma::setting::inner::f"
        ]
    );
    let files = vec![
        (me.clone(), "use super::traffic_class::CLASS;".to_string()),
        (
            vec!["rdma".into(), "traffic_class".into()],
            "use super::setting::Setting; use super::RdmaPort;".to_string(),
        ),
        (vec!["rdma".into()], "pub mod setting;".to_string()),
    ];
    let circle = a_circle(&sibling_edges(&files)).expect("the circle is found");
    assert_eq!(circle.first(), circle.last());
    assert_eq!(circle.len(), 3, "{circle:?}");
}

/// The files of `src/wire/` by module name (`h2_frames.rs`: `h2_frames`).
fn wire_modules() -> Vec<(String, PathBuf)> {
    let dir = repo().join("src/wire");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            (stem != "mod").then_some((stem, p))
        })
        .collect()
}

/// `wire` holds the codecs of peers' bytes and nothing of the rules: any
/// `crate::` path in it names `crate::wire` (or `super::`, its siblings), so
/// a codec is read, tested and fuzzed on bytes alone.
#[test]
fn wire_imports_nothing_of_the_crate_but_wire() {
    let modules = wire_modules();
    assert!(
        modules.len() >= 10,
        "src/wire holds only {modules:?}: the reader is broken"
    );
    let mut out = Vec::new();
    for (_, file) in &modules {
        let code = strip_comments(&std::fs::read_to_string(file).unwrap());
        let me = module_path(&repo().join("src"), file);
        for path in named_paths(&code, &me) {
            if path.first().map(String::as_str) != Some("wire") {
                out.push(format!(
                    "{} uses crate::{}",
                    file.strip_prefix(repo()).unwrap().display(),
                    path.join("::")
                ));
            }
        }
        for m in ["error!(", "warn!(", "info!(", "debug!(", "log_at!("] {
            if code.contains(m) {
                out.push(format!(
                    "{} logs ({m}): a codec returns what it found, its caller logs",
                    file.strip_prefix(repo()).unwrap().display()
                ));
            }
        }
    }
    assert!(
        out.is_empty(),
        "src/wire imports the crate outside wire:\n  {}\nPass what the codec needs in, or move \
         the rule to the caller.",
        out.join("\n  ")
    );
}

/// Every codec of `src/wire/` has a cargo-fuzz target of its own name in
/// fuzz/fuzz_targets/, listed in fuzz/Cargo.toml, with seeds in
/// fuzz/seeds/<name>/: untrusted bytes are fuzzed where they are decoded.
#[test]
fn every_wire_module_has_a_fuzz_target_of_its_name() {
    let root = repo();
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
    let mut missing = Vec::new();
    for (name, _) in wire_modules() {
        let target = root.join("fuzz/fuzz_targets").join(format!("{name}.rs"));
        if !target.is_file() {
            missing.push(format!("fuzz/fuzz_targets/{name}.rs"));
        }
        if !manifest.contains(&format!("name = \"{name}\"")) {
            missing.push(format!("fuzz/Cargo.toml's [[bin]] {name}"));
        }
        if std::fs::read_dir(root.join("fuzz/seeds").join(&name)).map_or(0, |d| d.count()) == 0 {
            missing.push(format!("fuzz/seeds/{name}/ (real bytes to start from)"));
        }
    }
    assert!(
        missing.is_empty(),
        "wire modules without their fuzz target:\n  {}\nA codec in src/wire gets a target of its \
         own name (docs/contributing.md, \"A new codec\").",
        missing.join("\n  ")
    );
}

#[test]
fn the_wire_rule_sees_an_import_out_of_wire() {
    let me = vec!["wire".to_string(), "grpc".to_string()];
    let code = "use super::hpack;\nuse crate::wire::protobuf::Writer;\nuse crate::log::escape;\n";
    let outside: Vec<String> = named_paths(code, &me)
        .into_iter()
        .filter(|p| p.first().map(String::as_str) != Some("wire"))
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(outside, ["log::escape"]);
}

/// Which paths of `files` break the edges' rule: a file of `src/commands/`
/// that names another command's file (`super::add::…` from check.rs), or a
/// file of `src/nri/`, `src/agent/` or `src/cli/` that names `crate::commands`
/// at all. What two edges share lives below them both (`rail`, one rail's
/// tuning); `commands/mod.rs` is the CNI commands' shared face and may be used
/// by each of them, and `commands/tests.rs`, the folder's unit tests, runs
/// each of them.
fn edge_crossings(files: &[(Vec<String>, String)]) -> Vec<String> {
    let commands: BTreeSet<String> = files
        .iter()
        .filter(|(m, _)| m.len() == 2 && m[0] == "commands")
        .map(|(m, _)| m[1].clone())
        .collect();
    let mut bad = Vec::new();
    for (me, text) in files {
        let code = strip_comments(text);
        let Some(top) = me.first() else {
            continue;
        };
        for path in named_paths(&code, me) {
            if path.first().map(String::as_str) != Some("commands") {
                continue;
            }
            let crosses = match top.as_str() {
                "commands" if me.get(1).is_some_and(|m| m == "tests") => false,
                "commands" => path
                    .get(1)
                    .is_some_and(|c| commands.contains(c) && me.get(1) != Some(c)),
                "nri" | "agent" | "cli" => true,
                _ => false,
            };
            if crosses {
                bad.push(format!("{} uses {}", me.join("::"), path.join("::")));
            }
        }
    }
    bad
}

#[test]
fn no_edge_uses_another_edges_files() {
    let files = src_files();
    assert!(
        files
            .iter()
            .any(|(m, _)| m.first().is_some_and(|t| t == "commands")),
        "no file of src/commands/ read"
    );
    let bad = edge_crossings(&files);
    assert!(
        bad.is_empty(),
        "an edge that uses another edge's files (move the shared piece below both, \
         into `rail` or its own module):\n  {}",
        bad.join("\n  ")
    );
}

/// A planted source file for a reader test: its module path and its text,
/// as the readers get the tree's files.
fn file(module: &[&str], text: &str) -> (Vec<String>, String) {
    (
        module.iter().map(|s| s.to_string()).collect(),
        text.to_string(),
    )
}

#[test]
fn the_edge_reader_sees_a_crossing_and_lets_the_face_be() {
    let files = [
        file(&["commands", "add"], "use super::open_netns;\n"),
        file(
            &["commands", "check"],
            "use super::{add::wanted_index, open_netns};\n// crate::commands::del in a comment\n",
        ),
        file(&["commands", "del"], "use crate::commands::del::x;\n"),
        file(
            &["commands", "tests"],
            "super::add::run(); super::del::run();\n",
        ),
        file(&["nri", "dra"], "let s = crate::commands::sysfs(&n);\n"),
        file(&["agent", "pass"], "use crate::commands::tests::Rig;\n"),
        file(
            &["plugin"],
            "commands::add::run(); crate::commands::add::run();\n",
        ),
    ];
    assert_eq!(
        edge_crossings(&files),
        [
            "commands::check uses commands::add::wanted_index",
            "nri::dra uses commands::sysfs",
            "agent::pass uses commands::tests::Rig"
        ]
    );
}

/// The file that holds every difference between the kernel and a test tree
/// behind a sysfs root (`sysfs::Host`, docs/design.md "Test trees").
const HOST_SEAM: &[&str] = &["sysfs", "host"];

/// Names that ask which host stands behind a sysfs root: a predicate, or a
/// flag or variant that carries its answer.
const HOST_QUESTIONS: &[&str] = &[
    "is_test_tree",
    "is_real",
    "is_kernel",
    "test_tree",
    "TestTree",
];

/// Where `files` outside the host seam ask which host it is: a name of
/// `HOST_QUESTIONS` (a whole identifier, comments dropped), or a root
/// compared with `/sys` (`==` or `!=` on a line naming `"/sys"` or
/// `DEFAULT_SYSFS_ROOT`), which is how the seam itself tells them apart.
fn host_questions(files: &[(Vec<String>, String)]) -> Vec<String> {
    let mut asked = Vec::new();
    for (me, text) in files {
        if me == HOST_SEAM {
            continue;
        }
        let code = strip_comments(text);
        for (n, line) in code.lines().enumerate() {
            let at = format!("{}:{}", me.join("::"), n + 1);
            for word in line.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if HOST_QUESTIONS.contains(&word) {
                    asked.push(format!("{at} names `{word}`"));
                }
            }
            let compares = line.contains("==") || line.contains("!=");
            if compares && (line.contains("\"/sys\"") || line.contains("DEFAULT_SYSFS_ROOT")) {
                asked.push(format!("{at} compares a root with /sys"));
            }
        }
    }
    asked
}

/// The kernel and a test tree differ in one place, chosen when the root is
/// opened: no caller asks which one it runs on, it calls the seam's method
/// for the thing whose doing differs (a pod's view, a netdev's bus, ...).
#[test]
fn no_file_but_the_host_seam_asks_which_host_it_is() {
    let files = src_files();
    assert!(
        files.iter().any(|(m, _)| m == HOST_SEAM),
        "src/sysfs/host.rs not read: the seam moved, and this test with it"
    );
    let asked = host_questions(&files);
    assert!(
        asked.is_empty(),
        "files of src/ that ask whether they run on the kernel or a test tree:\n  {}\n\
         Give sysfs::Host (src/sysfs/host.rs) a method for the thing whose doing differs, \
         its two answers side by side, and call it.",
        asked.join("\n  ")
    );
}

#[test]
fn the_host_question_reader_sees_each_way_of_asking() {
    let files = [
        file(&["rdma", "reach"], "if self.is_test_tree() {\n}\n"),
        file(
            &["cli", "inspect", "collect"],
            "// is_real() in a comment\nlet v = NodeView { test_tree: !host.is_real() };\n",
        ),
        file(
            &["node"],
            "self.sysfs_root != Path::new(DEFAULT_SYSFS_ROOT)\nsysfs_root: DEFAULT_SYSFS_ROOT.into(),\n",
        ),
        file(
            &["sysfs"],
            "let kernel = root == Path::new(\"/sys\");\nView::open(Path::new(\"/sys\"));\n\
             fn read_write_in_a_test_tree() {}\nlet s = \"a test tree\";\n",
        ),
        file(&["cli", "inspect", "tests"], "sysfs: PodSysfs::TestTree,\n"),
        file(
            &["sysfs", "host"],
            "if root == Path::new(\"/sys\") { Kind::Kernel } else { Kind::TestTree }\n",
        ),
    ];
    assert_eq!(
        host_questions(&files),
        [
            "rdma::reach:1 names `is_test_tree`",
            "cli::inspect::collect:2 names `test_tree`",
            "cli::inspect::collect:2 names `is_real`",
            "node:1 compares a root with /sys",
            "sysfs:1 compares a root with /sys",
            "cli::inspect::tests:1 names `TestTree`",
        ]
    );
}
