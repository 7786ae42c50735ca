//! The counters the kernel keeps for one port of an RDMA device, read from
//! its sysfs: `ports/<n>/hw_counters/` (every driver with `alloc_hw_port_stats`)
//! and `ports/<n>/counters/` (the PMA counters, only where the driver has
//! `process_mad`: mlx5, not rxe). docs/design.md, "RDMA counters".
//!
//! The view decides what is seen: the host's sysfs in the shared mode (a
//! pod's view has the compat device, without counters), the pod's sysfs in
//! the exclusive mode (the device lives in the pod's netns). The caller
//! passes the view a rail's device is reached through (`rdma::reach`): the
//! wrong one would read as "no counters".
//!
//! The names are the driver's (they vary with the firmware and the kernel),
//! filtered by `railCounters`; nothing here names a counter. Every file is
//! read through `View::read` (beneath the root, no links, a regular file of
//! at most a page, opened O_NONBLOCK so a FIFO cannot stall the pass). A
//! file that cannot be read or does not hold a number is skipped and told
//! in `Port::skipped`; the caller decides how often to say it.

use super::RdmaPort;
use crate::node::RailCounters;
use crate::sysfs::{SysfsError, View};
use std::path::PathBuf;

/// The directories of a port's counters, in the order they are read: a name
/// in both is taken from the first.
pub const DIRS: [&str; 2] = ["hw_counters", "counters"];

/// What one read of a port's counters found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Port {
    /// (name, value), sorted by name, at most the cap.
    pub values: Vec<(String, u64)>,
    /// Whether the port has a counter directory at all.
    pub has_counters: bool,
    /// Picked names past the cap, left out.
    pub over_cap: usize,
    /// (file as messages show it, name, why) of each picked file skipped.
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub name: String,
    pub path: String,
    pub why: String,
}

impl Port {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.values[i].1)
    }
}

/// Read `port`'s picked counters through `view`. Never fails: what cannot
/// be read is told in the answer.
pub fn read(view: &View, port: &RdmaPort, pick: &RailCounters) -> Port {
    let mut out = Port::default();
    // (name, directory), picked; a name in both directories is taken from
    // the first (sorted by name then directory, the first of a run kept).
    let mut names: Vec<(String, usize)> = Vec::new();
    for (at, dir) in DIRS.into_iter().enumerate() {
        let rel = port_dir(port).join(dir);
        let listed = match view.list(&rel) {
            Ok(l) => l,
            Err(SysfsError::Missing) => continue,
            Err(e) => {
                out.has_counters = true;
                out.skipped.push(Skipped {
                    name: dir.to_owned(),
                    path: view.show(&rel),
                    why: format!("the directory cannot be listed: {e}"),
                });
                continue;
            }
        };
        out.has_counters = true;
        names.extend(
            listed
                .into_iter()
                .filter(|n| pick.picks(n))
                .map(|n| (n, at)),
        );
    }
    // By name, so the series kept under the cap are the same every pass.
    names.sort();
    names.dedup_by(|later, first| later.0 == first.0);
    out.over_cap = names.len().saturating_sub(pick.max);
    names.truncate(pick.max);
    for (name, at) in names {
        let rel = port_dir(port).join(DIRS[at]).join(&name);
        match view.read(&rel).map(|text| parse(&text)) {
            Ok(Some(v)) => out.values.push((name, v)),
            Ok(None) => out.skipped.push(Skipped {
                path: view.show(&rel),
                name,
                why: "it does not hold a number".into(),
            }),
            Err(e) => out.skipped.push(Skipped {
                path: view.show(&rel),
                name,
                why: e.to_string(),
            }),
        }
    }
    out.values.sort();
    out
}

/// `class/infiniband/<dev>/ports/<n>`.
fn port_dir(port: &RdmaPort) -> PathBuf {
    PathBuf::from(format!(
        "class/infiniband/{}/ports/{}",
        port.device, port.port
    ))
}

/// A counter's text: the kernel prints `%llu` and a newline (`print_hw_stat`,
/// sysfs.c:826-832); anything else is not a counter's.
pub fn parse(text: &str) -> Option<u64> {
    let t = text.strip_suffix('\n').unwrap_or(text);
    if t.is_empty() || t.len() > 20 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::CounterPick;

    fn tree(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("roce-tune-counters-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("class/infiniband/rxe0/ports/1/hw_counters")).unwrap();
        d
    }

    fn port() -> RdmaPort {
        RdmaPort {
            device: "rxe0".into(),
            port: 1,
            pci: None,
            guid: None,
        }
    }

    #[test]
    fn parses_what_the_kernel_prints_and_nothing_else() {
        assert_eq!(parse("0\n"), Some(0));
        assert_eq!(parse("18446744073709551615\n"), Some(u64::MAX));
        for bad in [
            "",
            "\n",
            "-1\n",
            "1 2\n",
            "0x10\n",
            "18446744073709551616\n",
            "12\n\n",
            " 3",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn reads_the_picked_files_by_name_up_to_the_cap() {
        let root = tree("pick");
        let hw = root.join("class/infiniband/rxe0/ports/1/hw_counters");
        for (n, v) in [
            ("sent_pkts", "7\n"),
            ("rcvd_pkts", "9\n"),
            ("lifespan", "12\n"),
            ("ack_deferred", "1\n"),
            ("send_err", "oops\n"),
        ] {
            std::fs::write(hw.join(n), v).unwrap();
        }
        let view = View::open(&root).unwrap();
        let got = read(&view, &port(), &RailCounters::default());
        assert!(got.has_counters);
        assert_eq!(
            got.values,
            [("rcvd_pkts".into(), 9), ("sent_pkts".into(), 7)]
        );
        assert_eq!(got.skipped.len(), 1);
        assert_eq!(got.skipped[0].name, "send_err");
        assert_eq!(got.get("sent_pkts"), Some(7));
        let all = RailCounters {
            pick: CounterPick::All,
            max: 2,
        };
        let got = read(&view, &port(), &all);
        assert_eq!(
            got.values,
            [("ack_deferred".into(), 1), ("rcvd_pkts".into(), 9)]
        );
        assert_eq!(got.over_cap, 2, "send_err and sent_pkts; lifespan never");
        std::fs::remove_dir_all(hw).unwrap();
        let got = read(&view, &port(), &RailCounters::default());
        assert_eq!(got, Port::default(), "no counters at all");
        std::fs::remove_dir_all(root).unwrap();
    }
}
