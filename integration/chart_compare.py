"""The Helm chart (conf/helm/roce-tune) against the kustomize overlays (conf/deploy): render the
chart with `helm template`, and compare what it renders with what `kubectl kustomize` builds,
object by object. Used by integration/check-conf.py, which also runs its DaemonSet rules and
schema checks on the chart's output.

Two renderings of one install differ by nature in a few places, each handled here and nowhere
else:
* kustomize's configMapGenerator names the node config `roce-tune-node-config-<hash>` (its hash
  of the content, so a new node.json rolls the DaemonSet); the chart's ConfigMap has no suffix,
  and its pod template carries the checksum of the node config instead (CHECKSUM): the names are
  compared without the suffix, and the checksum is checked by itself (check-conf.py).
* the chart does not own the namespace (`helm install -n`): the overlays' Namespace objects are
  left out, and check-conf.py checks that docs/deploy.md gives their labels.
* Helm's own labels (HELM_LABELS) on the chart's objects.
* node.json is compared as JSON: the chart prints it from values (keys sorted), kustomize copies
  the file.
Everything else must be equal: kinds, names, namespaces, containers, images, commands, args,
env, mounts, volumes, securityContext, resources, nodeSelector, tolerations, RBAC rules.
"""
import copy
import json
import os
import re
import subprocess

import yaml

# The labels "roce-tune.labels" (templates/_helpers.tpl) adds to every object; None: any value.
HELM_LABELS = {
    "app.kubernetes.io/name": "roce-tune",
    "app.kubernetes.io/instance": None,
    "app.kubernetes.io/managed-by": "Helm",
    "helm.sh/chart": None,
}
# The pod template annotation that rolls the DaemonSet when the node config changes.
CHECKSUM = "checksum/node-config"
# A configMapGenerator name: <name>-<10 characters of kustomize's hash>.
GENERATED = re.compile(r"^(?P<base>.+)-[a-z0-9]{10}$")
# helm's message when values fail values.schema.json.
SCHEMA_REFUSED = "values don't meet the specifications of the schema"


def helm_cmd():
    return os.environ.get("HELM") or "helm"


def run_helm(args, timeout=120):
    """(exit status, stdout, stderr) of helm ARGS; status None when helm cannot run."""
    try:
        out = subprocess.run([helm_cmd()] + args, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        return None, "", "cannot run %s: %s" % (helm_cmd(), e)
    # Helm logs that it followed the chart's link to conf/grafana (dashboards/): not an error.
    err = "\n".join(l for l in out.stderr.splitlines() if "found symbolic link in path" not in l)
    return out.returncode, out.stdout, err


def set_args(values):
    """--set-json for each (key, value): types survive (--set would turn "10" into 10)."""
    args = []
    for k, v in values:
        args += ["--set-json", "%s=%s" % (k, json.dumps(v))]
    return args


def render(chart_dir, namespace, values=()):
    """The documents `helm template roce-tune CHART -n NAMESPACE` renders, or ValueError."""
    rc, out, err = run_helm(["template", "roce-tune", chart_dir, "-n", namespace] + set_args(values))
    if rc != 0:
        raise ValueError("helm template failed: %s" % err.strip().replace("\n", " | "))
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it
    return [d for d in yaml.load_all(out, Loader=loader) if d is not None]


def what(doc):
    return "%s %s" % (doc.get("kind"), (doc.get("metadata") or {}).get("name"))


def without_generated_names(docs):
    """kustomize's documents with each generated ConfigMap's hash suffix removed, from its name
    and from every configMap volume that names it."""
    docs = copy.deepcopy(docs)
    renamed = {}
    for d in docs:
        meta = d.get("metadata") or {}
        m = GENERATED.match(meta.get("name") or "")
        if d.get("kind") == "ConfigMap" and m:
            renamed[meta["name"]] = m.group("base")
            meta["name"] = m.group("base")
    for d in docs:
        pod = ((d.get("spec") or {}).get("template") or {}).get("spec") or {}
        for v in pod.get("volumes") or []:
            ref = v.get("configMap") or {}
            if ref.get("name") in renamed:
                ref["name"] = renamed[ref["name"]]
    return docs


def list_key(items):
    """The field that identifies an item of a list of objects (mountPath before name: two mounts
    may share a volume), or None: compared by position."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for k in ("mountPath", "name"):
        keys = [i.get(k) for i in items]
        if all(isinstance(x, str) for x in keys) and len(set(keys)) == len(keys):
            return k
    return None


def diff(chart, kz, path=""):
    """Every difference between two values, as 'path: ...' lines."""
    if isinstance(chart, dict) and isinstance(kz, dict):
        return diff_keyed(chart, kz, lambda k: "%s.%s" % (path, k) if path else str(k))
    if isinstance(chart, list) and isinstance(kz, list):
        k = list_key(chart) if list_key(chart) == list_key(kz) else None
        if k is not None:
            return diff_keyed({i[k]: i for i in chart}, {i[k]: i for i in kz},
                              lambda key: "%s[%s=%s]" % (path, k, key))
        if len(chart) == len(kz):
            return [line for i, (x, y) in enumerate(zip(chart, kz)) for line in diff(x, y, "%s[%d]" % (path, i))]
    if chart == kz and type(chart) is type(kz):
        return []
    return ["%s: the chart has %s, kustomize %s" % (path or "(root)", json.dumps(chart, sort_keys=True),
                                                     json.dumps(kz, sort_keys=True))]


def diff_keyed(chart, kz, where):
    """diff of two mappings (an object, or a list keyed by list_key); where(key) names an entry."""
    out = []
    for key in sorted(set(chart) | set(kz), key=str):
        if key not in kz:
            out.append("%s: only in the chart: %s" % (where(key), json.dumps(chart[key], sort_keys=True)))
        elif key not in chart:
            out.append("%s: only in kustomize: %s" % (where(key), json.dumps(kz[key], sort_keys=True)))
        else:
            out += diff(chart[key], kz[key], where(key))
    return out


def comparable(doc, kz_doc):
    """The chart's document with what differs by nature made kustomize's (module docstring)."""
    doc = copy.deepcopy(doc)
    kz_doc = copy.deepcopy(kz_doc)
    errs = []
    labels = (doc.get("metadata") or {}).get("labels") or {}
    kz_labels = (kz_doc.get("metadata") or {}).get("labels") or {}
    for k, want in HELM_LABELS.items():
        if k in labels and k not in kz_labels:
            if want is not None and labels[k] != want:
                errs.append("metadata.labels.%s: %r, not %r" % (k, labels[k], want))
            del labels[k]
    if not labels and "labels" in (doc.get("metadata") or {}):
        del doc["metadata"]["labels"]
    tmpl = ((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}
    (tmpl.get("annotations") or {}).pop(CHECKSUM, None)
    for d in (doc, kz_doc):
        if d.get("kind") == "ConfigMap":
            for k, v in (d.get("data") or {}).items():
                if k.endswith(".json") and isinstance(v, str):
                    try:
                        d["data"][k] = json.loads(v)
                    except ValueError:
                        pass  # compared as text; check-conf reports the JSON itself
    return doc, kz_doc, errs


def compare(chart_docs, kz_docs):
    """Every difference between the chart's rendering and kustomize's build of one install."""
    kz_docs = [d for d in without_generated_names(kz_docs) if d.get("kind") != "Namespace"]
    chart = {(d.get("kind"), (d.get("metadata") or {}).get("name")): d for d in chart_docs}
    kz = {(d.get("kind"), (d.get("metadata") or {}).get("name")): d for d in kz_docs}
    errs = []
    for key in sorted(set(chart) | set(kz), key=str):
        if key not in kz:
            errs.append("%s %s: only in the chart" % key)
        elif key not in chart:
            errs.append("%s %s: only in kustomize" % key)
        else:
            doc, kz_doc, label_errs = comparable(chart[key], kz[key])
            errs += ["%s %s: %s" % (key + (e,)) for e in label_errs + diff(doc, kz_doc)]
    return errs


def pod_annotation(docs, name):
    ds = next((d for d in docs if d.get("kind") == "DaemonSet"), {})
    return ((((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}).get(name)
