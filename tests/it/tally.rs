//! The CNI request tally (`<stateDir>/tally`, src/tally.rs) while its file
//! changes layout under the CNI processes that map it: a file another
//! process has mapped is never truncated (a mapped page past the end of its
//! file is SIGBUS), so no request dies of it, and after a change the counts
//! are exact again.

use crate::common::*;
use serde_json::json;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const DELS: usize = 600;
const WORKERS: usize = 16;

/// Another layout's file put in place the way a process of that layout does
/// it (a new file renamed over the old), so the test itself truncates
/// nothing that a DEL may have mapped: `same_size` a file of this layout's
/// size whose magic is another's (the case a reader maps before it can see
/// the magic), else one of another size.
fn plant_other_layout(tally: &Path, size: u64, same_size: bool, n: u64) {
    let tmp = tally.with_file_name(format!(".tally-test{}", std::process::id()));
    let mut body = if same_size {
        vec![0u8; size as usize]
    } else {
        vec![0u8; 4096 + (n % 3) as usize * 8]
    };
    body[..8].copy_from_slice(b"rt-tal00");
    body[8..16].copy_from_slice(&n.to_le_bytes());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .unwrap();
    std::io::Write::write_all(&mut f, &body).unwrap();
    std::fs::rename(&tmp, tally).unwrap();
}

fn del(node: &Path, cid: &str) -> Run {
    let conf = json!({"cniVersion": "1.1.0", "name": "rail", "type": "roce-tune"});
    Exec::cni(BIN, node, "DEL", cid, "", "net1")
        .stdin(conf.to_string())
        .run()
}

fn dels_counted(state: &Path) -> u64 {
    roce_tune::tally::read(state)
        .expect("the tally is this layout")
        .into_iter()
        .find(|(c, _)| *c == roce_tune::cni::env::Command::Del)
        .map_or(0, |(_, counts)| counts.by_code.iter().map(|(_, n)| n).sum())
}

#[test]
fn six_hundred_dels_while_the_layout_changes_and_none_dies() {
    needs!(root);
    let state = StateDirPath::new();
    let node = write_node_config(&state, None, json!({}));
    // DEL counts itself only in a state dir that exists.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&state.0)
        .unwrap();
    let tally = roce_tune::tally::path(&state.0);
    del(&node, "first").ok();
    let size = std::fs::metadata(&tally).expect("DEL made the tally").len();

    let stop = AtomicBool::new(false);
    let planted = AtomicU64::new(0);
    let next = AtomicU64::new(0);
    let died = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        s.spawn(|| {
            // Mostly the same size: the file a DEL maps before it reads the
            // magic, which is the one a truncation would pull from under it.
            while !stop.load(Ordering::Relaxed) {
                let n = planted.fetch_add(1, Ordering::Relaxed);
                plant_other_layout(&tally, size, n % 4 != 3, n);
                std::thread::sleep(Duration::from_micros(500));
            }
        });
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if i >= DELS {
                        break;
                    }
                    let r = del(&node, &format!("c{i}"));
                    if r.status != 0 || r.signal.is_some() {
                        died.lock().unwrap().push(format!(
                            "DEL {i}: status {} signal {:?}: {}",
                            r.status,
                            r.signal,
                            r.stderr.trim()
                        ));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let died = died.into_inner().unwrap();
    eprintln!(
        "tally: {DELS} DELs while the layout changed {} times: {} failed",
        planted.load(Ordering::Relaxed),
        died.len()
    );
    assert!(
        planted.load(Ordering::Relaxed) >= 50,
        "the layout changed too seldom to prove anything"
    );
    assert!(
        died.is_empty(),
        "{} of {DELS} DELs failed (SIGBUS is signal 7): {:#?}",
        died.len(),
        &died[..died.len().min(5)]
    );

    // After a change, every request counts, in a file of this layout.
    plant_other_layout(&tally, size, true, 0);
    for i in 0..10 {
        del(&node, &format!("after{i}")).ok();
    }
    assert_eq!(dels_counted(&state.0), 10);
}
