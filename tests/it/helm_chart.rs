//! The chart's node config cannot drift from roce-tune's. The chart
//! (conf/helm/roce-tune) builds node.json from its `nodeConfig` values, and
//! its values.schema.json types and bounds them, so that `helm install`
//! refuses what roce-tune would refuse at every ADD (104). Other branches add
//! node config keys; these tests fail until the schema has each one:
//!
//! - the keys: the schema's `nodeConfig` properties are exactly the keys
//!   `NodeConfig::parse` accepts (it names them all when it refuses an
//!   unknown one) and the keys of the README's node config table;
//! - the bounds: for every probe of `PROBES` (each key at and past its
//!   bounds, in and out of its type), the real Helm renders the chart with it,
//!   and the schema refuses exactly what the parser refuses; what the chart
//!   renders, the parser accepts. Every key needs a probe it accepts and one
//!   it refuses.
//!
//! check-conf compares the chart with the kustomize overlays
//! (integration/chart_compare.py); this file holds it to the binary.

use crate::common::{doc_section, needs, repo};
use roce_tune::node::NodeConfig;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chart() -> PathBuf {
    repo().join("conf/helm/roce-tune")
}

fn schema_node_config() -> Value {
    let path = chart().join("values.schema.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    schema["properties"]["nodeConfig"].clone()
}

/// The keys roce-tune accepts, from its own refusal of an unknown key.
fn roce_tune_keys() -> BTreeSet<String> {
    let err = NodeConfig::parse(Path::new("node.json"), br#"{"notAKey": 1}"#)
        .expect_err("an unknown key is refused");
    let msg = err.to_string();
    let (_, list) = msg.split_once("the keys are ").unwrap_or_else(|| {
        panic!("src/node.rs no longer names its keys when it refuses one: {msg}")
    });
    list.split(", ").map(str::to_owned).collect()
}

/// The first column of the README's node config table.
fn readme_keys() -> BTreeSet<String> {
    doc_section("README.md", "### Node config")
        .lines()
        .skip_while(|l| !l.starts_with("| key |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect()
}

#[test]
fn schema_holds_the_node_config_keys_roce_tune_accepts() {
    let node = schema_node_config();
    assert_eq!(
        node["additionalProperties"],
        json!(false),
        "values.schema.json's nodeConfig must refuse an unknown key, as roce-tune does"
    );
    let schema: BTreeSet<String> = node["properties"]
        .as_object()
        .expect("nodeConfig has properties")
        .keys()
        .cloned()
        .collect();
    let ours = roce_tune_keys();
    assert!(ours.len() >= 12, "only {ours:?}: the message was misread");
    let missing: Vec<_> = ours.difference(&schema).collect();
    let extra: Vec<_> = schema.difference(&ours).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "conf/helm/roce-tune/values.schema.json's nodeConfig and src/node.rs differ: keys \
         roce-tune accepts that the schema lacks: {missing:?} (add each, typed and bounded as \
         src/node.rs parses it, with its probes in tests/it/helm_chart.rs PROBES); keys the \
         schema has that roce-tune refuses: {extra:?}"
    );
    assert_eq!(
        readme_keys(),
        ours,
        "the README's node config table and src/node.rs's keys differ"
    );
}

/// What roce-tune does with a node config holding one key at a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Accepted,
    Refused,
    /// Accepted by roce-tune, refused by a rule of the chart's templates (a
    /// `fail` saying "roce-tune chart:"), never by the schema: a node
    /// setting a deployment has no use for.
    ChartRefuses,
}
use Verdict::*;

/// (key, value as JSON, verdict): each key in and out of its type, at and
/// past its bounds (src/node.rs).
const PROBES: &[(&str, &str, Verdict)] = &[
    ("stateDir", r#""/run/cni/x""#, Accepted),
    ("stateDir", "null", Accepted),
    ("stateDir", r#""run/cni""#, Refused),
    ("stateDir", r#""/run/../etc""#, Refused),
    ("stateDir", r#""/run/..""#, Refused),
    ("stateDir", "5", Refused),
    ("sysfsRoot", r#""/sys""#, Accepted),
    ("sysfsRoot", r#""/tmp/tree""#, ChartRefuses),
    ("sysfsRoot", r#""sys""#, Refused),
    ("sysfsRoot", "[]", Refused),
    ("logFile", r#""/var/log/roce-tune/roce-tune.log""#, Accepted),
    ("logFile", r#""/var/log/..x/a..b""#, Accepted),
    ("logFile", r#""roce-tune.log""#, Refused),
    ("logFile", r#""/var/../log""#, Refused),
    ("logFile", "true", Refused),
    (
        "sysctlAllowlist",
        r#"["net.ipv4.conf.*.arp_*", "net.ipv4.conf.IFNAME.rp_filter"]"#,
        Accepted,
    ),
    ("sysctlAllowlist", "[]", Accepted),
    ("sysctlAllowlist", "null", Accepted),
    ("sysctlAllowlist", r#""net.*""#, Refused),
    ("sysctlAllowlist", r#"["net..x"]"#, Refused),
    ("sysctlAllowlist", r#"["net.a/b"]"#, Refused),
    ("sysctlAllowlist", r#"["net.[a-z]"]"#, Refused),
    ("sysctlAllowlist", r#"[""]"#, Refused),
    ("sysctlAllowlist", "[1]", Refused),
    ("deviceInfoDir", r#""/run/devinfo""#, Accepted),
    ("deviceInfoDir", r#""devinfo""#, Refused),
    ("podResourcesSocket", r#""/run/kubelet.sock""#, Accepted),
    ("podResourcesSocket", r#""kubelet.sock""#, Refused),
    ("podResourcesCheckpoint", "null", Accepted),
    (
        "podResourcesCheckpoint",
        r#""/var/lib/kubelet/checkpoint""#,
        Accepted,
    ),
    ("podResourcesCheckpoint", r#""checkpoint""#, Refused),
    ("podResourcesCheckpoint", "false", Refused),
    ("podResourcesTimeoutMs", "1", Accepted),
    ("podResourcesTimeoutMs", "10000", Accepted),
    ("podResourcesTimeoutMs", "null", Accepted),
    ("podResourcesTimeoutMs", "0", Refused),
    ("podResourcesTimeoutMs", "10001", Refused),
    ("podResourcesTimeoutMs", "-1", Refused),
    ("podResourcesTimeoutMs", "2.5", Refused),
    ("podResourcesTimeoutMs", r#""250""#, Refused),
    ("gpuResources", r#"["example.com/gpu"]"#, Accepted),
    ("gpuResources", "[]", Accepted),
    ("gpuResources", "null", Accepted),
    ("gpuResources", r#"["a/b", "x_y.z-1/G_P.U-0"]"#, Accepted),
    ("gpuResources", r#"["../etc"]"#, Refused),
    ("gpuResources", r#"["nvidia.com/gpu/x"]"#, Refused),
    ("gpuResources", r#"["-nvidia.com/gpu"]"#, Refused),
    ("gpuResources", r#"["nvidia.com/gpu-"]"#, Refused),
    ("gpuResources", r#""nvidia.com/gpu""#, Refused),
    ("nvidiaGpusDir", r#""/proc/driver/nvidia/gpus""#, Accepted),
    ("nvidiaGpusDir", r#""gpus""#, Refused),
    ("metricsAddress", r#""127.0.0.1:9662""#, Accepted),
    ("metricsAddress", r#""[::1]:9999""#, Accepted),
    // Port 0 (any free port): roce-tune takes it, but the liveness probe
    // could not find /healthz (the chart's probeTarget says so).
    ("metricsAddress", r#""0.0.0.0:0""#, ChartRefuses),
    ("metricsAddress", r#""127.0.0.1:09662""#, Accepted),
    ("metricsAddress", r#""[fe80::1%4294967295]:80""#, Accepted),
    ("metricsAddress", r#""[1:2:3:4:5:6:1.2.3.4]:1""#, Accepted),
    ("metricsAddress", r#""[1::2:3:4:5:6:7]:1""#, Accepted),
    ("metricsAddress", "null", Accepted),
    ("metricsAddress", r#""localhost:9662""#, Refused),
    ("metricsAddress", r#""127.0.0.01:9662""#, Refused),
    ("metricsAddress", r#""127.0.0.1:65536""#, Refused),
    ("metricsAddress", r#""[fe80::1%4294967296]:80""#, Refused),
    ("metricsAddress", r#""[1:2:3:4:5:6:7:1.2.3.4]:1""#, Refused),
    ("metricsAddress", r#""[00001::1]:1""#, Refused),
    ("metricsAddress", r#""::1:9662""#, Refused),
    ("metricsAddress", "9662", Refused),
    ("driftPolicy", r#""repair""#, Accepted),
    ("driftPolicy", r#""report""#, Accepted),
    ("driftPolicy", "null", Accepted),
    ("driftPolicy", r#""fix""#, Refused),
    ("driftPolicy", "1", Refused),
    ("nriSocket", r#""/run/nri/nri.sock""#, Accepted),
    ("nriSocket", "null", Accepted),
    ("nriSocket", r#""nri.sock""#, Refused),
    ("nriSocket", r#""/var/run/../nri.sock""#, Refused),
    ("nriIndex", r#""50""#, Accepted),
    ("nriIndex", r#""00""#, Accepted),
    ("nriIndex", "null", Accepted),
    ("nriIndex", r#""5""#, Refused),
    ("nriIndex", r#""500""#, Refused),
    ("nriIndex", r#""5a""#, Refused),
    ("nriIndex", "50", Refused),
    ("ncclEnv", r#""annotated""#, Accepted),
    ("ncclEnv", r#""all""#, Accepted),
    ("ncclEnv", r#""off""#, Accepted),
    ("ncclEnv", "null", Accepted),
    ("ncclEnv", r#""true""#, Refused),
    ("ncclEnv", "true", Refused),
    ("jobEnvFamilies", r#"["nccl"]"#, Accepted),
    ("jobEnvFamilies", r#"["ucx", "nccl", "ucx"]"#, Accepted),
    ("jobEnvFamilies", "null", Accepted),
    ("jobEnvFamilies", "[]", Refused),
    ("jobEnvFamilies", r#"["mpi"]"#, Refused),
    ("jobEnvFamilies", r#""nccl""#, Refused),
    ("jobEnvFamilies", "[1]", Refused),
    (
        "jobEnvOmit",
        r#"["NCCL_IB_TC", "UCX_IB_TRAFFIC_CLASS"]"#,
        Accepted,
    ),
    ("jobEnvOmit", "[]", Accepted),
    ("jobEnvOmit", "null", Accepted),
    ("jobEnvOmit", r#"["NCCL_IB_TCX"]"#, Refused),
    ("jobEnvOmit", r#"["PATH"]"#, Refused),
    ("jobEnvOmit", r#""NCCL_IB_TC""#, Refused),
    (
        "draRails",
        r#"{"trafficClass": 41, "rdmaCmTos": 106, "gidIndex": 3, "gidCheck": "present",
            "gidTimeoutMs": 1000, "podTrafficClasses": [41, 106],
            "sysctl": {"net.ipv4.conf.IFNAME.arp_ignore": "1", "net.core.rmem_max": "4096 87380"}}"#,
        Accepted,
    ),
    ("draRails", "{}", Accepted),
    ("draRails", "null", Accepted),
    (
        "draRails",
        r#"{"trafficClass": null, "sysctl": null}"#,
        Accepted,
    ),
    (
        "draRails",
        r#"{"trafficClass": 0, "gidIndex": 1023, "gidTimeoutMs": 60000}"#,
        Accepted,
    ),
    (
        "draRails",
        r#"{"gidTimeoutMs": 0, "gidCheck": "off", "rdmaCmTos": 255}"#,
        Accepted,
    ),
    ("draRails", r#"{"podTrafficClasses": []}"#, Accepted),
    ("draRails", r#"{"trafficClas": 41}"#, Refused),
    ("draRails", r#"{"deviceID": "0000:0c:00.2"}"#, Refused),
    ("draRails", r#"{"trafficClass": 256}"#, Refused),
    ("draRails", r#"{"trafficClass": -1}"#, Refused),
    ("draRails", r#"{"trafficClass": 4.5}"#, Refused),
    ("draRails", r#"{"trafficClass": "41"}"#, Refused),
    ("draRails", r#"{"rdmaCmTos": 256}"#, Refused),
    ("draRails", r#"{"gidIndex": 1024}"#, Refused),
    ("draRails", r#"{"gidCheck": "always"}"#, Refused),
    ("draRails", r#"{"gidTimeoutMs": 60001}"#, Refused),
    ("draRails", r#"{"podTrafficClasses": [256]}"#, Refused),
    ("draRails", r#"{"podTrafficClasses": 41}"#, Refused),
    ("draRails", r#"{"sysctl": {"kernel.panic": "1"}}"#, Refused),
    ("draRails", r#"{"sysctl": {"net": "1"}}"#, Refused),
    ("draRails", r#"{"sysctl": {"net..x": "1"}}"#, Refused),
    ("draRails", r#"{"sysctl": {"net.a/b": "1"}}"#, Refused),
    ("draRails", r#"{"sysctl": {"net.a b": "1"}}"#, Refused),
    ("draRails", r#"{"sysctl": {"net.x": ""}}"#, Refused),
    ("draRails", r#"{"sysctl": {"net.x": "1\n2"}}"#, Refused),
    ("draRails", r#"{"sysctl": {"net.x": "1\t2"}}"#, Accepted),
    ("draRails", r#"{"sysctl": {"net.x": 1}}"#, Refused),
    ("draRails", r#"{"sysctl": "net.x"}"#, Refused),
    ("draRails", "[]", Refused),
    ("draRails", r#""enforce""#, Refused),
    ("statedir", r#""/run/cni/x""#, Refused),
];

/// A `draRails` profile of `n` sysctls whose values are `len` long.
fn sysctls(n: usize, len: usize) -> String {
    let m: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("net.k{i}"), json!("1".repeat(len))))
        .collect();
    json!({ "sysctl": m }).to_string()
}

/// Probes built rather than written: the count bounds.
fn built_probes() -> Vec<(&'static str, String, Verdict)> {
    let patterns = |n: usize| json!((0..n).map(|i| format!("net.k{i}")).collect::<Vec<_>>());
    let gpus = |n: usize| {
        json!((0..n)
            .map(|i| format!("example.com/gpu{i}"))
            .collect::<Vec<_>>())
    };
    let long = |n: usize| json!([format!("net.{}", "a".repeat(n - 4))]);
    let part = |n: usize| json!([format!("{}/gpu", "a".repeat(n))]);
    vec![
        ("sysctlAllowlist", patterns(256).to_string(), Accepted),
        ("sysctlAllowlist", patterns(257).to_string(), Refused),
        ("sysctlAllowlist", long(256).to_string(), Accepted),
        ("sysctlAllowlist", long(257).to_string(), Refused),
        ("gpuResources", gpus(64).to_string(), Accepted),
        ("gpuResources", gpus(65).to_string(), Refused),
        ("gpuResources", part(63).to_string(), Accepted),
        ("gpuResources", part(64).to_string(), Refused),
        (
            "jobEnvFamilies",
            json!(vec!["nccl"; 64]).to_string(),
            Accepted,
        ),
        (
            "jobEnvFamilies",
            json!(vec!["nccl"; 65]).to_string(),
            Refused,
        ),
        (
            "jobEnvOmit",
            json!(vec!["NCCL_IB_TC"; 64]).to_string(),
            Accepted,
        ),
        (
            "jobEnvOmit",
            json!(vec!["NCCL_IB_TC"; 65]).to_string(),
            Refused,
        ),
        (
            "draRails",
            json!({"podTrafficClasses": vec![41; 256]}).to_string(),
            Accepted,
        ),
        (
            "draRails",
            json!({"podTrafficClasses": vec![41; 257]}).to_string(),
            Refused,
        ),
        ("draRails", sysctls(64, 1), Accepted),
        ("draRails", sysctls(65, 1), Refused),
        ("draRails", sysctls(1, 256), Accepted),
        ("draRails", sysctls(1, 257), Refused),
        (
            "draRails",
            json!({"sysctl": {format!("net.{}", "a".repeat(252)): "1"}}).to_string(),
            Accepted,
        ),
        (
            "draRails",
            json!({"sysctl": {format!("net.{}", "a".repeat(253)): "1"}}).to_string(),
            Refused,
        ),
    ]
}

/// What Helm does with the chart and `nodeConfig.<key>` set to a value.
enum Rendered {
    NodeJson(Value),
    /// Helm's message.
    SchemaRefuses(String),
    ChartRefuses(String),
}

impl Rendered {
    fn describe(&self) -> String {
        // Helm's note that it followed the chart's link to conf/grafana is not news.
        let errors = |e: &str| {
            e.lines()
                .filter(|l| !l.contains("found symbolic link in path"))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let text = match self {
            Rendered::NodeJson(v) => format!("renders node.json {v}"),
            Rendered::SchemaRefuses(e) => format!("schema refuses it: {}", errors(e)),
            Rendered::ChartRefuses(e) => format!("template refuses it: {}", errors(e)),
        };
        text.chars().take(300).collect()
    }
}

fn helm_render(helm: &Path, key: &str, value: &str) -> Rendered {
    let out = Command::new(helm)
        .args(["template", "roce-tune"])
        .arg(chart())
        .args([
            "-n",
            "roce-tune",
            "--show-only",
            "templates/node-config.yaml",
        ])
        .arg("--set-json")
        .arg(format!("nodeConfig.{key}={value}"))
        .output()
        .expect("run helm");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        if stderr.contains("values don't meet the specifications of the schema") {
            return Rendered::SchemaRefuses(stderr);
        }
        assert!(
            stderr.contains("roce-tune chart:"),
            "helm template with nodeConfig.{key}={value} failed, neither by the schema nor by \
             a rule of the chart: {stderr}"
        );
        return Rendered::ChartRefuses(stderr);
    }
    // node-config.yaml prints node.json as a block scalar indented by four.
    let yaml = String::from_utf8(out.stdout).unwrap();
    let body: String = yaml
        .lines()
        .skip_while(|l| l.trim_end() != "  node.json: |")
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect();
    Rendered::NodeJson(
        serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("node.json as rendered is not JSON ({e}): {yaml}")),
    )
}

#[test]
fn schema_refuses_exactly_what_roce_tune_refuses() {
    let helm = needs!(helm);
    let probes: Vec<(&str, String, Verdict)> = PROBES
        .iter()
        .map(|&(k, v, verdict)| (k, v.to_owned(), verdict))
        .chain(built_probes())
        .collect();
    let mut wrong = Vec::new();
    for (key, value, verdict) in &probes {
        let v: Value = serde_json::from_str(value).unwrap();
        let alone = serde_json::to_vec(&json!({ *key: v })).unwrap();
        let ours = NodeConfig::parse(Path::new("node.json"), &alone);
        let short: String = value.chars().take(60).collect();
        if ours.is_ok() != (*verdict != Refused) {
            wrong.push(format!(
                "{key}={short}: the probe says {verdict:?}, roce-tune says {ours:?}"
            ));
            continue;
        }
        match (helm_render(&helm, key, value), verdict) {
            (Rendered::NodeJson(node), Accepted) => {
                // What the chart renders is what roce-tune reads: the value (a null
                // drops a key of values.yaml), beside the chart's defaults.
                let got = node.get(*key).cloned().unwrap_or(Value::Null);
                if got != v {
                    wrong.push(format!("{key}={short}: the chart rendered {got}"));
                }
                let bytes = serde_json::to_vec(&node).unwrap();
                if let Err(e) = NodeConfig::parse(Path::new("node.json"), &bytes) {
                    wrong.push(format!(
                        "{key}={short}: roce-tune refuses what the chart rendered: {e}"
                    ));
                }
            }
            (Rendered::SchemaRefuses(_), Refused) | (Rendered::ChartRefuses(_), ChartRefuses) => {}
            (got, _) => wrong.push(format!(
                "{key}={short}: roce-tune's verdict is {verdict:?}, but the chart {}",
                got.describe()
            )),
        }
    }
    let node = schema_node_config();
    for key in node["properties"].as_object().unwrap().keys() {
        for want in [Accepted, Refused] {
            if !probes.iter().any(|(k, _, v)| k == key && *v == want) {
                wrong.push(format!("{key}: no probe that roce-tune says {want:?} to"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the chart's values.schema.json and roce-tune's node config parser disagree:\n  {}",
        wrong.join("\n  ")
    );
}

/// The value sets whose rendering is recorded in tests/data/helm (the file,
/// the namespace, the values): the default install, OpenShift with the
/// metrics objects, and an uninstall on NVIDIA's operator. A change to the
/// chart that means to change what these render updates the file in the
/// same commit, so its diff shows what every cluster gets; a refactoring
/// (node pools) must leave them as they are.
const GOLDEN: &[(&str, &str, &[&str])] = &[
    ("default.yaml", "roce-tune", &[]),
    (
        "openshift-metrics.yaml",
        "roce-tune",
        &["platform=openshift", "metrics.enabled=true"],
    ),
    (
        "nvidia-uninstall.yaml",
        "nvidia-network-operator",
        &["platform=nvidia-network-operator", "uninstall.enabled=true"],
    ),
];

/// `helm template roce-tune <chart> -n <namespace> --set <value>...`: stdout.
fn helm_template(helm: &Path, namespace: &str, set: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new(helm);
    cmd.args(["template", "roce-tune"])
        .arg(chart())
        .args(["-n", namespace]);
    for v in set {
        cmd.args(["--set", v]);
    }
    let out = cmd.output().expect("run helm");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_recorded_renderings_are_what_the_chart_renders() {
    let helm = needs!(helm);
    let mut wrong = Vec::new();
    for (file, namespace, set) in GOLDEN {
        let path = repo().join("tests/data/helm").join(file);
        let want = std::fs::read_to_string(&path).unwrap();
        let got = helm_template(&helm, namespace, set).unwrap_or_else(|e| panic!("{file}: {e}"));
        if got != want {
            let first = got
                .lines()
                .zip(want.lines())
                .position(|(g, w)| g != w)
                .unwrap_or(got.lines().count().min(want.lines().count()));
            wrong.push(format!(
                "{file}: differs from line {}: the chart renders {:?}, the file has {:?}; if \
                 the change is meant, record it: helm template roce-tune conf/helm/roce-tune -n \
                 {namespace}{} > tests/data/helm/{file}",
                first + 1,
                got.lines().nth(first),
                want.lines().nth(first),
                set.iter()
                    .map(|v| format!(" --set {v}"))
                    .collect::<String>(),
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The documents of a `helm template` output, as JSON (read by PyYAML).
fn yaml_docs(py: &Path, text: &str) -> Vec<Value> {
    use std::io::Write;
    let mut child = Command::new(py)
        .args([
            "-c",
            "import json, sys, yaml\n\
             print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d is not None]))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyYAML could not read: {text}");
    match serde_json::from_slice(&out.stdout).unwrap() {
        Value::Array(docs) => docs,
        other => panic!("{other}"),
    }
}

/// `helm template` with `--set-json` values: its documents, or Helm's error.
fn render_json(py: &Path, helm: &Path, values: &[(&str, Value)]) -> Result<Vec<Value>, String> {
    let mut cmd = Command::new(helm);
    cmd.args(["template", "roce-tune"])
        .arg(chart())
        .args(["-n", "roce-tune"]);
    for (k, v) in values {
        cmd.arg("--set-json").arg(format!("{k}={v}"));
    }
    let out = cmd.output().expect("run helm");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(yaml_docs(py, &String::from_utf8(out.stdout).unwrap()))
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| {
            panic!(
                "no {kind} {name} among {:?}",
                docs.iter()
                    .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
                    .collect::<Vec<_>>()
            )
        })
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The node.json a ConfigMap carries, parsed.
fn node_json(cm: &Value) -> Value {
    serde_json::from_str(cm["data"]["node.json"].as_str().unwrap()).unwrap()
}

/// Two pools, as a cluster with A100 and H100 nodes has them: two
/// DaemonSets and two ConfigMaps, each DaemonSet on its pool's nodes, with
/// its pool's tolerations, installing its pool's node config (the global
/// one with the pool's keys over it, a null removing one), rolled by its own
/// config's checksum; selectors that cannot select each other's pods; what
/// roce-tune itself accepts in each node.json. A pool named default beside
/// another, or a name twice, is refused.
#[test]
fn two_node_pools_are_two_daemonsets_each_with_its_own_node_config() {
    let helm = needs!(helm);
    let py = needs!(yaml_python);
    let pools = json!([
        {"name": "a100", "nodeSelector": {"nvidia.com/gpu.product": "A100-SXM4-80GB"},
         "nodeConfig": {"gpuResources": ["nvidia.com/a100"], "sysctlAllowlist": null}},
        {"name": "h100", "nodeSelector": {"nvidia.com/gpu.product": "H100-SXM5-80GB"},
         "tolerations": [{"key": "h100", "operator": "Exists", "effect": "NoSchedule"}],
         "nodeConfig": {"driftPolicy": "report"}},
    ]);
    let docs = render_json(&py, &helm, &[("nodePools", pools.clone())]).unwrap();
    let dss = of_kind(&docs, "DaemonSet");
    assert_eq!(dss.len(), 2, "{dss:?}");
    assert_eq!(of_kind(&docs, "ConfigMap").len(), 2);
    let global = render_json(&py, &helm, &[]).unwrap();
    let global_conf = node_json(named(&global, "ConfigMap", "roce-tune-node-config"));
    for (pool, gpu) in [("a100", "A100-SXM4-80GB"), ("h100", "H100-SXM5-80GB")] {
        let ds = named(&docs, "DaemonSet", &format!("roce-tune-{pool}"));
        let cm = named(&docs, "ConfigMap", &format!("roce-tune-{pool}-node-config"));
        let pod = &ds["spec"]["template"];
        let label = json!(pool);
        assert_eq!(
            ds["spec"]["selector"]["matchLabels"]["roce-tune.io/node-pool"],
            label
        );
        assert_eq!(pod["metadata"]["labels"]["roce-tune.io/node-pool"], label);
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                   "nvidia.com/gpu.product": gpu}),
            "{pool}"
        );
        let vols = pod["spec"]["volumes"].as_array().unwrap();
        let cm_vol = vols.iter().find(|v| v["name"] == "node-config").unwrap();
        assert_eq!(
            cm_vol["configMap"]["name"], cm["metadata"]["name"],
            "{pool}"
        );
        // Its own checksum: of its own ConfigMap.
        let sum = &pod["metadata"]["annotations"]["checksum/node-config"];
        let other = dss
            .iter()
            .find(|d| d["metadata"]["name"] != ds["metadata"]["name"])
            .unwrap();
        assert_ne!(
            sum,
            &other["spec"]["template"]["metadata"]["annotations"]["checksum/node-config"]
        );
        let conf = node_json(cm);
        let bytes = serde_json::to_vec(&conf).unwrap();
        NodeConfig::parse(Path::new("node.json"), &bytes)
            .unwrap_or_else(|e| panic!("{pool}: roce-tune refuses {conf}: {e}"));
        let mut want = global_conf.clone();
        match pool {
            "a100" => {
                want["gpuResources"] = json!(["nvidia.com/a100"]);
                want.as_object_mut().unwrap().remove("sysctlAllowlist");
            }
            _ => want["driftPolicy"] = json!("report"),
        }
        assert_eq!(
            conf, want,
            "{pool}: the global node config with the pool's keys over it"
        );
    }
    let tol = |pool: &str| {
        named(&docs, "DaemonSet", pool)["spec"]["template"]["spec"]["tolerations"].clone()
    };
    assert_eq!(
        tol("roce-tune-a100"),
        json!([{"operator": "Exists"}]),
        "the global tolerations"
    );
    assert_eq!(
        tol("roce-tune-h100"),
        json!([{"key": "h100", "operator": "Exists", "effect": "NoSchedule"}])
    );

    for (pools, says) in [
        (
            json!([{"name": "default"}, {"name": "h100"}]),
            "cannot have sibling pools",
        ),
        (
            json!([{"name": "h100"}, {"name": "h100"}]),
            "names h100 twice",
        ),
    ] {
        let err = render_json(&py, &helm, &[("nodePools", pools.clone())]).unwrap_err();
        assert!(err.contains(says), "{pools}: {err}");
    }
    for bad in [
        json!([]),
        json!([{"name": "H100"}]),
        json!([{"name": "a100", "nodeConfig": {"stateDirr": "/x"}}]),
    ] {
        let err = render_json(&py, &helm, &[("nodePools", bad.clone())]).unwrap_err();
        assert!(
            err.contains("values don't meet the specifications of the schema"),
            "{bad}: {err}"
        );
    }
}
