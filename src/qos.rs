//! Where a rail's traffic class lands on its PF's QoS, and whether that is
//! where the fabric carries RoCE: pure rules over the PF's decoded DCB state
//! (`wire::dcb`), no IO. Also the node config's three keys that say what
//! the fabric expects (`railPriority`, `railLossless`, `qosCheck`), as pure
//! validation ready for the node config's parser.
//!
//! The chain, each link from the source (docs/design.md, "DCB and the QoS
//! verdict"):
//! - A class byte is the IPv6 traffic class / IPv4 ToS of the rail's RoCE v2
//!   packets: its DSCP is `class >> 2`, its ECN bits `class & 3`.
//! - On the PF, an APP entry of selector DSCP (5, dcbnl.h) puts a DSCP on a
//!   priority. The NIC trusts DSCP when the table holds DSCP entries: mlx5
//!   has no trust attribute, publishes its DSCP map as APP entries only in
//!   DSCP trust, switches to DSCP trust with the first entry and back to PCP
//!   with the last (`en_dcbnl.c`), and `mlnx_qos` infers the trust the same
//!   way. Without DSCP entries the class does not pick the priority at all.
//! - The live table is read, never the firmware's default map (`dscp >> 3`,
//!   what `mlnx_qos` writes when it turns DSCP trust on): an admin may have
//!   changed any entry.
//! - A DSCP missing from a DSCP table: mlx5 resets a deleted entry's DSCP
//!   to priority 0 (`mlx5e_dcbnl_ieee_delapp`), so it lands there. Other
//!   drivers may differ, so that landing is not "definite".
//! - The priority has PFC when its bit of `ieee_pfc.pfc_en` is set.

use crate::wire::dcb::{Answer, DcbState, NoDcb};
use serde_json::{Map, Value};
use std::fmt;

/// A rail's traffic class byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class(pub u8);

impl Class {
    /// The upper six bits (RFC 2474).
    pub fn dscp(self) -> u8 {
        self.0 >> 2
    }

    /// The lower two bits (RFC 3168).
    pub fn ecn(self) -> u8 {
        self.0 & 3
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "class {} (DSCP {}, ECN bits {})",
            self.0,
            self.dscp(),
            self.ecn()
        )
    }
}

/// What the node's admin says the fabric does: the priority RoCE is
/// carried on, and whether that priority is lossless (PFC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fabric {
    /// `railPriority`; `None`: not set, so nothing is judged against it.
    pub priority: Option<u8>,
    /// `railLossless`.
    pub lossless: bool,
}

/// Pause frames on one priority of the PF (`ieee_pfc`'s counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    pub sent: u64,
    pub received: u64,
}

/// Where the class lands on the PF: what `inspect` prints beside the
/// verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landing {
    pub class: Class,
    pub priority: u8,
    /// The DSCP has an entry of its own in the table (false: it lands on
    /// priority 0, mlx5's rule for a DSCP missing from a DSCP table).
    pub listed: bool,
    /// Whether that priority has PFC; `None`: the PF reports no PFC.
    pub pfc: Option<bool>,
    pub pause: Option<Pause>,
}

/// Why a rail cannot be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// The rail has no PF to ask (a veth, rxe on a netdev without one).
    NoPf,
    /// The PF answered that it has no DCB.
    NoDcb(NoDcb),
    /// The rail's PCI function is a VF, but its PF shows no netdev to ask
    /// (a PF bound to no network driver, or its netdevs renamed away).
    PfWithoutNetdev,
    /// The PF's answer could not be had or read (a malformed, oversized or
    /// late answer): what it said is logged where it was asked.
    Unanswered,
    /// The table gives the class's DSCP several priorities (bit `p` of
    /// `priorities` set for each): which one the NIC uses is the driver's.
    Ambiguous { class: Class, priorities: u8 },
    /// `railPriority` is not set: the landing is known, the expectation not.
    NotConfigured(Landing),
}

/// The QoS verdict of one rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok(Landing),
    /// The class lands on another priority than `expected`.
    WrongPriority {
        landing: Landing,
        expected: u8,
    },
    /// The expected priority, but the fabric is lossless and it has no PFC.
    NoPfc(Landing),
    /// The PF's table has no DSCP entries: it trusts PCP, and the class
    /// does not pick the priority, so nothing can be vouched for.
    PcpTrust(Class),
    Unknown(Unknown),
}

impl Verdict {
    /// The `verdict` label of `roce_tune_rail_qos`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Ok(_) => "ok",
            Verdict::WrongPriority { .. } => "wrong_priority",
            Verdict::NoPfc(_) => "no_pfc",
            Verdict::PcpTrust(_) => "pcp_trust",
            Verdict::Unknown(_) => "unknown",
        }
    }

    /// The `priority` label of `roce_tune_rail_qos`: the priority the class
    /// lands on, empty when the verdict is `unknown` or `pcp_trust` (the
    /// class does not pick it, or nothing was read).
    pub fn priority_label(&self) -> String {
        match self {
            Verdict::Ok(l) | Verdict::WrongPriority { landing: l, .. } | Verdict::NoPfc(l) => {
                l.priority.to_string()
            }
            Verdict::PcpTrust(_) | Verdict::Unknown(_) => String::new(),
        }
    }

    /// Where the class lands, when that is known.
    pub fn landing(&self) -> Option<&Landing> {
        match self {
            Verdict::Ok(l)
            | Verdict::WrongPriority { landing: l, .. }
            | Verdict::NoPfc(l)
            | Verdict::Unknown(Unknown::NotConfigured(l)) => Some(l),
            _ => None,
        }
    }

    /// A wrong priority read from the class's own entry of the table: what
    /// `qosCheck: enforce` may refuse. A DSCP missing from the table lands
    /// on 0 by mlx5's rule, not by an entry, so it is reported, not refused.
    pub fn is_definite_wrong(&self) -> bool {
        matches!(self, Verdict::WrongPriority { landing, .. } if landing.listed)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lands = |f: &mut fmt::Formatter<'_>, l: &Landing| {
            write!(f, "{} lands on priority {}", l.class, l.priority)?;
            if !l.listed {
                write!(
                    f,
                    " (its DSCP has no entry in the PF's DSCP table: mlx5 puts it on 0)"
                )?;
            }
            Ok(())
        };
        match self {
            Verdict::Ok(l) => {
                lands(f, l)?;
                match l.pfc {
                    Some(true) => write!(f, ", which has PFC"),
                    _ => Ok(()),
                }
            }
            Verdict::WrongPriority { landing, expected } => {
                lands(f, landing)?;
                write!(
                    f,
                    ", not on priority {expected} (railPriority): check the PF's DSCP map (`dcb app show dev <pf>`) against the class"
                )
            }
            Verdict::NoPfc(l) => {
                lands(f, l)?;
                match l.pfc {
                    None => write!(f, ", but the PF reports no PFC"),
                    Some(_) => write!(f, ", which has no PFC"),
                }?;
                write!(
                    f,
                    " while railLossless says the fabric is lossless: check the PF's PFC (`dcb pfc show dev <pf>`)"
                )
            }
            Verdict::PcpTrust(c) => write!(
                f,
                "{c}: the PF's APP table has no DSCP entries, so it trusts PCP and the class does not pick the priority"
            ),
            Verdict::Unknown(Unknown::NoPf) => {
                write!(f, "not judged: the rail has no PF to ask for DCB")
            }
            Verdict::Unknown(Unknown::NoDcb(why)) => {
                write!(f, "not judged: the PF has no DCB: {why}")
            }
            Verdict::Unknown(Unknown::PfWithoutNetdev) => {
                write!(f, "not judged: the rail's PF shows no netdev to ask for DCB")
            }
            Verdict::Unknown(Unknown::Unanswered) => {
                write!(f, "not judged: the PF's DCB answer could not be read")
            }
            Verdict::Unknown(Unknown::Ambiguous { class, priorities }) => {
                let list: Vec<String> = (0..8)
                    .filter(|p| priorities & (1 << p) != 0)
                    .map(|p| p.to_string())
                    .collect();
                write!(
                    f,
                    "not judged: the PF's table puts the DSCP of {class} on priorities {}",
                    list.join(" and ")
                )
            }
            Verdict::Unknown(Unknown::NotConfigured(l)) => {
                lands(f, l)?;
                write!(f, "; not judged: railPriority is not set")
            }
        }
    }
}

/// The verdict for a rail of class `class`, whose PF answered `pf` (`None`:
/// the rail has no PF), against what the fabric expects.
pub fn verdict(class: Class, pf: Option<&Answer>, fabric: Fabric) -> Verdict {
    let state = match pf {
        None => return Verdict::Unknown(Unknown::NoPf),
        Some(Answer::NoDcb(why)) => return Verdict::Unknown(Unknown::NoDcb(*why)),
        Some(Answer::State(s)) => s,
    };
    let landing = match land(class, state) {
        Err(v) => return v,
        Ok(l) => l,
    };
    let Some(expected) = fabric.priority else {
        return Verdict::Unknown(Unknown::NotConfigured(landing));
    };
    if landing.priority != expected {
        return Verdict::WrongPriority { landing, expected };
    }
    if fabric.lossless && landing.pfc != Some(true) {
        return Verdict::NoPfc(landing);
    }
    Verdict::Ok(landing)
}

/// Where `class` lands in `state`'s DSCP table, or the verdict that says
/// it cannot be told.
fn land(class: Class, state: &DcbState) -> Result<Landing, Verdict> {
    let mut any = false;
    let mut priorities = 0u8;
    for app in state.dscp_entries() {
        any = true;
        // An IEEE priority has three bits (dcbnl.h, `struct dcb_app`): an
        // entry past 7 says nothing the NIC can do, and is passed over.
        if app.protocol == u16::from(class.dscp()) && app.priority < 8 {
            priorities |= 1 << app.priority;
        }
    }
    if !any {
        return Err(Verdict::PcpTrust(class));
    }
    let (priority, listed) = match priorities.count_ones() {
        0 => (0, false),
        1 => (priorities.trailing_zeros() as u8, true),
        _ => return Err(Verdict::Unknown(Unknown::Ambiguous { class, priorities })),
    };
    let pfc = state.pfc.map(|p| p.enabled_on(priority));
    let pause = state.pfc.map(|p| Pause {
        sent: p.requests[usize::from(priority)],
        received: p.indications[usize::from(priority)],
    });
    Ok(Landing {
        class,
        priority,
        listed,
        pfc,
        pause,
    })
}

/// `qosCheck`: what a verdict other than `ok` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosCheck {
    /// The PF is not asked.
    Off,
    /// The verdict is logged and exported; nothing is refused.
    Warn,
    /// ADD also fails on a definite wrong priority
    /// ([`Verdict::is_definite_wrong`]).
    Enforce,
}

/// The node config's QoS keys, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosConfig {
    pub fabric: Fabric,
    pub check: QosCheck,
}

impl Default for QosConfig {
    fn default() -> QosConfig {
        QosConfig {
            fabric: Fabric {
                priority: None,
                lossless: false,
            },
            check: QosCheck::Warn,
        }
    }
}

/// The node config keys this module reads: for the parser's list of keys.
pub const NODE_KEYS: [&str; 3] = ["railPriority", "railLossless", "qosCheck"];

impl QosConfig {
    /// The keys of a node config's object; absent or null is the default.
    /// A refused value names its key and what it takes (the parser prefixes
    /// the file and makes it code 104).
    pub fn from_node_config(obj: &Map<String, Value>) -> Result<QosConfig, String> {
        let mut q = QosConfig::default();
        let set = |key: &str| obj.get(key).filter(|v| !v.is_null());
        if let Some(v) = set("railPriority") {
            q.fabric.priority = Some(
                v.as_u64()
                    .filter(|p| *p < 8)
                    .and_then(|p| u8::try_from(p).ok())
                    .ok_or("railPriority must be a whole number from 0 to 7 (the priority the fabric carries RoCE on)")?,
            );
        }
        if let Some(v) = set("railLossless") {
            q.fabric.lossless = v.as_bool().ok_or(
                "railLossless must be true or false (whether railPriority has PFC on the fabric)",
            )?;
        }
        if let Some(v) = set("qosCheck") {
            q.check = match v.as_str() {
                Some("off") => QosCheck::Off,
                Some("warn") => QosCheck::Warn,
                Some("enforce") => QosCheck::Enforce,
                _ => return Err("qosCheck must be \"off\", \"warn\" or \"enforce\"".into()),
            };
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    //! Each verdict from an answer built from the kernel's layouts, end to
    //! end: bytes, the DCB decoder, the rules.

    use super::*;
    use crate::wire::dcb::tests::{
        ack, answer_of, app, dscp_table, mlx5_answer, nla, refusal, reply_with,
    };
    use crate::wire::dcb::NoDcb;

    /// The firmware's default map, `dscp >> 3` (what `mlnx_qos` writes when
    /// it turns DSCP trust on).
    fn default_map(d: u16) -> Option<u8> {
        Some((d >> 3) as u8)
    }

    fn pf(pfc_en: u8, table: &[u8]) -> Answer {
        answer_of(&[mlx5_answer(pfc_en, table), ack()].concat()).unwrap()
    }

    /// The verdict for `class` on an mlx5 PF with the default map and PFC
    /// on the priorities of `pfc_en`, against `fabric`.
    fn on_default_map(class: u8, pfc_en: u8, fabric: Fabric) -> Verdict {
        verdict(
            Class(class),
            Some(&pf(pfc_en, &dscp_table(default_map))),
            fabric,
        )
    }

    const LOSSLESS_3: Fabric = Fabric {
        priority: Some(3),
        lossless: true,
    };

    #[test]
    fn the_class_lands_on_the_expected_priority_with_pfc() {
        // Class 106: DSCP 26, ECN 2; 26 >> 3 = 3; PFC on priority 3.
        let v = on_default_map(106, 0x08, LOSSLESS_3);
        let Verdict::Ok(l) = v else { panic!("{v:?}") };
        assert_eq!(v.name(), "ok");
        assert_eq!((l.class.dscp(), l.class.ecn()), (26, 2));
        assert_eq!((l.priority, l.listed, l.pfc), (3, true, Some(true)));
        // The pause counts of priority 3 (`requests` / `indications`).
        assert_eq!(
            l.pause,
            Some(Pause {
                sent: 1003,
                received: 2003
            })
        );
        assert!(
            v.to_string().contains("lands on priority 3, which has PFC"),
            "{v}"
        );
    }

    #[test]
    fn a_class_on_another_priority_is_wrong_priority_naming_both() {
        // Class 41: DSCP 10, ECN 1, which the default map puts on 1.
        let v = on_default_map(41, 0x08, LOSSLESS_3);
        assert_eq!(v.name(), "wrong_priority");
        let Verdict::WrongPriority { landing, expected } = v else {
            panic!("{v:?}")
        };
        assert_eq!((landing.priority, expected, landing.listed), (1, 3, true));
        assert!(v.is_definite_wrong());
        let msg = v.to_string();
        for needle in [
            "class 41",
            "DSCP 10",
            "ECN bits 1",
            "lands on priority 1",
            "not on priority 3",
        ] {
            assert!(msg.contains(needle), "{needle}: {msg}");
        }
        // The live table counts, not the default map: the cluster's NICs put
        // DSCP 10 on 0 and DSCP 0 on 1.
        let swapped = dscp_table(|d| match d {
            10 => Some(0),
            0 => Some(1),
            d => default_map(d),
        });
        let fabric0 = Fabric {
            priority: Some(0),
            lossless: false,
        };
        assert_eq!(
            verdict(Class(41), Some(&pf(0, &swapped)), fabric0).name(),
            "ok"
        );
        assert_eq!(
            verdict(Class(0), Some(&pf(0, &swapped)), fabric0).name(),
            "wrong_priority"
        );
    }

    #[test]
    fn a_dscp_missing_from_the_table_lands_on_zero_and_is_not_definite() {
        let without_26 = dscp_table(|d| if d == 26 { None } else { default_map(d) });
        let v = verdict(Class(106), Some(&pf(0x09, &without_26)), LOSSLESS_3);
        let Verdict::WrongPriority {
            landing,
            expected: 3,
        } = v
        else {
            panic!("{v:?}")
        };
        assert_eq!((landing.priority, landing.listed), (0, false));
        assert!(!v.is_definite_wrong());
        assert!(v.to_string().contains("mlx5 puts it on 0"), "{v}");
        let on_zero = Fabric {
            priority: Some(0),
            lossless: true,
        };
        assert_eq!(
            verdict(Class(106), Some(&pf(0x01, &without_26)), on_zero).name(),
            "ok"
        );
    }

    #[test]
    fn the_expected_priority_without_pfc_is_no_pfc_when_lossless() {
        // PFC on 4 only; class 106 lands on 3.
        let answer = pf(0x10, &dscp_table(default_map));
        let v = verdict(Class(106), Some(&answer), LOSSLESS_3);
        assert_eq!(v.name(), "no_pfc");
        assert!(v.to_string().contains("which has no PFC"), "{v}");
        let lossy = Fabric {
            priority: Some(3),
            lossless: false,
        };
        assert_eq!(verdict(Class(106), Some(&answer), lossy).name(), "ok");
        // A PF that reports no PFC at all.
        let no_pfc_attr = [nla(1, b"eth0\0"), nla(13, &nla(3, &app(5, 3, 26)))].concat();
        let answer = answer_of(&[reply_with(21, &no_pfc_attr), ack()].concat()).unwrap();
        let v = verdict(Class(106), Some(&answer), LOSSLESS_3);
        assert_eq!(v.name(), "no_pfc");
        assert!(v.to_string().contains("reports no PFC"), "{v}");
    }

    #[test]
    fn a_table_without_dscp_entries_is_pcp_trust() {
        // Empty, and with a RoCE v1 ethertype entry (selector 1, 0x8915).
        for table in [vec![], app(1, 3, 0x8915)] {
            let v = verdict(Class(106), Some(&pf(0x08, &table)), LOSSLESS_3);
            assert_eq!(v, Verdict::PcpTrust(Class(106)));
            assert!(v.to_string().contains("trusts PCP"), "{v}");
        }
    }

    #[test]
    fn no_pf_or_no_dcb_is_unknown() {
        assert_eq!(
            verdict(Class(106), None, LOSSLESS_3),
            Verdict::Unknown(Unknown::NoPf)
        );
        for (errno, why) in [(95, NoDcb::NotSupported), (19, NoDcb::NoDevice)] {
            let answer = answer_of(&refusal(errno)).unwrap();
            let v = verdict(Class(106), Some(&answer), LOSSLESS_3);
            assert_eq!(v, Verdict::Unknown(Unknown::NoDcb(why)));
            assert_eq!(v.name(), "unknown");
            assert!(v.to_string().contains("not judged"), "{v}");
        }
    }

    #[test]
    fn two_priorities_for_one_dscp_or_no_expectation_is_unknown() {
        let mut table = dscp_table(default_map);
        table.extend(app(5, 5, 26));
        let v = verdict(Class(106), Some(&pf(0x08, &table)), LOSSLESS_3);
        assert_eq!(
            v,
            Verdict::Unknown(Unknown::Ambiguous {
                class: Class(106),
                priorities: 0b0010_1000
            })
        );
        assert!(v.to_string().contains("priorities 3 and 5"), "{v}");
        // An entry past priority 7 is not an IEEE priority: passed over.
        let mut table = dscp_table(|d| if d == 26 { None } else { default_map(d) });
        table.extend(app(5, 9, 26));
        let v = verdict(Class(106), Some(&pf(0x01, &table)), LOSSLESS_3);
        assert!(
            matches!(v, Verdict::WrongPriority { landing, .. } if !landing.listed && landing.priority == 0)
        );
        // railPriority unset: where it lands, not judged.
        let unset = Fabric {
            priority: None,
            lossless: true,
        };
        let v = on_default_map(106, 0x08, unset);
        assert!(matches!(v, Verdict::Unknown(Unknown::NotConfigured(l)) if l.priority == 3));
        assert_eq!(v.landing().map(|l| l.priority), Some(3));
    }

    #[test]
    fn the_node_config_keys_are_validated_and_name_the_key() {
        let parse = |text: &str| {
            let v: Value = serde_json::from_str(text).unwrap();
            QosConfig::from_node_config(v.as_object().unwrap())
        };
        assert_eq!(parse("{}"), Ok(QosConfig::default()));
        assert_eq!(QosConfig::default().check, QosCheck::Warn);
        assert_eq!(
            parse(r#"{"railPriority":null,"railLossless":null,"qosCheck":null}"#),
            Ok(QosConfig::default())
        );
        assert_eq!(
            parse(r#"{"railPriority":3,"railLossless":true,"qosCheck":"enforce"}"#),
            Ok(QosConfig {
                fabric: LOSSLESS_3,
                check: QosCheck::Enforce
            })
        );
        assert_eq!(
            parse(r#"{"railPriority":0,"qosCheck":"off"}"#)
                .unwrap()
                .check,
            QosCheck::Off
        );
        for (text, key) in [
            (r#"{"railPriority":8}"#, "railPriority"),
            (r#"{"railPriority":-1}"#, "railPriority"),
            (r#"{"railPriority":3.5}"#, "railPriority"),
            (r#"{"railPriority":"3"}"#, "railPriority"),
            (r#"{"railLossless":"yes"}"#, "railLossless"),
            (r#"{"railLossless":1}"#, "railLossless"),
            (r#"{"qosCheck":"strict"}"#, "qosCheck"),
            (r#"{"qosCheck":"Warn"}"#, "qosCheck"),
            (r#"{"qosCheck":true}"#, "qosCheck"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(key), "{text}: {e}");
        }
        assert_eq!(NODE_KEYS, ["railPriority", "railLossless", "qosCheck"]);
    }
}
