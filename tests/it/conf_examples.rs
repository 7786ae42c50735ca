//! Shipped examples cannot rot: every roce-tune config embedded in conf/
//! (SriovNetwork metaPlugins strings, the NADs' configs, the cnitool conflist,
//! the NVIDIA network operator examples under conf/deploy/)
//! goes through the plugin's own config validation, with the `name` and
//! `cniVersion` libcni adds (integration/extract-configs.py --libcni).

use crate::common::repo;
use roce_tune::cni::config::NetConf;
use roce_tune::cni::keys::Key;
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

/// check-conf and the chart's schema generator judge configs by the keys
/// integration/declared_keys.py reads from src/cni/keys.rs (Python, a parse
/// of the Rust): held here to what the plugin itself declares, each key with
/// its owner and, for an owned setting, its bounds and whether a profile may
/// carry it, so neither tool can pass a key the plugin does not know, refuse
/// one it reads, or bound a setting otherwise.
#[test]
fn the_python_tools_read_the_plugins_declaration() {
    let out = Command::new("python3")
        .arg(repo().join("integration/declared_keys.py"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want: serde_json::Map<String, serde_json::Value> = Key::ALL
        .iter()
        // The test-only setting is no key of a release build: its row is
        // left out of the tools' reading.
        .filter(|k| k.name() != "testKnob")
        .map(|k| {
            let owned = k
                .owned()
                .map(|o| serde_json::json!({"min": o.min, "max": o.max, "profile": o.profile}));
            (
                k.name().to_owned(),
                serde_json::json!({"whose": format!("{:?}", k.whose()), "owned": owned}),
            )
        })
        .collect();
    assert_eq!(
        got,
        serde_json::Value::Object(want),
        "integration/declared_keys.py's reading of src/cni/keys.rs"
    );
}
