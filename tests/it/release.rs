//! The release: which tags `make image` gives (integration/image-tags.sh),
//! in a git repository of the test's own, where it can tag and dirty what it
//! likes: the revision's tag always, the version's too at the release's git
//! tag with a clean tree, and a refusal when HEAD's version tag is not
//! Cargo.toml's. And the two release binaries apart by construction: the
//! CNI plugin holds none of the agent's code.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch git repository with a Cargo.toml of `version`, committed.
struct Repo(PathBuf);

impl Repo {
    fn new(version: &str) -> Repo {
        let dir = std::env::temp_dir().join(unique("rt-release-"));
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo(dir);
        repo.git(&["init", "-q"]);
        std::fs::write(
            repo.0.join("Cargo.toml"),
            format!("[package]\nname = \"x\"\nversion = \"{version}\"\n"),
        )
        .unwrap();
        repo.git(&["add", "Cargo.toml"]);
        repo.git(&["commit", "-q", "-m", "first"]);
        repo
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(["-c", "tag.gpgSign=false", "-c", "commit.gpgSign=false"])
            .args(args)
            .current_dir(&self.0)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// integration/image-tags.sh run here: (exit status, stdout lines, stderr).
    fn tags(&self) -> (i32, Vec<String>, String) {
        let out = Command::new(repo().join("integration/image-tags.sh"))
            .current_dir(&self.0)
            .output()
            .expect("run image-tags.sh");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn rev12(&self) -> String {
        self.git(&["rev-parse", "HEAD"])[..12].to_owned()
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn make_image_tags_the_revision_always_and_the_version_at_its_release_tag() {
    let r = Repo::new("1.2.3");
    let rev = r.rev12();
    assert_eq!(r.tags(), (0, vec![format!("1.2.3-{rev}")], String::new()));

    // The release: HEAD tagged v1.2.3 (a lightweight tag and an annotated one alike).
    r.git(&["tag", "v1.2.3"]);
    assert_eq!(r.tags().1, vec![format!("1.2.3-{rev}"), "1.2.3".into()]);
    r.git(&["tag", "-d", "v1.2.3"]);
    r.git(&["tag", "-a", "-m", "release", "v1.2.3"]);
    assert_eq!(r.tags().1, vec![format!("1.2.3-{rev}"), "1.2.3".into()]);

    // Uncommitted changes: a -dirty build, never the release's tag.
    std::fs::write(
        r.0.join("Cargo.toml"),
        "[package]\nversion = \"1.2.3\"\n# x\n",
    )
    .unwrap();
    let (status, lines, err) = r.tags();
    assert_eq!((status, lines), (0, vec![format!("1.2.3-{rev}-dirty")]));
    assert!(err.contains("uncommitted changes"), "{err}");
    r.git(&["checkout", "-q", "Cargo.toml"]);

    // An untracked file does not make it dirty.
    std::fs::write(r.0.join("notes.txt"), "x").unwrap();
    assert_eq!(r.tags().1.len(), 2);

    // A later commit is not the release.
    r.git(&["commit", "-q", "--allow-empty", "-m", "next"]);
    assert_eq!(r.tags().1, vec![format!("1.2.3-{}", r.rev12())]);

    // HEAD tagged with another version: refused, naming both.
    r.git(&["tag", "v1.2.4"]);
    let (status, lines, err) = r.tags();
    assert_ne!(status, 0, "{lines:?}");
    assert!(err.contains("v1.2.4") && err.contains("1.2.3"), "{err}");
}

#[test]
fn image_tags_need_a_revision() {
    let dir = std::env::temp_dir().join(unique("rt-release-nogit-"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Cargo.toml"), "[package]\nversion = \"1.2.3\"\n").unwrap();
    let out = Command::new(repo().join("integration/image-tags.sh"))
        .current_dir(&dir)
        .env(
            "GIT_CEILING_DIRECTORIES",
            dir.parent().unwrap_or(Path::new("/")),
        )
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a git checkout"),
        "{out:?}"
    );
}

/// Strings only the agent's code holds: its HTTP server's health path, the
/// NRI plugin's pod event, the build-info metric's name. Each is a literal
/// of the module that serves it, so a CNI binary holding one has linked
/// that module in.
const AGENT_ONLY: &[&str] = &["/healthz", "RunPodSandbox", "roce_tune_build_info"];

/// docs/design.md, "Two binaries": the node's CNI bin dir gets `roce-tune`
/// alone, the one-shot plugin every ADD execs; the agent, the NRI plugin and
/// the metrics are `roce-tune-agent`'s. Only fat LTO keeps what the CNI
/// binary never calls out of it: this holds the stripped release
/// `roce-tune` to that, and the agent to holding each string (a search that
/// found nothing anywhere would pass any binary).
#[test]
fn the_cni_binary_holds_none_of_the_agents_code() {
    let (cni, agent) = needs!(release_bins);
    let holds = |bin: &Path, s: &str| {
        let bytes = std::fs::read(bin).unwrap();
        bytes.windows(s.len()).any(|w| w == s.as_bytes())
    };
    for s in AGENT_ONLY {
        assert!(
            holds(&agent, s),
            "{}: no {s:?}, the search is broken",
            agent.display()
        );
    }
    let held: Vec<&str> = AGENT_ONLY
        .iter()
        .copied()
        .filter(|s| holds(&cni, s))
        .collect();
    assert!(
        held.is_empty(),
        "{} holds the agent's {held:?}: a CNI path now reaches the agent's code \
         (a shared module that names it, or a call the optimiser cannot drop); \
         move the shared part below both (docs/design.md, \"Two binaries\")",
        cni.display()
    );
}
