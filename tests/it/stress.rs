//! Concurrency (`make stress`; not in CI): 64 workers over 16 devices for
//! STRESS_SECONDS (default 60), mixing ADD, repeated ADD, DEL, DEL without
//! a netns and CHECK. Four workers share each device, so co-owners (two
//! attachments on one device port, src/ownership/) happen all the time,
//! with different classes, and every hand-over between them is exercised.
//! At the end, after a DEL of every attachment, every device must hold its
//! original (unset included), and no entry, temp file or quarantined entry
//! may be left.
//!
//! Run: cargo test --release --test it stress:: -- --ignored --nocapture

use crate::common::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEVICES: usize = 16;
const WORKERS: usize = 64;

fn pci(d: usize) -> String {
    format!("0000:0c:{d:02x}.2")
}
fn dev(d: usize) -> String {
    format!("mlx5_{d}")
}
fn rail(d: usize) -> String {
    format!("r{d}")
}
fn ip(d: usize) -> String {
    format!("192.168.{d}.34")
}

/// Distinct originals, unset among them, none equal to a class a worker
/// writes (40..=47), so a missed restore cannot pass for a good one.
fn original(d: usize) -> String {
    match d % 4 {
        0 => String::new(),
        _ => format!("Global tclass={}\n", 100 + d),
    }
}

/// xorshift64*: enough to mix operations, reproducible per worker.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[derive(Default)]
struct Tally {
    ops: BTreeMap<&'static str, u64>,
    failures: Vec<String>,
}

#[test]
#[ignore = "stress: run by `make stress`"]
fn stress_many_workers_many_devices() {
    needs!(root);
    let secs: u64 = std::env::var("STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let tree = Arc::new(Tree::new());
    let state = Arc::new(StateDirPath::new());
    let pod = Pod::new(&rail(0), Some(&format!("{}/24", ip(0))));
    for d in 0..DEVICES {
        if d > 0 {
            pod.add_rail(&rail(d), Some(&format!("{}/24", ip(d))));
        }
        tree.add_device(&pci(d), &dev(d), &original(d));
        tree.set_ipv4_gids(&dev(d), &ip(d));
        tree.bind(&pod, &rail(d), &pci(d));
    }
    write_node_config(&state, Some(&tree), json!({}));
    let netns = pod.path();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (state, tally, netns) = (state.clone(), tally.clone(), netns.clone());
            std::thread::spawn(move || {
                let d = w % DEVICES;
                let conf = json!({
                    "cniVersion": "1.1.0", "name": "rail", "type": "roce-tune",
                    "trafficClass": 40 + (w / DEVICES) * 2 + w % 2,
                    "deviceID": pci(d), "gidTimeoutMs": 1000,
                    "prevResult": prev_result("1.1.0", &rail(d), &netns, &[&format!("{}/24", ip(d))]),
                })
                .to_string();
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (w as u64 + 1));
                let mut generation = 0u32;
                let mut attached = false;
                let mut local: BTreeMap<&'static str, u64> = BTreeMap::new();
                let mut failures = Vec::new();
                let mut step = |kind: &'static str, ns: &str, cid: &str, ok: &[u64]| {
                    let command = kind.split(' ').next().unwrap();
                    let r = run_plugin(&state, command, cid, ns, &rail(d), conf.as_bytes());
                    let code = if r.status == 0 {
                        0
                    } else {
                        serde_json::from_str::<serde_json::Value>(&r.stdout)
                            .ok()
                            .and_then(|v| v["code"].as_u64())
                            .unwrap_or(u64::MAX)
                    };
                    if r.stderr.contains("panicked") || !ok.contains(&code) {
                        failures.push(format!(
                            "worker {w} {kind} {cid}: status {} {} {}",
                            r.status,
                            r.stdout.trim(),
                            r.stderr.trim()
                        ));
                    }
                    *local.entry(kind).or_default() += 1;
                    if code == 102 {
                        *local.entry("CHECK: class held by a co-owner").or_default() += 1;
                    }
                };
                while Instant::now() < deadline {
                    let cid = format!("w{w}g{generation}");
                    match rng.next() % 10 {
                        0..=2 => {
                            let kind = if attached { "ADD repeated" } else { "ADD" };
                            step(kind, &netns, &cid, &[0]);
                            attached = true;
                        }
                        3..=4 => {
                            step("DEL", &netns, &cid, &[0]);
                            attached = false;
                            generation += 1;
                        }
                        5..=6 => {
                            step("DEL without netns", "", &cid, &[0]);
                            attached = false;
                            generation += 1;
                        }
                        _ if attached => {
                            // A co-owner's ADD or DEL may hand the class to
                            // another attachment: CHECK then reports 102.
                            step("CHECK", &netns, &cid, &[0, 102]);
                        }
                        // A runtime CHECKs only what it attached.
                        _ => {
                            step("ADD", &netns, &cid, &[0]);
                            attached = true;
                        }
                    }
                }
                step("DEL final", &netns, &format!("w{w}g{generation}"), &[0]);
                let mut t = tally.lock().unwrap();
                for (k, n) in local {
                    *t.ops.entry(k).or_default() += n;
                }
                t.failures.extend(failures);
            })
        })
        .collect();
    for h in workers {
        h.join().unwrap();
    }
    let took = started.elapsed();

    let t = tally.lock().unwrap();
    let total: u64 = t
        .ops
        .iter()
        .filter(|(k, _)| !k.starts_with("CHECK:"))
        .map(|(_, n)| n)
        .sum();
    println!(
        "\n{WORKERS} workers, {DEVICES} devices, {:.1} s",
        took.as_secs_f64()
    );
    println!("| operation | count |\n|---|---|");
    for (k, n) in &t.ops {
        println!("| {k} | {n} |");
    }
    println!(
        "| total | {total} |\n{:.0} operations/s, {} failures",
        total as f64 / took.as_secs_f64(),
        t.failures.len()
    );
    for f in t.failures.iter().take(10) {
        println!("FAILURE: {f}");
    }

    let mut wrong = Vec::new();
    for d in 0..DEVICES {
        let now = roce_tune::rdma::traffic_class::parse(&tree.tc(&dev(d)));
        let want = roce_tune::rdma::traffic_class::parse(&original(d));
        if now != want {
            wrong.push(format!("{}: {:?}, original {:?}", dev(d), now, want));
        }
    }
    let left: Vec<String> = std::fs::read_dir(&state.0)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !is_state_infrastructure(n))
        .collect();
    println!(
        "devices back to their original: {}/{DEVICES}; state left: {left:?}",
        DEVICES - wrong.len()
    );
    assert!(
        t.failures.is_empty(),
        "{} operations failed",
        t.failures.len()
    );
    assert!(wrong.is_empty(), "devices not restored: {wrong:?}");
    assert!(left.is_empty(), "state left behind: {left:?}");
    assert!(total > 0);
}
