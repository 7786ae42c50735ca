//! Shipped examples cannot rot: every roce-tune config embedded in conf/
//! (SriovNetwork metaPlugins strings, the NADs' configs, the cnitool conflist,
//! the NVIDIA network operator examples under conf/deploy/)
//! goes through the plugin's own config validation, with the `name` and
//! `cniVersion` libcni adds (integration/extract-configs.py --libcni).

use roce_tune::cni::config::NetConf;
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
        checked += 1;
    }
    // Shared, exclusive, per-rail (2), NAD, the cnitool conflist and the NVIDIA
    // network operator's SriovNetwork and NAD at least.
    assert!(checked >= 8, "only {checked} configs found in conf/");
}
