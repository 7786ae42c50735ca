//! The keys of a network config, declared once: the parser (`config`) reads
//! a value only through a `Key`, so this list is at once what it reads and
//! what a key it does not know is judged against.
//!
//! A key roce-tune does not know is one of two things. One edit (or a
//! letter's case) away from one of its own, it is a typo: `"gidindex": 1`
//! would leave the check at index 3 and `"trafficclass": 41` the class
//! unwritten, silently, so ADD refuses it (7, "did you mean"). Any other is
//! another tool's and is ignored with one warning line: the CNI spec lets a
//! plugin configuration object carry fields the plugin does not define
//! (SPEC.md, "Plugin configuration objects"), and libcni and Multus add
//! their own (docs/design.md, "The CNI protocol" and "Multus 4.2").

use super::error::code;
use serde_json::{Map, Value};

/// Whose a key is: what it means in a network config, and whether a key
/// near it is a typo of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// A setting of roce-tune's (the network config reference): a key one
    /// edit from it is a typo of it.
    RoceTune,
    /// A node setting: a host path, refused in a network config (a tenant
    /// may not name one); a key one edit from it is a typo of it too.
    Node,
    /// The runtime's: injected by libcni (`name`, `cniVersion`,
    /// `prevResult`, `runtimeConfig`, GC's attachments), reserved by the
    /// spec (`args`, `capabilities`, `type`). Known, so never warned
    /// about; nobody writes it for roce-tune, so never a typo target.
    Runtime,
}

/// Declares `Key`, its `ALL`, its `name`, its `Whose` and, for a per-rail
/// setting roce-tune owns, its `Owned` from one list, so that a key cannot
/// be read without being listed (the parser takes a `Key`, never a string)
/// nor listed without its owner. A row may be compiled only under a
/// `cfg` (`@cfg(...)`): the test-only setting's.
macro_rules! network_config_keys {
    ($($(#[doc = $doc:literal])* $(@cfg($cfg:meta))?
       $variant:ident = $name:literal, $whose:ident $(, owned $owned:tt)?;)*) => {
        /// A key of a network config that roce-tune knows.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Key {
            $($(#[doc = $doc])* $(#[cfg($cfg)])? $variant,)*
        }

        impl Key {
            /// Every key, in the order of the network config reference.
            pub const ALL: &'static [Key] = &[$($(#[cfg($cfg)])? Key::$variant,)*];

            /// The key as JSON spells it.
            pub const fn name(self) -> &'static str {
                match self {
                    $($(#[cfg($cfg)])? Key::$variant => $name,)*
                }
            }

            pub const fn whose(self) -> Whose {
                match self {
                    $($(#[cfg($cfg)])? Key::$variant => Whose::$whose,)*
                }
            }

            /// The declaration of the per-rail setting this key asks ADD to
            /// own (`crate::settings` holds its implementation), `None` for
            /// every other key.
            pub const fn owned(self) -> Option<Owned> {
                match self {
                    $($(#[cfg($cfg)])? Key::$variant => owned_row!($($owned)?),)*
                }
            }
        }
    };
}

/// A row's `owned { ... }`, or none.
macro_rules! owned_row {
    () => {
        None
    };
    ({ $($field:ident: $value:expr),* $(,)? }) => {
        Some(Owned { $($field: $value),* })
    };
}

/// What a per-rail setting roce-tune owns declares, once, beside its key:
/// everything the parser, a rail profile, the error table and the messages
/// need that is not how its file is read and written (that is its
/// `rdma::setting::Setting`, listed in `crate::settings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owned {
    /// How messages and logs name it.
    pub title: &'static str,
    /// Its bounds: a value outside is refused (7) with nothing changed.
    pub min: u32,
    pub max: u32,
    /// Whether a rail profile (the node config's `draRails`) may carry it.
    pub profile: bool,
    /// The CNI code of its file's failures (a row of `codes!`,
    /// docs/errors.md).
    pub code: u32,
}

network_config_keys! {
    /// libcni injects it into each plugin of a conflist (libcni
    /// `buildOneConfig`).
    CniVersion = "cniVersion", Runtime;
    Name = "name", Runtime;
    /// The executable's name: not checked (a renamed binary still works).
    Type = "type", Runtime;
    /// Declares what `runtimeConfig` may carry (SPEC.md "Deriving
    /// runtimeConfig"); roce-tune's is `CNIDeviceInfoFile`.
    Capabilities = "capabilities", Runtime;
    RuntimeConfig = "runtimeConfig", Runtime;
    /// Multus puts the pod's `cni-args` under `args.cni`.
    Args = "args", Runtime;
    PrevResult = "prevResult", Runtime;
    /// GC's list (spec 1.1.0); libcni sends it under both names
    /// (`libcni/api.go`, GCNetworkList).
    ValidAttachments = "cni.dev/valid-attachments", Runtime;
    Attachments = "cni.dev/attachments", Runtime;
    Sysctl = "sysctl", RoceTune;
    TrafficClass = "trafficClass", RoceTune, owned {
        title: "traffic class", min: 0, max: 255, profile: true, code: code::TRAFFIC_CLASS,
    };
    PodTrafficClasses = "podTrafficClasses", RoceTune;
    RdmaCmTos = "rdmaCmTos", RoceTune, owned {
        title: "rdma_cm default ToS", min: 0, max: 255, profile: true, code: code::RDMA_CM_TOS,
    };
    GidIndex = "gidIndex", RoceTune;
    GidCheck = "gidCheck", RoceTune;
    GidTimeoutMs = "gidTimeoutMs", RoceTune;
    /// Multus injects it, and `pciBusID`, into every plugin of a conflist
    /// (`addDeviceIDInConfList`); roce-tune reads both as a cross-check, and
    /// a person writes them by hand too, so a near miss is a typo.
    DeviceId = "deviceID", RoceTune;
    PciBusId = "pciBusID", RoceTune;
    RdmaPort = "rdmaPort", RoceTune;
    PlacementCheck = "placementCheck", RoceTune;
    GdrLevel = "gdrLevel", RoceTune;
    LogLevel = "logLevel", RoceTune;
    /// A setting that exists only to prove the declaration carries one
    /// (docs/contributing.md, "Adding a setting"): a file only a test tree
    /// has, never in a release build.
    @cfg(feature = "test-setting")
    TestKnob = "testKnob", RoceTune, owned {
        title: "test knob", min: 0, max: 15, profile: true, code: code::IO_FAILURE,
    };
    StateDir = "stateDir", Node;
    SysfsRoot = "sysfsRoot", Node;
    LogFile = "logFile", Node;
}

/// Keys the spec reserves for the protocol, whatever follows the prefix
/// (SPEC.md, "Plugin configuration objects": "Any keys starting with
/// `cni.dev/`").
const RESERVED_PREFIX: &str = "cni.dev/";

impl Key {
    /// The key `name` is, spelled exactly.
    pub fn named(name: &str) -> Option<Key> {
        Key::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// A key that a near miss of is a typo: roce-tune's own and the node's.
    fn is_typo_target(self) -> bool {
        self.whose() != Whose::Runtime
    }
}

/// A key of a network config that roce-tune does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stray {
    pub key: String,
    /// The key it is one edit (or a letter's case) from, when it is a typo.
    pub meant: Option<Key>,
}

/// The keys of `obj` that roce-tune does not know, each judged: a typo of
/// one of its keys, or another tool's. A known key is never a typo of
/// another, however near.
pub fn strays(obj: &Map<String, Value>) -> Vec<Stray> {
    obj.keys()
        .filter(|k| Key::named(k).is_none() && !k.starts_with(RESERVED_PREFIX))
        .map(|k| Stray {
            key: k.clone(),
            meant: meant(k),
        })
        .collect()
}

/// The key `typed` is a typo of: one edit from it once the letters' case
/// is set aside. The first in `Key::ALL` where two would do (none would
/// today: `tests::no_two_keys_are_one_edit_apart`).
pub fn meant(typed: &str) -> Option<Key> {
    Key::ALL
        .iter()
        .copied()
        .filter(|k| k.is_typo_target())
        .find(|k| at_most_one_edit(typed, k.name()))
}

/// Whether `a` becomes `b`, ASCII case aside, by at most one insertion,
/// deletion, substitution, or transposition of two adjacent characters:
/// a Damerau-Levenshtein distance of at most 1. At 1 the restricted form
/// (optimal string alignment) and the unrestricted one agree, so no
/// distance matrix is needed: one pass, whatever the key's length (a key
/// can be most of a 1 MiB stdin).
pub fn at_most_one_edit(a: &str, b: &str) -> bool {
    let fold = |s: &str| -> Vec<char> { s.chars().map(|c| c.to_ascii_lowercase()).collect() };
    let (a, b) = (fold(a), fold(b));
    let (short, long) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    if long.len() - short.len() > 1 {
        return false;
    }
    let Some(i) = short.iter().zip(long.iter()).position(|(x, y)| x != y) else {
        // Equal, or one character added at the end.
        return true;
    };
    if short.len() == long.len() {
        // One substitution, or two neighbours swapped.
        short[i + 1..] == long[i + 1..]
            || (i + 1 < short.len()
                && short[i] == long[i + 1]
                && short[i + 1] == long[i]
                && short[i + 2..] == long[i + 2..])
    } else {
        // One character inserted at `i`.
        short[i..] == long[i + 1..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_edit_is_damerau_levenshtein_at_most_one() {
        for (a, b) in [
            ("trafficClass", "trafficClass"),
            ("trafficclass", "trafficClass"),
            ("TRAFFICCLASS", "trafficClass"),
            ("gidindex", "gidIndex"),
            ("trafficClas", "trafficClass"),
            ("trafficClasss", "trafficClass"),
            ("traficClass", "trafficClass"),
            ("trafficCalss", "trafficClass"),
            ("rtafficClass", "trafficClass"),
            ("trafficClsas", "trafficClass"),
            ("gidIndx", "gidIndex"),
            ("xgidIndex", "gidIndex"),
            ("sysctls", "sysctl"),
            ("deviceId", "deviceID"),
        ] {
            assert!(at_most_one_edit(a, b), "{a} {b}");
            assert!(at_most_one_edit(b, a), "{b} {a}");
        }
        for (a, b) in [
            ("trafficClassy1", "trafficClass"),
            ("trafficlcass1", "trafficClass"),
            ("tarfficClsas", "trafficClass"),
            ("gidCheck", "gidIndex"),
            ("tc", "trafficClass"),
            ("", "name"),
            ("rdmaCmToss", "rdmaCmTo"),
        ] {
            assert!(!at_most_one_edit(a, b), "{a} {b}");
            assert!(!at_most_one_edit(b, a), "{b} {a}");
        }
        // Non-ASCII is compared by character, not byte.
        assert!(at_most_one_edit("gidÍndex", "gidIndex"));
        assert!(!at_most_one_edit("gidÍndexé", "gidIndex"));
    }

    #[test]
    fn no_two_keys_are_one_edit_apart() {
        // Were two known keys one edit apart, a typo between them would be
        // ambiguous; exact keys still win (`strays` skips every known key).
        for a in Key::ALL {
            for b in Key::ALL {
                if a != b {
                    assert!(!at_most_one_edit(a.name(), b.name()), "{a:?} {b:?}");
                }
            }
        }
    }

    #[test]
    fn a_known_key_is_never_stray_and_a_near_one_is_a_typo() {
        let mut obj = Map::new();
        for k in Key::ALL {
            obj.insert(k.name().into(), json!(1));
        }
        obj.insert("cni.dev/something-later".into(), json!(1));
        assert_eq!(strays(&obj), []);
        for (typed, meant_key) in [
            ("trafficclass", Some(Key::TrafficClass)),
            ("gidindex", Some(Key::GidIndex)),
            ("gidChek", Some(Key::GidCheck)),
            ("PciBusID", Some(Key::PciBusId)),
            ("statedir", Some(Key::StateDir)),
            ("logfile", Some(Key::LogFile)),
            // Near only the runtime's keys: another tool's, not a typo.
            ("cniversion", None),
            ("prevresult", None),
            ("ipam", None),
            ("vlan", None),
            ("dns", None),
            ("mtu", None),
        ] {
            let mut one = obj.clone();
            one.insert(typed.into(), json!(1));
            assert_eq!(
                strays(&one),
                [Stray {
                    key: typed.into(),
                    meant: meant_key
                }],
                "{typed}"
            );
        }
    }

    #[test]
    fn names_and_owners_come_from_the_one_list() {
        assert_eq!(Key::named("gidIndex"), Some(Key::GidIndex));
        assert_eq!(Key::named("gidindex"), None);
        assert_eq!(Key::DeviceId.name(), "deviceID");
        assert_eq!(Key::StateDir.whose(), Whose::Node);
        assert_eq!(Key::CniVersion.whose(), Whose::Runtime);
        let node: Vec<&str> = Key::ALL
            .iter()
            .filter(|k| k.whose() == Whose::Node)
            .map(|k| k.name())
            .collect();
        assert_eq!(node, ["stateDir", "sysfsRoot", "logFile"]);
    }
}
