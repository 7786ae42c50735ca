//! The NRI plugin's connection under a runtime that misbehaves, as a process
//! (`roce-tune-agent nri`, and the agent's `--nri`): reconnects bounded when
//! every session ends at once, memory bounded when a Synchronize keeps
//! coming, and the socket's directory held to the node's own rule. The
//! raw peer (tests/it/nri.rs, `Raw`) plays what a real runtime only does
//! when broken; nri-sim (containerd's own adaptation) plays the rest.

use crate::common::*;
use crate::nri::{socket, Plugin, Raw};
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

/// The lines of the reconnect loop: a session's start and end, and a
/// connect that failed.
fn reconnect_lines(log: &str) -> usize {
    log.lines()
        .filter(|l| {
            l.contains("registered as")
                || l.contains("disconnected:")
                || l.contains("not registered:")
                || l.contains("cannot connect")
        })
        .count()
}

/// A peer that answers the plugin's RegisterPlugin and closes at once,
/// for `span`: the connections it took.
fn register_and_close(raw: &Raw, span: Duration) -> usize {
    let t = Instant::now();
    let mut n = 0;
    while let Some(left) = span.checked_sub(t.elapsed()) {
        if raw.try_accept_registering(left).is_none() {
            break;
        }
        n += 1;
    }
    n
}

/// A runtime that takes the registration and closes (a crash loop, or a
/// proxy with nothing behind it): the plugin backs off from 25 ms to 5 s
/// between sessions under a second, so 5 s of it are at most 20
/// reconnects, and says so at most once per 10 s with a count of the
/// lines it left out. The back-off's wait ends at SIGTERM, within the
/// agent's second, in `nri` and in `agent --nri`.
#[test]
fn a_runtime_that_closes_every_session_at_once_gets_at_most_20_reconnects_in_5_s() {
    needs!(root);
    let (_dir, sock) = socket("nri-flap-");
    let raw = Raw::bind(&sock);
    let mut plugin = Plugin::nri(&sock, json!({}));
    let five = register_and_close(&raw, Duration::from_secs(5));
    let log = plugin.log();
    let lines = reconnect_lines(&log);
    let _ = writeln!(
        std::io::stderr(),
        "nri: {five} connections and {lines} reconnect lines in 5 s"
    );
    assert!(
        (3..=20).contains(&five),
        "{five} connections in 5 s: {}",
        log.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    assert!(lines <= 4, "{lines} lines in 5 s:\n{log}");
    // The peer keeps at it: within 10 s of the last line one more comes,
    // with the count of those not logged meanwhile.
    let said = "reconnect lines not logged in the last";
    let t = Instant::now();
    let mut total = five;
    while !plugin.log().contains(said) {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no {said:?} line within 15 s:\n{}",
            plugin.log()
        );
        total += register_and_close(&raw, Duration::from_millis(200));
    }
    let log = plugin.log();
    let line = log.lines().find(|l| l.contains(said)).unwrap();
    let left_out: usize = line
        .split(said)
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"));
    // Each session is two lines (registered, disconnected): every one not
    // logged is counted, none twice.
    assert!(
        left_out >= 1 && left_out <= 2 * total,
        "{left_out} of {total} sessions' lines: {line}"
    );
    // A wait of seconds now: SIGTERM ends it.
    let (status, took) = plugin.terminate();
    assert!(
        status.success() && took < Duration::from_secs(1),
        "{status} after {took:?}"
    );

    let (_dir, sock) = socket("nri-flap-agent-");
    let raw = Raw::bind(&sock);
    let mut agent = Plugin::start(
        &sock,
        json!({"metricsAddress": "127.0.0.1:0"}),
        &["agent", "--every", "3600", "--nri"],
    );
    let three = register_and_close(&raw, Duration::from_secs(3));
    assert!(
        (3..=20).contains(&three),
        "agent --nri: {three} connections in 3 s"
    );
    let (status, took) = agent.terminate();
    assert!(
        status.success() && took < Duration::from_secs(1),
        "agent --nri: {status} after {took:?}"
    );
}
