//! The sizes of the test tables that README.md and docs/ cite ("131 inputs",
//! "66 crash scenarios"), taken from the tables themselves. A hand-kept count
//! in each test once guarded against a row lost in an edit, and the docs
//! restated it by hand (and drifted: the README said 22 attacks while the
//! table held 28). Now the table is the only count: a row added or lost fails
//! here until the docs say so too, and a docs figure cannot drift. No root
//! needed: building a table runs nothing.
//!
//! A figure is found by its phrase, `{}` standing for the number, in the text
//! with its whitespace runs (line breaks) made single spaces. Every
//! occurrence of a phrase must hold the table's count, and every table must
//! be cited at least once: a rewrite that drops a phrase fails here, and
//! says which phrases this file knows.

use std::collections::BTreeSet;
use std::path::Path;

struct Figure {
    what: &'static str,
    count: usize,
    phrases: &'static [&'static str],
}

fn figures() -> Vec<Figure> {
    use crate::faults::{ADD_NEXT, ADD_POINTS, DEL_NEXT, DEL_POINTS, ORIGINALS};
    vec![
        Figure {
            what: "bad inputs (bad_inputs::cases)",
            count: crate::bad_inputs::row_names().len(),
            phrases: &["{} inputs", "bad-input table ({} rows)"],
        },
        Figure {
            what: "tampered state dirs (tampered_state::cases)",
            count: crate::tampered_state::row_names().len(),
            phrases: &["{} tampered state dirs", "tampered state dirs ({})"],
        },
        Figure {
            what: "attacks (security::attacks)",
            count: crate::security::row_names().len(),
            phrases: &["{} attacks", "security attacks ({})"],
        },
        Figure {
            what: "crash scenarios (faults::plan)",
            count: crate::faults::plan().len(),
            phrases: &[
                "{} crash scenarios",
                "fault build, {} scenarios",
                "= {} scenarios",
                "{} survived",
                "table of {} rows",
            ],
        },
        Figure {
            what: "tests in del_never_stuck (its #[test] fns)",
            count: include_str!("del_never_stuck.rs")
                .matches("#[test]")
                .count(),
            phrases: &["{} cases, every DEL succeeds"],
        },
        Figure {
            what: "fault points (faults::ADD_POINTS, DEL_POINTS)",
            count: ADD_POINTS.len() + DEL_POINTS.len(),
            phrases: &["{} fault points"],
        },
        Figure {
            what: "ADD fault points (faults::ADD_POINTS)",
            count: ADD_POINTS.len(),
            phrases: &["{} ADD points"],
        },
        Figure {
            what: "DEL fault points (faults::DEL_POINTS)",
            count: DEL_POINTS.len(),
            phrases: &["{} DEL points"],
        },
        Figure {
            what: "next steps after an ADD crash (faults::ADD_NEXT)",
            count: ADD_NEXT.len(),
            phrases: &["× {} next steps"],
        },
        Figure {
            what: "next steps after a DEL crash (faults::DEL_NEXT)",
            count: DEL_NEXT.len(),
            phrases: &["DEL points × {} ×"],
        },
        Figure {
            what: "originals of a fault scenario (faults::ORIGINALS)",
            count: ORIGINALS.len(),
            phrases: &["× {} originals"],
        },
        Figure {
            what: "cargo-fuzz targets (fuzz/Cargo.toml's [[bin]]s)",
            count: fuzz_targets().len(),
            phrases: &["{} cargo-fuzz targets"],
        },
        Figure {
            what: "check-conf's negative cases (integration/check-conf-negative.py CASES)",
            count: negative_cases(),
            phrases: &["{} negative cases"],
        },
    ]
}

/// The fuzz workspace's targets: each `[[bin]]` of fuzz/Cargo.toml, by name.
fn fuzz_targets() -> Vec<String> {
    let manifest = include_str!("../../fuzz/Cargo.toml");
    manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|bin| {
            let line = bin.lines().find(|l| l.trim_start().starts_with("name"))?;
            Some(line.split('"').nth(1)?.to_string())
        })
        .collect()
}

/// A target that `make fuzz` does not run, or that docs/reliability.md's
/// table of targets leaves out, is a count that drifted by another name
/// (the table once listed 5 of 6, and said 5).
#[test]
fn every_fuzz_target_is_run_and_in_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = std::fs::read_to_string(root.join("fuzz/run.sh")).unwrap();
    let reliability = std::fs::read_to_string(root.join("docs/reliability.md")).unwrap();
    let targets = fuzz_targets();
    assert!(
        targets.len() >= 6,
        "the [[bin]] reader is broken: {targets:?}"
    );
    let mut wrong = Vec::new();
    for t in &targets {
        if !run
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| w == t)
        {
            wrong.push(format!("fuzz/run.sh does not name {t}"));
        }
        let seeds = root.join("fuzz/seeds").join(t);
        if std::fs::read_dir(&seeds).map_or(0, |d| d.count()) == 0 {
            wrong.push(format!(
                "fuzz/seeds/{t} is missing or empty: every target starts from real bytes"
            ));
        }
        if !reliability
            .lines()
            .any(|l| l.starts_with(&format!("| {t} |")))
        {
            wrong.push(format!(
                "docs/reliability.md's table of targets has no row for {t}"
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// The rows of check-conf-negative.py's CASES: each opens a tuple at four
/// spaces, `    ("<name>",`.
fn negative_cases() -> usize {
    let text = include_str!("../../integration/check-conf-negative.py");
    let table = text
        .split("\nCASES = [\n")
        .nth(1)
        .and_then(|t| t.split("\n]\n").next())
        .expect("check-conf-negative.py has a `CASES = [ ... ]` table");
    table.lines().filter(|l| l.starts_with("    (\"")).count()
}

/// README.md and every docs/*.md, each with its whitespace runs made one space.
fn docs() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut more: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    more.sort();
    files.extend(more);
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let name = p.strip_prefix(root).unwrap().display().to_string();
            (name, flat)
        })
        .collect()
}

/// The numbers `text` gives where `phrase` has its `{}`.
fn cited(text: &str, phrase: &str) -> Vec<u64> {
    let (before, after) = phrase.split_once("{}").expect("a phrase holds {}");
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices(|c: char| c.is_ascii_digit()) {
        if i > 0 && bytes[i - 1].is_ascii_digit() {
            continue; // inside a number
        }
        let len = text[i..].bytes().take_while(u8::is_ascii_digit).count();
        if text[..i].ends_with(before) && text[i + len..].starts_with(after) {
            found.push(text[i..i + len].parse().unwrap());
        }
    }
    found
}

#[test]
fn cited_finds_the_number_in_its_phrase_only() {
    let t = "the bad-input table (131 rows) and 19 tampered state dirs, 1131 inputs";
    assert_eq!(cited(t, "bad-input table ({} rows)"), [131]);
    assert_eq!(cited(t, "{} tampered state dirs"), [19]);
    assert_eq!(
        cited(t, "{} inputs"),
        [1131],
        "a whole number, never its tail"
    );
    assert_eq!(cited(t, "{} attacks"), Vec::<u64>::new());
}

#[test]
fn the_docs_cite_each_table_as_it_is() {
    let docs = docs();
    let mut wrong = Vec::new();
    for f in figures() {
        println!("{}: {}", f.what, f.count);
        let mut seen = 0;
        for (file, text) in &docs {
            for phrase in f.phrases {
                for n in cited(text, phrase) {
                    seen += 1;
                    if n != f.count as u64 {
                        wrong.push(format!(
                            "{file} says {:?}, the table has {}: {}",
                            phrase.replace("{}", &n.to_string()),
                            f.count,
                            f.what
                        ));
                    }
                }
            }
        }
        if seen == 0 {
            wrong.push(format!(
                "nothing in README.md or docs/ cites the number of {} ({}) with any of {:?}: \
                 cite it, or give this file the phrase the docs use now",
                f.what, f.count, f.phrases
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// The measured bandwidths README.md states ("17.95 and 8.99 GB/s", "43 to 59
/// Gb/s"), each number before a unit, with a second one joined by "and" or
/// "to". A landing page restates what docs/ measured; it never measures.
fn bandwidths(text: &str) -> Vec<String> {
    let number_before = |s: &str| -> Option<String> {
        let start = s
            .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
            .map_or(0, |i| i + 1);
        let n = s[start..].trim_end_matches('.');
        (!n.is_empty() && n.starts_with(|c: char| c.is_ascii_digit())).then(|| n.to_string())
    };
    let mut out = Vec::new();
    for unit in [" GB/s", " Gb/s"] {
        for (at, _) in text.match_indices(unit) {
            let before = &text[..at];
            let Some(last) = number_before(before) else {
                continue;
            };
            let rest = &before[..before.len() - last.len()];
            for joint in [" and ", " to "] {
                if let Some(first) = rest.strip_suffix(joint).and_then(number_before) {
                    out.push(first);
                }
            }
            out.push(last);
        }
    }
    out
}

/// Whether `text` holds `number` as a word of its own (not 96 inside 96.9,
/// 196 or a hash's `a96b`).
fn holds_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after: Vec<char> = text[at + number.len()..].chars().take(2).collect();
        let word_after = match after.as_slice() {
            [c, ..] if c.is_alphanumeric() => true,
            ['.', c, ..] => c.is_alphanumeric(),
            _ => false,
        };
        !before.is_some_and(|c| c.is_alphanumeric() || c == '.') && !word_after
    })
}

#[test]
fn bandwidths_finds_each_number_and_its_pair() {
    let t = "reached 17.95 and 8.99 GB/s instead of the 96 GB/s; 43 to 59 Gb/s of 96.9 Gb/s.";
    assert_eq!(bandwidths(t), ["17.95", "8.99", "96", "43", "59", "96.9"]);
    assert!(holds_number("instead of 96. The", "96"));
    assert!(!holds_number("instead of 96.9 and 196", "96"));
    assert!(holds_number("(43 to 59 Gb/s", "59"));
    assert!(!holds_number("at 1b826a96b", "96"));
}

/// The README's "Why" gives the measured figures that motivated roce-tune;
/// the docs give them with their sources (docs/topology.md for the jobs'
/// bus bandwidth, docs/design.md, "The traffic class file", for a rail's).
/// A figure there that no source states is a figure nobody measured.
#[test]
fn the_readmes_measured_figures_are_the_docs_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let flat = |p: &str| {
        let text = std::fs::read_to_string(root.join(p)).unwrap();
        text.replace("**", "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let readme = flat("README.md");
    // Only the passages that give the measurements: a number elsewhere (a
    // PCI address, a table of timings) proves nothing.
    let topology = std::fs::read_to_string(root.join("docs/topology.md")).unwrap();
    let intro = topology.split("\n\n").nth(1).unwrap().to_string();
    let class = crate::common::doc_section("docs/design.md", "### The traffic class file");
    let sources = [intro, class]
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let figures = bandwidths(&readme);
    assert!(
        figures.len() >= 6,
        "README.md gives the measured bandwidths (17.95 and 8.99 GB/s, 96.28 and 96.35 GB/s, 43 to \
         59 Gb/s of 96.9 Gb/s); found only {figures:?}: the reader is broken or the figures were dropped"
    );
    let unsourced: Vec<&String> = figures
        .iter()
        .filter(|n| !holds_number(&sources, n))
        .collect();
    assert!(
        unsourced.is_empty(),
        "README.md states {unsourced:?} (GB/s or Gb/s) that neither docs/topology.md's opening \
         nor docs/design.md, \"The traffic class file\", states: give the measurement and its \
         source there first"
    );
}

/// A row copied and not renamed would run twice and name two failures alike.
#[test]
fn every_row_of_a_table_has_its_own_name() {
    for (table, names) in [
        ("bad_inputs", crate::bad_inputs::row_names()),
        ("tampered_state", crate::tampered_state::row_names()),
        ("security", crate::security::row_names()),
    ] {
        let mut seen = BTreeSet::new();
        let twice: Vec<&String> = names.iter().filter(|n| !seen.insert(*n)).collect();
        assert!(twice.is_empty(), "{table}: named twice: {twice:?}");
    }
}
