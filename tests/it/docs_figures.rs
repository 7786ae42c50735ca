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
            what: "fuzz targets (fuzz/run.sh ALL_TARGETS)",
            count: fuzz_targets().len(),
            phrases: &["{} cargo-fuzz targets"],
        },
    ]
}

/// The targets fuzz/run.sh lists, one a line between `ALL_TARGETS=(` and `)`.
fn fuzz_targets() -> Vec<&'static str> {
    let run = include_str!("../../fuzz/run.sh");
    let list = run
        .split_once("ALL_TARGETS=(\n")
        .and_then(|(_, rest)| rest.split_once("\n)"))
        .expect("fuzz/run.sh has ALL_TARGETS=( ... )")
        .0;
    list.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Every target of fuzz/run.sh has its [[bin]] in fuzz/Cargo.toml and its
/// seeds, and every [[bin]] is listed: a target added in one place only is
/// never run, or never built.
#[test]
fn every_fuzz_target_is_listed_built_and_seeded() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
    let bins: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|b| b.split("name = \"").nth(1)?.split('"').next())
        .collect();
    let mut listed = fuzz_targets();
    assert!(listed.len() >= 11, "{listed:?}");
    for t in &listed {
        assert!(bins.contains(t), "{t}: no [[bin]] in fuzz/Cargo.toml");
        let seeds = root.join("fuzz/seeds").join(t);
        let n = std::fs::read_dir(&seeds).map(|d| d.count()).unwrap_or(0);
        assert!(n > 0, "{t}: no seeds in {}", seeds.display());
    }
    let mut built = bins.clone();
    built.sort();
    listed.sort();
    assert_eq!(
        built, listed,
        "fuzz/Cargo.toml's bins against fuzz/run.sh's list"
    );
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
