//! Judging a rail's QoS on the node: from the rail's PCI function to its PF
//! (`physfn`), the PF's netdevs (`net/`), their DCB state asked from the
//! calling thread's netns (the host's: a PF stays there), and the pure
//! verdict of `qos`. ADD (`rail::tune`, so a DRA rail's
//! RunPodSandbox too), the agent's pass and `inspect` all judge through
//! [`Judge`].
//!
//! - Where the answer comes from is the caller's choice, a [`DcbSource`]:
//!   the host's rtnetlink ([`HOST_DCB`]) for every command, recorded or
//!   built answers in tests. No test tree branches here: a test tree's PF
//!   names are asked of the real kernel like any other (and it answers
//!   ENODEV or EOPNOTSUPP: `unknown`).
//! - A [`Judge`] asks each PF once: 16 rails share one or two PFs, and a
//!   pass wants one picture of each. The agent makes one per pass, so a
//!   PF's changed map shows at the next.
//! - Why a rail is not judged is said once per device for the life of the
//!   process ([`say_once`]), not at every pass or every pod: a node without
//!   DCB-capable NICs would otherwise log it for ever.
//! - Every ask is bounded: one deadline for all of a PF's netdevs, within
//!   what the caller has left ([`DCB_TIMEOUT`] at most). The kernel answers
//!   an RTM_GETDCB inside the request's own system call (rtnetlink is
//!   synchronous), so the bound only matters for a kernel in trouble.

use crate::netlink::{dcb_state_within, DcbQueryError, Protocol, Socket};
use crate::qos::{self, Class, Fabric, QosCheck, Unknown, Verdict};
use crate::rdma::is_safe_component;
use crate::sysfs::View;
use crate::wire::dcb::Answer;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most a rail's judgment waits for its PF's answers: an ADD goes on
/// after this with `unknown` (its runtime's own timeout is minutes, but
/// the QoS verdict is never worth a slow ADD).
pub const DCB_TIMEOUT: Duration = Duration::from_millis(500);

/// The most netdevs of one PF asked: a PF in switchdev mode shows its VFs'
/// representors under its `net/` too (each answers EOPNOTSUPP; the uplink
/// has DCB), a few dozen at most.
pub const MAX_PF_NETDEVS: usize = 64;

/// The most devices remembered as "said": past it, nothing more is said
/// (a node has a few PFs; the bound keeps a hostile tree from growing it).
const MAX_SAID: usize = 1024;

/// Where a PF's DCB answers come from. `Sync`: ADD's rail is shared with
/// the thread that enters the pod netns.
pub trait DcbSource: Sync {
    /// `netdev`'s IEEE DCB state, answered within `timeout`.
    fn ask(&self, netdev: &str, timeout: Duration) -> Result<Answer, DcbQueryError>;
}

/// The kernel's answer, on an rtnetlink socket opened in the calling
/// thread's netns for each ask (one per PF and pass).
pub struct HostDcb;

impl DcbSource for HostDcb {
    fn ask(&self, netdev: &str, timeout: Duration) -> Result<Answer, DcbQueryError> {
        #[cfg(feature = "fault-injection")]
        if let Some(answer) = planted_answer(netdev) {
            return answer;
        }
        let mut sock = Socket::open(Protocol::Route).map_err(DcbQueryError::Netlink)?;
        dcb_state_within(&mut sock, netdev, timeout)
    }
}

/// Test-only (the fault-injection build): the kernel's answer for
/// `netdev` from the file of that name in the directory
/// ROCE_TUNE_DCB_ANSWERS names, the datagram the socket would have read
/// (`wire::dcb::encode_answer`), decoded as the socket's are. No netdev of
/// the test machines (veth, e1000e, rxe) has DCB, and a DRA rail's verdict
/// is judged in the agent's process, beyond a test's `DcbSource`.
#[cfg(feature = "fault-injection")]
fn planted_answer(netdev: &str) -> Option<Result<Answer, DcbQueryError>> {
    let dir = std::env::var_os("ROCE_TUNE_DCB_ANSWERS")?;
    let bytes = std::fs::read(Path::new(&dir).join(netdev)).ok()?;
    // nlmsg_seq of the answer's first message, bytes 8..12 of its header.
    let seq = u32::from_ne_bytes(bytes.get(8..12)?.try_into().ok()?);
    Some(
        crate::wire::dcb::Exchange::new(seq)
            .feed(&bytes)
            .map_err(DcbQueryError::Dcb)
            .and_then(|a| a.ok_or(DcbQueryError::Dcb(crate::wire::dcb::DcbError::NoReply))),
    )
}

/// What every command asks.
pub static HOST_DCB: HostDcb = HostDcb;

/// What a PF said: the netdev that answered (the first with DCB, else the
/// first asked), and the answer, or why there is none (the line's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PfAnswer {
    /// The PF's PCI address.
    pub pci: String,
    pub netdev: Option<String>,
    pub answer: Result<Answer, String>,
}

impl PfAnswer {
    /// The name lines and labels give the PF: its netdev, else its PCI
    /// address.
    pub fn name(&self) -> &str {
        self.netdev.as_deref().unwrap_or(&self.pci)
    }
}

/// One rail's verdict, and the PF it was asked of (`None`: no PF).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub pf: Option<String>,
    pub verdict: Verdict,
}

/// The rail's PF as sysfs shows it.
enum Pf {
    /// Not a VF (no `physfn`): a PF itself, rxe over a veth, an SF.
    None,
    Some {
        pci: String,
        netdevs: Vec<String>,
    },
}

/// The PF of the PCI function `vf`, from the host's sysfs.
fn pf_of(host: &View, vf: &str) -> Pf {
    if !is_safe_component(vf) {
        return Pf::None;
    }
    let devices = Path::new("bus/pci/devices");
    let pci = match host.link_name(&devices.join(vf).join("physfn")) {
        Ok(name) if is_safe_component(&name) => name,
        _ => return Pf::None,
    };
    let mut netdevs: Vec<String> = host
        .list(&devices.join(&pci).join("net"))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| is_safe_component(n) && n.len() <= 15)
        .collect();
    netdevs.sort();
    netdevs.truncate(MAX_PF_NETDEVS);
    Pf::Some { pci, netdevs }
}

/// The judgments of one command or pass: each PF asked once.
pub struct Judge<'a> {
    source: &'a dyn DcbSource,
    pfs: HashMap<String, PfAnswer>,
}

impl<'a> Judge<'a> {
    pub fn new(source: &'a dyn DcbSource) -> Judge<'a> {
        Judge {
            source,
            pfs: HashMap::new(),
        }
    }

    /// The verdict for the rail of PCI function `vf` (`None`: the rail has
    /// none, as rxe) and class `class`, against `fabric`, asking a PF not
    /// asked yet within `until`. A rail not judged is said once per device.
    pub fn rail(
        &mut self,
        host: &View,
        vf: Option<&str>,
        class: Class,
        fabric: Fabric,
        until: Instant,
    ) -> Judged {
        let pf = vf.map_or(Pf::None, |vf| pf_of(host, vf));
        let Pf::Some { pci, netdevs } = pf else {
            let device = vf.unwrap_or("no PCI function");
            let verdict = qos::verdict(class, None, fabric);
            say_once(
                device,
                &format!("QoS of the rails on {device} (not a VF): {verdict}"),
            );
            return Judged { pf: None, verdict };
        };
        let asked = match self.pfs.get(&pci) {
            Some(a) => a,
            None => {
                let a = ask_pf(self.source, &pci, &netdevs, until);
                self.pfs.entry(pci).or_insert(a)
            }
        };
        let verdict = match &asked.answer {
            Ok(answer) => qos::verdict(class, Some(answer), fabric),
            Err(_) if asked.netdev.is_none() => Verdict::Unknown(Unknown::PfWithoutNetdev),
            Err(_) => Verdict::Unknown(Unknown::Unanswered),
        };
        let name = asked.name().to_owned();
        match (&verdict, &asked.answer) {
            (Verdict::Unknown(_), Err(why)) => say_once(
                &name,
                &format!("QoS of the rails on PF {name}: {verdict}: {why}"),
            ),
            (Verdict::Unknown(_), Ok(_)) => {
                say_once(&name, &format!("QoS of the rails on PF {name}: {verdict}"))
            }
            _ => unsay(&name),
        }
        Judged {
            pf: Some(name),
            verdict,
        }
    }

    /// Every PF asked so far, in PCI order: their pause counts.
    pub fn pfs(&self) -> Vec<&PfAnswer> {
        let mut v: Vec<&PfAnswer> = self.pfs.values().collect();
        v.sort_by(|a, b| a.pci.cmp(&b.pci));
        v
    }
}

/// Ask the PF's netdevs in order, all within `until`, until one has DCB.
fn ask_pf(source: &dyn DcbSource, pci: &str, netdevs: &[String], until: Instant) -> PfAnswer {
    let mut first: Option<PfAnswer> = None;
    for netdev in netdevs {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let got = match source.ask(netdev, left) {
            Ok(a @ Answer::State(_)) => {
                return PfAnswer {
                    pci: pci.to_owned(),
                    netdev: Some(netdev.clone()),
                    answer: Ok(a),
                }
            }
            Ok(a) => Ok(a),
            Err(e) => Err(format!("asking {netdev}: {e}")),
        };
        first.get_or_insert(PfAnswer {
            pci: pci.to_owned(),
            netdev: Some(netdev.clone()),
            answer: got,
        });
    }
    first.unwrap_or_else(|| PfAnswer {
        pci: pci.to_owned(),
        netdev: netdevs.first().cloned(),
        answer: Err(if netdevs.is_empty() {
            format!("PF {pci} has no netdev under its net/")
        } else {
            "no time was left to ask it".to_owned()
        }),
    })
}

/// The devices whose "not judged" line was said, for the process's life.
static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Log `line` the first time `device` is not judged; a device judged since
/// is said again the next time.
pub fn say_once(device: &str, line: &str) {
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.len() < MAX_SAID && said.insert(device.to_owned()) {
        crate::info!("{line}");
    }
}

fn unsay(device: &str) {
    SAID.lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(device);
}

/// What `qosCheck` does with a rail's verdict at ADD (and at a DRA rail's
/// RunPodSandbox): `warn` logs a verdict that is not `ok` (an `unknown` was
/// said once already), `enforce` refuses the definite wrong priority
/// alone: the message (code 108 at the CNI edge) names the class, its DSCP,
/// the priority it lands on, the one expected and the fix. A DSCP missing
/// from the table, PCP trust or no PFC are logged, not refused: the class
/// was not shown to land elsewhere by the PF's own entry.
pub fn gate(check: QosCheck, judged: &Judged, ifname: &str) -> Result<(), String> {
    let pf = judged.pf.as_deref().unwrap_or("?");
    let line = format!("QoS of {ifname} on PF {pf}: {}", judged.verdict);
    match &judged.verdict {
        Verdict::Ok(_) => {
            crate::info!("{line}");
            Ok(())
        }
        Verdict::Unknown(_) => Ok(()),
        Verdict::WrongPriority { landing, expected }
            if check == QosCheck::Enforce && judged.verdict.is_definite_wrong() =>
        {
            let dscp = landing.class.dscp();
            Err(format!(
                "QoS of {ifname}: class {} (DSCP {dscp}) lands on priority {} on PF {pf} by its DSCP map, not on priority {expected} (railPriority); qosCheck is enforce, so the rail is refused and nothing was changed: map DSCP {dscp} to priority {expected} on the PF (`dcb app replace dev {pf} dscp-prio {dscp}:{expected}`), give the network a class whose DSCP the PF puts on {expected}, or set qosCheck to warn",
                landing.class.0, landing.priority
            ))
        }
        _ => {
            crate::warn!("{line}");
            Ok(())
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! The IO step over recorded and built answers: the bytes go through
    //! the codec's own `Exchange`, as the socket's do.

    use super::*;
    use crate::qos::Pause;
    use crate::wire::dcb::tests::{ack, dscp_table, mlx5_answer, nla, refusal, reply_with};
    use crate::wire::dcb::{DcbError, Exchange};
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Answers by netdev name: the bytes a kernel would send, decoded by
    /// the codec as the socket decodes them. Counts the asks.
    pub(crate) struct Recorded {
        pub(crate) answers: Vec<(String, Vec<u8>)>,
        pub(crate) asked: AtomicUsize,
    }

    impl Recorded {
        pub(crate) fn new(answers: &[(&str, Vec<u8>)]) -> Recorded {
            Recorded {
                answers: answers
                    .iter()
                    .map(|(n, b)| (n.to_string(), b.clone()))
                    .collect(),
                asked: AtomicUsize::new(0),
            }
        }
    }

    impl DcbSource for Recorded {
        fn ask(&self, netdev: &str, _: Duration) -> Result<Answer, DcbQueryError> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            let Some((_, bytes)) = self.answers.iter().find(|(n, _)| n == netdev) else {
                return Ok(Answer::NoDcb(crate::wire::dcb::NoDcb::NoDevice));
            };
            let mut ex = Exchange::new(0x0a0b_0c0d);
            match ex.feed(bytes).map_err(DcbQueryError::Dcb)? {
                Some(a) => Ok(a),
                None => Err(DcbQueryError::Dcb(DcbError::NoReply)),
            }
        }
    }

    /// A tree with a PF at 0000:3b:00.0 (netdevs `pf_netdevs`) and its VF
    /// 0000:3b:00.2, and a PCI function without `physfn`.
    pub(crate) fn tree(name: &str, pf_netdevs: &[&str]) -> (std::path::PathBuf, View) {
        let root =
            std::env::temp_dir().join(format!("roce-tune-rail-qos-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let devices = root.join("bus/pci/devices");
        std::fs::create_dir_all(devices.join("0000:3b:00.0/net")).unwrap();
        std::fs::create_dir_all(devices.join("0000:3b:00.2")).unwrap();
        std::fs::create_dir_all(devices.join("0000:5e:00.0")).unwrap();
        for n in pf_netdevs {
            std::fs::create_dir_all(devices.join("0000:3b:00.0/net").join(n)).unwrap();
        }
        std::os::unix::fs::symlink("../0000:3b:00.0", devices.join("0000:3b:00.2/physfn")).unwrap();
        let view = View::open(&root).unwrap();
        (root, view)
    }

    const VF: Option<&str> = Some("0000:3b:00.2");
    const FABRIC: Fabric = Fabric {
        priority: Some(3),
        lossless: true,
    };

    fn soon() -> Instant {
        Instant::now() + DCB_TIMEOUT
    }

    fn default_map() -> Vec<u8> {
        dscp_table(|d| Some((d >> 3) as u8))
    }

    #[test]
    fn a_vf_is_judged_by_its_pfs_answer_and_each_pf_is_asked_once() {
        let (_root, host) = tree("once", &["enp59s0f0np0"]);
        let src = Recorded::new(&[(
            "enp59s0f0np0",
            [mlx5_answer(0x08, &default_map()), ack()].concat(),
        )]);
        let mut judge = Judge::new(&src);
        // Class 106 (DSCP 26) lands on 3, which has PFC: ok; class 41 (DSCP
        // 10) on 1: wrong, definite.
        let ok = judge.rail(&host, VF, Class(106), FABRIC, soon());
        assert_eq!(ok.pf.as_deref(), Some("enp59s0f0np0"));
        assert_eq!(ok.verdict.name(), "ok", "{}", ok.verdict);
        assert_eq!(
            ok.verdict.landing().and_then(|l| l.pause),
            Some(Pause {
                sent: 1003,
                received: 2003
            })
        );
        let wrong = judge.rail(&host, VF, Class(41), FABRIC, soon());
        assert_eq!(wrong.verdict.name(), "wrong_priority");
        assert_eq!(wrong.verdict.priority_label(), "1");
        assert_eq!(src.asked.load(Ordering::Relaxed), 1);
        assert_eq!(judge.pfs().len(), 1);
        // A new judge (the next pass) asks again.
        Judge::new(&src).rail(&host, VF, Class(106), FABRIC, soon());
        assert_eq!(src.asked.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn the_first_netdev_with_dcb_answers_for_the_pf() {
        // A switchdev PF: the VF representors (no DCB) sort before the
        // uplink here.
        let (_root, host) = tree("switchdev", &["eth9", "pf0vf0", "zz-uplink"]);
        let src = Recorded::new(&[
            ("eth9", refusal(95)),
            ("pf0vf0", refusal(95)),
            (
                "zz-uplink",
                [mlx5_answer(0x08, &default_map()), ack()].concat(),
            ),
        ]);
        let j = Judge::new(&src).rail(&host, VF, Class(106), FABRIC, soon());
        assert_eq!(
            (j.pf.as_deref(), j.verdict.name()),
            (Some("zz-uplink"), "ok")
        );
    }

    #[test]
    fn no_pf_no_netdev_or_no_dcb_is_unknown() {
        let (_root, host) = tree("unknown", &[]);
        let src = Recorded::new(&[]);
        let mut judge = Judge::new(&src);
        for vf in [None, Some("0000:5e:00.0"), Some("../etc")] {
            let j = judge.rail(&host, vf, Class(106), FABRIC, soon());
            assert_eq!(j.verdict, Verdict::Unknown(Unknown::NoPf), "{vf:?}");
            assert_eq!(j.pf, None);
        }
        let j = judge.rail(&host, VF, Class(106), FABRIC, soon());
        assert_eq!(j.verdict, Verdict::Unknown(Unknown::PfWithoutNetdev));
        assert_eq!(j.pf.as_deref(), Some("0000:3b:00.0"));
        let (_root, host) = tree("veth", &["veth-pf"]);
        let src = Recorded::new(&[("veth-pf", refusal(95))]);
        let j = Judge::new(&src).rail(&host, VF, Class(106), FABRIC, soon());
        assert_eq!(j.verdict.name(), "unknown");
        assert!(
            j.verdict.to_string().contains("EOPNOTSUPP"),
            "{}",
            j.verdict
        );
        assert_eq!(j.verdict.priority_label(), "");
        assert_eq!(gate(QosCheck::Enforce, &j, "net1"), Ok(()));
    }

    #[test]
    fn bad_answers_are_unknown_never_a_panic() {
        let good = [mlx5_answer(0x08, &default_map()), ack()].concat();
        let mut truncated = good.clone();
        truncated.truncate(good.len() / 2);
        // APP tables past any answer: 1,000 entries in one nest (the codec
        // refuses it by its size, before reading an entry), and 10,000
        // (80,000 bytes: no attribute's length can say it, so they come as
        // a reply of that size, refused before any attribute is read).
        let entries = |n: u32| -> Vec<u8> {
            (0..n)
                .flat_map(|i| crate::wire::dcb::tests::app(5, 3, (i % 64) as u16))
                .collect()
        };
        let thousand = reply_with(
            21,
            &[nla(1, b"p0\0"), nla(13, &nla(3, &entries(1000)))].concat(),
        );
        let ten_thousand = reply_with(21, &[nla(1, b"p0\0"), entries(10_000)].concat());
        // An unknown attribute is skipped: the answer is read.
        let unknown_attr = reply_with(
            21,
            &[
                nla(1, b"p0\0"),
                nla(99, &[1, 2, 3, 4]),
                nla(13, &[nla(42, &[0; 8]), nla(3, &default_map())].concat()),
            ]
            .concat(),
        );
        let oversized = reply_with(21, &[nla(1, b"p0\0"), nla(13, &vec![0; 9000])].concat());
        for (what, bytes, want) in [
            ("truncated", truncated, "unknown"),
            ("1,000 APP entries", [thousand, ack()].concat(), "unknown"),
            (
                "10,000 APP entries",
                [ten_thousand, ack()].concat(),
                "unknown",
            ),
            ("oversized", [oversized, ack()].concat(), "unknown"),
            (
                "unknown attribute",
                [unknown_attr, ack()].concat(),
                "no_pfc",
            ),
            ("an errno that is not no-DCB", refusal(1), "unknown"),
        ] {
            let (_root, host) = tree("bad", &["p0"]);
            let src = Recorded::new(&[("p0", bytes)]);
            let j = Judge::new(&src).rail(&host, VF, Class(106), FABRIC, soon());
            assert_eq!(j.verdict.name(), want, "{what}: {}", j.verdict);
        }
    }

    #[test]
    fn a_deadline_already_past_asks_nothing() {
        let (_root, host) = tree("late", &["p0"]);
        let src = Recorded::new(&[("p0", [mlx5_answer(0x08, &default_map()), ack()].concat())]);
        let j = Judge::new(&src).rail(&host, VF, Class(106), FABRIC, Instant::now());
        assert_eq!(j.verdict, Verdict::Unknown(Unknown::Unanswered));
        assert_eq!(src.asked.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn unknown_is_said_once_per_device_and_again_after_a_judgment() {
        let lines = RefCell::new(Vec::new());
        let said = |dev: &str| {
            let before = SAID.lock().unwrap().contains(dev);
            say_once(dev, "x");
            if !before {
                lines.borrow_mut().push(dev.to_owned());
            }
        };
        let dev = format!("said-once-{}", std::process::id());
        said(&dev);
        said(&dev);
        assert_eq!(lines.borrow().len(), 1);
        unsay(&dev);
        said(&dev);
        assert_eq!(lines.borrow().len(), 2);
    }

    #[test]
    fn enforce_refuses_only_the_definite_wrong_priority_naming_the_fix() {
        let (_root, host) = tree("gate", &["p0"]);
        let src = Recorded::new(&[("p0", [mlx5_answer(0x08, &default_map()), ack()].concat())]);
        let mut judge = Judge::new(&src);
        let wrong = judge.rail(&host, VF, Class(41), FABRIC, soon());
        let e = gate(QosCheck::Enforce, &wrong, "net1").unwrap_err();
        for needle in [
            "net1",
            "class 41",
            "DSCP 10",
            "priority 1",
            "not on priority 3",
            "dscp-prio 10:3",
            "qosCheck",
            "nothing was changed",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
        assert_eq!(gate(QosCheck::Warn, &wrong, "net1"), Ok(()));
        // The class's DSCP missing from the table: reported, not refused.
        let (_root, host) = tree("gate-missing", &["p0"]);
        let without_10 = dscp_table(|d| (d != 10).then_some((d >> 3) as u8));
        let src = Recorded::new(&[("p0", [mlx5_answer(0x08, &without_10), ack()].concat())]);
        let j = Judge::new(&src).rail(&host, VF, Class(41), FABRIC, soon());
        assert_eq!(j.verdict.name(), "wrong_priority");
        assert_eq!(gate(QosCheck::Enforce, &j, "net1"), Ok(()));
        // No PFC, PCP trust: logged, not refused.
        let (_root, host) = tree("gate-nopfc", &["p0"]);
        let src = Recorded::new(&[("p0", [mlx5_answer(0, &default_map()), ack()].concat())]);
        let j = Judge::new(&src).rail(&host, VF, Class(106), FABRIC, soon());
        assert_eq!(j.verdict.name(), "no_pfc");
        assert_eq!(gate(QosCheck::Enforce, &j, "net1"), Ok(()));
        let (_root, host) = tree("gate-pcp", &["p0"]);
        let src = Recorded::new(&[("p0", [mlx5_answer(0x08, &[]), ack()].concat())]);
        let j = Judge::new(&src).rail(&host, VF, Class(106), FABRIC, soon());
        assert_eq!(j.verdict.name(), "pcp_trust");
        assert_eq!(gate(QosCheck::Enforce, &j, "net1"), Ok(()));
    }
}
