#!/usr/bin/env python3
"""Negative tests of check-conf: each case breaks one thing in a copy of conf/ and requires
check-conf to FAIL with a message that names the problem and the file or overlay. Also pins
integration/sriov_render.py on a known SriovNetwork.

Usage: check-conf-negative.py CRD_DIR [CASE...]     (run by integration/check-conf.sh)
Every case must fail check-conf as expected; any case that passes, or fails for another
reason, fails this script (exit 1). A mutation that does not apply (the text it edits moved)
is a failure too: fix the case, never skip it.
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

# Imports of integration/*.py leave no __pycache__ in the checkout.
sys.dont_write_bytecode = True
here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
sys.path.insert(0, here)
import sriov_render  # noqa: E402


def edit(rel, old, new, count=1):
    def apply(root):
        path = os.path.join(root, rel)
        with open(path) as f:
            text = f.read()
        if text.count(old) < count:
            raise AssertionError("mutation does not apply: %r not in %s" % (old, rel))
        with open(path, "w") as f:
            f.write(text.replace(old, new, count))
    return apply


def write(rel, text):
    def apply(root):
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)
    return apply


def edit_json(rel, change):
    """A mutation of a JSON file: change(document) edits it in place."""
    def apply(root):
        path = os.path.join(root, rel)
        with open(path) as f:
            doc = json.load(f)
        change(doc)
        with open(path, "w") as f:
            json.dump(doc, f, indent=2)
    return apply


def both(*mutations):
    def apply(root):
        for m in mutations:
            m(root)
    return apply


SHARED = "conf/sriovnetwork-shared.yaml"
DASH = "conf/grafana/roce-tune.json"
METRICS = "conf/deploy/components/metrics/"
CATALOGUE = "src/agent/metrics.rs"
NAD = "conf/network-attachment-definition.yaml"
BASE_DS = "conf/deploy/base/daemonset.yaml"
CHART = "conf/helm/roce-tune/"
RULES = "conf/alerts/roce-tune.rules.yaml"
ALERTS = "conf/deploy/components/alerts/"
CHART_DS = CHART + "templates/daemonset.yaml"
DEPLOY_MD = "docs/deploy.md"
DOCS_SNIPPETS = "docs/deploy.md (snippets"
# The last mount of the base's agent (the NRI socket's dir), and one more that the chart lacks.
BASE_LAST_MOUNT = ("              mountPath: /var/run/nri\n              mountPropagation: HostToContainer\n"
                   "      volumes:\n")
EXTRA_MOUNT = ("              mountPath: /var/run/nri\n              mountPropagation: HostToContainer\n"
               "            - name: extra\n              mountPath: /var/run/extra\n"
               "      volumes:\n        - name: extra\n          hostPath:\n            path: /var/run/extra\n"
               "            type: DirectoryOrCreate\n")

# (name, mutation, label the FAIL line must contain, messages the output must contain)
CASES = [
    ("quote-in-metaPlugins",
     edit(SHARED, '"type": "sbr"', '"type": "sbr",\n      "note": "don\'t"'),
     SHARED, ["spec.metaPlugins contains a single quote (') on line 10"]),
    ("doubled-quote-in-metaPlugins",
     edit(SHARED, '"type": "sbr"', '"type": "sbr",\n      "note": "a\'\'b"'),
     SHARED, ["spec.metaPlugins contains a single quote"]),
    ("quote-in-ipam",
     edit(SHARED, '"poolName": "sriov-pool"', '"poolName": "sriov\'pool"'),
     SHARED, ["spec.ipam contains a single quote"]),
    ("host-path-key-in-metaPlugins",
     edit(SHARED, '"trafficClass": 41,', '"trafficClass": 41,\n      "stateDir": "/var/tmp/x",'),
     SHARED, ["stateDir is a node setting: roce-tune refuses a network config that names stateDir, sysfsRoot or logFile"]),
    ("host-path-key-in-NAD",
     edit(NAD, '"trafficClass": 41,', '"trafficClass": 41,\n          "sysfsRoot": "/tmp/sys",'),
     NAD, ["sysfsRoot is a node setting"]),
    ("logFile-in-SriovNetwork-of-nvidia-example",
     edit("conf/deploy/nvidia-network-operator/examples/sriovnetwork.yaml", '"gidIndex": 3,',
          '"gidIndex": 3,\n      "logFile": "/var/log/roce-tune.log",'),
     "examples/sriovnetwork.yaml", ["logFile is a node setting"]),
    ("whitespace-in-ipam-string",
     edit(SHARED, '"poolName": "sriov-pool"', '"poolName": "sriov pool"'),
     SHARED, ["the operator removes every whitespace character from ipam"]),
    ("metaPlugins-as-array",
     edit("conf/sriovnetwork-exclusive.yaml", '{\n      "type": "rdma"\n    },', '[{"type": "rdma"}],'),
     "conf/sriovnetwork-exclusive.yaml", ["every plugin must be a JSON object"]),
    ("metaPlugins-trailing-comma",
     edit("conf/sriovnetwork-exclusive.yaml", '"type": "sbr"\n    }', '"type": "sbr"\n    },'),
     "conf/sriovnetwork-exclusive.yaml", ["spec.config of the rendered NAD is not JSON"]),
    ("SriovNetwork-in-unknown-namespace",
     edit("conf/sriovnetwork-exclusive.yaml", "namespace: sriov-network-operator", "namespace: team-a"),
     "conf/sriovnetwork-exclusive.yaml", ["not an operator namespace this project knows"]),
    ("shipped-NAD-differs-from-rendering",
     edit(NAD, '"trafficClass": 41,', '"trafficClass": 42,'),
     NAD, ["spec.config differs from the operator's rendering"]),
    ("bin-dir-DirectoryOrCreate",
     edit("conf/deploy/kubernetes/cni-bin-dir.yaml", "type: Directory", "type: DirectoryOrCreate"),
     "conf/deploy/kubernetes ", ["volume cni-bin must be hostPath /opt/cni/bin of type Directory"]),
    ("openshift-wrong-bin-dir",
     edit("conf/deploy/openshift/openshift.yaml", "path: /var/lib/cni/bin", "path: /opt/cni/bin"),
     "conf/deploy/openshift ", ["volume cni-bin must be hostPath /var/lib/cni/bin of type Directory"]),
    ("openshift-without-scc-rbac",
     edit("conf/deploy/openshift/kustomization.yaml", "  - scc-rbac.yaml\n", ""),
     "conf/deploy/openshift ", ["no Role + RoleBinding grants `use` of the privileged SCC"]),
    ("openshift-without-scc-annotation",
     edit("conf/deploy/openshift/openshift.yaml", "openshift.io/required-scc: privileged", "example.com/x: y"),
     "conf/deploy/openshift ", ["openshift.io/required-scc: privileged is missing"]),
    ("overlay-references-missing-file",
     edit("conf/deploy/kubernetes/kustomization.yaml", "path: cni-bin-dir.yaml", "path: cni-bin-dir-gone.yaml"),
     "conf/deploy/kubernetes (kubectl kustomize)", ["kubectl kustomize failed"]),
    ("tolerations-only-gpu",
     edit(BASE_DS, "        - operator: Exists\n", "        - key: nvidia.com/gpu\n          operator: Exists\n"),
     "conf/deploy/kubernetes ", ["tolerations: need {operator: Exists}"]),
    ("floating-image-tag",
     edit("conf/deploy/base/kustomization.yaml", 'newTag: "0.', 'newTag: "latest" #'),
     "conf/deploy/nvidia-network-operator ", ["image tag 'latest' is not the release, Cargo.toml's version"]),
    ("image-tag-of-a-revision",
     edit("conf/deploy/base/kustomization.yaml", 'newTag: "0.1.0"', 'newTag: "0.1.0-e6551efe869c"'),
     "conf/deploy/kubernetes ", ["image tag '0.1.0-e6551efe869c' is not the release"]),
    ("netns-without-propagation",
     edit(BASE_DS, "              mountPath: /var/run/netns\n              mountPropagation: HostToContainer\n",
          "              mountPath: /var/run/netns\n"),
     "conf/deploy/kubernetes ", ["/var/run/netns must be mounted from the host with mountPropagation HostToContainer"]),
    ("agent-run-by-the-cni-binary",
     edit(BASE_DS, '["/roce-tune-agent", "agent",', '["/roce-tune", "agent",'),
     "conf/deploy/kubernetes ", ["container agent: command must be [/roce-tune-agent, agent, --every, N]"]),
    ("probe-not-where-the-agent-listens",
     edit("conf/deploy/base/node.json", "{", '{"metricsAddress": "127.0.0.1:9663",', 1),
     "conf/deploy/kubernetes ", ["livenessProbe must be httpGet http://127.0.0.1:9663/healthz"]),
    ("agent-without-liveness-probe",
     edit(BASE_DS, "          livenessProbe:\n", "          readinessProbe:\n"),
     "conf/deploy/kubernetes ", ["container agent: no livenessProbe"]),
    ("agent-with-a-cpu-limit",
     edit(BASE_DS, "          limits: {memory: 160Mi}\n", "          limits: {cpu: 100m, memory: 160Mi}\n"),
     "conf/deploy/kubernetes ", ["a CPU limit (100m) on the agent"]),
    ("nri-without-its-socket-dir",
     edit(BASE_DS, "            - name: nri\n              mountPath: /var/run/nri\n              mountPropagation: HostToContainer\n", ""),
     "conf/deploy/kubernetes ", ["with --nri, the directory of node.json's nriSocket /var/run/nri must be mounted"]),
    ("nri-index-not-two-digits",
     edit("conf/deploy/base/node.json", "{", '{"nriIndex": "5",', 1),
     "conf/deploy/kubernetes ", ["node.json: nriIndex: '5' does not match '^[0-9]{2}$'"]),
    ("misspelt-field-in-DaemonSet",
     edit(BASE_DS, "              mountPath: /run/netns\n              mountPropagation: HostToContainer\n",
          "              mountPath: /run/netns\n              mountPropogation: HostToContainer\n"),
     "conf/deploy/kubernetes ", ["Additional properties are not allowed ('mountPropogation' was unexpected)"]),
    ("repair-without-configfs",
     edit(BASE_DS, "            - name: sys-kernel\n              mountPath: /sys/kernel\n              mountPropagation: HostToContainer\n", ""),
     "conf/deploy/kubernetes ", ["/sys/kernel/config must come from the host's /sys/kernel/config (or /sys/kernel), read-write"]),
    ("repair-without-hostPID",
     edit(BASE_DS, "      hostPID: true\n", ""),
     "conf/deploy/openshift ", ["hostPID must be true"]),
    ("node-config-unknown-key",
     edit("conf/deploy/base/node.json", '"deviceInfoDir":', '"statedir": "/x",\n  "deviceInfoDir":'),
     "conf/deploy/kubernetes ", ["node.json: unknown key 'statedir'"]),
    ("node-config-bad-allowlist-pattern",
     edit("conf/deploy/base/node.json", '"net.ipv4.conf.*.arp_filter",', '"net.ipv4.conf.[a-z]*.arp_filter",'),
     "conf/deploy/openshift ", ["sysctlAllowlist pattern 'net.ipv4.conf.[a-z]*.arp_filter' must be a dotted key"]),
    ("node-config-logFile-not-mounted",
     edit("conf/deploy/base/node.json", '"deviceInfoDir":', '"logFile": "/var/log/roce-tune/roce-tune.log",\n  "deviceInfoDir":'),
     "conf/deploy/openshift ", ["the directory of node.json's logFile /var/log/roce-tune/roce-tune.log is not mounted"]),
    ("nvidia-overlay-creates-namespace",
     both(write("conf/deploy/nvidia-network-operator/namespace.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: nvidia-network-operator\n"),
          edit("conf/deploy/nvidia-network-operator/kustomization.yaml", "  - ../base\n",
               "  - ../base\n  - namespace.yaml\n")),
     "conf/deploy/nvidia-network-operator ", ["the overlay must not create"]),
    ("uninstall-keeps-init-container",
     edit("conf/deploy/components/uninstall/uninstall-container.yaml",
          "- op: remove\n  path: /spec/template/spec/initContainers\n", ""),
     "conf/deploy/uninstall/kubernetes ", ["uninstall: no initContainer may run"]),
    # The metrics component, built on every install overlay.
    ("metrics-upstream-is-not-metricsAddress",
     edit("conf/deploy/base/node.json", '"deviceInfoDir":', '"metricsAddress": "127.0.0.1:9700",\n  "deviceInfoDir":'),
     "conf/deploy/components/metrics with kubernetes ", ["--upstream 'http://127.0.0.1:9662/' is not http://<node.json's metricsAddress>/"]),
    ("metrics-address-not-loopback",
     both(edit("conf/deploy/base/node.json", '"deviceInfoDir":', '"metricsAddress": "0.0.0.0:9662",\n  "deviceInfoDir":'),
          edit(METRICS + "kube-rbac-proxy.yaml", "--upstream=http://127.0.0.1:9662/", "--upstream=http://0.0.0.0:9662/")),
     "conf/deploy/components/metrics with openshift ", ["metricsAddress 0.0.0.0:9662 is not loopback"]),
    ("metrics-address-is-a-name",
     edit("conf/deploy/base/node.json", '"deviceInfoDir":', '"metricsAddress": "localhost:9662",\n  "deviceInfoDir":'),
     "conf/deploy/kubernetes ", ["metricsAddress must be an IP address and port"]),
    ("metrics-proxy-privileged",
     edit(METRICS + "kube-rbac-proxy.yaml", "            runAsNonRoot: true\n", "            runAsNonRoot: true\n            privileged: true\n"),
     "conf/deploy/components/metrics with nvidia-network-operator ", ["securityContext.privileged must be unset or false"]),
    ("metrics-proxy-forwards-everything",
     edit(METRICS + "kube-rbac-proxy.yaml", "            - --allow-paths=/metrics\n", ""),
     "conf/deploy/components/metrics with kubernetes ", ["--allow-paths must be /metrics"]),
    ("metrics-token-in-every-container",
     edit(METRICS + "kube-rbac-proxy.yaml", "      volumes:\n", "      automountServiceAccountToken: true\n      volumes:\n"),
     "conf/deploy/components/metrics with kubernetes ", ["automountServiceAccountToken must stay false"]),
    ("metrics-proxy-without-tokenreviews",
     edit(METRICS + "rbac.yaml", '  - apiGroups: ["authentication.k8s.io"]\n    resources: ["tokenreviews"]\n    verbs: ["create"]\n', ""),
     "conf/deploy/components/metrics with openshift ",
     ["no ClusterRole with tokenreviews and subjectaccessreviews `create` is bound to ServiceAccount roce-tune/roce-tune"]),
    ("metrics-reader-role-missing",
     edit(METRICS + "rbac.yaml", '  - nonResourceURLs: ["/metrics"]', '  - nonResourceURLs: ["/healthz"]'),
     "conf/deploy/components/metrics with kubernetes ", ["no ClusterRole with `get` on the non-resource URL /metrics is bound"]),
    ("metrics-service-wrong-target-port",
     edit(METRICS + "service.yaml", "targetPort: https-metrics", "targetPort: 9100"),
     "conf/deploy/components/metrics with kubernetes ",
     ["Service roce-tune-metrics: port https-metrics does not reach kube-rbac-proxy's listen port 9662"]),
    ("metrics-service-not-headless",
     edit(METRICS + "service.yaml", "  clusterIP: None\n", ""),
     "conf/deploy/components/metrics with kubernetes ", ["must be headless"]),
    ("metrics-servicemonitor-misspelt-field",
     edit(METRICS + "servicemonitor.yaml", "      bearerTokenFile:", "      bearerTokenFil:"),
     "conf/deploy/components/metrics with kubernetes ", ["Additional properties are not allowed ('bearerTokenFil' was unexpected)"]),
    ("metrics-servicemonitor-without-node-label",
     edit(METRICS + "servicemonitor.yaml", "          targetLabel: node", "          targetLabel: nodename"),
     "conf/deploy/components/metrics with nvidia-network-operator ", ["no relabeling of __meta_kubernetes_endpoint_node_name to `node`"]),
    # The Grafana dashboard against the catalogue of src/agent/metrics.rs.
    ("dashboard-queries-an-unknown-metric",
     edit(DASH, "roce_tune_rail_traffic_class_wanted{", "roce_tune_rail_traffic_klass_wanted{"),
     DASH, ["unknown metric roce_tune_rail_traffic_klass_wanted: not in the catalogue"]),
    ("catalogue-loses-a-metric-the-dashboard-uses",
     edit(CATALOGUE, 'name: "roce_tune_orphans_pending"', 'name: "roce_tune_orphans_waiting"'),
     DASH, ["unknown metric roce_tune_orphans_pending"]),
    ("dashboard-histogram-without-bucket",
     edit(DASH, "roce_tune_cni_request_duration_seconds_bucket{", "roce_tune_cni_request_duration_seconds{", 3),
     DASH, ["roce_tune_cni_request_duration_seconds is a histogram"]),
    ("dashboard-label-the-metric-lacks",
     edit(DASH, 'roce_tune_idle_vfs_holding_class{node=~\\"$node\\"}', 'roce_tune_idle_vfs_holding_class{node=~\\"$node\\", pod=\\"x\\"}'),
     DASH, ["roce_tune_idle_vfs_holding_class has no label 'pod'"]),
    ("dashboard-ignores-the-node-variable",
     edit(DASH, 'roce_tune_orphans_pending{node=~\\"$node\\"}', "roce_tune_orphans_pending"),
     DASH, ['roce_tune_orphans_pending: the selector must filter node=~"$node"']),
    ("dashboard-promql-does-not-parse",
     edit(DASH, "sum by (node) (roce_tune_rail_info{", "sum by (node) ((roce_tune_rail_info{"),
     DASH, ["PromQL: could not parse expression"]),
    ("dashboard-without-schemaVersion",
     edit(DASH, '"schemaVersion": 39,', ""),
     DASH, ["schemaVersion None: must be an integer >= 36"]),
    ("dashboard-panel-without-targets",
     edit(DASH, '"targets": [', '"targetz": ['),
     DASH, ["no targets"]),
    ("metrics-servicemonitor-renames-the-rails-pods",
     edit(METRICS + "servicemonitor.yaml", "      honorLabels: true\n", ""),
     "conf/deploy/components/metrics with kubernetes ", ["honorLabels must be true"]),
    # The alerting rules (conf/alerts), the alerts component and the chart's PrometheusRule.
    ("rules-query-an-unknown-metric",
     edit(RULES, "roce_tune_orphans_pending) > 0", "roce_tune_orphans_waiting) > 0"),
     RULES + " (Prometheus rules)", ["unknown metric roce_tune_orphans_waiting: not in the catalogue"]),
    ("rules-group-by-a-label-the-metric-lacks",
     edit(RULES, "max by (node) (roce_tune_orphans_pending)", "max by (node, pod, interface) (roce_tune_orphans_pending)"),
     RULES + " (Prometheus rules)", ["grouping by 'interface', a label none of the metrics here has"]),
    ("rules-up-of-every-job",
     edit(RULES, 'min by (node) (up{job="roce-tune"}) == 0', "min by (node) (up) == 0"),
     RULES + " (Prometheus rules)", ['up without job="roce-tune"']),
    ("rules-misspelt-key",
     edit(RULES, "        for: 30m\n", "        fro: 30m\n"),
     RULES + " (Prometheus rules)", ["promtool check rules", "field fro not found"]),
    ("alerts-component-copy-differs",
     edit(ALERTS + "prometheusrule.yaml", "> 1\n", "> 100\n"),
     ALERTS[:-1] + " (prometheusrule.yaml is conf/alerts/roce-tune.rules.yaml)",
     ["is not what integration/alerts_component.py writes"]),
    ("alerts-component-without-the-daemonsets-namespace",
     edit(ALERTS + "kustomization.yaml", "          kind: PrometheusRule\n          name: roce-tune\n",
          "          kind: PrometheusRule\n          name: roce-tune-other\n"),
     ALERTS[:-1] + " with components/metrics and kubernetes",
     ["PrometheusRule roce-tune: namespace None, not the DaemonSet's 'roce-tune'"]),
    ("chart-rule-file-is-another",
     both(lambda root: os.remove(os.path.join(root, CHART + "files/roce-tune.rules.yaml")),
          write(CHART + "files/roce-tune.rules.yaml", "groups:\n  - name: other\n    rules: []\n")),
     "conf/helm/roce-tune (platform kubernetes, metrics.enabled, metrics.prometheusRule.enabled)",
     ["its spec is not {groups: <the groups of conf/alerts/roce-tune.rules.yaml>}"]),
    # The Helm chart against the overlays (integration/chart_compare.py) and against itself.
    ("chart-mount-changed",
     edit(CHART_DS, "            - name: state\n              mountPath: {{ $state }}\n",
          "            - name: state\n              mountPath: /var/lib/roce-tune\n"),
     "conf/helm/roce-tune (platform kubernetes) as conf/deploy/kubernetes",
     ["differs from kustomize: DaemonSet roce-tune: spec.template.spec.containers[name=agent]"
      ".volumeMounts[mountPath=/var/lib/roce-tune]: only in the chart",
      "volumeMounts[mountPath=/run/cni/roce-tune]: only in kustomize"]),
    ("overlay-gains-a-mount-the-chart-lacks",
     edit(BASE_DS, BASE_LAST_MOUNT, EXTRA_MOUNT),
     "conf/helm/roce-tune (platform openshift) as conf/deploy/openshift",
     ["spec.template.spec.containers[name=agent].volumeMounts[mountPath=/var/run/extra]: only in kustomize",
      "spec.template.spec.volumes[name=extra]: only in kustomize"]),
    ("metrics-without-prometheus-role",
     edit(METRICS + "rbac.yaml", '    resources: ["services", "endpoints", "pods"]', '    resources: ["services", "pods"]'),
     "conf/deploy/components/metrics with kubernetes",
     ["no Role in roce-tune lets a Prometheus list and watch the Service's endpoints"]),
    ("chart-proxy-forwards-everything",
     edit(CHART_DS, "            - --allow-paths=/metrics\n", ""),
     "conf/helm/roce-tune (platform nvidia-network-operator, metrics.enabled) as conf/deploy/components/metrics",
     ["--allow-paths must be /metrics", "containers[name=kube-rbac-proxy].args"]),
    ("chart-uninstall-keeps-the-state-volume",
     edit(CHART_DS, "        {{- if $.Values.uninstall.enabled }}\n        # Not roce-tune's own dirs",
          "        - name: state\n          hostPath:\n            path: {{ $state }}\n            type: DirectoryOrCreate\n"
          "        {{- if $.Values.uninstall.enabled }}\n        # Not roce-tune's own dirs"),
     "conf/helm/roce-tune (platform kubernetes, uninstall.enabled) as conf/deploy/uninstall/kubernetes",
     ["would make the kubelet re-create what uninstall removes", "volumes[name=state]: only in the chart"]),
    ("chart-app-version-not-cargos",
     edit(CHART + "Chart.yaml", 'appVersion: "0.1.0"', 'appVersion: "0.1.0-e6551efe869c"'),
     "conf/helm/roce-tune (Chart.yaml, values.yaml)",
     ["Chart.yaml: appVersion '0.1.0-e6551efe869c' (the chart's default image tag) is not Cargo.toml's version"]),
    ("chart-default-tag-not-the-app-version",
     edit(CHART + "values.yaml", '  tag: ""', '  tag: "0.1.0-e6551efe869c"'),
     "conf/helm/roce-tune (Chart.yaml, values.yaml)",
     ["values.yaml: image.tag '0.1.0-e6551efe869c': the default must be empty"]),
    ("chart-nodeConfig-defaults-are-not-the-bases",
     edit(CHART + "values.yaml", "nodeConfig:\n", "nodeConfig:\n  driftPolicy: report\n"),
     "conf/helm/roce-tune (Chart.yaml, values.yaml)",
     ["values.yaml: nodeConfig", "is not conf/deploy/base/node.json"]),
    ("chart-without-node-config-checksum",
     edit(CHART_DS, "        checksum/node-config:", "        example.com/config:"),
     "conf/helm/roce-tune (checksum/node-config rolls the DaemonSet on a new nodeConfig)",
     ["the pod template has no annotation checksum/node-config"]),
    ("chart-schema-takes-unknown-node-config-keys",
     edit_json(CHART + "values.schema.json",
               lambda d: d["properties"]["nodeConfig"].update(additionalProperties=True)),
     "conf/helm/roce-tune (values.schema.json refuses an unknown nodeConfig key)",
     ["was not refused by values.schema.json"]),
    ("chart-dashboard-without-sidecar-label",
     edit(CHART + "values.yaml", "    label: grafana_dashboard\n", "    label: dashboard\n"),
     "conf/helm/roce-tune (grafana.dashboard.enabled",
     ["no label grafana_dashboard"]),
    ("docs-lack-a-namespace-label",
     edit("docs/deploy.md", "pod-security.kubernetes.io/warn=privileged", "pod-security.kubernetes.io/warn=baseline"),
     "conf/helm/roce-tune (platform kubernetes) as conf/deploy/kubernetes",
     ["docs/deploy.md does not give its label pod-security.kubernetes.io/warn=privileged"]),
    ("containerfile-pulls",
     edit("conf/image/Containerfile", "FROM scratch", "FROM docker.io/library/busybox:latest"),
     "conf/image/Containerfile", ["FROM docker.io/library/busybox:latest: the image is built offline FROM scratch"]),
    # The docs' snippets (integration/docs_snippets.py): a reader copies them onto a node.
    ("docs-k3s-template-turns-nri-off",
     edit(DEPLOY_MD, "  disable = false\n  disable_connections = false\n  socket_path = '/var/run/nri/nri.sock'",
          "  disable = true\n  disable_connections = false\n  socket_path = '/var/run/nri/nri.sock'"),
     DOCS_SNIPPETS, ["[plugins.io.containerd.nri.v1.nri]: disable must be false (NRI on), got True"]),
    ("docs-machineconfig-writes-another-file",
     # enable_nri = false, base64-encoded: not the drop-in the page shows.
     edit(DEPLOY_MD, "base64,W2NyaW8ubnJpXQplbmFibGVfbnJpID0gdHJ1ZQpucmlfbGlzdGVuID0gIi92YXIvcnVuL25yaS9ucmkuc29jayIK",
          "base64,W2NyaW8ubnJpXQplbmFibGVfbnJpID0gZmFsc2UKbnJpX2xpc3RlbiA9ICIvdmFyL3J1bi9ucmkvbnJpLnNvY2siCg=="),
     DOCS_SNIPPETS, ["storage.files /etc/crio/crio.conf.d/99-roce-tune-nri.conf: [crio.nri]: enable_nri must be true",
                     "are none of the TOML blocks of this document"]),
    ("docs-hostdevice-nad-chain-out-of-order",
     edit(DEPLOY_MD, '''{"type": "roce-tune", "trafficClass": 41, "gidIndex": 3, "gidCheck": "enforce"},
        {"type": "sbr"}''', '''{"type": "sbr"},
        {"type": "roce-tune", "trafficClass": 41, "gidIndex": 3, "gidCheck": "enforce"}'''),
     DOCS_SNIPPETS, ["chain order must be sriov -> [rdma] -> roce-tune -> sbr, got host-device -> sbr -> roce-tune"]),
    ("docs-platform-section-not-marked",
     edit(DEPLOY_MD, "> **Not run here**: no k3s or RKE2 node", "> No k3s or RKE2 node"),
     DOCS_SNIPPETS, ["section '## k3s and RKE2: the containerd config template' holds a runtime's configuration"]),
]

# integration/sriov_render.py on conf/sriovnetwork-shared.yaml with the openshift.io prefix:
# the text the operator's template (sriov-network-operator 249e2001) produced for it when
# rendered with Go's text/template (checked once when this was written; see the module).
PINNED_RENDER = (
    'apiVersion: "k8s.cni.cncf.io/v1"\n'
    "kind: NetworkAttachmentDefinition\n"
    "metadata:\n"
    "  name: rdma-vf\n"
    "  namespace: default\n"
    "  annotations:\n"
    "    k8s.v1.cni.cncf.io/resourceName: openshift.io/rdma_vf\n"
    "    sriovnetwork.openshift.io/owner-ref: SriovNetwork.sriovnetwork.openshift.io/sriov-network-operator/rdma-vf\n"
    "spec:\n"
    "  config: '{\n"
    '  "cniVersion":"1.0.0",\n'
    '  "name":"rdma-vf","plugins": [\n'
    '    {"type":"sriov","vlan":0,"vlanQoS":0,"logLevel":"info","ipam":{"type":"nv-ipam","poolName":"sriov-pool"}\n'
    "},\n"
    "  {\n"
    '  "type": "roce-tune",\n'
    '  "trafficClass": 41,\n'
    '  "gidIndex": 3,\n'
    '  "gidCheck": "enforce",\n'
    '  "gidTimeoutMs": 3000\n'
    "},\n"
    "{\n"
    '  "type": "sbr"\n'
    "}\n"
    "\n"
    "  ]\n"
    "}'\n"
)


def check_pinned_render(crd_dir):
    import yaml
    with open(os.path.join(repo, SHARED)) as f:
        doc = next(d for d in yaml.safe_load_all(f) if d)
    with open(os.path.join(crd_dir, "sriovnetwork.openshift.io_sriovnetworks.yaml")) as f:
        crd = next(d for d in yaml.safe_load_all(f) if d)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    text = sriov_render.render_text(doc, "openshift.io", schema)
    if text != PINNED_RENDER:
        return ["sriov_render.render_text(%s) changed:\n%s" % (SHARED, text)]
    nad, conf = sriov_render.parse_rendered(text)
    if [p["type"] for p in conf["plugins"]] != ["sriov", "roce-tune", "sbr"]:
        return ["the pinned rendering does not parse to sriov, roce-tune, sbr: %s" % conf]
    return []


def run_case(crd_dir, name, mutate, label, messages):
    tmp = tempfile.mkdtemp(prefix="check-conf-neg-")
    try:
        shutil.copytree(os.path.join(repo, "conf"), os.path.join(tmp, "conf"), symlinks=True)
        shutil.copy(os.path.join(repo, "Cargo.toml"), os.path.join(tmp, "Cargo.toml"))
        # The metric catalogue the dashboard is checked against (src/agent/metrics.rs).
        os.makedirs(os.path.join(tmp, "src", "agent"))
        shutil.copy(os.path.join(repo, CATALOGUE), os.path.join(tmp, CATALOGUE))
        # The namespace labels the chart's install must give (docs/deploy.md).
        os.makedirs(os.path.join(tmp, "docs"))
        shutil.copy(os.path.join(repo, "docs", "deploy.md"), os.path.join(tmp, "docs", "deploy.md"))
        # roce-tune's default nriSocket, which the docs' NRI snippets must name (src/node/mod.rs).
        os.makedirs(os.path.join(tmp, "src", "node"), exist_ok=True)
        shutil.copy(os.path.join(repo, "src", "node", "mod.rs"), os.path.join(tmp, "src", "node", "mod.rs"))
        try:
            mutate(tmp)
        except AssertionError as e:
            return ["case is broken: %s" % e]
        out = subprocess.run([sys.executable, os.path.join(here, "check-conf.py"),
                              os.path.join(tmp, "conf"), crd_dir],
                             capture_output=True, text=True, timeout=300)
        text = out.stdout + out.stderr
        errs = []
        if out.returncode != 1:
            errs.append("check-conf exited %d, expected 1" % out.returncode)
        fail_blocks = []
        block = None
        for line in text.splitlines():
            if line.startswith("FAIL "):
                block = [line]
                fail_blocks.append(block)
            elif line.startswith("     ") and block is not None:
                block.append(line)
            else:
                block = None
        named = [b for b in fail_blocks if label in b[0]]
        if not named:
            errs.append("no FAIL line names %r" % label)
        for m in messages:
            if not any(m in line for b in named for line in b):
                errs.append("no message %r under the FAIL line of %r" % (m, label))
        if errs:
            errs.append("check-conf output:\n" + text)
        return errs
    finally:
        shutil.rmtree(tmp)


def main(argv):
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    crd_dir, only = argv[0], set(argv[1:])
    unknown = only - {c[0] for c in CASES} - {"pinned-render"}
    if unknown:
        sys.stderr.write("unknown case(s): %s\n" % ", ".join(sorted(unknown)))
        return 2
    failed = 0
    if not only or "pinned-render" in only:
        errs = check_pinned_render(crd_dir)
        print("%s pinned-render" % ("FAIL" if errs else "ok  "))
        for e in errs:
            print("     " + e)
        failed += bool(errs)
    cases = [c for c in CASES if not only or c[0] in only]
    # Two at a time: each case is a check-conf run, mostly waiting on kubectl kustomize.
    with concurrent.futures.ThreadPoolExecutor(max_workers=int(os.environ.get("CHECK_CONF_JOBS", "2"))) as pool:
        results = list(pool.map(lambda c: run_case(crd_dir, *c), cases))
    for (name, _, _, _), errs in zip(cases, results):
        print("%s %s" % ("FAIL" if errs else "ok  ", name))
        for e in errs:
            print("     " + e.replace("\n", "\n     "))
        failed += bool(errs)
    total = (len(only) if only else len(CASES) + 1)
    print("check-conf negative cases: %d, failed %d" % (total, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
