//! The chart's node config cannot drift from roce-tune's. The chart
//! (conf/helm/roce-tune) builds node.json from its `nodeConfig` values, and
//! its values.schema.json types and bounds them, so that `helm install`
//! refuses what roce-tune would refuse at every ADD (104). Other branches add
//! node config keys; these tests fail until the schema has each one:
//!
//! - the keys: the schema's `nodeConfig` properties are exactly the keys
//!   `NodeConfig::parse` accepts (it names them all when it refuses an
//!   unknown one) and the keys of docs/config.md's node config table;
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
        panic!("src/node/mod.rs no longer names its keys when it refuses one: {msg}")
    });
    list.split(", ").map(str::to_owned).collect()
}

/// The first column of docs/config.md's node config table.
fn documented_keys() -> BTreeSet<String> {
    doc_section("docs/config.md", "## Node config")
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
        "conf/helm/roce-tune/values.schema.json's nodeConfig and src/node/mod.rs differ: keys \
         roce-tune accepts that the schema lacks: {missing:?} (add each, typed and bounded as \
         src/node/mod.rs parses it, with its probes in tests/it/helm_chart.rs PROBES); keys the \
         schema has that roce-tune refuses: {extra:?}"
    );
    assert_eq!(
        documented_keys(),
        ours,
        "docs/config.md's node config table and src/node/mod.rs's keys differ"
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
/// past its bounds (src/node/mod.rs).
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
    ("railPriority", "0", Accepted),
    ("railPriority", "7", Accepted),
    ("railPriority", "null", Accepted),
    ("railPriority", "8", Refused),
    ("railPriority", "-1", Refused),
    ("railPriority", "3.5", Refused),
    ("railPriority", r#""3""#, Refused),
    ("railLossless", "true", Accepted),
    ("railLossless", "false", Accepted),
    ("railLossless", "null", Accepted),
    ("railLossless", r#""true""#, Refused),
    ("railLossless", "1", Refused),
    ("qosCheck", r#""off""#, Accepted),
    ("qosCheck", r#""warn""#, Accepted),
    ("qosCheck", r#""enforce""#, Accepted),
    ("qosCheck", "null", Accepted),
    ("qosCheck", r#""strict""#, Refused),
    ("qosCheck", r#""Warn""#, Refused),
    ("qosCheck", "true", Refused),
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
    ("railCounters", r#""*""#, Accepted),
    (
        "railCounters",
        r#"["out_of_sequence", "VL15_dropped", "rx-x"]"#,
        Accepted,
    ),
    ("railCounters", "[]", Accepted),
    ("railCounters", "null", Accepted),
    ("railCounters", r#""all""#, Refused),
    ("railCounters", r#""sent_pkts""#, Refused),
    ("railCounters", r#"{"sent_pkts": 1}"#, Refused),
    ("railCounters", r#"["../x"]"#, Refused),
    ("railCounters", r#"["a/b"]"#, Refused),
    ("railCounters", r#"["a.b"]"#, Refused),
    ("railCounters", r#"[""]"#, Refused),
    ("railCounters", r#"["lifespan"]"#, Refused),
    ("railCounters", "[1]", Refused),
    ("railCountersMax", "1", Accepted),
    ("railCountersMax", "1024", Accepted),
    ("railCountersMax", "null", Accepted),
    ("railCountersMax", "0", Refused),
    ("railCountersMax", "1025", Refused),
    ("railCountersMax", "2.5", Refused),
    ("railCountersMax", r#""64""#, Refused),
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
        (
            "railCounters",
            json!((0..256).map(|i| format!("c{i}")).collect::<Vec<_>>()).to_string(),
            Accepted,
        ),
        (
            "railCounters",
            json!((0..257).map(|i| format!("c{i}")).collect::<Vec<_>>()).to_string(),
            Refused,
        ),
        (
            "railCounters",
            json!(["a".repeat(64)]).to_string(),
            Accepted,
        ),
        ("railCounters", json!(["a".repeat(65)]).to_string(), Refused),
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
/// metrics objects, the metrics objects with the alerts as kube-prometheus-stack
/// selects them, and an uninstall on NVIDIA's operator. A change to the
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
        "kubernetes-alerts.yaml",
        "roce-tune",
        &[
            "metrics.enabled=true",
            "metrics.prometheusRule.enabled=true",
            "metrics.prometheusRule.labels.release=kube-prometheus-stack",
        ],
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

/// The groups of conf/alerts/roce-tune.rules.yaml, read by PyYAML: what the
/// chart's PrometheusRule must carry (its files/ links to that file; a copy
/// in its place that drifts fails here).
fn rule_file_groups() -> Value {
    let py = needs!(yaml_python);
    let text = std::fs::read_to_string(repo().join("conf/alerts/roce-tune.rules.yaml")).unwrap();
    yaml_docs(&py, &text)[0]["groups"].clone()
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

// ------------------------------------------------------------ every value, rendered

type Check = Box<dyn Fn(&[Value]) -> Result<(), String>>;

/// One value set and what its rendering must hold.
struct Case {
    set: Vec<(&'static str, Value)>,
    check: Check,
}

fn case(
    set: Vec<(&'static str, Value)>,
    check: impl Fn(&[Value]) -> Result<(), String> + 'static,
) -> Case {
    Case {
        set,
        check: Box::new(check),
    }
}

fn want(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

fn the_ds(docs: &[Value]) -> &Value {
    let dss = of_kind(docs, "DaemonSet");
    assert_eq!(dss.len(), 1, "one DaemonSet");
    dss[0]
}

fn pod_spec(docs: &[Value]) -> &Value {
    &the_ds(docs)["spec"]["template"]["spec"]
}

fn container<'a>(docs: &'a [Value], name: &str) -> &'a Value {
    let spec = pod_spec(docs);
    spec["containers"]
        .as_array()
        .into_iter()
        .chain(spec["initContainers"].as_array())
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}: {spec}"))
}

fn has_kind(docs: &[Value], kind: &str, name: &str) -> bool {
    docs.iter()
        .any(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

/// Each value of values.yaml, set to something other than its default, and
/// what the chart must render for it. `every_value_is_rendered_by_a_case`
/// holds the list to the schema.
fn cases() -> Vec<Case> {
    let res = json!({"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "96Mi"}});
    let agent_res =
        json!({"requests": {"cpu": "50m", "memory": "48Mi"}, "limits": {"memory": "256Mi"}});
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product",
            "operator": "In", "values": ["A100-SXM4-80GB", "H100-SXM5-80GB"]}]}]}}});
    let digest = format!("sha256:{}", "ab".repeat(32));
    let on = || ("metrics.enabled", json!(true));
    let sm =
        |docs: &[Value]| named(docs, "ServiceMonitor", "roce-tune")["spec"]["endpoints"][0].clone();
    vec![
        case(vec![("platform", json!("openshift"))], |d| {
            let s = pod_spec(d);
            want(
                s["nodeSelector"]["node-role.kubernetes.io/worker"] == ""
                    && has_kind(d, "Role", "roce-tune-privileged-scc"),
                || format!("{s}"),
            )
        }),
        case(
            vec![(
                "platforms",
                json!({
                "kubernetes": {"cniBinDir": "/usr/libexec/cni", "nodeSelector": {"k": "1"}},
                "openshift": {"cniBinDir": "/var/lib/cni/bin", "nodeSelector": {}},
                "nvidia-network-operator": {"cniBinDir": "/opt/cni/bin", "nodeSelector": {}}}),
            )],
            |d| {
                let s = pod_spec(d);
                let bin = s["volumes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == "cni-bin")
                    .unwrap();
                want(
                    bin["hostPath"]["path"] == "/usr/libexec/cni" && s["nodeSelector"]["k"] == "1",
                    || format!("{s}"),
                )
            },
        ),
        case(
            vec![("image.repository", json!("myregistry/roce-tune"))],
            |d| {
                let i = &container(d, "agent")["image"];
                want(i == "myregistry/roce-tune:0.1.0", || {
                    format!("{i}: the chart's appVersion")
                })
            },
        ),
        case(vec![("image.tag", json!("0.1.0-0123456789ab"))], |d| {
            let i = &container(d, "install")["image"];
            want(
                i == "registry.example.com/roce-tune:0.1.0-0123456789ab",
                || format!("{i}"),
            )
        }),
        case(
            vec![
                ("image.digest", json!(digest)),
                ("image.tag", json!("ignored")),
            ],
            move |d| {
                let w = format!("registry.example.com/roce-tune@sha256:{}", "ab".repeat(32));
                want(
                    container(d, "agent")["image"] == w.as_str()
                        && container(d, "install")["image"] == w.as_str(),
                    || format!("{}", container(d, "agent")["image"]),
                )
            },
        ),
        case(vec![("image.pullPolicy", json!("Always"))], |d| {
            want(container(d, "agent")["imagePullPolicy"] == "Always", || {
                "pullPolicy".into()
            })
        }),
        case(
            vec![("imagePullSecrets", json!([{"name": "my-registry"}]))],
            |d| {
                want(
                    pod_spec(d)["imagePullSecrets"] == json!([{"name": "my-registry"}]),
                    || format!("{}", pod_spec(d)),
                )
            },
        ),
        case(
            vec![(
                "nodeSelector",
                json!({"kubernetes.io/arch": "amd64", "rdma": "yes"}),
            )],
            |d| {
                want(
                    pod_spec(d)["nodeSelector"]
                        == json!({"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "rdma": "yes"}),
                    || format!("{}", pod_spec(d)["nodeSelector"]),
                )
            },
        ),
        case(
            vec![("tolerations", json!([{"key": "gpu", "operator": "Exists"}]))],
            |d| {
                want(
                    pod_spec(d)["tolerations"] == json!([{"key": "gpu", "operator": "Exists"}]),
                    || format!("{}", pod_spec(d)["tolerations"]),
                )
            },
        ),
        case(vec![("priorityClassName", json!("rdma-critical"))], |d| {
            want(pod_spec(d)["priorityClassName"] == "rdma-critical", || {
                "priorityClassName".into()
            })
        }),
        case(vec![("affinity", affinity.clone())], move |d| {
            want(pod_spec(d)["affinity"] == affinity, || {
                format!("{}", pod_spec(d))
            })
        }),
        case(
            vec![("podAnnotations", json!({"example.com/owner": "gpu-team"}))],
            |d| {
                let a = &the_ds(d)["spec"]["template"]["metadata"]["annotations"];
                want(
                    a["example.com/owner"] == "gpu-team" && a["checksum/node-config"].is_string(),
                    || format!("{a}"),
                )
            },
        ),
        case(vec![("podLabels", json!({"team": "gpu"}))], |d| {
            let ds = the_ds(d);
            let l = &ds["spec"]["template"]["metadata"]["labels"];
            want(
                l["team"] == "gpu" && ds["spec"]["selector"]["matchLabels"].get("team").is_none(),
                || format!("{ds}"),
            )
        }),
        case(vec![("maxUnavailable", json!(2))], |d| {
            want(
                the_ds(d)["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 2,
                || "maxUnavailable".into(),
            )
        }),
        case(vec![("agent.every", json!(30))], |d| {
            let c = &container(d, "agent")["command"];
            want(
                c == &json!(["/roce-tune-agent", "agent", "--every", "30", "--nri"]),
                || format!("{c}"),
            )
        }),
        case(vec![("agent.resources", agent_res.clone())], move |d| {
            want(
                container(d, "agent")["resources"] == agent_res
                    && container(d, "install")["resources"]["limits"]["cpu"] == "100m",
                || format!("{}", container(d, "agent")),
            )
        }),
        case(
            vec![
                (
                    "agent.livenessProbe",
                    json!({"enabled": true, "periodSeconds": 20, "timeoutSeconds": 7, "failureThreshold": 5}),
                ),
                ("nodeConfig.metricsAddress", json!("[::1]:9999")),
            ],
            |d| {
                let p = &container(d, "agent")["livenessProbe"];
                want(
                    *p == json!({"httpGet": {"host": "::1", "port": 9999, "path": "/healthz"},
                    "periodSeconds": 20, "timeoutSeconds": 7, "failureThreshold": 5}),
                    || format!("{p}"),
                )
            },
        ),
        case(vec![("agent.livenessProbe.enabled", json!(false))], |d| {
            want(container(d, "agent").get("livenessProbe").is_none(), || {
                "a probe".into()
            })
        }),
        case(
            vec![
                ("install.resources", res.clone()),
                ("uninstall.enabled", json!(true)),
            ],
            {
                let res = res.clone();
                move |d| {
                    want(container(d, "uninstall")["resources"] == res, || {
                        format!("{}", container(d, "uninstall"))
                    })
                }
            },
        ),
        case(vec![("install.resources", res.clone())], {
            let res = res.clone();
            move |d| {
                want(container(d, "install")["resources"] == res, || {
                    format!("{}", container(d, "install"))
                })
            }
        }),
        case(
            vec![(
                "nodePools",
                json!([{"name": "h100", "nodeSelector": {"gpu": "h100"}}]),
            )],
            |d| {
                let s = &the_ds(d)["metadata"]["name"];
                want(
                    s == "roce-tune-h100" && pod_spec(d)["nodeSelector"]["gpu"] == "h100",
                    || format!("{s}"),
                )
            },
        ),
        case(vec![on()], |d| {
            want(
                has_kind(d, "Service", "roce-tune-metrics")
                    && has_kind(d, "ServiceMonitor", "roce-tune")
                    && has_kind(d, "Role", "roce-tune-prometheus")
                    && container(d, "kube-rbac-proxy")["image"].is_string(),
                || "metrics objects".into(),
            )
        }),
        case(vec![on(), ("metrics.port", json!(9443))], |d| {
            let args = &container(d, "kube-rbac-proxy")["args"];
            let svc = &named(d, "Service", "roce-tune-metrics")["spec"]["ports"][0]["port"];
            want(
                args[0] == "--secure-listen-address=[$(HOST_IP)]:9443" && svc == 9443,
                || format!("{args} {svc}"),
            )
        }),
        case(
            vec![
                on(),
                (
                    "metrics.proxy.image",
                    json!("quay.io/brancz/kube-rbac-proxy:v0.19.1"),
                ),
            ],
            |d| {
                want(
                    container(d, "kube-rbac-proxy")["image"]
                        == "quay.io/brancz/kube-rbac-proxy:v0.19.1",
                    || "proxy image".into(),
                )
            },
        ),
        case(
            vec![
                on(),
                ("metrics.proxy.tlsSecret", json!("roce-tune-metrics-tls")),
            ],
            |d| {
                let c = container(d, "kube-rbac-proxy");
                let vols = pod_spec(d)["volumes"].as_array().unwrap();
                let v = vols.iter().find(|v| v["name"] == "kube-rbac-proxy-tls");
                let args: Vec<&str> = c["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                want(
                    args.contains(&"--tls-cert-file=/etc/kube-rbac-proxy/tls.crt")
                        && args.contains(&"--tls-private-key-file=/etc/kube-rbac-proxy/tls.key")
                        && v.is_some_and(|v| v["secret"]["secretName"] == "roce-tune-metrics-tls")
                        && c["volumeMounts"].as_array().unwrap().iter().any(|m| {
                            m["name"] == "kube-rbac-proxy-tls"
                                && m["mountPath"] == "/etc/kube-rbac-proxy"
                        }),
                    || format!("{c}"),
                )
            },
        ),
        case(vec![on(), ("metrics.proxy.resources", res.clone())], {
            let res = res.clone();
            move |d| {
                want(container(d, "kube-rbac-proxy")["resources"] == res, || {
                    "proxy resources".into()
                })
            }
        }),
        case(
            vec![
                on(),
                (
                    "metrics.readers",
                    json!([{"kind": "ServiceAccount", "name": "prom", "namespace": "obs"}]),
                ),
            ],
            |d| {
                let s = &named(d, "ClusterRoleBinding", "roce-tune-metrics-reader")["subjects"];
                want(
                    *s == json!([{"kind": "ServiceAccount", "name": "prom", "namespace": "obs"}]),
                    || format!("{s}"),
                )
            },
        ),
        case(
            vec![
                on(),
                (
                    "metrics.prometheusRBAC",
                    json!({"enabled": true, "serviceAccount": "prom", "namespace": "obs"}),
                ),
            ],
            |d| {
                let s = &named(d, "RoleBinding", "roce-tune-prometheus")["subjects"];
                let rules = &named(d, "Role", "roce-tune-prometheus")["rules"][0];
                want(
                    *s == json!([{"kind": "ServiceAccount", "name": "prom", "namespace": "obs"}])
                        && rules["resources"]
                            .as_array()
                            .unwrap()
                            .contains(&json!("endpoints")),
                    || format!("{s}"),
                )
            },
        ),
        case(
            vec![on(), ("metrics.prometheusRBAC.enabled", json!(false))],
            |d| {
                want(
                    !has_kind(d, "Role", "roce-tune-prometheus")
                        && !has_kind(d, "RoleBinding", "roce-tune-prometheus"),
                    || "Role".into(),
                )
            },
        ),
        case(
            vec![on(), ("metrics.serviceMonitor.enabled", json!(false))],
            |d| {
                want(
                    !has_kind(d, "ServiceMonitor", "roce-tune")
                        && has_kind(d, "Service", "roce-tune-metrics"),
                    || "ServiceMonitor".into(),
                )
            },
        ),
        case(
            vec![
                on(),
                (
                    "metrics.serviceMonitor.labels",
                    json!({"release": "kube-prometheus-stack"}),
                ),
            ],
            |d| {
                let l = &named(d, "ServiceMonitor", "roce-tune")["metadata"]["labels"];
                want(
                    l["release"] == "kube-prometheus-stack"
                        && l["app.kubernetes.io/name"] == "roce-tune",
                    || format!("{l}"),
                )
            },
        ),
        case(
            vec![
                on(),
                ("metrics.serviceMonitor.interval", json!("15s")),
                ("metrics.serviceMonitor.scrapeTimeout", json!("5s")),
            ],
            move |d| {
                let e = sm(d);
                want(e["interval"] == "15s" && e["scrapeTimeout"] == "5s", || {
                    format!("{e}")
                })
            },
        ),
        case(
            vec![
                on(),
                (
                    "metrics.serviceMonitor.authorization",
                    json!({"credentials": {"name": "prom-token", "key": "token"}}),
                ),
            ],
            move |d| {
                let e = sm(d);
                want(
                    e["authorization"]
                        == json!({"credentials": {"name": "prom-token", "key": "token"}})
                        && e.get("bearerTokenFile").is_none(),
                    || format!("{e}"),
                )
            },
        ),
        case(
            vec![
                on(),
                ("metrics.proxy.tlsSecret", json!("roce-tune-metrics-tls")),
                (
                    "metrics.serviceMonitor.tlsConfig",
                    json!({"ca": {"secret": {"name": "roce-tune-metrics-ca", "key": "ca.crt"}}, "serverName": "roce-tune-metrics.roce-tune.svc"}),
                ),
            ],
            move |d| {
                let e = sm(d);
                want(
                    e["tlsConfig"]
                        == json!({"ca": {"secret": {"name": "roce-tune-metrics-ca", "key": "ca.crt"}}, "serverName": "roce-tune-metrics.roce-tune.svc"}),
                    || format!("{e}"),
                )
            },
        ),
        case(
            vec![
                on(),
                ("metrics.prometheusRule.enabled", json!(true)),
                (
                    "metrics.prometheusRule.labels",
                    json!({"release": "kube-prometheus-stack"}),
                ),
            ],
            |d| {
                let rule = named(d, "PrometheusRule", "roce-tune");
                let l = &rule["metadata"]["labels"];
                want(
                    l["release"] == "kube-prometheus-stack"
                        && l["app.kubernetes.io/name"] == "roce-tune"
                        && rule["metadata"]["namespace"] == "roce-tune"
                        && rule["spec"]["groups"] == rule_file_groups(),
                    || {
                        format!(
                            "{}; its groups are not conf/alerts/roce-tune.rules.yaml's (the chart's \
                             files/roce-tune.rules.yaml must be that file)",
                            rule["metadata"]
                        )
                    },
                )
            },
        ),
        case(
            vec![
                on(),
                ("metrics.prometheusRule.enabled", json!(true)),
                (
                    "metrics.prometheusRule.runbookBaseUrl",
                    json!("https://github.com/example/roce-tune/blob/v0.1.0/"),
                ),
            ],
            |d| {
                // Every rule's link, and nothing else, is the published page.
                let base = "https://github.com/example/roce-tune/blob/v0.1.0/";
                let mut groups = rule_file_groups();
                let mut links = 0;
                for group in groups.as_array_mut().unwrap() {
                    for rule in group["rules"].as_array_mut().unwrap() {
                        let url = &mut rule["annotations"]["runbook_url"];
                        if let Some(path) = url.as_str().filter(|u| u.starts_with("docs/")) {
                            *url = json!(format!("{base}{path}"));
                            links += 1;
                        }
                    }
                }
                let rule = named(d, "PrometheusRule", "roce-tune");
                want(links > 0 && rule["spec"]["groups"] == groups, || {
                    format!("{links} links; rendered {}", rule["spec"]["groups"])
                })
            },
        ),
        case(
            vec![
                on(),
                ("metrics.prometheusRule.enabled", json!(true)),
                ("uninstall.enabled", json!(true)),
            ],
            |d| {
                want(of_kind(d, "PrometheusRule").is_empty(), || {
                    "a PrometheusRule during an uninstall, where no agent runs".into()
                })
            },
        ),
        case(
            vec![
                ("grafana.dashboard.enabled", json!(true)),
                ("grafana.dashboard.label", json!("dash")),
                ("grafana.dashboard.labelValue", json!("yes")),
                ("grafana.dashboard.namespace", json!("grafana")),
            ],
            |d| {
                let cm = named(d, "ConfigMap", "roce-tune-grafana-dashboard");
                want(
                    cm["metadata"]["labels"]["dash"] == "yes"
                        && cm["metadata"]["namespace"] == "grafana",
                    || format!("{}", cm["metadata"]),
                )
            },
        ),
        case(vec![("uninstall.enabled", json!(true))], |d| {
            let names: Vec<&Value> = pod_spec(d)["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| &c["name"])
                .collect();
            want(
                names == [&json!("uninstall")] && pod_spec(d).get("initContainers").is_none(),
                || format!("{names:?}"),
            )
        }),
    ]
}

/// Each value renders what it says, through the real Helm, checked on the
/// objects it renders (the defaults, the kustomize overlays' objects, are
/// check-conf's).
#[test]
fn each_value_renders_what_it_says() {
    let helm = needs!(helm);
    let py = needs!(yaml_python);
    let mut wrong = Vec::new();
    for c in cases() {
        let set: Vec<(&str, Value)> = c.set.clone();
        match render_json(&py, &helm, &set) {
            Ok(docs) => {
                if let Err(e) = (c.check)(&docs) {
                    wrong.push(format!("{set:?}: {e}"));
                }
            }
            Err(e) => wrong.push(format!("{set:?}: helm template failed: {e}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What the schema or the chart refuses among the values above: a CPU limit
/// on the agent, a podLabel or podAnnotation of the chart's own, a digest
/// that is not sha256, a tlsConfig without a CA, or with a CA while
/// kube-rbac-proxy serves its self-signed certificate, an authorization
/// without credentials, a probe on port 0.
#[test]
fn values_that_cannot_work_are_refused() {
    let helm = needs!(helm);
    let py = needs!(yaml_python);
    let schema = "values don't meet the specifications of the schema";
    let cases: Vec<(Vec<(&str, Value)>, &str)> = vec![
        (
            vec![(
                "agent.resources",
                json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "160Mi"}}),
            )],
            schema,
        ),
        (
            vec![("podLabels", json!({"app.kubernetes.io/name": "x"}))],
            "podLabels may not set app.kubernetes.io/name",
        ),
        (
            vec![("podAnnotations", json!({"checksum/node-config": "x"}))],
            "podAnnotations may not set checksum/node-config",
        ),
        (vec![("image.digest", json!("md5:0123"))], schema),
        (
            vec![
                ("metrics.enabled", json!(true)),
                (
                    "metrics.serviceMonitor.tlsConfig",
                    json!({"serverName": "x"}),
                ),
            ],
            schema,
        ),
        (
            vec![
                ("metrics.enabled", json!(true)),
                (
                    "metrics.serviceMonitor.tlsConfig",
                    json!({"ca": {"secret": {"name": "ca", "key": "ca.crt"}}}),
                ),
            ],
            "metrics.proxy.tlsSecret is empty",
        ),
        (
            vec![
                ("metrics.enabled", json!(true)),
                (
                    "metrics.serviceMonitor.authorization",
                    json!({"type": "Bearer"}),
                ),
            ],
            schema,
        ),
        (
            vec![
                ("metrics.enabled", json!(true)),
                (
                    "metrics.serviceMonitor.authorization",
                    json!({"type": "Basic", "credentials": {"name": "a", "key": "b"}}),
                ),
            ],
            schema,
        ),
        (
            vec![("nodeConfig.metricsAddress", json!("127.0.0.1:0"))],
            "has port 0",
        ),
        (vec![("resources", json!({}))], schema),
        (
            vec![("metrics.prometheusRule.enabled", json!(true))],
            "metrics.prometheusRule.enabled needs metrics.enabled",
        ),
        (
            vec![
                ("metrics.enabled", json!(true)),
                ("metrics.prometheusRule.labels", json!({"release": 1})),
            ],
            schema,
        ),
        // A base without its scheme or its closing "/" would make every
        // link a dead one.
        (
            vec![
                ("metrics.enabled", json!(true)),
                (
                    "metrics.prometheusRule.runbookBaseUrl",
                    json!("docs.example.internal/roce-tune"),
                ),
            ],
            schema,
        ),
    ];
    let mut wrong = Vec::new();
    for (set, says) in cases {
        match render_json(&py, &helm, &set) {
            Ok(_) => wrong.push(format!("{set:?}: rendered")),
            Err(e) if !e.contains(says) => {
                wrong.push(format!("{set:?}: refused, but not with {says:?}: {e}"))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every value of values.schema.json (but nodeConfig's keys, which
/// `schema_refuses_exactly_what_roce_tune_refuses` probes) is set by a case
/// of `each_value_renders_what_it_says`: a value added to the chart needs
/// its case.
#[test]
fn every_value_is_rendered_by_a_case() {
    fn leaves(schema: &Value, path: String, out: &mut Vec<String>) {
        match schema["properties"].as_object() {
            Some(props) if path != "nodeConfig" && path != "nodePools" => {
                for (k, v) in props {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    leaves(v, p, out);
                }
            }
            _ => out.push(path),
        }
    }
    let text = std::fs::read_to_string(chart().join("values.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let mut all = Vec::new();
    leaves(&schema, String::new(), &mut all);
    let set: Vec<&str> = cases()
        .iter()
        .flat_map(|c| c.set.iter().map(|(k, _)| *k))
        .collect();
    let missing: Vec<&String> = all
        .iter()
        .filter(|leaf| {
            leaf.as_str() != "nodeConfig"
                && !set.iter().any(|k| {
                    *k == leaf.as_str()
                        || leaf.starts_with(&format!("{k}."))
                        || k.starts_with(&format!("{leaf}."))
                })
        })
        .collect();
    assert!(all.len() > 30, "{all:?}");
    assert!(missing.is_empty(), "values no case renders: {missing:?}");
}
