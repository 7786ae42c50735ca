//! A per-rail setting is declared once (docs/contributing.md, "Adding a
//! setting"). The proof is a setting that exists only in test builds (the
//! cargo feature `test-setting`): `testKnob`, declared in `src/cni/keys.rs`,
//! implemented in `src/settings/test_knob.rs`, covered by the shared test of
//! every setting (`agent::every_setting`, run in that build by `make
//! integration`). Here: no release binary holds it, every setting has its
//! row in the config reference, and a stored patch that adds one more
//! setting touches only the files contributing.md lists.

use crate::common::*;
#[cfg(feature = "test-setting")]
use std::path::{Path, PathBuf};
#[cfg(feature = "test-setting")]
use std::process::Command;

fn holds(bin: &std::path::Path, s: &str) -> bool {
    let bytes = std::fs::read(bin).unwrap();
    bytes.windows(s.len()).any(|w| w == s.as_bytes())
}

/// The test-only setting's file name, a literal of its module alone.
const KNOB_FILE: &str = "roce_tune_test_knob";

#[test]
fn the_test_setting_is_in_test_builds_only() {
    // The binary this test run built holds it exactly when built with the
    // feature (a search that never finds it would pass any binary)...
    assert_eq!(
        holds(std::path::Path::new(BIN), KNOB_FILE),
        cfg!(feature = "test-setting")
    );
    // ...and the stripped release binaries, which `make release` builds
    // without it, never do.
    let (cni, agent) = needs!(release_bins);
    for bin in [cni, agent] {
        assert!(!holds(&bin, KNOB_FILE), "{}", bin.display());
        assert!(!holds(&bin, "testKnob"), "{}", bin.display());
    }
}

#[test]
fn every_setting_has_its_row_in_the_config_reference() {
    let doc = std::fs::read_to_string(repo().join("docs/config.md")).unwrap();
    for s in roce_tune::settings::SETTINGS {
        let d = s.declaration();
        let row = format!("| `{}` | int {}..{};", s.key(), d.min, d.max);
        assert!(
            doc.contains(&row),
            "docs/config.md has no row starting {row:?}: add the setting's row to the network \
             config table (its key, its declared bounds, what it writes)"
        );
    }
}

/// The files docs/contributing.md lists for a new setting, besides the new
/// file of its own (`src/settings/<name>.rs`). Held to contributing.md below.
#[cfg(feature = "test-setting")]
const LISTED: &[&str] = &[
    "src/cni/keys.rs",
    "src/settings/mod.rs",
    "tests/it/agent/every_setting.rs",
    "docs/config.md",
];

#[cfg(feature = "test-setting")]
const PATCH: &str = "tests/data/patches/add-a-setting.patch";

/// A copy of the repository's tracked files, committed in a git repository
/// of its own, where a patch can be applied and its diff read.
#[cfg(feature = "test-setting")]
struct Copy(PathBuf);

#[cfg(feature = "test-setting")]
impl Copy {
    fn of_the_checkout() -> Copy {
        let dir = std::env::temp_dir().join(unique("rt-add-setting-"));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = Copy(dir);
        let files = git(&repo(), &["ls-files", "-z"]);
        for f in files.split('\0').filter(|f| !f.is_empty()) {
            let (from, to) = (repo().join(f), copy.0.join(f));
            // A file deleted in the checkout but not yet from the index.
            if !from.is_file() {
                continue;
            }
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&from, &to).unwrap();
        }
        git(&copy.0, &["init", "-q"]);
        git(&copy.0, &["add", "-A"]);
        git(&copy.0, &["commit", "-q", "-m", "the checkout"]);
        copy
    }
}

#[cfg(feature = "test-setting")]
impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(feature = "test-setting")]
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "commit.gpgSign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The stored patch adds `testDial`, a second test-only setting, the way
/// contributing.md says: its declaration, its file, its line in
/// `SETTINGS`, its row of the shared test and of the config reference. It
/// must apply to today's tree, touch nothing else, and build into a crate
/// whose declaration tests pass with it. When this fails because the
/// patch no longer applies, redo it on today's files (contributing.md says
/// how); when it fails because a new setting now needs another file, that
/// file is the regression.
#[cfg(feature = "test-setting")]
#[test]
fn a_stored_patch_adds_a_setting_in_the_files_contributing_lists() {
    let guide = std::fs::read_to_string(repo().join("docs/contributing.md")).unwrap();
    for f in LISTED.iter().chain(&["src/settings/<name>.rs", PATCH]) {
        assert!(
            guide.contains(&format!("`{f}`")),
            "docs/contributing.md does not name `{f}`"
        );
    }

    let copy = Copy::of_the_checkout();
    let applied = Command::new("git")
        .args(["apply", "--index"])
        .arg(repo().join(PATCH))
        .current_dir(&copy.0)
        .output()
        .expect("run git");
    assert!(
        applied.status.success(),
        "{PATCH} no longer applies to today's files ({}): redo it as docs/contributing.md, \
         \"Adding a setting\", says, in the same five files",
        String::from_utf8_lossy(&applied.stderr).trim()
    );
    let named = git(&copy.0, &["diff", "--cached", "--name-status"]);
    let mut new = Vec::new();
    for line in named.lines() {
        let (status, file) = line.split_once('\t').unwrap();
        match status {
            "M" if LISTED.contains(&file) => {}
            "A" if file.starts_with("src/settings/") && file.ends_with(".rs") => new.push(file),
            _ => panic!(
                "the patch changes {file} ({status}), which docs/contributing.md does not list \
                 for a new setting:\n{named}"
            ),
        }
    }
    assert_eq!(new.len(), 1, "one new file, the setting's own:\n{named}");
    let count = named.lines().count();
    assert!(count <= 5, "{count} files:\n{named}");

    // It builds, and the declaration's own tests (every owned key has its
    // setting, in order; its bounds refused) pass with it. Its own target
    // dir, kept between runs: only roce-tune itself is rebuilt.
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "--locked",
            "--offline",
            "--lib",
            "--features",
            "test-setting",
        ])
        .args(["--", "settings::", "cni::config::", "cni::keys::"])
        .env("CARGO_TARGET_DIR", repo().join("target/patched"))
        .current_dir(&copy.0)
        .output()
        .expect("run cargo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the patched crate's tests:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The patched list holds the added setting: its declaration test ran
    // over it, not over today's list.
    assert!(
        text.contains("settings::tests::keys_are_unique_found_and_named_once ... ok"),
        "{text}"
    );
    let src = std::fs::read_to_string(copy.0.join("src/settings/mod.rs")).unwrap();
    assert!(src.contains("test_dial::DIAL"), "the patch adds no setting");
}
