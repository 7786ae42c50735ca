#!/usr/bin/env bash
# integration/check-conf.sh: validate conf/ offline: the kustomize overlays (built with
# `kubectl kustomize`), the manifests against the upstream CRD schemas, every SriovNetwork
# rendered the way the sriov-network-operator renders it, the optional metrics component on every
# install overlay, the Grafana dashboard against the metric catalogue (src/agent/metrics.rs) and
# promtool's PromQL parser, the Helm chart (conf/helm/roce-tune: `helm lint --strict`, and
# `helm template` for each platform compared object by object with the matching overlay's
# build, integration/chart_compare.py), the JSON, YAML and TOML snippets of README.md and docs/
# (integration/docs_snippets.py); then the negative cases
# (integration/check-conf-negative.py), each of which must make check-conf fail.
# Needs python3 with yaml, jsonschema and kubernetes_validate (setup.sh makes a venv from
# integration/requirements-check-conf.txt) and a kubectl whose kustomize builds components
# (>= v4: kubectl >= 1.21), promtool and helm (4); setup.sh installs them.
# Does not need root or the roce-tune binary.
#
# CRDs: $ROCE_TUNE_CRD_DIR, else tests/data/crds (the upstream schemas, kept in the
# repository with their provenance in its README.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"

crd_dir="${ROCE_TUNE_CRD_DIR:-$repo/tests/data/crds}"
[ -d "$crd_dir" ] || { echo "check-conf: no CRD directory $crd_dir (set ROCE_TUNE_CRD_DIR)" >&2; exit 1; }

# The venv integration/setup.sh makes (kubernetes-validate: the Kubernetes schemas, offline),
# else any python3 that has all three modules.
venv_py="${ROCE_TUNE_BUILD_DIR:-$here/.build}/venv/bin/python"
py=""
for cand in "$venv_py" /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import yaml, jsonschema, kubernetes_validate' 2>/dev/null; then
        py="$cand"; break
    fi
done
[ -n "$py" ] || { echo "check-conf: need python3 with yaml, jsonschema and kubernetes_validate: run integration/setup.sh (it makes $venv_py from integration/requirements-check-conf.txt)" >&2; exit 1; }

export KUBECTL="${KUBECTL:-kubectl}"
command -v "$KUBECTL" >/dev/null 2>&1 || { echo "check-conf: no $KUBECTL (run integration/setup.sh)" >&2; exit 1; }

# promtool parses the Grafana dashboard's PromQL: the one setup.sh unpacks, else one on PATH.
build_promtool="${ROCE_TUNE_BUILD_DIR:-$here/.build}/bin/promtool"
if [ -z "${PROMTOOL:-}" ]; then
    if [ -x "$build_promtool" ]; then PROMTOOL="$build_promtool"; else PROMTOOL="$(command -v promtool || true)"; fi
fi
[ -n "$PROMTOOL" ] || { echo "check-conf: no promtool (run integration/setup.sh: it unpacks $build_promtool)" >&2; exit 1; }
export PROMTOOL

# Helm 4 lints and renders the chart (conf/helm/roce-tune): the one setup.sh installs, else one on PATH.
build_helm="${ROCE_TUNE_BUILD_DIR:-$here/.build}/helm/helm"
if [ -z "${HELM:-}" ]; then
    if [ -x "$build_helm" ]; then HELM="$build_helm"; else HELM="$(command -v helm || true)"; fi
fi
[ -n "$HELM" ] || { echo "check-conf: no helm (run integration/setup.sh: it installs $build_helm)" >&2; exit 1; }
export HELM

echo "check-conf: the chart's rail profile holds src/cni/keys.rs's owned settings"
"$py" "$here/chart-schema.py" --check
echo "check-conf: CRDs from $(cd "$crd_dir" && pwd)"
"$py" "$here/check-conf.py" "$repo/conf" "$crd_dir"
echo "check-conf: negative cases (each breaks one thing in a copy of conf/ and must fail)"
"$py" "$here/check-conf-negative.py" "$crd_dir"
