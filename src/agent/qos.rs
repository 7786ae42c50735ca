//! The agent's QoS picture, once a pass: each live rail's verdict
//! (`roce_tune_rail_qos`) and the pause counts of each PF those rails sit
//! on (`roce_tune_pf_pfc_pause_total`). One `rail_qos::Judge` a pass, so
//! each PF is asked once however many rails share it, and a changed DSCP
//! map or PFC shows at the next pass. Nothing is asked with `qosCheck:
//! off`; a rail not judged is said once per device (`rail_qos::say_once`),
//! not every pass.

use super::metrics::{PfPauseSample, QosSample, RailLabels, RailQosSample};
use crate::node::NodeConfig;
use crate::qos::{Class, QosCheck, Unknown, Verdict};
use crate::rail_qos::{DcbSource, Judge, DCB_TIMEOUT};
use crate::state::Entry;
use crate::sysfs::View;
use crate::wire::dcb::Answer;
use std::time::Instant;

/// The verdicts of `live` (each with its metric labels) and their PFs'
/// pause counts, asked of `source`.
pub fn sample(
    node: &NodeConfig,
    host: &View,
    live: &[(&Entry, RailLabels)],
    source: &dyn DcbSource,
) -> QosSample {
    let mut out = QosSample::default();
    if node.qos.check == QosCheck::Off {
        return out;
    }
    let mut judge = Judge::new(source);
    for (entry, labels) in live {
        let class = entry
            .rail
            .as_ref()
            .and_then(|r| r.traffic_class.or(r.rdma_cm_tos));
        let verdict = match class {
            // The class the rail carries is the application's: nothing to
            // judge (as at ADD).
            None => Verdict::Unknown(Unknown::NoPf),
            Some(c) => {
                judge
                    .rail(
                        host,
                        entry.pci.as_deref(),
                        Class(c),
                        node.qos.fabric,
                        Instant::now() + DCB_TIMEOUT,
                    )
                    .verdict
            }
        };
        out.rails.push(RailQosSample {
            labels: labels.clone(),
            verdict: verdict.name(),
            priority: verdict.priority_label(),
        });
    }
    for pf in judge.pfs() {
        if let (Some(netdev), Ok(Answer::State(state))) = (&pf.netdev, &pf.answer) {
            if let Some(p) = state.pfc {
                out.pfs.push(PfPauseSample {
                    pf: netdev.clone(),
                    requests: p.requests,
                    indications: p.indications,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rail_qos::tests::{tree, Recorded};
    use crate::state::RailRecord;
    use crate::wire::dcb::tests::{ack, dscp_table, mlx5_answer, refusal};
    use std::sync::atomic::Ordering;

    fn entry(ifname: &str, pci: Option<&str>, class: Option<u8>) -> Entry {
        let mut e = crate::state::tests::entry("c1");
        e.ifname = ifname.to_owned();
        e.pci = pci.map(str::to_owned);
        e.rail = Some(RailRecord {
            gid_index: None,
            traffic_class: class,
            rdma_cm_tos: None,
        });
        e
    }

    fn labels(ifname: &str) -> RailLabels {
        RailLabels {
            interface: ifname.into(),
            ..RailLabels::default()
        }
    }

    fn node(text: &str) -> NodeConfig {
        NodeConfig::parse(std::path::Path::new("node.json"), text.as_bytes()).unwrap()
    }

    #[test]
    fn each_live_rail_has_its_verdict_and_each_pf_its_pause_counts_once() {
        let (_root, host) = tree("agent", &["p0"]);
        let src = Recorded::new(&[(
            "p0",
            [
                mlx5_answer(0x08, &dscp_table(|d| Some((d >> 3) as u8))),
                ack(),
            ]
            .concat(),
        )]);
        let rails = [
            entry("net1", Some("0000:3b:00.2"), Some(106)),
            entry("net2", Some("0000:3b:00.2"), Some(41)),
            entry("net3", None, Some(106)),
            entry("net4", Some("0000:3b:00.2"), None),
        ];
        let live: Vec<(&Entry, RailLabels)> =
            rails.iter().map(|e| (e, labels(&e.ifname))).collect();
        let n = node(r#"{"railPriority":3,"railLossless":true}"#);
        let q = sample(&n, &host, &live, &src);
        let got: Vec<(&str, &str, &str)> = q
            .rails
            .iter()
            .map(|r| (r.labels.interface.as_str(), r.verdict, r.priority.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("net1", "ok", "3"),
                ("net2", "wrong_priority", "1"),
                ("net3", "unknown", ""),
                ("net4", "unknown", "")
            ]
        );
        assert_eq!(src.asked.load(Ordering::Relaxed), 1, "one PF, asked once");
        assert_eq!(q.pfs.len(), 1);
        assert_eq!((q.pfs[0].pf.as_str(), q.pfs[0].requests[3]), ("p0", 1003));
        // off: nothing asked, no series.
        let q = sample(&node(r#"{"qosCheck":"off"}"#), &host, &live, &src);
        assert_eq!(q, QosSample::default());
        assert_eq!(src.asked.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_pf_without_dcb_gives_unknown_and_no_pause_counts() {
        let (_root, host) = tree("agent-nodcb", &["p0"]);
        let src = Recorded::new(&[("p0", refusal(95))]);
        let rails = [entry("net1", Some("0000:3b:00.2"), Some(106))];
        let live: Vec<(&Entry, RailLabels)> = rails.iter().map(|e| (e, labels("net1"))).collect();
        let q = sample(&node("{}"), &host, &live, &src);
        assert_eq!(
            (q.rails[0].verdict, q.rails[0].priority.as_str()),
            ("unknown", "")
        );
        assert!(q.pfs.is_empty());
    }
}
