#!/usr/bin/env python3
"""Validate the manifests and CNI configs in conf/ offline. Run through integration/check-conf.sh.

For every YAML document under conf/:
  * a kind with a CRD in <shared>/fixtures/crds/ (SriovNetwork, SriovNetworkNodePolicy,
    NetworkAttachmentDefinition): apiVersion must be <group>/<served version>, and the document
    must validate against that version's openAPIV3Schema, in STRICT mode: an object schema
    with "properties" and no "additionalProperties" rejects unknown fields (what
    `kubectl apply --validate=strict`, the default since 1.27, does; the API server would
    otherwise silently prune them). metadata.name is required.
  * DaemonSet (no schema offline): the fields the installer relies on (selector matches
    the template labels, nodeSelector, a hostPath volume for the CNI bin dir, images, commands).
  * anything else: an error (add a check when you add a manifest).
For every CNI config (SriovNetwork metaPlugins and ipam, NAD spec.config, *.conflist):
  * it parses as the operator/libcni would parse it;
  * every plugin has a "type"; the chain order is [sriov] -> [rdma] -> roce-tune -> sbr;
  * every roce-tune config has the DESIGN 2.1 key types and ranges (the Rust test feeds the
    same configs, printed by integration/extract-configs.py, to the plugin's own validation).
Other files: conf/Containerfile must COPY files that exist.

Usage: check-conf.py CONF_DIR CRD_DIR        (prints one line per file, exits 1 on any error)
"""
import copy
import glob
import importlib.util
import json
import os
import re
import sys

import jsonschema
import yaml

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("extract_configs", os.path.join(here, "extract-configs.py"))
extract_configs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(extract_configs)

PCI_RE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$")
ROCE_KEYS = {
    # DESIGN 2.1; plus what libcni/Multus add.
    "type", "sysctl", "trafficClass", "gidIndex", "gidCheck", "gidTimeoutMs", "rdmaPort",
    "deviceID", "pciBusID", "stateDir", "sysfsRoot", "logFile", "logLevel",
    "name", "cniVersion", "prevResult", "runtimeConfig", "args", "capabilities",
}


def load_crds(crd_dir):
    """{(group, kind): {version: schema}} of the served versions of every CRD."""
    crds = {}
    for path in sorted(glob.glob(os.path.join(crd_dir, "*.yaml")) + glob.glob(os.path.join(crd_dir, "*.yml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                s = doc["spec"]
                versions = {}
                for v in s.get("versions", []):
                    if v.get("served"):
                        versions[v["name"]] = v["schema"]["openAPIV3Schema"]
                crds[(s["group"], s["names"]["kind"])] = versions
    return crds


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
    if not (doc.get("metadata") or {}).get("name"):
        errs.append("metadata.name: required")
    return errs


def check_daemonset(doc):
    errs = []
    if doc.get("apiVersion") != "apps/v1":
        errs.append("apiVersion must be apps/v1")
    spec = doc.get("spec") or {}
    sel = ((spec.get("selector") or {}).get("matchLabels")) or {}
    tmpl = spec.get("template") or {}
    labels = ((tmpl.get("metadata") or {}).get("labels")) or {}
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        errs.append("spec.selector.matchLabels must be non-empty and match spec.template.metadata.labels")
    pod = tmpl.get("spec") or {}
    if not pod.get("nodeSelector"):
        errs.append("spec.template.spec.nodeSelector: missing (install only on SR-IOV/RDMA GPU nodes)")
    vols = {v.get("name"): v for v in pod.get("volumes") or []}
    host_paths = {n for n, v in vols.items() if (v.get("hostPath") or {}).get("path") in ("/opt/cni/bin", "/var/lib/cni/bin")}
    if not host_paths:
        errs.append("no hostPath volume for /opt/cni/bin")
    containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    if not pod.get("containers"):
        errs.append("spec.template.spec.containers: missing")
    for c in containers:
        n = c.get("name") or "?"
        if not c.get("image"):
            errs.append("container %s: image missing" % n)
        for m in c.get("volumeMounts") or []:
            if m.get("name") not in vols:
                errs.append("container %s: volumeMount %s has no volume" % (n, m.get("name")))
    if not any(m.get("name") in host_paths for c in containers for m in c.get("volumeMounts") or []):
        errs.append("no container mounts the CNI bin hostPath")
    return errs


def check_roce_tune(p):
    errs = []
    for k in p:
        if k not in ROCE_KEYS:
            errs.append("unknown key %r (not in DESIGN 2.1)" % k)

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if "trafficClass" in p and not (is_int(p["trafficClass"]) and 0 <= p["trafficClass"] <= 255):
        errs.append("trafficClass must be an integer 0..255")
    if "gidIndex" in p and not (is_int(p["gidIndex"]) and p["gidIndex"] >= 0):
        errs.append("gidIndex must be an integer >= 0")
    if "gidTimeoutMs" in p and not (is_int(p["gidTimeoutMs"]) and p["gidTimeoutMs"] >= 0):
        errs.append("gidTimeoutMs must be an integer >= 0")
    if "rdmaPort" in p and not (is_int(p["rdmaPort"]) and p["rdmaPort"] >= 1):
        errs.append("rdmaPort must be an integer >= 1")
    if "gidCheck" in p and p["gidCheck"] not in ("enforce", "warn", "off"):
        errs.append("gidCheck must be enforce, warn or off")
    for k in ("deviceID", "pciBusID"):
        if k in p and not (isinstance(p[k], str) and PCI_RE.match(p[k])):
            errs.append("%s must be a PCI address DDDD:BB:DD.F" % k)
    for k in ("stateDir", "sysfsRoot", "logFile"):
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


def check_chain(plugins, interface_first):
    """plugins: the full list as the runtime sees it."""
    errs = []
    types = [p.get("type") if isinstance(p, dict) else None for p in plugins]
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
            errs += ["roce-tune: " + e for e in check_roce_tune(p)]
    return errs


def check_netconf_text(text, what, sriov_prefix=False):
    """Parse a CNI config as runtime would; sriov_prefix: metaPlugins to append after sriov."""
    try:
        if sriov_prefix:
            plugins = [{"type": "sriov"}] + extract_configs.meta_plugins(text)
        else:
            _, ver, plugins = extract_configs.plugins_of_netconf(json.loads(text))
            if ver is None:
                return ["%s: no cniVersion" % what]
    except ValueError as e:
        return ["%s: does not parse: %s" % (what, e)]
    return ["%s: %s" % (what, e) for e in check_chain(plugins, True)]


def check_yaml_doc(doc, crds):
    if not isinstance(doc, dict):
        return ["not a mapping"]
    kind = doc.get("kind")
    errs = check_crd_doc(doc, crds)
    if errs is None:
        if kind == "DaemonSet":
            errs = check_daemonset(doc)
        else:
            return ["kind %r: no schema and no check for it (add one to integration/check-conf.py)" % kind]
    spec = doc.get("spec") or {}
    if kind == "SriovNetwork":
        if isinstance(spec.get("metaPlugins"), str):
            errs += check_netconf_text(spec["metaPlugins"], "spec.metaPlugins", sriov_prefix=True)
        if isinstance(spec.get("ipam"), str):
            try:
                if not isinstance(json.loads(spec["ipam"]), dict):
                    errs.append("spec.ipam: not a JSON object")
            except ValueError as e:
                errs.append("spec.ipam: does not parse: %s" % e)
    if kind == "NetworkAttachmentDefinition" and isinstance(spec.get("config"), str):
        errs += check_netconf_text(spec["config"], "spec.config")
    return errs


def check_containerfile(path, repo):
    errs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            m = re.match(r"^\s*COPY\s+(?!--from)(.+)$", line)
            if m:
                srcs = m.group(1).split()[:-1]
                for s in srcs:
                    if s != "." and not os.path.exists(os.path.join(repo, s)):
                        errs.append("line %d: COPY source %s does not exist" % (n, s))
    if "crt-static" not in open(path).read():
        errs.append("the build stage must set RUSTFLAGS=-C target-feature=+crt-static")
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
    failed = checked = 0
    for root, dirs, files in os.walk(conf_dir):
        dirs.sort()
        for fn in sorted(files):
            path = os.path.join(root, fn)
            rel = os.path.relpath(path, repo)
            errs = []
            if fn.endswith((".yaml", ".yml")):
                try:
                    with open(path) as f:
                        docs = [d for d in yaml.safe_load_all(f) if d is not None]
                except yaml.YAMLError as e:
                    docs, errs = [], ["YAML: %s" % e]
                kinds = []
                for i, doc in enumerate(docs):
                    kinds.append(str(doc.get("kind") if isinstance(doc, dict) else "?"))
                    errs += ["document %d (%s): %s" % (i, kinds[-1], e) for e in check_yaml_doc(doc, crds)]
                what = ", ".join(kinds)
            elif fn.endswith((".conflist", ".conf", ".json")):
                with open(path) as f:
                    errs = check_netconf_text(f.read(), "config")
                what = "CNI config"
            elif fn == "Containerfile" or fn.endswith(".Containerfile"):
                errs = check_containerfile(path, repo)
                what = "Containerfile"
            else:
                continue
            checked += 1
            if errs:
                failed += 1
                print("FAIL %s (%s)" % (rel, what))
                for e in errs:
                    print("     %s" % e)
            else:
                print("ok   %s (%s)" % (rel, what))
    configs, errors = extract_configs.extract(conf_dir)
    for e in errors:
        failed += 1
        print("FAIL extract-configs: %s" % e)
    print("%d files checked, %d failed; %d roce-tune configs embedded; CRDs: %s" % (
        checked, failed, len(configs), ", ".join("%s/%s" % k for k in sorted(crds))))
    return 1 if failed or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
