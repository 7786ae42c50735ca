#!/usr/bin/env python3
"""Validate the manifests and CNI configs in conf/ offline. Run through integration/check-conf.sh.

1. Every kustomization under conf/deploy/ is built with `kubectl kustomize` (the overlays, the
   base, the uninstall overlays; components only through them), and the output is checked:
   * CRD kinds against tests/data/crds (strict, see below); the built-in kinds
     against the Kubernetes schemas of K8S_SCHEMA_VERSION (kubernetes-validate, strict:
     an unknown or misspelt field is an error), and the kinds an overlay may hold
     (Namespace, ServiceAccount, ConfigMap, Role, RoleBinding, DaemonSet) by the rules
     below; any other kind is an error.
   * The DaemonSet of an install overlay: privileged initContainer `install` running
     /install.sh with paths that match its mounts; the CNI bin dir of that overlay
     (OVERLAYS) as a hostPath of type Directory; tolerations `operator: Exists`; a
     nodeSelector with the image's architecture; a ServiceAccount in the build; requests
     and limits; a pinned image whose tag is the release, Cargo.toml's version;
     container `agent` running `/roce-tune-agent agent --every N` (the long-running
     binary: the CNI binary `/roce-tune` refuses `agent`), privileged,
     hostNetwork, hostPID, the state dir and node config dir of node.json mounted from the
     host at the same paths (node config read-only), /run/netns and /var/run/netns with
     HostToContainer propagation, the host's /sys/kernel/config (configfs) read-write; with
     `--nri` (the NRI plugin), the directory of node.json's nriSocket mounted from the host at
     the same path with HostToContainer.
   * The node config in the ConfigMap (node.json): the keys, types and bounds of the chart's
     values.schema.json nodeConfig (7), which tests/it/helm_chart.rs holds to roce-tune's own.
   * OpenShift: the required-scc annotation and a Role + RoleBinding granting `use` of the
     privileged SCC to the ServiceAccount. NVIDIA: the operator's namespace, not created.
   * An uninstall overlay: the same bin dir and image as its install overlay, no
     initContainer, one `uninstall` container, and no volume that would re-create
     roce-tune's directories.
   Files a kustomization uses are checked through its output only; other files under
   conf/deploy (examples) are checked like the rest of conf/.
2. Every other YAML document under conf/:
   * a kind with a CRD in tests/data/crds (SriovNetwork, SriovNetworkNodePolicy,
     NetworkAttachmentDefinition): apiVersion must be <group>/<served version>, and the
     document must validate against that version's openAPIV3Schema, in STRICT mode: an
     object schema with "properties" and no "additionalProperties" rejects unknown fields
     (what `kubectl apply --validate=strict`, the default since 1.27, does; the API server
     would otherwise silently prune them). metadata.name must be a DNS-1123 subdomain.
   * a SriovNetwork is rendered the way the sriov-network-operator renders it
     (integration/sriov_render.py: its template splices metaPlugins, ipam and capabilities
     verbatim into one single-quoted YAML scalar), then the result is parsed as YAML and
     its config as JSON. Errors: a `'` in any spliced field; a rendering that is not YAML,
     not JSON, or whose plugins or ipam differ from what the manifest says (the operator
     strips every whitespace character from ipam); the rendered NAD failing its CRD schema
     or the chain rules below; a namespace whose operator (hence resource prefix) is not
     known. A NetworkAttachmentDefinition in the same directory with the rendered name and
     namespace must be identical to the rendering (resource annotation and config).
3. Every CNI config (a rendered or shipped NAD's spec.config, *.conflist):
   * every plugin has a "type"; the chain order is [sriov] -> [rdma] -> roce-tune -> sbr;
   * every roce-tune config has the docs/design.md, "Node config" and "Network config" key types and ranges; in a SriovNetwork or a
     NAD (tenant-written), the node settings stateDir, sysfsRoot and logFile are errors:
     roce-tune refuses them there (code 7). The Rust test tests/it/conf_examples.rs feeds the
     same configs, printed by integration/extract-configs.py, to the plugin's own validation.
4. conf/image/Containerfile: FROM scratch only (built offline), the OCI labels.
5. The optional metrics component (conf/deploy/components/metrics), built on top of every
   install overlay in a temporary kustomization (as a user composes it): every document
   against its schema (the ServiceMonitor against prometheus-operator's CRD, strict), the
   install overlay's own checks, and the metrics rules: a kube-rbac-proxy container, not
   privileged, non-root, read-only root, no capabilities, with a pinned image, listening on
   [$(HOST_IP)]:<port> (status.hostIP), forwarding only /metrics to http://<node.json's
   metricsAddress>/, which must be loopback (else the agent is reachable without the proxy);
   its own projected token (the pod keeps automountServiceAccountToken: false and no other
   container mounts a token); a ClusterRole with tokenreviews and subjectaccessreviews
   `create` bound to the DaemonSet's ServiceAccount in its namespace; a ClusterRole with
   `get` on the non-resource URL /metrics, bound to someone; a headless Service selecting the
   pods whose port reaches the proxy's; a ServiceMonitor in the same namespace that selects
   that Service, scrapes its port over https with a bearer token, sets the `node` label and
   honours the agent's own labels (honorLabels: its namespace and pod are the rails' pods).
6. conf/grafana/*.json, Grafana dashboards: a title, uid, schemaVersion >= 36, a `datasource`
   and a `node` variable; panels with unique ids, a grid position within 24 columns, and
   (but rows and text) Prometheus targets with refIds and expressions. Every roce_tune_*
   name an expression (or a variable query) uses must be a family of the catalogue
   (src/agent/metrics.rs, its CATALOGUE table), a histogram only as _bucket/_sum/_count;
   every label it matches or groups by must be one of that family's labels or one Prometheus
   adds (node, instance, job; le on _bucket); every roce_tune_* selector filters
   node=~"$node"; and every expression parses as PromQL (`promtool check rules` on them, with
   the dashboard variables substituted).

7. The Helm chart (conf/helm/roce-tune), with HELM (integration/chart_compare.py):
   * Chart.yaml: apiVersion v2, version and appVersion (the default image tag) Cargo.toml's,
     as the kustomize base's newTag; values.yaml's image.tag empty (appVersion), its repository
     and nodeConfig the base's;
   * `helm lint --strict` for each platform, with metrics and the dashboard on, and with
     uninstall on;
   * `helm template` for each platform, with metrics.enabled, with uninstall.enabled: the
     schema and DaemonSet rules above on what it renders, then a comparison, object by object,
     with `kubectl kustomize` of the matching overlay (with the metrics component; the
     uninstall overlay): the same kinds, names, containers, images, mounts, volumes,
     securityContext, args, env, nodeSelector, tolerations, everything but what differs by
     nature (integration/chart_compare.py says what and why). The overlays' Namespace labels
     must be in docs/deploy.md (DEPLOY_MD), since the chart does not create the namespace;
   * the pod template's node config checksum changes with nodeConfig and with nothing else;
     grafana.dashboard.enabled adds only conf/grafana/roce-tune.json as a ConfigMap with the
     sidecar's label; an unknown nodeConfig key fails `helm template`.
8. The snippets of README.md and docs/*.md (integration/docs_snippets.py says the rules):
   every ```json, ```yaml and ```toml block parses; a runtime's NRI table (containerd's,
   CRI-O's, an OpenShift MachineConfig's CRI-O drop-in) keeps NRI on at roce-tune's nriSocket
   (src/node/mod.rs, NODE_RS) and sits in a section that says it was not run here; a document of
   a kind with a CRD schema is checked as the files of conf/ are (2 and 3).
9. conf/alerts/*.rules.yaml, Prometheus rule files: `promtool check rules`, and every
   roce_tune_* name and label as the dashboard's (6, without the node variable); `up` only of
   the ServiceMonitor's job. The PrometheusRule of conf/deploy/components/alerts (built on every
   install overlay, with the metrics component) and the chart's (metrics.prometheusRule.enabled)
   carry exactly its groups, and pass prometheus-operator's CRD schema.
   integration/rules-test.py (`make rules-test`) runs its promtool tests.

Usage: check-conf.py CONF_DIR CRD_DIR    (one line per file or build; exit 1 on any error)
Environment: KUBECTL (default: kubectl on PATH), CARGO_TOML (default: CONF_DIR/../Cargo.toml),
METRICS_RS (default: CONF_DIR/../src/agent/metrics.rs), PROMTOOL (the dashboards' PromQL
check; check-conf.sh sets it), HELM (default: helm on PATH; check-conf.sh sets it), DEPLOY_MD
(default: CONF_DIR/../docs/deploy.md), NODE_RS (default: CONF_DIR/../src/node/mod.rs).
"""
import copy
import functools
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema
import kubernetes_validate
import yaml

# libyaml's loader where PyYAML has it: the CRDs, kustomize's and helm's output are parsed in
# a tenth of the pure-Python loader's time.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Imports of integration/*.py leave no __pycache__ in the checkout.
sys.dont_write_bytecode = True
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import alerts_component  # noqa: E402
import chart_compare  # noqa: E402
import docs_snippets  # noqa: E402
import sriov_render  # noqa: E402

import declared_keys  # noqa: E402

spec = importlib.util.spec_from_file_location("extract_configs", os.path.join(here, "extract-configs.py"))
extract_configs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(extract_configs)

PCI_RE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Node settings: a network config that names one is refused (docs/design.md, "Node config" and "Network config", code 7).
HOST_PATH_KEYS = ("stateDir", "sysfsRoot", "logFile")
# src/cni/keys.rs, the plugin's one declaration, read by integration/declared_keys.py
# (tests/it/conf_examples.rs holds that reading to the Rust): roce-tune's keys, what libcni and
# Multus add, and the node's, with the bounds of each per-rail setting roce-tune owns.
DECLARED_KEYS = declared_keys.declared()
ROCE_KEYS = set(DECLARED_KEYS)
OWNED_BOUNDS = {k: (d["owned"]["min"], d["owned"]["max"])
                for k, d in DECLARED_KEYS.items() if d["owned"]}
assert set(HOST_PATH_KEYS) == {k for k, d in DECLARED_KEYS.items() if d["whose"] == "Node"}
# The Helm chart (module docstring, 7), under CONF_DIR. Its values.schema.json's nodeConfig is
# the one description of node.json here: tests/it/helm_chart.rs holds it to the keys, types and
# bounds roce-tune itself accepts, and every node.json in conf/ is checked against it.
CHART = os.path.join("helm", "roce-tune")
NODE_CONFIG_SCHEMA = {}
NODE_CONFIG_DEFAULTS = {"stateDir": "/run/cni/roce-tune", "sysfsRoot": "/sys",
                        # src/node/mod.rs DEFAULT_NRI_SOCKET
                        "nriSocket": "/var/run/nri/nri.sock",
                        # src/agent/http.rs DEFAULT_ADDRESS
                        "metricsAddress": "127.0.0.1:9662"}
NODE_CONFIG_HOST_DIR = "/etc/cni/roce-tune"
NODE_PATTERN_COMPONENT = re.compile(r"^[A-Za-z0-9_*-]+$")

# What each shipped install overlay deploys to (conf/deploy/<name>). Its uninstall overlay is
# conf/deploy/uninstall/<name>.
OVERLAYS = {
    "kubernetes": {"bin_dir": "/opt/cni/bin", "namespace": "roce-tune", "own_namespace": True,
                   "openshift": False},
    "openshift": {"bin_dir": "/var/lib/cni/bin", "namespace": "roce-tune", "own_namespace": True,
                  "openshift": True},
    "nvidia-network-operator": {"bin_dir": "/opt/cni/bin", "namespace": "nvidia-network-operator",
                                "own_namespace": False, "openshift": False},
}
# The architecture of the image `make image` builds (the binary's target triple).
IMAGE_ARCH = "amd64"
# The Kubernetes release whose schemas (kubernetes-validate) the built-in kinds must pass,
# strict: unknown fields are errors. kubectl here is 1.32.
K8S_SCHEMA_VERSION = "1.32.0"
OVERLAY_KINDS = {"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "Role", "RoleBinding"}
# The optional metrics component (conf/deploy/<METRICS_COMPONENT>) adds these.
METRICS_COMPONENT = os.path.join("components", "metrics")
METRICS_KINDS = {"Service", "ServiceMonitor", "ClusterRole", "ClusterRoleBinding"}
# The optional alerts component (conf/deploy/<ALERTS_COMPONENT>), used with the metrics one: the
# rule file as prometheus-operator's PrometheusRule (module docstring, 9).
ALERTS_COMPONENT = os.path.join("components", "alerts")
ALERTS_KINDS = {"PrometheusRule"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
PROXY = "kube-rbac-proxy"
PROXY_IMAGE = re.compile(r"^quay\.io/brancz/kube-rbac-proxy:v\d+\.\d+\.\d+$")
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


# ------------------------------------------------------------------ CRD schemas

def load_crds(crd_dir):
    """{(group, kind): {version: schema}} of the served versions of every CRD."""
    crds = {}
    for path in sorted(glob.glob(os.path.join(crd_dir, "*.yaml")) + glob.glob(os.path.join(crd_dir, "*.yml"))):
        with open(path) as f:
            for doc in yaml.load_all(f, Loader=YAML_LOADER):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                s = doc["spec"]
                versions = {}
                for v in s.get("versions", []):
                    if v.get("served"):
                        versions[v["name"]] = v["schema"]["openAPIV3Schema"]
                crds[(s["group"], s["names"]["kind"])] = versions
    return crds


def crd_schema(crds, group, kind):
    versions = crds.get((group, kind)) or {}
    return next(iter(versions.values()), None)


def strict(schema):
    """Copy of an OpenAPI v3 schema where objects with properties reject unknown fields."""
    schema = copy.deepcopy(schema)

    def walk(s):
        if not isinstance(s, dict):
            return
        if (s.get("type") == "object" and "properties" in s and "additionalProperties" not in s
                and not s.get("x-kubernetes-preserve-unknown-fields")):
            s["additionalProperties"] = False
        for key in ("properties", "patternProperties"):
            for sub in (s.get(key) or {}).values():
                walk(sub)
        for key in ("items", "additionalProperties", "not"):
            if isinstance(s.get(key), dict):
                walk(s[key])
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in s.get(key) or []:
                walk(sub)

    walk(schema)
    return schema


def check_metadata(doc):
    name = (doc.get("metadata") or {}).get("name")
    if not name:
        return ["metadata.name: required"]
    if not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        return ["metadata.name %r: not a DNS-1123 subdomain (the API server refuses it)" % (name,)]
    return []


def check_crd_doc(doc, crds):
    errs = []
    api = doc.get("apiVersion", "")
    group, _, version = api.rpartition("/")
    versions = crds.get((group, doc.get("kind")))
    if versions is None:
        return None
    if version not in versions:
        return ["apiVersion %s: version %r not served (served: %s)" % (api, version, ", ".join(versions))]
    validator = jsonschema.Draft7Validator(strict(versions[version]))
    for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in e.absolute_path) or "(root)"
        errs.append("%s: %s" % (where, e.message))
    return errs + check_metadata(doc)


# ------------------------------------------------------------------ CNI configs

def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_roce_tune(p, tenant):
    """tenant: the config comes from a SriovNetwork or NAD (network config, docs/design.md, "Who writes what")."""
    errs = []
    for k in p:
        if k not in ROCE_KEYS:
            errs.append("unknown key %r (not in the config reference: docs/design.md, Network config)" % k)
    if tenant:
        for k in HOST_PATH_KEYS:
            if k in p:
                errs.append("%s is a node setting: roce-tune refuses a network config that names "
                            "stateDir, sysfsRoot or logFile (code 7); set it in the node config "
                            "(conf/deploy/base/node.json)" % k)

    for key, (lo, hi) in OWNED_BOUNDS.items():
        if key in p and not (is_int(p[key]) and lo <= p[key] <= hi):
            errs.append("%s must be an integer %d..%d" % (key, lo, hi))
    if "podTrafficClasses" in p:
        v = p["podTrafficClasses"]
        if not (isinstance(v, list) and all(is_int(x) and 0 <= x <= 255 for x in v)):
            errs.append("podTrafficClasses must be a list of integers 0..255")
    if "gidIndex" in p and not (is_int(p["gidIndex"]) and p["gidIndex"] >= 0):
        errs.append("gidIndex must be an integer >= 0")
    if "gidTimeoutMs" in p and not (is_int(p["gidTimeoutMs"]) and p["gidTimeoutMs"] >= 0):
        errs.append("gidTimeoutMs must be an integer >= 0")
    if "rdmaPort" in p and not (is_int(p["rdmaPort"]) and p["rdmaPort"] >= 1):
        errs.append("rdmaPort must be an integer >= 1")
    if "gidCheck" in p and p["gidCheck"] not in ("enforce", "present", "warn", "off"):
        errs.append("gidCheck must be enforce, present, warn or off")
    for k in ("deviceID", "pciBusID"):
        if k in p and not (isinstance(p[k], str) and PCI_RE.match(p[k])):
            errs.append("%s must be a PCI address DDDD:BB:DD.F" % k)
    for k in HOST_PATH_KEYS:
        if k in p and not (isinstance(p[k], str) and p[k].startswith("/")):
            errs.append("%s must be an absolute path" % k)
    if "sysctl" in p:
        sc = p["sysctl"]
        if not isinstance(sc, dict):
            errs.append("sysctl must be a map")
        else:
            for k, v in sc.items():
                parts = k.split(".")
                if parts[0] != "net" or any(x in ("", "..") or "/" in x for x in parts):
                    errs.append("sysctl key %r must stay under net. without / or .." % k)
                if not isinstance(v, str):
                    errs.append("sysctl %r: value must be a string" % k)
    return errs


ORDER = {"sriov": 0, "host-device": 0, "rdma": 1, "roce-tune": 2, "sbr": 3}


def check_chain(plugins, interface_first, tenant):
    """plugins: the full list as the runtime sees it."""
    errs = []
    if any(not isinstance(p, dict) for p in plugins):
        return ["every plugin must be a JSON object (got %s)" % [type(p).__name__ for p in plugins]]
    types = [p.get("type") for p in plugins]
    if any(not isinstance(t, str) or not t for t in types):
        errs.append("every plugin needs a string \"type\" (got %s)" % types)
        return errs
    if interface_first and types[0] not in ("sriov", "host-device"):
        errs.append("first plugin must be the interface plugin (sriov), got %s" % types[0])
    known = [ORDER[t] for t in types if t in ORDER]
    if known != sorted(known):
        errs.append("chain order must be sriov -> [rdma] -> roce-tune -> sbr, got %s" % " -> ".join(types))
    if "roce-tune" in types and types.count("roce-tune") != 1:
        errs.append("roce-tune appears more than once")
    if "tuning" in types and "roce-tune" in types:
        errs.append("tuning and roce-tune in one chain: roce-tune replaces tuning's sysctls")
    for p in plugins:
        if p.get("type") == "roce-tune":
            errs += ["roce-tune: " + e for e in check_roce_tune(p, tenant)]
    return errs


def check_netconf_text(text, what, tenant):
    """A NAD's spec.config or a conflist file, parsed as libcni would."""
    try:
        _, ver, plugins = extract_configs.plugins_of_netconf(json.loads(text))
        if ver is None:
            return ["%s: no cniVersion" % what]
    except ValueError as e:
        return ["%s: does not parse: %s" % (what, e)]
    return ["%s: %s" % (what, e) for e in check_chain(plugins, True, tenant)]


def quote_lines(text):
    return ", ".join(str(n) for n, line in enumerate(text.splitlines(), 1) if "'" in line)


def render_sriov_network(doc, crds):
    """Render as the operator does. ([errors], rendered NAD or None)."""
    errs = []
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    namespace = meta.get("namespace")
    prefix = sriov_render.OPERATOR_NAMESPACES.get(namespace)
    if prefix is None:
        errs.append("metadata.namespace %r: not an operator namespace this project knows (%s), so "
                    "the resource prefix of the rendered NAD is unknown"
                    % (namespace, ", ".join(sorted(sriov_render.OPERATOR_NAMESPACES))))
        prefix = "unknown.example"
    for field in ("metaPlugins", "ipam", "capabilities"):
        value = spec.get(field)
        if isinstance(value, str) and "'" in value:
            errs.append("spec.%s contains a single quote (') on line %s of the field: the operator "
                        "pastes %s verbatim into a single-quoted YAML scalar (config: '...'), where "
                        "' ends the scalar and '' turns into ': the NetworkAttachmentDefinition "
                        "breaks or changes; write it as \\u0027 inside JSON strings"
                        % (field, quote_lines(value), field))
    if errs:
        return errs, None
    schema = crd_schema(crds, "sriovnetwork.openshift.io", "SriovNetwork")
    try:
        text = sriov_render.render_text(doc, prefix, schema)
        nad, conf = sriov_render.parse_rendered(text)
    except sriov_render.RenderError as e:
        return ["rendered as the operator does: %s" % e], None
    what = "rendered NAD %s/%s" % ((nad.get("metadata") or {}).get("namespace"), (nad.get("metadata") or {}).get("name"))
    nad_errs = check_crd_doc(nad, crds)
    errs += ["%s: %s" % (what, e) for e in (nad_errs or [])]
    plugins = conf.get("plugins") if isinstance(conf, dict) else None
    if isinstance(spec.get("metaPlugins"), str) and spec["metaPlugins"].strip():
        if not isinstance(plugins, list):
            errs.append("%s: config has no plugins list" % what)
            return errs, nad
        try:
            meant = extract_configs.meta_plugins(spec["metaPlugins"])
        except ValueError as e:
            meant = None
            errs.append("spec.metaPlugins: not JSON objects separated by commas (%s)" % e)
        if meant is not None and plugins[1:] != meant:
            errs.append("%s: the plugins after sriov differ from spec.metaPlugins (a multi-line JSON "
                        "string is folded by the YAML scalar): rendered %s" % (what, json.dumps(plugins[1:])))
    else:
        plugins = [conf] if isinstance(conf, dict) else conf
    if isinstance(spec.get("ipam"), str) and spec["ipam"].strip():
        try:
            meant = json.loads(spec["ipam"])
            if not isinstance(meant, dict):
                errs.append("spec.ipam: not a JSON object")
            first = plugins[0] if plugins and isinstance(plugins[0], dict) else {}
            if isinstance(meant, dict) and first.get("ipam") != meant:
                errs.append("spec.ipam: the operator removes every whitespace character from ipam "
                            "(strings.Fields), also inside JSON strings: it renders as %s, not %s"
                            % (json.dumps(first.get("ipam")), json.dumps(meant)))
        except ValueError as e:
            errs.append("spec.ipam: does not parse: %s" % e)
    errs += ["%s: %s" % (what, e) for e in check_chain(plugins, True, tenant=True)]
    if spec.get("networkNamespace") and namespace not in sriov_render.OPERATOR_NAMESPACES:
        errs.append("spec.networkNamespace: the operator refuses it outside its own namespace "
                    "(controllers/generic_network_controller.go)")
    return errs, nad


def check_yaml_doc(doc, crds):
    if not isinstance(doc, dict):
        return ["not a mapping"], None
    kind = doc.get("kind")
    errs = check_crd_doc(doc, crds)
    if errs is None:
        return ["kind %r: no schema and no check for it here (kustomize manifests belong under "
                "conf/deploy/ in a kustomization; add a check to integration/check-conf.py)" % kind], None
    spec = doc.get("spec") or {}
    rendered = None
    if kind == "SriovNetwork":
        render_errs, rendered = render_sriov_network(doc, crds)
        errs += render_errs
    if kind == "NetworkAttachmentDefinition" and isinstance(spec.get("config"), str):
        errs += check_netconf_text(spec["config"], "spec.config", tenant=True)
    return errs, rendered


def compare_nad(shipped, rendered):
    """A shipped NAD that claims to be the operator's rendering of a shipped SriovNetwork."""
    errs = []
    key = "k8s.v1.cni.cncf.io/resourceName"
    a = ((shipped.get("metadata") or {}).get("annotations") or {}).get(key)
    b = ((rendered.get("metadata") or {}).get("annotations") or {}).get(key)
    if a != b:
        errs.append("annotation %s is %r, the operator renders %r" % (key, a, b))
    try:
        sc = json.loads(shipped["spec"]["config"])
        rc = json.loads(rendered["spec"]["config"])
        if sc != rc:
            errs.append("spec.config differs from the operator's rendering: %s" % json.dumps(rc, sort_keys=True))
    except (KeyError, TypeError, ValueError):
        pass  # reported by its own checks
    return errs


# ------------------------------------------------------------------ kustomize

def kustomization_file(d):
    for n in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if os.path.isfile(os.path.join(d, n)):
            return os.path.join(d, n)
    return None


def referenced_files(kdir, seen=None):
    """Every file a kustomization (and what it includes) reads."""
    seen = set() if seen is None else seen
    kfile = kustomization_file(kdir)
    if kfile is None or kfile in seen:
        return seen
    seen.add(kfile)
    with open(kfile) as f:
        k = yaml.safe_load(f) or {}

    def add(rel):
        p = os.path.normpath(os.path.join(kdir, rel))
        if os.path.isdir(p):
            referenced_files(p, seen)
        else:
            seen.add(p)

    for rel in (k.get("resources") or []) + (k.get("components") or []) + (k.get("patchesStrategicMerge") or []):
        add(rel)
    for p in (k.get("patches") or []) + (k.get("patchesJson6902") or []):
        if isinstance(p, dict) and p.get("path"):
            add(p["path"])
    for g in (k.get("configMapGenerator") or []) + (k.get("secretGenerator") or []):
        for f in g.get("files") or []:
            add(f.split("=", 1)[-1])
    return seen


def kubectl_cmd():
    return os.environ.get("KUBECTL") or "kubectl"


def kustomize_version():
    """(version string, None) or (None, error)."""
    try:
        out = subprocess.run([kubectl_cmd(), "version", "--client", "-o", "json"],
                             capture_output=True, text=True, timeout=60)
    except OSError as e:
        return None, "cannot run %s: %s" % (kubectl_cmd(), e)
    try:
        v = json.loads(out.stdout).get("kustomizeVersion")
    except ValueError:
        v = None
    if not v:
        return None, "%s reports no kustomize version (%s)" % (kubectl_cmd(), (out.stderr or out.stdout).strip()[:200])
    m = re.match(r"v?(\d+)\.(\d+)", v)
    # Components (conf/deploy/components) came in kustomize v3.7; kubectl 1.14-1.20 embed
    # v2.0.3 (Debian 12's kubernetes-client is 1.20).
    if not m or (int(m.group(1)), int(m.group(2))) < (4, 0):
        return None, ("%s embeds kustomize %s, which cannot build conf/deploy (components need "
                      "kustomize >= v3.7; kubectl >= 1.21 embeds v4+)" % (kubectl_cmd(), v))
    return v, None


BUILDS = {}


def kustomize_build(kdir):
    """`kubectl kustomize KDIR`'s documents (a copy), or ValueError; built once per directory:
    the chart is compared with the same builds the overlays' checks read."""
    key = os.path.realpath(kdir)
    if key not in BUILDS:
        out = subprocess.run([kubectl_cmd(), "kustomize", kdir], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            BUILDS[key] = ValueError("kubectl kustomize failed: %s" % out.stderr.strip().replace("\n", " | "))
        else:
            BUILDS[key] = [d for d in yaml.load_all(out.stdout, Loader=YAML_LOADER) if d is not None]
    if isinstance(BUILDS[key], ValueError):
        raise BUILDS[key]
    return copy.deepcopy(BUILDS[key])


# kubernetes-validate reads a kind's schema and its 1.3 MB _definitions.json from disk for every
# document it validates: about 25 ms each, 60% of a check-conf run once the chart's renders
# are checked too. Read each file once (the contents are only read, never changed).
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
    kubernetes_validate.utils.schema_contents)


def check_k8s_schema(doc):
    """A built-in kind against the Kubernetes schema of K8S_SCHEMA_VERSION, strict."""
    try:
        kubernetes_validate.validate(doc, K8S_SCHEMA_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        where = ".".join(str(p) for p in getattr(e, "absolute_path", []) or []) or "(root)"
        return ["Kubernetes %s schema (strict): %s: %s" % (K8S_SCHEMA_VERSION, where, str(e).splitlines()[0])]
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
        return ["no Kubernetes %s schema for it: %s" % (K8S_SCHEMA_VERSION, str(e).splitlines()[0])]
    return []


def cargo_version(cargo_toml):
    with open(cargo_toml) as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    return m.group(1) if m else None


def check_image(c, version):
    """The shipped manifests run the release: the tag is Cargo.toml's version (the chart's
    appVersion, the kustomize base's newTag), the image `make image` tags so at the release's
    git tag. A digest (the chart's image.digest) pins one image whatever its tags."""
    image = c.get("image") or ""
    if re.match(r"^[^@:]+(:[^@/]+)?@sha256:[0-9a-f]{64}$", image):
        return []
    name, sep, tag = image.rpartition(":")
    if not sep or "/" in tag or "@" in image:
        return ["container %s: image %r has no tag (the release's: Cargo.toml's version)" % (c.get("name"), image)]
    if version and tag != version:
        return ["container %s: image tag %r is not the release, Cargo.toml's version %s: the manifests "
                "name the image `make image` tags <version> at the release's git tag (no floating, "
                "revision or -dirty tags)" % (c.get("name"), tag, version)]
    return []


def is_agent(c):
    """The long-running container: the one that runs `roce-tune-agent agent`."""
    return (c.get("command") or [])[:2] == ["/roce-tune-agent", "agent"]


def check_resources(c):
    """Requests and limits for every container; no CPU limit for the agent, whose process is
    also the NRI plugin: it answers every container creation on the node within NRI's request
    timeout (2 s, containerd/nri pkg/api/timeouts.go), and a CFS quota (100m: 10 ms of CPU
    per 100 ms period) makes a burst of answers wait for the next period, over and over."""
    r = c.get("resources") or {}
    req, lim = r.get("requests") or {}, r.get("limits") or {}
    agent = is_agent(c)
    limits = ("memory",) if agent else ("cpu", "memory")
    missing = [k for k in ("cpu", "memory") if k not in req] + ["limit " + k for k in limits if k not in lim]
    errs = ["container %s: resources without %s" % (c.get("name"), ", ".join(missing))] if missing else []
    if agent and "cpu" in lim:
        errs.append("container %s: a CPU limit (%s) on the agent: it answers NRI's container creations "
                    "within a 2 s timeout, and a CFS quota throttles it (request CPU, limit memory only)"
                    % (c.get("name"), lim["cpu"]))
    return errs


def check_node_config(text):
    try:
        conf = json.loads(text)
    except ValueError as e:
        return ["node.json does not parse: %s" % e], {}
    if not isinstance(conf, dict):
        return ["node.json is not a JSON object"], {}
    errs = []
    keys = NODE_CONFIG_SCHEMA.get("properties") or {}
    if not keys:
        return ["no node config schema to check node.json against (%s/values.schema.json, "
                "properties.nodeConfig)" % CHART], conf
    for k, v in conf.items():
        if k not in keys:
            errs.append("node.json: unknown key %r (roce-tune refuses it with 104; the keys: %s)" % (k, ", ".join(sorted(keys))))
        elif k == "sysctlAllowlist":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                errs.append("node.json: sysctlAllowlist must be a list of strings")
                continue
            if len(v) > 256:
                errs.append("node.json: sysctlAllowlist holds more than 256 patterns (src/node/mod.rs refuses it)")
            for pat in v:
                # src/node/mod.rs validate_pattern: components of letters, digits, _ - and *;
                # and a pattern outside net. can never match (network sysctls stay under net.).
                if (len(pat) > 256 or pat.split(".")[0] != "net"
                        or not all(NODE_PATTERN_COMPONENT.match(c) for c in pat.split("."))):
                    errs.append("node.json: sysctlAllowlist pattern %r must be a dotted key under net. of "
                                "letters, digits, '_', '-' and '*' (* matches within one component)" % pat)
        elif k == "metricsAddress":
            if parse_ip_port(v) is None:
                errs.append("node.json: metricsAddress must be an IP address and port, such as "
                            "127.0.0.1:9662 or [::1]:9662 (src/agent/http.rs parse_address: no names)")
        else:
            for e in jsonschema.Draft7Validator(keys[k]).iter_errors(v):
                errs.append("node.json: %s: %s (%s)" % (k, e.message, keys[k].get("description", "")))
    return errs, conf


def parse_ip_port(v):
    """(ipaddress, port) of "a.b.c.d:port" or "[v6]:port", as Rust's SocketAddr parses; else None."""
    import ipaddress
    if not isinstance(v, str):
        return None
    m = re.match(r"^\[([0-9A-Fa-f:.]+)\]:(\d{1,5})$", v) or re.match(r"^([0-9.]+):(\d{1,5})$", v)
    if not m or not 0 < int(m.group(2)) < 65536:
        return None
    try:
        ip = ipaddress.ip_address(m.group(1))
    except ValueError:
        return None
    if (ip.version == 6) != v.startswith("["):
        return None
    return ip, int(m.group(2))


def pod_parts(ds):
    tmpl = (ds.get("spec") or {}).get("template") or {}
    return tmpl.get("metadata") or {}, tmpl.get("spec") or {}


def host_path_mounts(pod, container):
    """{mountPath: (hostPath path, volume type, mount)} of a container's hostPath mounts."""
    vols = {v.get("name"): v for v in pod.get("volumes") or []}
    out = {}
    for m in container.get("volumeMounts") or []:
        hp = (vols.get(m.get("name")) or {}).get("hostPath")
        if hp:
            out[m.get("mountPath")] = (hp.get("path"), hp.get("type"), m)
    return out


def check_common_pod(ds, docs, expect, version):
    errs = []
    if ds.get("apiVersion") != "apps/v1":
        errs.append("apiVersion must be apps/v1")
    sel = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    meta, pod = pod_parts(ds)
    labels = meta.get("labels") or {}
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        errs.append("spec.selector.matchLabels must be non-empty and match the pod template's labels")
    ns = pod.get("nodeSelector") or {}
    if not ns:
        errs.append("nodeSelector: missing (each overlay sets it)")
    if ns.get("kubernetes.io/arch") != IMAGE_ARCH:
        errs.append("nodeSelector: kubernetes.io/arch must be %s, the image's only architecture" % IMAGE_ARCH)
    tol = pod.get("tolerations") or []
    if not any(t.get("operator") == "Exists" and not t.get("key") and not t.get("effect") for t in tol):
        errs.append("tolerations: need {operator: Exists} with no key and no effect (a skipped node "
                    "cannot run the pods that need roce-tune)")
    sa = pod.get("serviceAccountName")
    if not sa or not any(d.get("kind") == "ServiceAccount" and d["metadata"]["name"] == sa for d in docs):
        errs.append("serviceAccountName %r: no such ServiceAccount in the build" % sa)
    if not pod.get("hostNetwork"):
        errs.append("hostNetwork must be true (the class file is in the host netns's sysfs)")
    if not pod.get("hostPID"):
        errs.append("hostPID must be true (recorded /proc/<pid>/ns/net paths)")
    vols = {v.get("name"): v for v in pod.get("volumes") or []}
    cni_bin = (vols.get("cni-bin") or {}).get("hostPath") or {}
    if cni_bin.get("path") != expect["bin_dir"] or cni_bin.get("type") != "Directory":
        errs.append("volume cni-bin must be hostPath %s of type Directory (got %s, type %s): a "
                    "DirectoryOrCreate or wrong path gives the node a new, unused bin dir"
                    % (expect["bin_dir"], cni_bin.get("path"), cni_bin.get("type")))
    containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    used = set()
    for c in containers:
        n = c.get("name")
        # The metrics component's proxy: its own image, and no privilege (check_metrics_build).
        errs += (check_image(c, version) if n != PROXY else []) + check_resources(c)
        if c.get("imagePullPolicy") != "IfNotPresent":
            errs.append("container %s: imagePullPolicy must be IfNotPresent (pinned tags)" % n)
        if n != PROXY and not (c.get("securityContext") or {}).get("privileged"):
            errs.append("container %s: must be privileged (host files under SELinux, /sys read-write)" % n)
        for m in c.get("volumeMounts") or []:
            used.add(m.get("name"))
            if m.get("name") not in vols:
                errs.append("container %s: volumeMount %s has no volume" % (n, m.get("name")))
    for name, v in vols.items():
        if name not in used:
            errs.append("volume %s is mounted by no container" % name)
    if expect["openshift"]:
        if (meta.get("annotations") or {}).get("openshift.io/required-scc") != "privileged":
            errs.append("pod template annotation openshift.io/required-scc: privileged is missing")
    return errs


def args_value(args, flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def check_install_ds(ds, docs, expect, version):
    errs = check_common_pod(ds, docs, expect, version)
    _, pod = pod_parts(ds)
    vols = {v.get("name"): v for v in pod.get("volumes") or []}
    inits = {c.get("name"): c for c in pod.get("initContainers") or []}
    conts = {c.get("name"): c for c in pod.get("containers") or []}
    install = inits.get("install")
    node_conf = {}
    if install is None:
        errs.append("initContainer install: missing")
    else:
        if install.get("command") != ["/bin/busybox", "sh", "/install.sh"]:
            errs.append("initContainer install: command must be [/bin/busybox, sh, /install.sh]")
        args = install.get("args") or []
        mounts = host_path_mounts(pod, install)
        bin_mount = args_value(args, "--bin-dir")
        if (mounts.get(bin_mount) or (None,))[0] != expect["bin_dir"]:
            errs.append("initContainer install: --bin-dir %s is not where the %s hostPath is mounted" % (bin_mount, expect["bin_dir"]))
        # The node config: a file of the ConfigMap volume, copied to the host's config dir.
        src = args_value(args, "--node-config") or ""
        cm_mount = next((m for m in install.get("volumeMounts") or []
                         if src.startswith(m.get("mountPath", "") + "/") and "configMap" in (vols.get(m.get("name")) or {})), None)
        if cm_mount is None:
            errs.append("initContainer install: --node-config %r is not in a mounted ConfigMap" % src)
        else:
            cm_name = vols[cm_mount["name"]]["configMap"].get("name")
            key = src[len(cm_mount["mountPath"]) + 1:]
            cm = next((d for d in docs if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == cm_name), None)
            if cm is None or key not in (cm.get("data") or {}):
                errs.append("ConfigMap %s with key %s: not in the build" % (cm_name, key))
            else:
                node_errs, node_conf = check_node_config(cm["data"][key])
                errs += node_errs
        conf_dir = args_value(args, "--node-config-dir")
        if (mounts.get(conf_dir) or (None,))[0] != NODE_CONFIG_HOST_DIR:
            errs.append("initContainer install: --node-config-dir %s is not the hostPath %s" % (conf_dir, NODE_CONFIG_HOST_DIR))
        state_dir = node_conf.get("stateDir", NODE_CONFIG_DEFAULTS["stateDir"]) if isinstance(node_conf, dict) else None
        st = args_value(args, "--state-dir")
        if st is not None and (mounts.get(st) or (None,))[0] != state_dir:
            errs.append("initContainer install: --state-dir %s is not the hostPath of node.json's stateDir %s" % (st, state_dir))
    repair = conts.get("agent")
    if repair is None:
        errs.append("container agent: missing")
        return errs
    cmd = repair.get("command") or []
    # The agent: orphans, drift, metrics (src/agent/mod.rs), in the long-running binary
    # (docs/design.md, "Two binaries"); --every as src/cli/mod.rs takes it.
    every = args_value(cmd, "--every")
    with_nri = cmd[4:] == ["--nri"]
    if (cmd[:2] != ["/roce-tune-agent", "agent"] or len(cmd) != 4 + with_nri or every is None
            or not re.match(r"^[1-9][0-9]*$", every) or int(every) > 86400):
        errs.append("container agent: command must be [/roce-tune-agent, agent, --every, N] with N "
                    "from 1 to 86400, and --nri after it for the NRI plugin (got %s)" % cmd)
    errs += ["container agent: " + e for e in check_liveness_probe(repair, node_conf)]
    mounts = host_path_mounts(pod, repair)
    if with_nri:
        # The runtime makes a new socket each time it starts: the directory is mounted.
        nri_dir = os.path.dirname(node_conf.get("nriSocket", NODE_CONFIG_DEFAULTS["nriSocket"]))
        m = mounts.get(nri_dir)
        if not m or m[0] != nri_dir or m[2].get("mountPropagation") != "HostToContainer":
            errs.append("container agent: with --nri, the directory of node.json's nriSocket %s "
                        "must be mounted from the host at the same path with mountPropagation "
                        "HostToContainer" % nri_dir)
    state_dir = node_conf.get("stateDir", NODE_CONFIG_DEFAULTS["stateDir"])
    m = mounts.get(state_dir)
    if not m or m[0] != state_dir or m[2].get("readOnly"):
        errs.append("container agent: node.json's stateDir %s must be mounted read-write from the "
                    "same host path" % state_dir)
    m = mounts.get(NODE_CONFIG_HOST_DIR)
    if not m or m[0] != NODE_CONFIG_HOST_DIR or not m[2].get("readOnly"):
        errs.append("container agent: %s must be mounted read-only from the host (the node "
                    "config the plugin reads)" % NODE_CONFIG_HOST_DIR)
    for d in ("/run/netns", "/var/run/netns"):
        m = mounts.get(d)
        if not m or m[0] != d or m[2].get("mountPropagation") != "HostToContainer":
            errs.append("container agent: %s must be mounted from the host with "
                        "mountPropagation HostToContainer (recorded netns paths)" % d)
    sysfs = node_conf.get("sysfsRoot", NODE_CONFIG_DEFAULTS["sysfsRoot"])
    if sysfs != "/sys" and (mounts.get(sysfs) or (None,))[0] != sysfs:
        errs.append("container agent: node.json's sysfsRoot %s is not mounted from the host" % sysfs)
    errs += ["container agent: " + e for e in check_configfs(mounts, sysfs)]
    log = node_conf.get("logFile")
    if log and (mounts.get(os.path.dirname(log)) or (None,))[0] != os.path.dirname(log):
        errs.append("container agent: the directory of node.json's logFile %s is not mounted "
                    "from the host (the loop's log would stay in the container)" % log)
    return errs


def check_liveness_probe(c, node_conf):
    """The agent's liveness probe: GET /healthz (src/agent/health.rs) on node.json's
    metricsAddress, where the agent listens; the kubelet probes from the host's network
    namespace, and the pod is hostNetwork, so an unspecified address is reached on loopback."""
    probe = c.get("livenessProbe")
    if not probe:
        return ["no livenessProbe: a stuck agent (no pass for three periods, or its NRI plugin's "
                "thread gone) would never be restarted"]
    addr = node_conf.get("metricsAddress", NODE_CONFIG_DEFAULTS["metricsAddress"])
    parsed = parse_ip_port(addr)
    if parsed is None:
        return ["livenessProbe: node.json's metricsAddress %r is not an IP address and port" % (addr,)]
    ip, port = parsed
    want = "127.0.0.1" if str(ip) == "0.0.0.0" else "::1" if str(ip) == "::" else str(ip)
    get = probe.get("httpGet") or {}
    errs = []
    if (get.get("host"), get.get("port"), get.get("path"), get.get("scheme", "HTTP")) != (want, port, "/healthz", "HTTP"):
        errs.append("livenessProbe must be httpGet http://%s:%d/healthz, where node.json's metricsAddress "
                    "%s has the agent listen (got host %r, port %r, path %r)"
                    % (want, port, addr, get.get("host"), get.get("port"), get.get("path")))
    if (probe.get("timeoutSeconds") or 1) < 2:
        errs.append("livenessProbe: timeoutSeconds %s: a loaded node answers later than 1 s, and a probe "
                    "that fails a healthy agent restarts it" % probe.get("timeoutSeconds", 1))
    return errs


def check_configfs(mounts, sysfs_root):
    """rdmaCmTos is restored in <sysfsRoot>/kernel/config (configfs); a container's own
    sysfs mount does not carry the host's configfs mount."""
    target = sysfs_root.rstrip("/") + "/kernel/config"
    for inside, host in ((target, "/sys/kernel/config"), (os.path.dirname(target), "/sys/kernel")):
        m = mounts.get(inside)
        if m and m[0] == host and not m[2].get("readOnly"):
            return []
    return ["%s must come from the host's /sys/kernel/config (or /sys/kernel), read-write "
            "(rdmaCmTos entries are restored in configfs, which the container's /sys lacks)" % target]


def check_uninstall_ds(ds, docs, expect, version, install_image):
    errs = check_common_pod(ds, docs, expect, version)
    _, pod = pod_parts(ds)
    if pod.get("initContainers"):
        errs.append("uninstall: no initContainer may run (it would reinstall)")
    conts = pod.get("containers") or []
    if [c.get("name") for c in conts] != ["uninstall"]:
        errs.append("uninstall: the one container must be `uninstall` (got %s)" % [c.get("name") for c in conts])
        return errs
    c = conts[0]
    if (c.get("command") or [])[:4] != ["/bin/busybox", "sh", "/install.sh", "--uninstall"]:
        errs.append("uninstall: command must start [/bin/busybox, sh, /install.sh, --uninstall]")
    if c.get("image") != install_image:
        errs.append("uninstall: image %s differs from the install overlay's %s" % (c.get("image"), install_image))
    for v in pod.get("volumes") or []:
        path = (v.get("hostPath") or {}).get("path")
        if path in (NODE_CONFIG_HOST_DIR, NODE_CONFIG_DEFAULTS["stateDir"]):
            errs.append("uninstall: volume %s (%s) would make the kubelet re-create what uninstall removes" % (v.get("name"), path))
    mounts = host_path_mounts(pod, c)
    errs += ["uninstall: " + e for e in check_configfs(mounts, NODE_CONFIG_DEFAULTS["sysfsRoot"])]
    for d in ("/etc/cni", "/run/cni"):
        if (mounts.get(d) or (None,))[0] != d:
            errs.append("uninstall: %s must be mounted from the host at the same path" % d)
    args = c.get("args") or []
    if (mounts.get(args_value(args, "--bin-dir")) or (None,))[0] != expect["bin_dir"]:
        errs.append("uninstall: --bin-dir is not where the %s hostPath is mounted" % expect["bin_dir"])
    return errs


def check_overlay_docs(docs, expect, extra_kinds=frozenset()):
    errs = []
    ns_docs = [d for d in docs if d.get("kind") == "Namespace"]
    kinds = OVERLAY_KINDS | set(extra_kinds)
    for d in docs:
        kind = d.get("kind")
        if kind not in kinds:
            errs.append("%s: kind not expected in an overlay (%s)" % (kind, ", ".join(sorted(kinds))))
            continue
        errs += ["%s %s: %s" % (kind, (d.get("metadata") or {}).get("name"), e) for e in check_metadata(d)]
        if kind in CLUSTER_SCOPED:
            if kind != "Namespace" and (d.get("metadata") or {}).get("namespace"):
                errs.append("%s %s: cluster-scoped, must have no namespace" % (kind, d["metadata"].get("name")))
        elif (d.get("metadata") or {}).get("namespace") != expect["namespace"]:
            errs.append("%s %s: namespace %r, expected %s" % (kind, d["metadata"].get("name"),
                                                              d["metadata"].get("namespace"), expect["namespace"]))
    if expect["own_namespace"]:
        if [d["metadata"]["name"] for d in ns_docs] != [expect["namespace"]]:
            errs.append("Namespace %s: the overlay must create exactly its own namespace" % expect["namespace"])
        elif (ns_docs[0]["metadata"].get("labels") or {}).get("pod-security.kubernetes.io/enforce") != "privileged":
            errs.append("Namespace %s: label pod-security.kubernetes.io/enforce: privileged is missing "
                        "(Pod Security Admission refuses the privileged DaemonSet)" % expect["namespace"])
    elif ns_docs:
        errs.append("Namespace: the overlay must not create %s: it belongs to the operator, and "
                    "`kubectl delete -k` would delete it" % ", ".join(d["metadata"]["name"] for d in ns_docs))
    if expect["openshift"]:
        sa = next((d["metadata"]["name"] for d in docs if d.get("kind") == "ServiceAccount"), None)
        roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Role"}
        granted = False
        for rb in (d for d in docs if d.get("kind") == "RoleBinding"):
            role = roles.get((rb.get("roleRef") or {}).get("name"))
            subj = any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
                       and s.get("namespace") == expect["namespace"] for s in rb.get("subjects") or [])
            rule = role and any("security.openshift.io" in (r.get("apiGroups") or [])
                                and "securitycontextconstraints" in (r.get("resources") or [])
                                and "privileged" in (r.get("resourceNames") or [])
                                and "use" in (r.get("verbs") or []) for r in role.get("rules") or [])
            granted = granted or bool(subj and rule)
        if not granted:
            errs.append("no Role + RoleBinding grants `use` of the privileged SCC to ServiceAccount %s" % sa)
    return errs


def check_deploy(deploy_dir, repo, crds, version):
    """[(label, errors)] for every kustomization under deploy_dir."""
    results = []
    kdirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(deploy_dir, "**", "kustomization.y*ml"), recursive=True))
    images = {}
    expected = set(OVERLAYS) | {os.path.join("uninstall", o) for o in OVERLAYS} | {"base"}
    found = set()
    for kdir in kdirs:
        rel = os.path.relpath(kdir, deploy_dir)
        label = os.path.relpath(kdir, repo)
        with open(kustomization_file(kdir)) as f:
            k = yaml.safe_load(f) or {}
        if k.get("kind") == "Component":
            continue  # built through the overlays that use it
        found.add(rel)
        try:
            docs = kustomize_build(kdir)
        except ValueError as e:
            results.append((label + " (kubectl kustomize)", [str(e)]))
            continue
        errs = []
        for d in docs:
            what = "%s %s" % (d.get("kind"), (d.get("metadata") or {}).get("name"))
            crd_errs = check_crd_doc(d, crds)
            if crd_errs is None:
                errs += ["%s: %s" % (what, e) for e in check_k8s_schema(d)]
            else:
                errs += ["%s: %s" % (what, e) for e in crd_errs]
        name = rel.split(os.sep)[-1]
        uninstall = rel.startswith("uninstall" + os.sep)
        ds = [d for d in docs if d.get("kind") == "DaemonSet"]
        if rel == "base":
            pass  # no namespace, bin dir or selector of its own: the overlays are checked
        elif name not in OVERLAYS:
            errs.append("unknown overlay %s: add what it deploys to OVERLAYS in integration/check-conf.py" % rel)
        elif len(ds) != 1:
            errs.append("expected one DaemonSet, got %d" % len(ds))
        else:
            expect = OVERLAYS[name]
            errs += check_overlay_docs(docs, expect)
            if uninstall:
                errs += ["DaemonSet: " + e for e in check_uninstall_ds(ds[0], docs, expect, version, images.get(name))]
            else:
                errs += ["DaemonSet: " + e for e in check_install_ds(ds[0], docs, expect, version)]
                _, pod = pod_parts(ds[0])
                images[name] = next((c.get("image") for c in pod.get("containers") or []), None)
        results.append(("%s (kubectl kustomize: %s)" % (label, ", ".join(d.get("kind", "?") for d in docs)), errs))
    for missing in sorted(expected - found):
        results.append((os.path.join(os.path.relpath(deploy_dir, repo), missing), ["kustomization missing"]))
    return (results + check_metrics_component(deploy_dir, repo, crds, version)
            + check_alerts_component(deploy_dir, repo, crds, version))


# ------------------------------------------------------------------ the metrics component

def built_node_config(pod, docs):
    """node.json as the install initContainer copies it ({} when it cannot be found: the
    install checks report that)."""
    vols = {v.get("name"): v for v in pod.get("volumes") or []}
    install = next((c for c in pod.get("initContainers") or [] if c.get("name") == "install"), {})
    src = args_value(install.get("args") or [], "--node-config") or ""
    for m in install.get("volumeMounts") or []:
        cm_ref = (vols.get(m.get("name")) or {}).get("configMap")
        if cm_ref and src.startswith(m.get("mountPath", "") + "/"):
            key = src[len(m["mountPath"]) + 1:]
            cm = next((d for d in docs if d.get("kind") == "ConfigMap"
                       and d["metadata"]["name"] == cm_ref.get("name")), None)
            try:
                conf = json.loads(((cm or {}).get("data") or {}).get(key) or "{}")
            except ValueError:
                return {}
            return conf if isinstance(conf, dict) else {}
    return {}


def rules_allow(rules, api_group, resource, verb):
    return any(api_group in (r.get("apiGroups") or []) and resource in (r.get("resources") or [])
               and verb in (r.get("verbs") or []) for r in rules or [])


def bound_subjects(docs, role_name):
    return [s for b in docs if b.get("kind") == "ClusterRoleBinding"
            and (b.get("roleRef") or {}).get("kind") == "ClusterRole"
            and (b.get("roleRef") or {}).get("name") == role_name for s in b.get("subjects") or []]


def check_metrics_build(docs):
    """The rules of the metrics component (module docstring, 5), on an overlay built with it."""
    errs = []
    ds = next((d for d in docs if d.get("kind") == "DaemonSet"), None)
    if ds is None:
        return ["no DaemonSet"]
    ns = (ds.get("metadata") or {}).get("namespace")
    meta, pod = pod_parts(ds)
    labels = meta.get("labels") or {}
    conts = pod.get("containers") or []
    proxy = next((c for c in conts if c.get("name") == PROXY), None)
    if proxy is None:
        return ["DaemonSet: no container %s" % PROXY]
    node_conf = built_node_config(pod, docs)
    agent_addr = node_conf.get("metricsAddress", NODE_CONFIG_DEFAULTS["metricsAddress"])
    parsed = parse_ip_port(agent_addr)
    if parsed is None:
        errs.append("node.json's metricsAddress %r is not an IP address and port" % (agent_addr,))
    elif not parsed[0].is_loopback:
        errs.append("node.json's metricsAddress %s is not loopback: the agent's /metrics would be "
                    "reachable without %s (authentication, authorization, TLS)" % (agent_addr, PROXY))

    # The proxy container.
    what = "container %s" % PROXY
    if not PROXY_IMAGE.match(proxy.get("image") or ""):
        errs.append("%s: image %r is not quay.io/brancz/kube-rbac-proxy:vX.Y.Z (a pinned release)"
                    % (what, proxy.get("image")))
    sc = proxy.get("securityContext") or {}
    for key, want in (("privileged", None), ("runAsNonRoot", True), ("allowPrivilegeEscalation", False),
                      ("readOnlyRootFilesystem", True)):
        if sc.get(key, None) is not want and not (key == "privileged" and sc.get(key) is False):
            errs.append("%s: securityContext.%s must be %s (it only listens and forwards)"
                        % (what, key, "unset or false" if want is None else str(want).lower()))
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []) or (sc.get("capabilities") or {}).get("add"):
        errs.append("%s: securityContext.capabilities must drop ALL and add none" % what)
    args = proxy.get("args") or []
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    listen = flags.get("secure-listen-address") or ""
    m = re.match(r"^\[\$\((\w+)\)\]:(\d+)$", listen)
    env = {e.get("name"): e for e in proxy.get("env") or []}
    if not m:
        errs.append("%s: --secure-listen-address must be [$(HOST_IP)]:<port> (got %r)" % (what, listen))
        listen_port = None
    else:
        listen_port = int(m.group(2))
        ref = ((env.get(m.group(1)) or {}).get("valueFrom") or {}).get("fieldRef") or {}
        if ref.get("fieldPath") != "status.hostIP":
            errs.append("%s: $(%s) must come from fieldRef status.hostIP (hostNetwork: the node's address)"
                        % (what, m.group(1)))
    if flags.get("upstream") != "http://%s/" % agent_addr:
        errs.append("%s: --upstream %r is not http://<node.json's metricsAddress>/ (http://%s/): the "
                    "proxy would forward to nothing, or to something else" % (what, flags.get("upstream"), agent_addr))
    if flags.get("allow-paths") != "/metrics":
        errs.append("%s: --allow-paths must be /metrics (forward nothing else)" % what)
    if any(a.startswith("--insecure-listen-address") or a.startswith("--ignore-paths") for a in args):
        errs.append("%s: --insecure-listen-address and --ignore-paths would bypass authentication" % what)
    ports = {p.get("name"): p for p in proxy.get("ports") or []}

    # Tokens: the proxy's own, and nobody else's.
    vols = {v.get("name"): v for v in pod.get("volumes") or []}
    if pod.get("automountServiceAccountToken") is not False:
        errs.append("pod: automountServiceAccountToken must stay false (the privileged agent "
                    "container needs no API token; the proxy mounts its own)")
    token_vols = {n for n, v in vols.items()
                  if any("serviceAccountToken" in src for src in ((v.get("projected") or {}).get("sources") or []))}
    mount = next((vm for vm in proxy.get("volumeMounts") or [] if vm.get("mountPath") == TOKEN_DIR), None)
    if not mount or mount.get("name") not in token_vols or not mount.get("readOnly"):
        errs.append("%s: needs a projected serviceAccountToken volume mounted read-only at %s "
                    "(client-go's in-cluster config)" % (what, TOKEN_DIR))
    for c in (pod.get("initContainers") or []) + conts:
        if c is not proxy and any(vm.get("name") in token_vols for vm in c.get("volumeMounts") or []):
            errs.append("container %s: mounts the proxy's service account token" % c.get("name"))

    # RBAC.
    sa = pod.get("serviceAccountName")
    roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    proxy_roles = [n for n, r in roles.items()
                   if rules_allow(r.get("rules"), "authentication.k8s.io", "tokenreviews", "create")
                   and rules_allow(r.get("rules"), "authorization.k8s.io", "subjectaccessreviews", "create")]
    if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa and s.get("namespace") == ns
               for n in proxy_roles for s in bound_subjects(docs, n)):
        errs.append("no ClusterRole with tokenreviews and subjectaccessreviews `create` is bound to "
                    "ServiceAccount %s/%s (kube-rbac-proxy cannot check a caller)" % (ns, sa))
    readers = [n for n, r in roles.items()
               if any("/metrics" in (x.get("nonResourceURLs") or []) and "get" in (x.get("verbs") or [])
                      for x in r.get("rules") or [])]
    if not any(bound_subjects(docs, n) for n in readers):
        errs.append("no ClusterRole with `get` on the non-resource URL /metrics is bound to anyone "
                    "(what a Prometheus needs)")

    # Service and ServiceMonitor.
    services = [d for d in docs if d.get("kind") == "Service"]
    svc_ok = []
    for svc in services:
        name = svc["metadata"]["name"]
        spec = svc.get("spec") or {}
        sel = spec.get("selector") or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            errs.append("Service %s: selector %s does not select the DaemonSet's pods" % (name, sel))
            continue
        if spec.get("clusterIP") != "None":
            errs.append("Service %s: must be headless (clusterIP: None): each node is scraped, not one "
                        "at random behind a virtual IP" % name)
        for p in spec.get("ports") or []:
            tp = p.get("targetPort")
            target = ports.get(tp) if isinstance(tp, str) else next(
                (q for q in ports.values() if q.get("containerPort") == tp), None)
            if target is None or target.get("containerPort") != listen_port:
                errs.append("Service %s: port %s does not reach %s's listen port %s"
                            % (name, p.get("name"), PROXY, listen_port))
            else:
                svc_ok.append((svc, p))
    if not svc_ok:
        errs.append("no Service port reaches %s" % PROXY)
    monitors = [d for d in docs if d.get("kind") == "ServiceMonitor"]
    if not monitors:
        errs.append("no ServiceMonitor")
    # Prometheus discovers the targets by listing the Service's endpoints in this namespace:
    # kube-prometheus' prometheus-k8s may do that only where a Role lets it.
    ns_roles = {d["metadata"]["name"]: d for d in docs
                if d.get("kind") == "Role" and (d.get("metadata") or {}).get("namespace") == ns}
    listing = [n for n, r in ns_roles.items()
               if rules_allow(r.get("rules"), "", "endpoints", "list") and rules_allow(r.get("rules"), "", "endpoints", "watch")]
    if not any(b.get("kind") == "RoleBinding" and (b.get("roleRef") or {}).get("name") in listing and b.get("subjects")
               for b in docs):
        errs.append("no Role in %s lets a Prometheus list and watch the Service's endpoints, bound to "
                    "someone (kube-prometheus' prometheus-k8s has a Role only in default, kube-system "
                    "and monitoring: it would find no target)" % ns)
    for sm in monitors:
        name = sm["metadata"]["name"]
        spec = sm.get("spec") or {}
        if ns not in ((spec.get("namespaceSelector") or {}).get("matchNames") or []):
            errs.append("ServiceMonitor %s: namespaceSelector.matchNames must hold %s" % (name, ns))
        want = (spec.get("selector") or {}).get("matchLabels") or {}
        selected = [(s, p) for s, p in svc_ok
                    if want and all(((s["metadata"].get("labels") or {}).get(k) == v) for k, v in want.items())]
        if not selected:
            errs.append("ServiceMonitor %s: selector %s selects no Service that reaches %s" % (name, want, PROXY))
            continue
        port_names = {p.get("name") for _, p in selected}
        for ep in spec.get("endpoints") or []:
            where = "ServiceMonitor %s endpoint %s" % (name, ep.get("port"))
            if ep.get("port") not in port_names:
                errs.append("%s: not a port of the selected Service (%s)" % (where, ", ".join(sorted(port_names))))
            if ep.get("scheme") != "https":
                errs.append("%s: scheme must be https (kube-rbac-proxy serves TLS only)" % where)
            if ep.get("path", "/metrics") != "/metrics":
                errs.append("%s: path must be /metrics (--allow-paths)" % where)
            if not (ep.get("bearerTokenFile") or ep.get("authorization") or ep.get("bearerTokenSecret")):
                errs.append("%s: no bearer token: kube-rbac-proxy answers 401" % where)
            if not any(r.get("targetLabel") == "node" and "__meta_kubernetes_endpoint_node_name"
                       in (r.get("sourceLabels") or []) for r in ep.get("relabelings") or []):
                errs.append("%s: no relabeling of __meta_kubernetes_endpoint_node_name to `node` "
                            "(conf/grafana/roce-tune.json selects by node)" % where)
            # prometheus-operator gives every target the labels namespace and pod (the scraped
            # pod's: the agent's own; pkg/prometheus/promcfg.go at 6adcebc5, the relabelings after
            # "Relabel namespace and pod and service labels into proper labels"), and Prometheus
            # renames a scraped label that collides with a target label to exported_<name> unless
            # honor_labels is set: the rail metrics' namespace and pod, the pod each rail belongs
            # to, would become exported_namespace and exported_pod, and every pod the dashboard
            # and the alerts name would be the agent's.
            if ep.get("honorLabels") is not True:
                errs.append("%s: honorLabels must be true: prometheus-operator's target labels "
                            "namespace and pod (the agent's pod) would rename the rail metrics' own "
                            "to exported_namespace and exported_pod" % where)
    return errs


def build_with_component(deploy_dir, overlay, component):
    """`kubectl kustomize` of a kustomization that a user would write: the overlay as a
    resource, the component (or a tuple of them, in order) on top. (kustomize refuses absolute
    paths: relative ones.)"""
    key = ("component", os.path.realpath(deploy_dir), overlay, component)
    if key in BUILDS:
        if isinstance(BUILDS[key], ValueError):
            raise BUILDS[key]
        return copy.deepcopy(BUILDS[key])
    try:
        BUILDS[key] = build_component_once(deploy_dir, overlay, component)
    except ValueError as e:
        BUILDS[key] = e
        raise
    return copy.deepcopy(BUILDS[key])


def build_component_once(deploy_dir, overlay, component):
    tmp = tempfile.mkdtemp(prefix="check-conf-component-")
    try:
        rel = lambda p: os.path.relpath(os.path.join(deploy_dir, p), tmp)  # noqa: E731
        with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                            "resources": [rel(overlay)],
                            "components": [rel(c) for c in components(component)]}, f)
        return kustomize_build(tmp)
    finally:
        shutil.rmtree(tmp)


def schema_errors(docs, crds):
    """Every document of a build against its CRD's schema, else the Kubernetes schemas."""
    errs = []
    for d in docs:
        dwhat = "%s %s" % (d.get("kind"), (d.get("metadata") or {}).get("name"))
        crd_errs = check_crd_doc(d, crds)
        errs += ["%s: %s" % (dwhat, e) for e in (check_k8s_schema(d) if crd_errs is None else crd_errs)]
    return errs


def components(component):
    """The components of build_with_component's argument: one path or a tuple of them."""
    return list(component) if isinstance(component, tuple) else [component]


def check_metrics_component(deploy_dir, repo, crds, version):
    """[(label, errors)]: the metrics component on each install overlay."""
    comp = os.path.join(deploy_dir, METRICS_COMPONENT)
    label = os.path.relpath(comp, repo)
    if kustomization_file(comp) is None:
        return [(label, ["kustomization missing (the optional metrics component)"])]
    results = []
    for name, expect in sorted(OVERLAYS.items()):
        what = "%s with %s" % (label, name)
        try:
            docs = build_with_component(deploy_dir, name, METRICS_COMPONENT)
        except ValueError as e:
            results.append((what + " (kubectl kustomize)", [str(e)]))
            continue
        errs = schema_errors(docs, crds)
        errs += check_overlay_docs(docs, expect, METRICS_KINDS)
        ds = [d for d in docs if d.get("kind") == "DaemonSet"]
        if len(ds) != 1:
            errs.append("expected one DaemonSet, got %d" % len(ds))
        else:
            errs += ["DaemonSet: " + e for e in check_install_ds(ds[0], docs, expect, version)]
            errs += check_metrics_build(docs)
        results.append(("%s (kubectl kustomize: %s)" % (what, ", ".join(d.get("kind", "?") for d in docs)), errs))
    return results


def check_rule_object(docs, conf_dir):
    """The one PrometheusRule of a build or a rendering: in the DaemonSet's namespace, carrying
    exactly the groups of the rule file (module docstring, 9)."""
    groups, err = load_rule_groups(os.path.join(conf_dir, RULES))
    if err:
        return [err]
    rules = [d for d in docs if d.get("kind") == "PrometheusRule"]
    if len(rules) != 1:
        return ["expected one PrometheusRule, got %d" % len(rules)]
    errs = []
    ds = next((d for d in docs if d.get("kind") == "DaemonSet"), {})
    ns = (ds.get("metadata") or {}).get("namespace")
    if (rules[0].get("metadata") or {}).get("namespace") != ns:
        errs.append("PrometheusRule %s: namespace %r, not the DaemonSet's %r"
                    % (rules[0]["metadata"].get("name"), rules[0]["metadata"].get("namespace"), ns))
    if rules[0].get("spec") != {"groups": groups}:
        errs.append("PrometheusRule %s: its spec is not {groups: <the groups of conf/%s>}"
                    % (rules[0]["metadata"].get("name"), RULES))
    return errs


def check_alerts_component(deploy_dir, repo, crds, version):
    """[(label, errors)]: the alerts component's copy of the rule file, and the component with
    the metrics one on each install overlay."""
    conf_dir = os.path.dirname(deploy_dir)
    comp = os.path.join(deploy_dir, ALERTS_COMPONENT)
    label = os.path.relpath(comp, repo)
    if kustomization_file(comp) is None:
        return [(label, ["kustomization missing (the optional alerts component)"])]
    copy_path = os.path.join(comp, "prometheusrule.yaml")
    try:
        with open(os.path.join(conf_dir, RULES)) as f:
            want = alerts_component.render(f.read())
        with open(copy_path) as f:
            got = f.read()
        errs = [] if got == want else [
            "%s is not what integration/alerts_component.py writes from conf/%s: run `python3 "
            "integration/alerts_component.py > %s`" % (os.path.relpath(copy_path, repo), RULES,
                                                       os.path.relpath(copy_path, repo))]
    except OSError as e:
        errs = [str(e)]
    results = [("%s (prometheusrule.yaml is conf/%s)" % (label, RULES), errs)]
    for name, expect in sorted(OVERLAYS.items()):
        what = "%s with %s and %s" % (label, METRICS_COMPONENT, name)
        try:
            docs = build_with_component(deploy_dir, name, (METRICS_COMPONENT, ALERTS_COMPONENT))
        except ValueError as e:
            results.append((what + " (kubectl kustomize)", [str(e)]))
            continue
        errs = schema_errors(docs, crds)
        errs += check_overlay_docs(docs, expect, METRICS_KINDS | ALERTS_KINDS)
        errs += check_rule_object(docs, conf_dir)
        results.append(("%s (kubectl kustomize: %s)" % (what, ", ".join(d.get("kind", "?") for d in docs)), errs))
    return results


# ------------------------------------------------------------------ the Helm chart

def load_node_config_schema(conf_dir):
    """values.schema.json's nodeConfig (NODE_CONFIG_SCHEMA), or an error."""
    path = os.path.join(conf_dir, CHART, "values.schema.json")
    try:
        with open(path) as f:
            schema = json.load(f)
        node = schema["properties"]["nodeConfig"]
        jsonschema.Draft7Validator.check_schema(schema)
    except (OSError, ValueError, KeyError, TypeError, jsonschema.SchemaError) as e:
        return "%s: no usable properties.nodeConfig (%s)" % (path, str(e).splitlines()[0])
    NODE_CONFIG_SCHEMA.clear()
    NODE_CONFIG_SCHEMA.update(node)
    return None


def read_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f) or {}


def check_chart_meta(chart_dir, deploy_dir, version):
    """Chart.yaml and values.yaml against Cargo.toml and the kustomize base: one image, one tag,
    one version: Cargo.toml's, the release's."""
    errs = []
    chart = read_yaml(os.path.join(chart_dir, "Chart.yaml"))
    values = read_yaml(os.path.join(chart_dir, "values.yaml"))
    base = read_yaml(os.path.join(deploy_dir, "base", "kustomization.yaml"))
    image = next((i for i in base.get("images") or [] if i.get("name") == "roce-tune"), {})
    if chart.get("apiVersion") != "v2":
        errs.append("Chart.yaml: apiVersion must be v2 (Helm 3 and 4 charts)")
    if version and chart.get("version") != version:
        errs.append("Chart.yaml: version %r is not Cargo.toml's %r" % (chart.get("version"), version))
    if version and str(chart.get("appVersion")) != version:
        errs.append("Chart.yaml: appVersion %r (the chart's default image tag) is not Cargo.toml's "
                    "version %r: the release's image is tagged so" % (chart.get("appVersion"), version))
    if version and str(image.get("newTag")) != version:
        errs.append("conf/deploy/base/kustomization.yaml: newTag %r is not Cargo.toml's version %r "
                    "(nor the chart's appVersion): the release's image is tagged so"
                    % (image.get("newTag"), version))
    if (values.get("image") or {}).get("tag") != "":
        errs.append("values.yaml: image.tag %r: the default must be empty, so that the chart names "
                    "its appVersion, the release" % ((values.get("image") or {}).get("tag"),))
    if (values.get("image") or {}).get("repository") != image.get("newName"):
        errs.append("values.yaml: image.repository %r differs from conf/deploy/base/kustomization.yaml's "
                    "newName %r" % ((values.get("image") or {}).get("repository"), image.get("newName")))
    with open(os.path.join(deploy_dir, "base", "node.json")) as f:
        node_json = json.load(f)
    if values.get("nodeConfig") != node_json:
        errs.append("values.yaml: nodeConfig %s is not conf/deploy/base/node.json %s (the chart's defaults "
                    "are the base's)" % (json.dumps(values.get("nodeConfig"), sort_keys=True),
                                         json.dumps(node_json, sort_keys=True)))
    return errs


def chart_installs():
    """(what, values, (overlay, component or None), expect) of every install the chart is
    compared in: each platform as its overlay, with the metrics component, and its uninstall."""
    for name, expect in sorted(OVERLAYS.items()):
        plat = [("platform", name)]
        yield "platform %s" % name, plat, (name, None), expect, False
        yield "platform %s, metrics.enabled" % name, plat + [("metrics.enabled", True)], \
            (name, METRICS_COMPONENT), expect, False
        yield "platform %s, metrics.enabled, metrics.prometheusRule.enabled" % name, \
            plat + [("metrics.enabled", True), ("metrics.prometheusRule.enabled", True)], \
            (name, (METRICS_COMPONENT, ALERTS_COMPONENT)), expect, False
        yield "platform %s, uninstall.enabled" % name, plat + [("uninstall.enabled", True)], \
            (os.path.join("uninstall", name), None), expect, True


def chart_rules(docs, crds, expect, version, uninstall, metrics, install_image):
    """check-conf's rules for an overlay's build, on the chart's rendering of it."""
    errs = []
    for d in docs:
        crd_errs = check_crd_doc(d, crds)
        errs += ["%s: %s" % (chart_compare.what(d), e)
                 for e in (check_k8s_schema(d) if crd_errs is None else crd_errs)]
    # The chart does not create its namespace (`helm install -n`): not an overlay's own.
    alerts = any(d.get("kind") in ALERTS_KINDS for d in docs)
    errs += check_overlay_docs(docs, dict(expect, own_namespace=False),
                               (METRICS_KINDS if metrics else set()) | (ALERTS_KINDS if alerts else set()))
    ds = [d for d in docs if d.get("kind") == "DaemonSet"]
    if len(ds) != 1:
        return errs + ["expected one DaemonSet, got %d" % len(ds)]
    if uninstall:
        errs += ["DaemonSet: " + e for e in check_uninstall_ds(ds[0], docs, expect, version, install_image)]
    else:
        errs += ["DaemonSet: " + e for e in check_install_ds(ds[0], docs, expect, version)]
    if metrics:
        errs += check_metrics_build(docs)
    return errs


def namespace_label_errs(kz_docs, deploy_md):
    """The chart does not create the namespace: docs/deploy.md must give the labels the
    overlay's Namespace carries (Pod Security Admission refuses the DaemonSet without them)."""
    errs = []
    try:
        with open(deploy_md) as f:
            text = f.read()
    except OSError as e:
        return ["cannot read %s: %s" % (deploy_md, e)]
    for ns in (d for d in kz_docs if d.get("kind") == "Namespace"):
        for k, v in sorted(((ns.get("metadata") or {}).get("labels") or {}).items()):
            if "%s=%s" % (k, v) not in text:
                errs.append("Namespace %s: %s does not give its label %s=%s (the chart does not create "
                            "the namespace: the Helm install labels it)"
                            % (ns["metadata"]["name"], os.path.relpath(deploy_md, os.path.dirname(os.path.dirname(deploy_md))), k, v))
    return errs


def check_chart(conf_dir, deploy_dir, repo, crds, version):
    """[(label, errors)]: the chart linted, rendered for every install of chart_installs() and
    compared with kustomize's build of it (integration/chart_compare.py), check-conf's rules on
    what it renders, the node config checksum, the dashboard, the schema's refusal of an
    unknown node config key."""
    chart_dir = os.path.join(conf_dir, CHART)
    label = os.path.relpath(chart_dir, repo)
    if not os.path.isfile(os.path.join(chart_dir, "Chart.yaml")):
        return [(label, ["missing: the Helm chart (Chart.yaml)"])]
    rc, out, err = chart_compare.run_helm(["version", "--short"])
    if rc != 0:
        return [(label + " (helm)", ["%s: %s (integration/setup.sh installs integration/.build/helm/helm)"
                                     % (chart_compare.helm_cmd(), (err or out).strip())])]
    print("check-conf: %s %s" % (chart_compare.helm_cmd(), out.strip()))
    results = [(label + " (Chart.yaml, values.yaml)", check_chart_meta(chart_dir, deploy_dir, version))]
    on = [("metrics.enabled", True), ("metrics.prometheusRule.enabled", True), ("grafana.dashboard.enabled", True)]
    for name in sorted(OVERLAYS):
        for extra in (on, [("uninstall.enabled", True)]):
            vals = [("platform", name)] + extra
            rc, out, err = chart_compare.run_helm(["lint", "--strict", chart_dir] + chart_compare.set_args(vals))
            results.append(("%s (helm lint --strict, %s)" % (label, ", ".join("%s=%s" % (k, json.dumps(v)) for k, v in vals)),
                            [] if rc == 0 else ["helm lint --strict failed: %s" % (out + err).strip()]))
    deploy_md = os.environ.get("DEPLOY_MD") or os.path.join(repo, "docs", "deploy.md")
    images = {}
    for what, vals, (overlay, component), expect, uninstall in chart_installs():
        kz_label = " and ".join(os.path.relpath(os.path.join(deploy_dir, c), repo)
                                for c in (components(component) if component else [overlay]))
        if component:
            kz_label += " with %s" % overlay
        where = "%s (%s) as %s" % (label, what, kz_label)
        try:
            docs = chart_compare.render(chart_dir, expect["namespace"], vals)
            kz_docs = (build_with_component(deploy_dir, overlay, component) if component
                       else kustomize_build(os.path.join(deploy_dir, overlay)))
        except ValueError as e:
            results.append((where, [str(e)]))
            continue
        errs = chart_rules(docs, crds, expect, version, uninstall, bool(component),
                           images.get(overlay.split(os.sep)[-1]))
        if component and ALERTS_COMPONENT in components(component):
            errs += check_rule_object(docs, conf_dir)
        if not uninstall and not component:
            ds = next((d for d in docs if d.get("kind") == "DaemonSet"), {})
            images[overlay] = next((c.get("image") for c in pod_parts(ds)[1].get("containers") or []), None)
            errs += namespace_label_errs(kz_docs, deploy_md)
        errs += ["differs from kustomize: " + e for e in chart_compare.compare(docs, kz_docs)]
        results.append((where, errs))
    return results + check_chart_behaviour(chart_dir, label, conf_dir)


def check_chart_behaviour(chart_dir, label, conf_dir):
    """What no kustomize build has: the checksum that rolls the DaemonSet on a new node
    config (and only then), the dashboard ConfigMap, the schema's unknown-key refusal."""
    results = []
    ns = OVERLAYS["kubernetes"]["namespace"]
    try:
        base = chart_compare.render(chart_dir, ns)
        other_config = chart_compare.render(chart_dir, ns, [("nodeConfig.driftPolicy", "report")])
        other_period = chart_compare.render(chart_dir, ns, [("agent.every", 11)])
        dash = chart_compare.render(chart_dir, ns, [("grafana.dashboard.enabled", True)])
    except ValueError as e:
        return [(label + " (helm template)", [str(e)])]
    errs = []
    sums = [chart_compare.pod_annotation(d, chart_compare.CHECKSUM) for d in (base, other_config, other_period)]
    if not (isinstance(sums[0], str) and re.match(r"^[0-9a-f]{64}$", sums[0])):
        errs.append("the pod template has no annotation %s: <sha256 of the node config>, so `helm "
                    "upgrade` with a new nodeConfig would not roll the DaemonSet" % chart_compare.CHECKSUM)
    elif sums[0] == sums[1]:
        errs.append("%s is the same for another nodeConfig (driftPolicy: report): `helm upgrade` "
                    "would not roll the DaemonSet" % chart_compare.CHECKSUM)
    elif sums[0] != sums[2]:
        errs.append("%s changes with agent.every, which is not the node config" % chart_compare.CHECKSUM)
    results.append(("%s (%s rolls the DaemonSet on a new nodeConfig)" % (label, chart_compare.CHECKSUM), errs))

    errs = []
    before = {chart_compare.what(d): d for d in base}
    extra = [d for d in dash if chart_compare.what(d) not in before]
    errs += ["with the dashboard, %s differs: %s" % (chart_compare.what(d), e)
             for d in dash if d not in extra for e in chart_compare.diff(d, before[chart_compare.what(d)])]
    cm = [d for d in extra if d.get("kind") == "ConfigMap"]
    if len(extra) != 1 or len(cm) != 1:
        errs.append("grafana.dashboard.enabled must add exactly one ConfigMap, added: %s"
                    % ", ".join(chart_compare.what(d) for d in extra))
    else:
        data = cm[0].get("data") or {}
        if (cm[0]["metadata"].get("labels") or {}).get("grafana_dashboard") is None:
            errs.append("%s: no label grafana_dashboard (what Grafana's dashboard sidecar watches)"
                        % chart_compare.what(cm[0]))
        with open(os.path.join(conf_dir, "grafana", "roce-tune.json")) as f:
            want = json.load(f)
        try:
            got = json.loads(data.get("roce-tune.json") or "")
        except ValueError as e:
            got = None
            errs.append("%s: roce-tune.json is not JSON: %s" % (chart_compare.what(cm[0]), e))
        if got is not None and got != want:
            errs.append("%s: roce-tune.json is not conf/grafana/roce-tune.json" % chart_compare.what(cm[0]))
        errs += ["%s: %s" % (chart_compare.what(cm[0]), e) for e in check_k8s_schema(cm[0])]
    results.append(("%s (grafana.dashboard.enabled: conf/grafana/roce-tune.json for the sidecar)" % label, errs))

    results.append(("%s (nodePools: two pools, two DaemonSets with their own node configs)" % label,
                    check_node_pools(chart_dir, ns)))

    rc, _, err = chart_compare.run_helm(["template", "roce-tune", chart_dir, "-n", ns]
                                        + chart_compare.set_args([("nodeConfig.statedir", "/x")]))
    errs = [] if rc not in (0, None) and chart_compare.SCHEMA_REFUSED in err and "statedir" in err else [
        "helm template with nodeConfig.statedir (an unknown node config key) was not refused by "
        "values.schema.json (roce-tune refuses it with 104): exit %s, %s" % (rc, err.strip()[:300])]
    results.append(("%s (values.schema.json refuses an unknown nodeConfig key)" % label, errs))
    return results


# Two node pools as a cluster with two kinds of GPU node has them (values.yaml, nodePools).
NODE_POOLS = [
    {"name": "a100", "nodeSelector": {"nvidia.com/gpu.product": "A100-SXM4-80GB"},
     "nodeConfig": {"gpuResources": ["nvidia.com/a100"], "stateDir": "/run/cni/roce-tune-a100"}},
    {"name": "h100", "nodeSelector": {"nvidia.com/gpu.product": "H100-SXM5-80GB"},
     "nodeConfig": {"logFile": "/var/log/roce-tune/h100.log"}},
]


def check_node_pools(chart_dir, ns):
    """Each pool's DaemonSet passes the install rules against its own ConfigMap (its state dir
    and log dir mounted where its node config says), and no DaemonSet's selector selects another
    one's pods (the DaemonSet controller would fight over them)."""
    try:
        docs = chart_compare.render(chart_dir, ns, [("nodePools", NODE_POOLS), ("metrics.enabled", True)])
    except ValueError as e:
        return [str(e)]
    errs = []
    dss = [d for d in docs if d.get("kind") == "DaemonSet"]
    if sorted(d["metadata"]["name"] for d in dss) != ["roce-tune-a100", "roce-tune-h100"]:
        return ["expected DaemonSets roce-tune-a100 and roce-tune-h100, got %s" % [d["metadata"]["name"] for d in dss]]
    for ds in dss:
        errs += ["DaemonSet %s: %s" % (ds["metadata"]["name"], e)
                 for e in check_install_ds(ds, docs, OVERLAYS["kubernetes"], None)]
        sel = ds["spec"]["selector"]["matchLabels"]
        for other in dss:
            labels = pod_parts(other)[0].get("labels") or {}
            if other is not ds and all(labels.get(k) == v for k, v in sel.items()):
                errs.append("DaemonSet %s's selector %s selects the pods of %s"
                            % (ds["metadata"]["name"], sel, other["metadata"]["name"]))
    errs += check_metrics_build([d for d in docs if d.get("kind") != "DaemonSet"] + dss[:1])
    return errs


# ------------------------------------------------------------------ Grafana dashboards

# A row of src/agent/metrics.rs's CATALOGUE, and a label list (the module's doc says the form).
CATALOGUE_ROW = re.compile(r'Family\s*\{\s*metric:\s*Metric::\w+,\s*name:\s*"([a-z_:][a-z0-9_:]*)",\s*'
                           r'kind:\s*Kind::(Counter|Gauge|Histogram),\s*labels:\s*([A-Z_]+),\s*'
                           r'help:\s*"((?:[^"\\]|\\.)*)",?\s*\}')
LABEL_LIST = re.compile(r'(?:pub\s+)?const\s+([A-Z_]+):\s*&\[&str\]\s*=\s*&\[([^\]]*)\];')
METRIC_NAME = re.compile(r"\broce_tune_[a-z0-9_]+")
PROM_LABELS = {"node", "instance", "job"}
PANEL_TYPES = {"row", "text", "timeseries", "stat", "table", "gauge", "bargauge", "heatmap", "piechart"}


def load_catalogue(path):
    """({name: (kind, [labels])}, error): CATALOGUE's families."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        return None, "cannot read the metric catalogue %s: %s" % (path, e)
    lists = {m.group(1): re.findall(r'"([^"]*)"', m.group(2)) for m in LABEL_LIST.finditer(text)}
    start = text.find("pub const CATALOGUE")
    end = text.find("\n];", start)
    if start < 0 or end < 0:
        return None, "%s: no `pub const CATALOGUE: &[Family] = &[ ... ];`" % path
    table = text[start:end]
    rows = CATALOGUE_ROW.findall(table)
    if len(rows) != table.count("Family {"):
        return None, ("%s: %d rows of CATALOGUE are not in the form `Family { metric, name, kind, "
                      "labels: CONST, help }` check-conf parses" % (path, table.count("Family {") - len(rows)))
    cat = {}
    for name, kind, labels, _help in rows:
        if labels not in lists:
            return None, "%s: CATALOGUE row %s: label list %s is not a `const %s: &[&str] = &[...]`" % (
                path, name, labels, labels)
        cat[name] = (kind, lists[labels])
    if not cat:
        return None, "%s: CATALOGUE is empty" % path
    return cat, None


def dashboard_exprs(dash):
    """[(where, expr)] of every Prometheus query: panel targets and query variables."""
    out = []

    def panels(ps):
        for p in ps or []:
            for t in p.get("targets") or []:
                out.append(("panel %s %r target %s" % (p.get("id"), p.get("title"), t.get("refId")), t.get("expr")))
            panels(p.get("panels"))

    panels(dash.get("panels"))
    for v in (dash.get("templating") or {}).get("list") or []:
        if v.get("type") == "query":
            q = v.get("query")
            out.append(("variable %s" % v.get("name"), q.get("query") if isinstance(q, dict) else q))
    return out


def check_promql_names(expr, catalogue, node_filter=True):
    """Every roce_tune_* name and the labels used with it."""
    errs = []
    used = []
    for m in METRIC_NAME.finditer(expr):
        name = m.group(0)
        base, suffix = name, ""
        for s in ("_bucket", "_sum", "_count"):
            if name.endswith(s) and name[:-len(s)] in catalogue and catalogue[name[:-len(s)]][0] == "Histogram":
                base, suffix = name[:-len(s)], s
        if base not in catalogue:
            errs.append("unknown metric %s: not in the catalogue (src/agent/metrics.rs CATALOGUE)" % name)
            continue
        if catalogue[base][0] == "Histogram" and not suffix:
            errs.append("%s is a histogram: query %s_bucket, _sum or _count" % (name, name))
            continue
        labels = set(catalogue[base][1]) | PROM_LABELS | ({"le"} if suffix == "_bucket" else set())
        used.append(labels)
        rest = expr[m.end():]
        sel = re.match(r"\s*\{([^}]*)\}", rest)
        matchers = re.findall(r'([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*"', sel.group(1)) if sel else []
        for label in matchers:
            if label not in labels:
                errs.append("%s has no label %r (its labels: %s)" % (name, label, ", ".join(sorted(catalogue[base][1]))))
        if node_filter and not (sel and re.search(r'\bnode\s*=~\s*"\$node"', sel.group(1))):
            errs.append('%s: the selector must filter node=~"$node" (the dashboard\'s node variable)' % name)
    known = set().union(*used) if used else set()
    # A label label_replace adds (its last four arguments: dst, replacement, src, regex).
    known |= set(re.findall(r'"([A-Za-z_]\w*)"\s*,\s*"[^"]*"\s*,\s*"[^"]*"\s*,\s*"[^"]*"\s*\)', expr))
    for grouping in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        for label in (x.strip() for x in grouping.split(",")):
            if label and used and label not in known:
                errs.append("grouping by %r, a label none of the metrics here has" % label)
    return errs


def promql_syntax_errors(exprs):
    """`promtool check rules` on every expression, with Grafana's variables substituted."""
    promtool = os.environ.get("PROMTOOL")
    if not promtool:
        return ["no promtool to parse the PromQL (set PROMTOOL; integration/setup.sh unpacks it "
                "into integration/.build/bin)"]
    subst = [("$__rate_interval", "5m"), ("$__interval", "1m"), ("$__range", "1h"), ("$node", ".*"),
             ("${node}", ".*")]
    rules = []
    for i, (_, e) in enumerate(exprs):
        for a, b in subst:
            e = e.replace(a, b)
        rules.append({"record": "dashboard:expr_%d" % i, "expr": e})
    tmp = tempfile.mkdtemp(prefix="check-conf-promql-")
    try:
        path = os.path.join(tmp, "rules.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        try:
            out = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True, timeout=120)
        except OSError as e:
            return ["cannot run promtool %s: %s" % (promtool, e)]
    finally:
        shutil.rmtree(tmp)
    if out.returncode == 0:
        return []
    errs = []
    for line in (out.stdout + out.stderr).splitlines():
        m = re.search(r'"dashboard:expr_(\d+)": (.*)$', line)
        if m:
            errs.append("%s: PromQL: %s" % (exprs[int(m.group(1))][0], m.group(2)))
    return errs or ["promtool check rules failed: %s" % (out.stdout + out.stderr).strip()[:500]]


def check_dashboard(path, catalogue):
    try:
        with open(path) as f:
            dash = json.load(f)
    except ValueError as e:
        return ["not JSON: %s" % e]
    if not isinstance(dash, dict):
        return ["not a JSON object"]
    errs = []
    if not isinstance(dash.get("title"), str) or not dash["title"]:
        errs.append("title: missing")
    if not (isinstance(dash.get("uid"), str) and re.match(r"^[A-Za-z0-9_-]{1,40}$", dash["uid"])):
        errs.append("uid: missing or not 1-40 of [A-Za-z0-9_-] (Grafana's rule)")
    sv = dash.get("schemaVersion")
    if not is_int(sv) or sv < 36:
        errs.append("schemaVersion %r: must be an integer >= 36 (datasource references as {type, uid})" % (sv,))
    variables = {v.get("name"): v for v in (dash.get("templating") or {}).get("list") or [] if isinstance(v, dict)}
    ds_var = variables.get("datasource") or {}
    if ds_var.get("type") != "datasource" or ds_var.get("query") != "prometheus":
        errs.append("templating: needs a variable `datasource` of type datasource, query prometheus")
    node_var = variables.get("node") or {}
    if node_var.get("type") != "query":
        errs.append("templating: needs a query variable `node`")
    ids = set()

    def walk(panels, where):
        if not isinstance(panels, list):
            errs.append("%s: panels must be a list" % where)
            return
        for p in panels:
            if not isinstance(p, dict):
                errs.append("%s: a panel is not an object" % where)
                continue
            pw = "panel %s %r" % (p.get("id"), p.get("title"))
            if not is_int(p.get("id")) or p["id"] in ids:
                errs.append("%s: id must be a unique integer" % pw)
            ids.add(p.get("id"))
            if p.get("type") not in PANEL_TYPES:
                errs.append("%s: type %r is not one of %s" % (pw, p.get("type"), ", ".join(sorted(PANEL_TYPES))))
            if not isinstance(p.get("title"), str) or not p["title"]:
                errs.append("%s: no title" % pw)
            g = p.get("gridPos") or {}
            if not all(is_int(g.get(k)) for k in "xywh") or g["x"] < 0 or g["w"] < 1 or g["h"] < 1 or g["x"] + g["w"] > 24:
                errs.append("%s: gridPos needs integers x, y, w, h with x + w <= 24" % pw)
            if p.get("type") == "row":
                walk(p.get("panels") or [], pw)
                continue
            if p.get("type") == "text":
                continue
            targets = p.get("targets")
            if not isinstance(targets, list) or not targets:
                errs.append("%s: no targets" % pw)
                continue
            refs = [t.get("refId") for t in targets if isinstance(t, dict)]
            if len(refs) != len(targets) or len(set(refs)) != len(refs) or not all(isinstance(r, str) and r for r in refs):
                errs.append("%s: every target needs its own refId" % pw)
            for t in targets:
                if not isinstance(t, dict) or not isinstance(t.get("expr"), str) or not t["expr"].strip():
                    errs.append("%s: a target without an expr" % pw)
                ds = (t.get("datasource") if isinstance(t, dict) else None) or p.get("datasource") or {}
                if not (isinstance(ds, dict) and ds.get("type") == "prometheus"):
                    errs.append("%s: datasource must be {type: prometheus, uid: ${datasource}}" % pw)

    walk(dash.get("panels"), "dashboard")
    if not ids:
        errs.append("no panels")
    exprs = [(w, e) for w, e in dashboard_exprs(dash) if isinstance(e, str) and e.strip()]
    if catalogue is None:
        return errs
    promql = []
    for where, expr in exprs:
        if where.startswith("variable"):
            # Grafana's label_values(<selector>, <label>), not PromQL.
            m = re.match(r"^\s*label_values\((.*),\s*([A-Za-z_]\w*)\s*\)\s*$", expr)
            if not m:
                errs.append("%s: expected label_values(<metric>, <label>)" % where)
                continue
            errs += ["%s: %s" % (where, e) for e in check_promql_names(m.group(1), catalogue, node_filter=False)]
            for name in METRIC_NAME.findall(m.group(1)):
                if name in catalogue and m.group(2) not in set(catalogue[name][1]) | PROM_LABELS:
                    errs.append("%s: %s has no label %r" % (where, name, m.group(2)))
            continue
        if not METRIC_NAME.search(expr):
            errs.append("%s: queries no roce_tune_* metric" % where)
        errs += ["%s: %s" % (where, e) for e in check_promql_names(expr, catalogue)]
        promql.append((where, expr))
    errs += promql_syntax_errors(promql)
    return errs


# ------------------------------------------------------------------ alerting rules

# The one rule file (module docstring, 9), under CONF_DIR; what the chart and the alerts component
# ship is it. Its promtool tests are integration/rules-test.py's (`make rules-test`).
RULES = os.path.join("alerts", "roce-tune.rules.yaml")
# The scrape job the ServiceMonitor makes (jobLabel app.kubernetes.io/name, the Service's label).
AGENT_JOB = "roce-tune"


def load_rule_groups(path):
    """(groups, error) of a Prometheus rule file."""
    try:
        with open(path) as f:
            doc = yaml.load(f, Loader=YAML_LOADER)
    except (OSError, yaml.YAMLError) as e:
        return None, "cannot read %s: %s" % (path, e)
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list) or set(doc) != {"groups"}:
        return None, "%s: a Prometheus rule file is a mapping with the one key groups" % path
    return doc["groups"], None


def check_rule_file(path, catalogue):
    """A rule file of conf/alerts: promtool's check, and its metric names and labels as the
    dashboard's (the catalogue's, no node variable); `up` only of the agent's job."""
    groups, err = load_rule_groups(path)
    if err:
        return [err]
    errs = []
    for g in groups:
        for r in g.get("rules") or []:
            what = "group %s, %s %s" % (g.get("name"), "alert" if "alert" in r else "record",
                                        r.get("alert") or r.get("record"))
            expr = r.get("expr") or ""
            if catalogue is not None:
                errs += ["%s: %s" % (what, e) for e in check_promql_names(expr, catalogue, node_filter=False)]
            for m in re.finditer(r"\bup\b\s*(\{[^}]*\})?", expr):
                if 'job="%s"' % AGENT_JOB not in (m.group(1) or "").replace(" ", ""):
                    errs.append('%s: up without job="%s" (the ServiceMonitor\'s job) is every target\'s'
                                % (what, AGENT_JOB))
    promtool = os.environ.get("PROMTOOL")
    if not promtool:
        return errs + ["no promtool (set PROMTOOL; integration/setup.sh unpacks it into integration/.build/bin)"]
    out = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        said = " | ".join(l.strip() for l in (out.stdout + out.stderr).splitlines() if l.strip())
        errs.append("promtool check rules: %s" % said[:800])
    return errs


# ------------------------------------------------------------------ files

def check_containerfile(path):
    errs = []
    with open(path) as f:
        text = f.read()
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*FROM\s+(\S+)", line, re.I)
        if m and m.group(1) != "scratch":
            errs.append("line %d: FROM %s: the image is built offline FROM scratch (no registry)" % (n, m.group(1)))
    for label in ("version", "revision", "source", "licenses", "title"):
        if "org.opencontainers.image.%s=" % label not in text:
            errs.append("OCI label org.opencontainers.image.%s is missing" % label)
    return errs


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    conf_dir, crd_dir = argv
    repo = os.path.dirname(os.path.abspath(conf_dir))
    crds = load_crds(crd_dir)
    if not crds:
        print("FAIL no CRD found in %s" % crd_dir)
        return 1
    version = cargo_version(os.environ.get("CARGO_TOML") or os.path.join(repo, "Cargo.toml"))
    failed = checked = 0

    def report(label, errs):
        nonlocal failed, checked
        checked += 1
        if errs:
            failed += 1
            print("FAIL %s" % label)
            for e in errs:
                print("     %s" % e)
        else:
            print("ok   %s" % label)

    schema_err = load_node_config_schema(conf_dir)
    if schema_err:
        report("%s (values.schema.json)" % os.path.join(os.path.relpath(conf_dir, repo), CHART), [schema_err])
    deploy_dir = os.path.join(conf_dir, "deploy")
    kustomized = set()
    if os.path.isdir(deploy_dir):
        kv, err = kustomize_version()
        if err:
            report("conf/deploy (kubectl kustomize)", [err])
        else:
            print("check-conf: %s, kustomize %s" % (kubectl_cmd(), kv))
            for label, errs in check_deploy(deploy_dir, repo, crds, version):
                report(label, errs)
            for label, errs in check_chart(conf_dir, deploy_dir, repo, crds, version):
                report(label, errs)
        for kfile in glob.glob(os.path.join(deploy_dir, "**", "kustomization.y*ml"), recursive=True):
            kustomized |= referenced_files(os.path.dirname(kfile))
    else:
        report("conf/deploy", ["missing: the kustomize layout (base and overlays)"])

    catalogue, catalogue_err = load_catalogue(
        os.environ.get("METRICS_RS") or os.path.join(repo, "src", "agent", "metrics.rs"))
    dashboards = 0
    rendered_by_dir = {}
    nads_by_dir = {}
    for root, dirs, files in os.walk(conf_dir):
        dirs.sort()
        if "Chart.yaml" in files:
            dirs[:] = []
            continue  # the chart: checked through what it renders (check_chart)
        for fn in sorted(files):
            path = os.path.normpath(os.path.join(root, fn))
            rel = os.path.relpath(path, repo)
            if path in kustomized:
                continue
            errs = []
            if os.path.basename(root) == "alerts" and fn.endswith(".rules.yaml"):
                errs = ([catalogue_err] if catalogue_err else []) + check_rule_file(path, catalogue)
                what = "Prometheus rules"
            elif fn.endswith((".yaml", ".yml")):
                try:
                    with open(path) as f:
                        docs = [d for d in yaml.safe_load_all(f) if d is not None]
                except yaml.YAMLError as e:
                    docs, errs = [], ["YAML: %s" % e]
                kinds = []
                for i, doc in enumerate(docs):
                    kinds.append(str(doc.get("kind") if isinstance(doc, dict) else "?"))
                    doc_errs, rendered = check_yaml_doc(doc, crds)
                    errs += ["document %d (%s): %s" % (i, kinds[-1], e) for e in doc_errs]
                    if rendered is not None:
                        rendered_by_dir.setdefault(root, []).append((rel, i, rendered))
                    if kinds[-1] == "NetworkAttachmentDefinition":
                        nads_by_dir.setdefault(root, []).append((rel, i, doc))
                what = ", ".join(kinds)
            elif fn.endswith(".json") and os.path.basename(root) == "grafana":
                if catalogue_err:
                    errs = [catalogue_err]
                errs = errs + check_dashboard(path, catalogue)
                what = "Grafana dashboard"
                dashboards += 1
            elif fn.endswith((".conflist", ".conf", ".json")):
                with open(path) as f:
                    errs = check_netconf_text(f.read(), "config", tenant=False)
                what = "CNI config"
            elif fn == "Containerfile" or fn.endswith(".Containerfile"):
                errs = check_containerfile(path)
                what = "Containerfile"
            else:
                continue
            report("%s (%s)" % (rel, what), errs)
    # A shipped NAD beside a SriovNetwork that renders to the same namespace/name claims to be
    # that rendering: it must be.
    pairs = 0
    for root, rendered in rendered_by_dir.items():
        for srel, si, r in rendered:
            rmeta = r.get("metadata") or {}
            for nrel, ni, nad in nads_by_dir.get(root, []):
                nmeta = nad.get("metadata") or {}
                if (nmeta.get("namespace"), nmeta.get("name")) == (rmeta.get("namespace"), rmeta.get("name")):
                    pairs += 1
                    report("%s#%d is what the operator renders from %s#%d" % (nrel, ni, srel, si), compare_nad(nad, r))
    # The docs' snippets (module docstring, 8).
    try:
        nri_socket = docs_snippets.default_nri_socket(
            os.environ.get("NODE_RS") or os.path.join(repo, "src", "node", "mod.rs"))
    except (OSError, ValueError) as e:
        nri_socket = None
        report("src/node/mod.rs (roce-tune's default nriSocket, for the docs' snippets)", [str(e)])

    def crd_check(doc):
        return check_yaml_doc(doc, crds)[0] if check_crd_doc(doc, crds) is not None else None

    for path in docs_snippets.doc_files(repo) if nri_socket else []:
        errs, summary = docs_snippets.check(path, nri_socket, crd_check)
        report("%s (snippets: %s)" % (os.path.relpath(path, repo), summary), errs)
    configs, errors = extract_configs.extract(conf_dir)
    for e in errors:
        failed += 1
        print("FAIL extract-configs: %s" % e)
    print("%d checks, %d failed; %d SriovNetwork renderings compared with a shipped NAD; %d roce-tune "
          "configs embedded; %d Grafana dashboards against %d catalogue metrics; CRDs: %s"
          % (checked, failed, pairs, len(configs), dashboards, len(catalogue or {}),
             ", ".join("%s/%s" % k for k in sorted(crds))))
    return 1 if failed or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
