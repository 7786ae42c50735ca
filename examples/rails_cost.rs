//! Dev-only: the cost of what the NRI plugin does inside a CreateContainer,
//! `Rails::refresh` and `env_for`, on a node with 128 live entries (8 pods of
//! 16 rails), for docs/performance.md ("The job environment").
//!
//! `rails_cost [ROUNDS [DEAD]]` (root: it makes a state dir under /run)
//! writes the entries as ADDs do (`StateDir::write`), and DEAD more whose
//! pods are gone (orphans not yet released; 0 by default), then times
//! ROUNDS rounds of a refresh with nothing new plus the environment of one
//! 16-rail pod, and as many rounds in which one entry is new (an ADD since
//! the last request), then the same two with the plugin's own refresh,
//! `follow_dir` (inotify: `round_follow_quiet`, `round_follow_one_new`),
//! then as many again after 2 s without a write (no listing at all).
//! The pod is this process's own netns (`/proc/self/ns/net`), so its rails
//! are live; the other pods' recorded netns paths are gone, as an orphan's
//! are, and are never opened. Instructions, repeatable under load:
//!
//! ```text
//! cargo build --release --example rails_cost
//! valgrind --tool=callgrind --toggle-collect=rails_cost::round_quiet \
//!     target/release/examples/rails_cost 100     # or round_one_new, round_still
//! ```

use roce_tune::job_env::{EnvPolicy, Family, Rails};
use roce_tune::netns::{Lookup, NetNs, NsId};
use roce_tune::rdma::reach::Reach;
use roce_tune::state::{Entry, Owned, RailRecord, StateDir, FORMAT};
use std::path::Path;
use std::time::{Duration, Instant};

const PODS: usize = 8;
const RAILS: usize = 16;

fn entry(pod: usize, rail: usize, netns: &str, id: NsId) -> Entry {
    let dev = pod * RAILS + rail;
    Entry {
        version: FORMAT,
        network: format!("rail-{}", rail + 1),
        container_id: format!(
            "{pod:02}f1c0ffee5a1e7c0de0123456789abcdef0123456789abcdef0123456789"
        ),
        ifname: format!("net{}", rail + 1),
        netns: netns.to_owned(),
        netns_id: Some(id),
        reach: Reach::Host,
        device: format!("mlx5_{dev}"),
        port: 1,
        pci: Some(format!("0000:{:02x}:00.{}", 0x10 + dev / 8, 2 + dev % 6)),
        guid: None,
        owned: [(
            "trafficClass".to_string(),
            Owned {
                original: None,
                written: 41,
            },
        )]
        .into(),
        device_info: None,
        pod: None,
        placement: None,
        gid: Some(format!(
            "0000:0000:0000:0000:0000:ffff:0a0a:{:02x}02",
            rail + 1
        )),
        rail: Some(RailRecord {
            gid_index: Some(3),
            traffic_class: Some(41),
            rdma_cm_tos: None,
        }),
        created_ns: 1,
    }
}

/// One request's work: catch up, then the pod's environment.
#[inline(never)]
fn round(rails: &mut Rails, state: &StateDir, pod: &NsId, policy: &EnvPolicy) -> usize {
    rails.refresh(state);
    rails.env_for(pod, policy).map_or(0, |e| e.vars.len())
}

/// `round` when nothing changed since the last one (callgrind tells the two
/// kinds apart by these names).
#[inline(never)]
fn round_quiet(rails: &mut Rails, state: &StateDir, pod: &NsId, policy: &EnvPolicy) -> usize {
    // Not folded with its twin into one function by the linker.
    std::hint::black_box(1) + round(rails, state, pod, policy)
}

/// `round` when the dir has not changed for longer than the quiet margin.
#[inline(never)]
fn round_still(rails: &mut Rails, state: &StateDir, pod: &NsId, policy: &EnvPolicy) -> usize {
    std::hint::black_box(3) + round(rails, state, pod, policy)
}

/// The plugin's request: `follow_dir`, then the pod's environment.
#[inline(never)]
fn follow(rails: &mut Rails, dir: &Path, pod: &NsId, policy: &EnvPolicy) -> usize {
    rails.follow_dir(dir);
    rails.env_for(pod, policy).map_or(0, |e| e.vars.len())
}

/// `follow` when nothing changed since the last one.
#[inline(never)]
fn round_follow_quiet(rails: &mut Rails, dir: &Path, pod: &NsId, policy: &EnvPolicy) -> usize {
    std::hint::black_box(4) + follow(rails, dir, pod, policy)
}

/// `follow` after one entry was written.
#[inline(never)]
fn round_follow_one_new(rails: &mut Rails, dir: &Path, pod: &NsId, policy: &EnvPolicy) -> usize {
    std::hint::black_box(5) + follow(rails, dir, pod, policy)
}

/// `round` after one entry was written.
#[inline(never)]
fn round_one_new(rails: &mut Rails, state: &StateDir, pod: &NsId, policy: &EnvPolicy) -> usize {
    std::hint::black_box(2) + round(rails, state, pod, policy)
}

fn percentiles(mut d: Vec<Duration>) -> String {
    d.sort();
    let at = |p: f64| d[((d.len() as f64 * p) as usize).min(d.len() - 1)].as_secs_f64() * 1e6;
    format!(
        "p50 {:.0} us, p90 {:.0} us, p99 {:.0} us, max {:.0} us",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    )
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(2000, |n| n.parse().expect("ROUNDS is a number"));
    let dead: usize = std::env::args()
        .nth(2)
        .map_or(0, |n| n.parse().expect("DEAD is a number"));
    let base = Path::new("/run/roce-tune-rails-cost");
    let _ = std::fs::remove_dir_all(base);
    std::fs::create_dir_all(base).expect("make /run/roce-tune-rails-cost (root?)");
    let state = StateDir::create(&base.join("state")).expect("the state dir");
    let me = match NetNs::lookup(Path::new("/proc/self/ns/net")).expect("this netns") {
        Lookup::Netns(ns) => ns.id(),
        _ => panic!("/proc/self/ns/net is no netns"),
    };
    for pod in 0..PODS {
        for rail in 0..RAILS {
            let (path, id) = match pod {
                0 => ("/proc/self/ns/net".to_string(), me),
                _ => (
                    format!("/var/run/netns/gone-{pod}"),
                    NsId {
                        dev: 4,
                        ino: 4026540000 + pod as u64,
                    },
                ),
            };
            state.write(&entry(pod, rail, &path, id)).expect("write");
        }
    }
    for i in 0..dead {
        let mut e = entry(1 + i % (PODS - 1), i % RAILS, "/var/run/netns/gone", me);
        e.container_id = format!("{i:08}deadbeef0123456789abcdef0123456789abcdef0123456789abcdef");
        e.netns_id = Some(NsId {
            dev: 4,
            ino: 4026600000 + i as u64,
        });
        state.write(&e).expect("write");
    }
    let policy = EnvPolicy {
        families: vec![Family::Nccl],
        omit: vec![],
    };
    let mut rails = Rails::new();
    let t = Instant::now();
    let vars = round(&mut rails, &state, &me, &policy);
    println!(
        "{} live and {dead} dead entries, first refresh + env_for: {:.0} us ({vars} variables)",
        PODS * RAILS,
        t.elapsed().as_secs_f64() * 1e6
    );
    let mut quiet = Vec::with_capacity(rounds);
    let mut one_new = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let t = Instant::now();
        round_quiet(&mut rails, &state, &me, &policy);
        quiet.push(t.elapsed());
        // An ADD since the last request: one entry rewritten (a new file).
        let mut e = entry(1 + i % (PODS - 1), i % RAILS, "/var/run/netns/gone", me);
        e.netns_id = Some(NsId { dev: 4, ino: 1 });
        e.created_ns = i as u64;
        state.write(&e).expect("write");
        let t = Instant::now();
        round_one_new(&mut rails, &state, &me, &policy);
        one_new.push(t.elapsed());
    }
    println!("nothing new, {rounds} rounds: {}", percentiles(quiet));
    println!("one entry new, {rounds} rounds: {}", percentiles(one_new));
    let dir = base.join("state");
    let mut followed = Rails::new();
    follow(&mut followed, &dir, &me, &policy);
    let mut quiet = Vec::with_capacity(rounds);
    let mut one_new = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let t = Instant::now();
        round_follow_quiet(&mut followed, &dir, &me, &policy);
        quiet.push(t.elapsed());
        let mut e = entry(1 + i % (PODS - 1), i % RAILS, "/var/run/netns/gone", me);
        e.netns_id = Some(NsId { dev: 4, ino: 2 });
        e.created_ns = i as u64;
        state.write(&e).expect("write");
        let t = Instant::now();
        round_follow_one_new(&mut followed, &dir, &me, &policy);
        one_new.push(t.elapsed());
    }
    println!(
        "follow_dir, nothing new, {rounds} rounds: {}",
        percentiles(quiet)
    );
    println!(
        "follow_dir, one entry new, {rounds} rounds: {}",
        percentiles(one_new)
    );
    // No ADD or DEL for longer than `job_env`'s quiet margin: the dir's own
    // stamp proves nothing changed, and no entry is listed.
    std::thread::sleep(Duration::from_millis(2100));
    round(&mut rails, &state, &me, &policy);
    let mut still = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        round_still(&mut rails, &state, &me, &policy);
        still.push(t.elapsed());
    }
    println!(
        "the dir unchanged for 2 s, {rounds} rounds: {}",
        percentiles(still)
    );
    let _ = std::fs::remove_dir_all(base);
}
