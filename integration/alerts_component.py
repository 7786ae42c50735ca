#!/usr/bin/env python3
"""conf/deploy/components/alerts/prometheusrule.yaml, written from conf/alerts/roce-tune.rules.yaml:
the rule file's text, indented under the PrometheusRule's spec (prometheus-operator's spec.groups
is a rule file's groups), as the chart's templates/prometheus-rule.yaml embeds the same file.
kustomize reads nothing outside a kustomization's directory, so the component holds a copy;
check-conf fails when the copy is not what this writes. After changing the rule file:

    python3 integration/alerts_component.py > conf/deploy/components/alerts/prometheusrule.yaml
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(os.path.dirname(here), "conf", "alerts", "roce-tune.rules.yaml")

HEADER = """\
# prometheus-operator's PrometheusRule (monitoring.coreos.com/v1; schema:
# tests/data/crds/monitoring.coreos.com_prometheusrules.yaml): conf/alerts/roce-tune.rules.yaml
# under spec, written by integration/alerts_component.py (check-conf fails when they differ).
# Do not edit: edit the rule file, then
#   python3 integration/alerts_component.py > conf/deploy/components/alerts/prometheusrule.yaml
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: roce-tune
  labels:
    app.kubernetes.io/name: roce-tune
    app.kubernetes.io/component: alerts
spec:
"""


def render(rules_text):
    body = "".join(("  " + line) if line.strip() else line for line in rules_text.splitlines(True))
    return HEADER + body


def main():
    with open(RULES) as f:
        sys.stdout.write(render(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
