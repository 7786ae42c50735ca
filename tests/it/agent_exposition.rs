//! The agent's exposition as Prometheus itself reads it: a snapshot in which
//! every family of the catalogue has samples (label values with quotes,
//! backslashes, newlines and UTF-8 included) is served by the agent's HTTP
//! server and the body is fed to `promtool check metrics`, Prometheus's
//! parser and linter (client_golang's promlint: naming, units, `_total`,
//! histogram rules). It must find nothing.
//!
//! promtool comes from Debian's `prometheus` package, unpacked by
//! integration/setup.sh (`needs!(promtool)`).

use crate::common::*;
use roce_tune::agent::health::Health;
use roce_tune::agent::http::{routes, Limits, Published, Server};
use roce_tune::agent::metrics::{
    render, AgentSample, CniCounts, Command, Histogram, HwCounter, NriSample, PfPauseSample,
    PodSample, QosSample, RailLabels, RailQosSample, RailSample, Reading, SettingCounts,
    SettingSample, Snapshot, CATALOGUE,
};
use roce_tune::wire::exposition::CONTENT_TYPE;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

fn rail(pod: &str, ifname: &str, dev: &str, pci: &str, network: &str) -> RailLabels {
    RailLabels {
        namespace: "team-a".into(),
        pod: pod.into(),
        interface: ifname.into(),
        rdma_device: dev.into(),
        pci_address: pci.into(),
        network: network.into(),
    }
}

fn owned(key: &'static str, now: Option<Reading>, wanted: u32) -> SettingSample {
    SettingSample { key, now, wanted }
}

fn snapshot() -> Snapshot {
    let mut add = Histogram::default();
    for ms in [3, 20, 20, 400, 3100, 61_000] {
        add.observe(Duration::from_millis(ms));
    }
    let mut del = Histogram::default();
    del.observe(Duration::from_micros(950));
    Snapshot {
        rails: vec![
            RailSample {
                labels: rail("train-0", "net1", "mlx5_2", "0000:3b:00.2", "rdma-vf"),
                settings: vec![
                    owned("trafficClass", Some(Reading::Value(41)), 41),
                    owned("rdmaCmTos", Some(Reading::Value(106)), 106),
                ],
                gid_index: Some(Reading::Value(3)),
                placement_near: Some(true),
                hw_counters: vec![
                    HwCounter {
                        port: 1,
                        name: "out_of_sequence".into(),
                        value: 11_649,
                    },
                    HwCounter {
                        port: 1,
                        name: "np_cnp_sent".into(),
                        value: u64::MAX,
                    },
                ],
            },
            RailSample {
                // Values only a validator upstream keeps out; the writer
                // must still produce a valid exposition.
                labels: rail(
                    "we\"ird\\pod",
                    "net2",
                    "mlx5_3",
                    "0000:3b:00.3",
                    "réseau\nsecond line",
                ),
                settings: vec![owned("trafficClass", Some(Reading::Unset), 41)],
                gid_index: Some(Reading::Unset),
                placement_near: Some(false),
                hw_counters: vec![HwCounter {
                    port: 2,
                    name: "sent_pkts".into(),
                    value: 0,
                }],
            },
        ],
        pods: vec![PodSample {
            namespace: "team-a".into(),
            pod: "train-0".into(),
            starved_gpus: 2,
        }],
        drift: SettingCounts::from([("trafficClass", 3), ("rdmaCmTos", 1)]),
        drift_repairs: SettingCounts::from([("trafficClass", 3)]),
        orphan_repairs: 7,
        orphans_pending: 1,
        repair_skipped: 4,
        idle_vfs_holding_class: 2,
        cni: CniCounts {
            requests: vec![
                (Command::Add, 0, 120),
                (Command::Add, 101, 3),
                (Command::Del, 0, 118),
                (Command::Check, 103, 1),
            ],
            durations: vec![(Command::Add, add), (Command::Del, del)],
        },
        agent: AgentSample {
            start_time: UNIX_EPOCH + Duration::from_secs(1_780_000_000),
            repair_interval: Duration::from_secs(60),
            repair_passes: 30,
            repair_pass_failures: 2,
            last_success: Some(UNIX_EPOCH + Duration::from_millis(1_780_001_800_500)),
            last_pass_duration: Some(Duration::from_micros(4_321)),
        },
        nri: Some(NriSample {
            connected: false,
            requests: vec![
                ("CreateContainer", "ok", 40),
                ("Configure", "ok", 2),
                ("unknown", "unimplemented", 1),
            ],
            env_injected: 12,
            env_kept: 3,
        }),
        qos: QosSample {
            rails: vec![
                RailQosSample {
                    labels: rail("train-0", "net1", "mlx5_2", "0000:3b:00.2", "rdma-vf"),
                    verdict: "ok",
                    priority: "3".into(),
                },
                RailQosSample {
                    labels: rail("we\"ird\\pod", "net2", "mlx5_3", "0000:3b:00.3", "r\nx"),
                    verdict: "unknown",
                    priority: String::new(),
                },
            ],
            pfs: vec![PfPauseSample {
                pf: "enp59s0f0np0".into(),
                requests: [u64::MAX; 8],
                indications: [0; 8],
            }],
        },
    }
}

/// GET /metrics from the agent's server: (Content-Type, body).
fn scrape(body: String) -> (String, String) {
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), Limits::default()).unwrap();
    let addr = server.local_addr();
    let handle = server
        .spawn(routes(
            Arc::new(Published::new(body)),
            Arc::new(Health::new(Duration::from_secs(600), None)),
        ))
        .unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    handle.shutdown().unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let ct = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap()
        .to_string();
    (ct, body.to_string())
}

#[test]
fn promtool_check_metrics_finds_nothing_in_a_full_exposition() {
    let text = render(&snapshot());
    for f in CATALOGUE {
        assert!(
            text.contains(&format!("\n# TYPE {} ", f.name))
                || text.starts_with(&format!("# HELP {} ", f.name)),
            "{} has no samples in the test snapshot",
            f.name
        );
    }
    let (content_type, body) = scrape(text.clone());
    assert_eq!(content_type, CONTENT_TYPE);
    assert_eq!(body, text);

    let promtool = needs!(promtool);
    if let Err(said) = promtool::check_metrics(&promtool, &body) {
        panic!("{said}\n--- exposition ---\n{body}");
    }
}

/// The same check must fail on a broken exposition, or the test proves
/// nothing: a counter without `_total`, an unescaped newline in a label
/// value, a family without HELP. (promtool 2.42 does not flag a histogram
/// whose buckets are not cumulative, a repeated series, or `inf` for
/// `+Inf`, which Go's ParseFloat reads: src/wire/exposition.rs's own tests
/// cover those.)
#[test]
fn promtool_check_metrics_rejects_what_the_writer_must_never_produce() {
    let promtool = needs!(promtool);
    for bad in [
        "# HELP x_requests requests\n# TYPE x_requests counter\nx_requests 1\n",
        "# HELP x_info i\n# TYPE x_info gauge\nx_info{a=\"b\nc\"} 1\n",
        "# TYPE x_info gauge\nx_info 1\n",
    ] {
        assert!(
            promtool::check_metrics(&promtool, bad).is_err(),
            "promtool accepted {bad:?}"
        );
    }
}
