//! Shipped examples cannot rot: every roce-tune config embedded in conf/
//! (SriovNetwork metaPlugins strings, the NADs' configs, the cnitool conflist,
//! the NVIDIA network operator examples under conf/deploy/)
//! goes through the plugin's own config validation, with the `name` and
//! `cniVersion` libcni adds (integration/extract-configs.py --libcni).

use roce_tune::cni::config::NetConf;
use roce_tune::cni::keys::Key;
use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn every_shipped_config_passes_validation() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .args([
            &format!("{root}/integration/extract-configs.py"),
            "--libcni",
            "--with-source",
            &format!("{root}/conf"),
        ])
        .output()
        .expect("python3 runs integration/extract-configs.py (make setup installs python3-yaml)");
    assert!(
        out.status.success(),
        "extract-configs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (source, json) = line
            .split_once('\t')
            .expect("--with-source prefixes each line");
        let conf = NetConf::parse(
            json.as_bytes(),
            std::path::Path::new("/etc/cni/roce-tune/node.json"),
        )
        .unwrap_or_else(|e| panic!("{source}: {json} is refused: {e}"));
        assert!(
            conf.traffic_class.is_some(),
            "{source}: the shipped examples all set a traffic class"
        );
        // Nor a key ADD would refuse as a typo or warn about at every pod.
        assert_eq!(
            conf.strays_warning(),
            None,
            "{source}: {json} holds keys roce-tune does not know"
        );
        checked += 1;
    }
    // Shared, exclusive, per-rail (2), NAD, the cnitool conflist and the NVIDIA
    // network operator's SriovNetwork and NAD at least.
    assert!(checked >= 8, "only {checked} configs found in conf/");
}

/// check-conf judges the keys of conf/'s configs by a list of its own
/// (`ROCE_KEYS` in integration/check-conf.py, Python): held here to the
/// plugin's one declaration, so check-conf can neither pass a key the
/// plugin does not know nor refuse one it reads.
#[test]
fn check_confs_keys_are_the_plugins() {
    let src = include_str!("../../integration/check-conf.py");
    let quoted = |from: &str, to: &str| -> BTreeSet<String> {
        let start = src
            .find(from)
            .unwrap_or_else(|| panic!("no {from} in check-conf.py"));
        let body = &src[start + from.len()..];
        let body = &body[..body.find(to).unwrap_or_else(|| panic!("no end of {from}"))];
        // Comments hold no key; each key is a double-quoted string.
        body.lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .flat_map(|l| l.split('"').skip(1).step_by(2))
            .map(str::to_owned)
            .collect()
    };
    let mut got = quoted("ROCE_KEYS = {", "}");
    got.extend(quoted("HOST_PATH_KEYS = (", ")"));
    let want: BTreeSet<String> = Key::ALL.iter().map(|k| k.name().to_owned()).collect();
    assert_eq!(
        got, want,
        "integration/check-conf.py's ROCE_KEYS and src/cni/keys.rs"
    );
}
