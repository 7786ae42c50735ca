//! The one list of per-rail settings roce-tune owns. State entries (by key),
//! ADD, CHECK, DEL and the orphan repair (`ownership`), the agent's drift
//! counters and its metrics, and `inspect` all iterate it; none names a
//! setting of its own. It sits above the implementations
//! (`rdma::traffic_class`, `rdma::rdma_cm`), which know only the trait
//! (`rdma::setting`), so the list and what it lists never import each other.
//! A new setting is its declaration (`cni::keys`), its file here and its
//! line in `SETTINGS` (docs/contributing.md, "Adding a setting").

use crate::rdma::setting::Setting;
use crate::rdma::{rdma_cm, traffic_class};

#[cfg(feature = "test-setting")]
mod test_knob;

/// Every setting roce-tune can own, in the order ADD writes them.
pub static SETTINGS: &[&dyn Setting] = &[
    &traffic_class::CLASS,
    &rdma_cm::TOS,
    #[cfg(feature = "test-setting")]
    &test_knob::KNOB,
];

/// The setting a config key or a state entry names.
pub fn by_key(key: &str) -> Option<&'static dyn Setting> {
    SETTINGS.iter().copied().find(|s| s.key() == key)
}

/// How the metrics (the `setting` label, `roce_tune_rail_<name>`) and
/// `inspect`'s rail line name a setting: its key in snake case
/// (`rdmaCmTos`: `rdma_cm_tos`), the form of Prometheus names and of the
/// line's other fields. Derived, so a new setting has one name to choose.
pub fn snake_name(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::keys::{Key, Whose};
    use std::collections::BTreeSet;

    #[test]
    fn keys_are_unique_found_and_named_once() {
        let mut names = BTreeSet::new();
        for s in SETTINGS {
            let found = by_key(s.key()).unwrap();
            assert!(std::ptr::eq(
                found as *const dyn Setting as *const u8,
                *s as *const dyn Setting as *const u8
            ));
            // A config key (camel case, ASCII letters), so its snake name is
            // a valid label value and metric name part, and two keys never
            // share one.
            let key = s.key();
            assert!(key.starts_with(|c: char| c.is_ascii_lowercase()), "{key}");
            assert!(key.chars().all(|c| c.is_ascii_alphabetic()), "{key}");
            assert!(names.insert(snake_name(key)), "{key}: its name twice");
            // Configured by a key of the network config's one declaration,
            // so a typo of it is refused as every other setting's is, and
            // declared there as owned: its bounds, title and code.
            assert_eq!(
                Key::named(key).map(Key::whose),
                Some(Whose::RoceTune),
                "{key}"
            );
            assert_eq!(s.declared().owned(), Some(s.declaration()), "{key}");
        }
        // And every key declared as owned has its implementation here, in
        // the declarations' order (the order ADD writes them).
        let declared: Vec<&str> = Key::ALL
            .iter()
            .filter(|k| k.owned().is_some())
            .map(|k| k.name())
            .collect();
        let listed: Vec<&str> = SETTINGS.iter().map(|s| s.key()).collect();
        assert_eq!(declared, listed);
        assert!(by_key("laterSetting").is_none());
        assert_eq!(snake_name("trafficClass"), "traffic_class");
        assert_eq!(snake_name("rdmaCmTos"), "rdma_cm_tos");
        assert_eq!(snake_name("mtu"), "mtu");
    }
}
