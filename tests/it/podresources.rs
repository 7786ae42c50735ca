//! `roce_tune::podresources` against a fake kubelet (integration/fake_kubelet:
//! Python grpcio serving the PodResources v1 API on a unix socket) in each
//! of its modes: results, error kinds, and that every call returns within
//! its timeout and a small margin.
//!
//! The fake runs from the venv integration/setup.sh makes
//! (integration/.build/venv-grpc, or under $ROCE_TUNE_BUILD_DIR): each test
//! says `needs!(grpc_venv)`, which skips without it, except under
//! ROCE_TUNE_REQUIRE_ROOT=1 (CI), where a missing venv is a failure.

use crate::common::kubelet::{FakeKubelet, FLOODS, NOBODY};
use crate::common::{needs, repo, unique};
use roce_tune::podresources::{
    pod_devices, Device, Error, PodDevices, Query, Source, GET_RESPONSE_MAX, MAX_RESPONSE,
};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a call may take beyond its timeout: the client polls against one
/// deadline, so this is scheduling slack on a busy 2-core machine.
const MARGIN: Duration = Duration::from_millis(250);

const PODS: &str = r#"{"pods": [
  {"name": "trainer", "namespace": "team-a", "cpu_ids": [4, 5],
   "containers": [
     {"name": "sidecar", "devices": [
        {"resource": "nvidia.com/rdma_vf", "ids": ["0000:17:00.2"], "numa": [0]}]},
     {"name": "main", "cpu_ids": [4, 5], "devices": [
        {"resource": "nvidia.com/gpu", "ids": ["GPU-0", "GPU-1"], "numa": [0]},
        {"resource": "nvidia.com/rdma_vf", "ids": ["0000:17:00.2", "0000:17:00.3"], "numa": [0, 1]}]}]},
  {"name": "trainer", "namespace": "team-b",
   "containers": [{"name": "main", "devices": [
        {"resource": "nvidia.com/gpu", "ids": ["GPU-7"]},
        {"resource": "nvidia.com/rdma_vf", "ids": ["0000:b1:00.4"]}]}]},
  {"name": "idle", "namespace": "team-a", "containers": [{"name": "main"}]}
]}"#;

/// The fake kubelet serving PODS.
fn start(py: &Path, flags: &[&str]) -> FakeKubelet {
    FakeKubelet::serving(py, PODS, flags)
}

fn q<'a>(namespace: &'a str, name: &'a str) -> Query<'a> {
    Query {
        namespace,
        name,
        uid: None,
    }
}

type Answer = Result<Option<(PodDevices, Source)>, Error>;

/// One call, asserted to return within `timeout` + MARGIN.
fn call(socket: &Path, timeout: Duration, query: &Query) -> (Answer, Duration) {
    let t = Instant::now();
    let r = pod_devices(socket, timeout, query);
    let took = t.elapsed();
    assert!(
        took <= timeout + MARGIN,
        "{query:?} took {took:?}, over {timeout:?} + {MARGIN:?}: {r:?}"
    );
    (r, took)
}

fn dev(resource: &str, id: &str) -> Device {
    Device {
        resource: resource.into(),
        id: id.into(),
    }
}

/// team-a/trainer: the sidecar's VF is also the main container's, once.
fn trainer_a() -> Vec<Device> {
    vec![
        dev("nvidia.com/rdma_vf", "0000:17:00.2"),
        dev("nvidia.com/gpu", "GPU-0"),
        dev("nvidia.com/gpu", "GPU-1"),
        dev("nvidia.com/rdma_vf", "0000:17:00.3"),
    ]
}

fn trainer_b() -> Vec<Device> {
    vec![
        dev("nvidia.com/gpu", "GPU-7"),
        dev("nvidia.com/rdma_vf", "0000:b1:00.4"),
    ]
}

const T: Duration = Duration::from_secs(5);

fn found(r: Answer, source: Source) -> Vec<Device> {
    match r {
        Ok(Some((d, s))) => {
            assert_eq!(s, source);
            d.devices
        }
        other => panic!("expected devices from {source:?}: {other:?}"),
    }
}

#[test]
fn fake_kubelet_matches_the_documented_api() {
    let py = needs!(grpc_venv);
    let out = Command::new(&py)
        .args(["-m", "unittest", "discover", "-s"])
        .arg(repo().join("integration/fake_kubelet"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("Ran 12 tests"), "{err}");
}

#[test]
fn get_finds_the_pod_by_namespace_and_name() {
    let py = needs!(grpc_venv);
    let fake = start(&py, &[]);
    let (r, _) = call(&fake.socket, T, &q("team-a", "trainer"));
    assert_eq!(found(r, Source::Get), trainer_a());
    // Same name, other namespace: the other pod's devices, and only those.
    let (r, _) = call(&fake.socket, T, &q("team-b", "trainer"));
    assert_eq!(found(r, Source::Get), trainer_b());
    let (r, _) = call(&fake.socket, T, &q("team-a", "idle"));
    assert_eq!(found(r, Source::Get), vec![]);
}

#[test]
fn an_unknown_pod_is_none_after_get_then_list() {
    let py = needs!(grpc_venv);
    let fake = start(&py, &[]);
    // Get answers UNKNOWN "pod ... not found"; List on the same connection
    // (HPACK table carried over) does not have it either.
    for (ns, name) in [
        ("team-c", "trainer"),
        ("team-a", "trainer-0"),
        ("team", "a-trainer"),
    ] {
        let (r, _) = call(&fake.socket, T, &q(ns, name));
        assert!(matches!(r, Ok(None)), "{ns}/{name}: {r:?}");
    }
}

#[test]
fn without_get_list_is_used_and_filtered_by_namespace() {
    let py = needs!(grpc_venv);
    for flag in ["--no-get", "--get-disabled"] {
        let fake = start(&py, &[flag]);
        let (r, _) = call(&fake.socket, T, &q("team-a", "trainer"));
        assert_eq!(found(r, Source::List), trainer_a(), "{flag}");
        let (r, _) = call(&fake.socket, T, &q("team-b", "trainer"));
        assert_eq!(found(r, Source::List), trainer_b(), "{flag}");
        let (r, _) = call(&fake.socket, T, &q("team-c", "trainer"));
        assert!(matches!(r, Ok(None)), "{flag}: {r:?}");
    }
}

#[test]
fn a_slow_kubelet_within_the_timeout_answers() {
    let py = needs!(grpc_venv);
    let fake = start(&py, &["--delay-ms", "300"]);
    let (r, took) = call(
        &fake.socket,
        Duration::from_secs(3),
        &q("team-a", "trainer"),
    );
    assert_eq!(found(r, Source::Get), trainer_a());
    assert!(took >= Duration::from_millis(300), "{took:?}");
    // Not found: Get then List, each 300 ms late, within 3 s.
    let (r, took) = call(&fake.socket, Duration::from_secs(3), &q("team-c", "x"));
    assert!(matches!(r, Ok(None)), "{r:?}");
    assert!(took >= Duration::from_millis(600), "{took:?}");
}

#[test]
fn a_slow_kubelet_beyond_the_timeout_times_out() {
    let py = needs!(grpc_venv);
    let fake = start(&py, &["--delay-ms", "2000"]);
    for ms in [100, 400] {
        let timeout = Duration::from_millis(ms);
        let (r, took) = call(&fake.socket, timeout, &q("team-a", "trainer"));
        assert!(matches!(r, Err(Error::Timeout { .. })), "{ms} ms: {r:?}");
        assert!(took >= timeout, "{took:?}");
    }
}

#[test]
fn a_hanging_kubelet_times_out() {
    let py = needs!(grpc_venv);
    let fake = start(&py, &["--hang"]);
    let timeout = Duration::from_millis(300);
    let (r, took) = call(&fake.socket, timeout, &q("team-a", "trainer"));
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    assert!(took >= timeout, "{took:?}");
}

#[test]
fn garbage_is_a_protocol_error_at_once() {
    let py = needs!(grpc_venv);
    for seed in ["1", "2", "3"] {
        let fake = start(&py, &["--garbage", "--seed", seed]);
        let (r, took) = call(
            &fake.socket,
            Duration::from_secs(2),
            &q("team-a", "trainer"),
        );
        match &r {
            // No byte of what the server sent is quoted.
            Err(e @ Error::Protocol(_)) => assert!(e.to_string().is_ascii(), "{e}"),
            _ => panic!("seed {seed}: {r:?}"),
        }
        assert!(took < Duration::from_secs(1), "seed {seed}: {took:?}");
    }
}

#[test]
fn a_huge_answer_is_too_large() {
    let py = needs!(grpc_venv);
    // Get answers one pod (at most POD_BYTES_MAX), List every pod of the
    // node (Multus's limit).
    for (flags, max) in [
        (&["--huge"][..], GET_RESPONSE_MAX),
        (&["--huge", "--no-get"][..], MAX_RESPONSE),
    ] {
        let fake = start(&py, flags);
        let (r, _) = call(
            &fake.socket,
            Duration::from_secs(10),
            &q("team-a", "trainer"),
        );
        match r {
            Err(Error::TooLarge { size, limit }) => {
                assert_eq!(limit, max as u64);
                assert!(size > limit, "{size}");
            }
            other => panic!("{flags:?}: {other:?}"),
        }
    }
}

#[test]
fn no_socket_is_no_socket() {
    let dir = std::env::temp_dir().join(unique("rt-podres-nosock-"));
    std::fs::create_dir_all(&dir).unwrap();
    let (r, _) = call(&dir.join("kubelet.sock"), T, &q("team-a", "trainer"));
    assert!(matches!(r, Err(Error::NoSocket(_))), "{r:?}");
    // A stopped kubelet leaves its socket file: ECONNREFUSED.
    let stale = dir.join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let (r, took) = call(&stale, T, &q("team-a", "trainer"));
    assert!(matches!(r, Err(Error::NoSocket(_))), "{r:?}");
    assert!(took < Duration::from_millis(100), "{took:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every bound a real one: a peer that never stops sending valid
/// frames held a call for seconds, since the bound was checked only before
/// a read that would block. Each call must end within its timeout and the
/// usual margin, with a timeout or a protocol error, and no byte of the
/// flood quoted.
#[test]
fn a_peer_that_never_stops_sending_is_cut_off_within_the_bound() {
    let py = needs!(grpc_venv);
    let timeout = Duration::from_millis(250);
    let mut failures = Vec::new();
    for kind in FLOODS {
        let peer = start(&py, &["--flood", kind]);
        let socket = peer.socket.clone();
        let (tx, rx) = mpsc::channel();
        let t = Instant::now();
        std::thread::spawn(move || {
            let _ = tx.send(pod_devices(&socket, timeout, &q("team-a", "trainer")));
        });
        // A call that never ends is reported, not waited on forever.
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(r) => {
                let took = t.elapsed();
                if took > timeout + MARGIN {
                    failures.push(format!("{kind}: {took:?} ({r:?})"));
                }
                match &r {
                    Err(Error::Timeout { .. }) | Err(Error::Protocol(_)) => {}
                    other => failures.push(format!("{kind}: {other:?}")),
                }
                if let Err(e) = &r {
                    assert!(!e.to_string().contains("hostile!"), "{e}");
                }
            }
            Err(_) => failures.push(format!("{kind}: no answer within 5 s")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Who answers: any uid may serve the kubelet's socket path if
/// it can bind it first, and whoever answers decides the placement verdict.
/// The socket's peer must be root (SO_PEERCRED): a kubelet served by
/// `nobody` is refused, named, and never asked.
#[test]
fn a_kubelet_socket_served_by_another_uid_is_not_trusted() {
    needs!(root);
    let py = needs!(grpc_venv);
    let fake = FakeKubelet::serving_as(&py, PODS, &[], Some(NOBODY));
    let (r, _) = call(&fake.socket, T, &q("team-a", "trainer"));
    match r {
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("uid 65534") && m.contains("not root"), "{m}");
        }
        Ok(found) => panic!("answered by nobody and believed: {found:?}"),
    }
}
