//! The fake kubelet (integration/fake_kubelet/fake_kubelet.py: Python
//! grpcio serving the kubelet's PodResources v1 API on a unix socket, the
//! real protobuf and gRPC stack) as a process of a test. tests/it/
//! podresources.rs holds it to the API's documented behaviour; the
//! placement tests serve their pods with it. Each test that starts one says
//! `needs!(grpc_venv)` first: that is the `py` these functions take.

use super::{repo, unique};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// fake_kubelet.py's `--flood` kinds: each an endless run of frames RFC
/// 9113 lets a server send (FLOODS there cites the section of each).
pub const FLOODS: [&str; 7] = [
    "informational",
    "unknown",
    "window-update",
    "ping",
    "settings",
    "priority",
    "padding",
];

/// The uid the tests run untrusted servers and files as: Debian's `nobody`.
pub const NOBODY: u32 = 65534;

/// A running fake kubelet; killed and its directory removed on drop.
pub struct FakeKubelet {
    child: Child,
    dir: PathBuf,
    pub socket: PathBuf,
}

impl FakeKubelet {
    /// A fake kubelet serving `pods` (fake_kubelet.py's `--pods` JSON) with
    /// `flags` (`--no-get`, `--delay-ms N`, `--hang`, `--garbage`,
    /// `--flood KIND`, ...).
    pub fn serving(py: &Path, pods: &str, flags: &[&str]) -> FakeKubelet {
        FakeKubelet::serving_as(py, pods, flags, None)
    }

    /// `serving`, run as `uid` (its own group too, no others) when given,
    /// through util-linux's setpriv: a kubelet socket anyone may serve.
    pub fn serving_as(py: &Path, pods: &str, flags: &[&str], uid: Option<u32>) -> FakeKubelet {
        let dir = std::env::temp_dir().join(unique("rt-kubelet-"));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("kubelet.sock");
        let pods_file = dir.join("pods.json");
        std::fs::write(&pods_file, pods).unwrap();
        let mut command = match uid {
            Some(uid) => {
                std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={uid}"))
                    .arg("--clear-groups")
                    .arg(py);
                c
            }
            None => Command::new(py),
        };
        let mut child = command
            .arg(repo().join("integration/fake_kubelet/fake_kubelet.py"))
            .arg("--socket")
            .arg(&socket)
            .arg("--pods")
            .arg(&pods_file)
            .arg("--calls")
            .arg(dir.join("calls"))
            .args(flags)
            .env("FAKE_KUBELET_LIFETIME_S", "300")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the fake kubelet");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut fake = FakeKubelet { child, dir, socket };
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.starts_with("listening ") => fake,
            other => {
                let _ = fake.child.kill();
                panic!("fake kubelet {flags:?} did not start: {other:?}");
            }
        }
    }

    /// The calls served so far, one line each (`Get <ns>/<name>`, `List`).
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
