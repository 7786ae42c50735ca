//! Spec versions roce-tune speaks, and the VERSION command's answer.

use serde_json::{json, Value};

/// Every version whose result format roce-tune can read and write (docs/design.md, "Behaviour").
pub const SUPPORTED_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

pub fn is_supported(v: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&v)
}

/// CHECK exists from 0.4.0 on; GC and STATUS from 1.1.0 on.
pub fn at_least(v: &str, min: &str) -> bool {
    parse(v) >= parse(min)
}

fn parse(v: &str) -> (u32, u32, u32) {
    let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// The VERSION command echoes the input's cniVersion (SPEC.md "VERSION").
pub fn version_info(input_version: &str) -> Value {
    json!({ "cniVersion": input_version, "supportedVersions": SUPPORTED_VERSIONS })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_follows_semver_not_strings() {
        assert!(at_least("1.1.0", "0.4.0"));
        assert!(at_least("0.4.0", "0.4.0"));
        assert!(!at_least("0.3.1", "0.4.0"));
        assert!(at_least("0.10.0", "0.4.0"));
        assert!(!at_least("1.0.0", "1.1.0"));
    }

    #[test]
    fn version_info_lists_all_supported() {
        let v = version_info("1.0.0");
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(v["supportedVersions"].as_array().unwrap().len(), 5);
        assert!(!is_supported("0.2.0"));
        assert!(is_supported("1.1.0"));
    }
}
