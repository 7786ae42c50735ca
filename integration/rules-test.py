#!/usr/bin/env python3
"""The alerting rules' tests (`make rules-test`): conf/alerts/*.rules.yaml through promtool, and
the rules held to their tests.

1. `promtool check rules` on every rule file of conf/alerts;
2. `promtool test rules` on every test file of tests/data/alerts (Debian's promtool 2.42);
3. coverage, read from both files: every alert of a rule file has a test case where it fires
   (exp_alerts not empty) and one where it stays quiet (exp_alerts empty) at an eval_time past
   its `for` (a quiet case before `for` proves nothing); every test file names its rule file.
   The firing cases assert what an on-call reads: every alert of the rail group (the rules that
   name a pod) asserts the labels namespace and pod and finds the pod's name in its summary and
   description; every other alert asserts node and finds it in its description;
4. every alert has a summary, a description and a runbook_url: the section's path in roce-tune's
   source tree, docs/troubleshooting.md#<anchor> (GitHub's anchor of one of its headings; the
   project names no public repository, so no host is made up: docs/deploy.md, "Alerts", says how
   to point them at where you publish the docs);
5. the coverage check itself, on copies of the files: an alert whose tests are removed, and a
   new alert without any, must each be reported.

Environment: PROMTOOL (default: integration/.build/bin/promtool, the one setup.sh unpacks, else
promtool on PATH). Needs python3 with PyYAML. Exit 1 on any failure.
"""
import copy
import glob
import os
import re
import subprocess
import sys

import yaml

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
RULES_DIR = os.path.join(repo, "conf", "alerts")
TESTS_DIR = os.path.join(repo, "tests", "data", "alerts")
TROUBLESHOOTING = os.path.join(repo, "docs", "troubleshooting.md")
# The group whose alerts are about one pod's rail (or the pod itself): they name the pod.
RAIL_GROUP = "roce-tune-rails"
RUNBOOK = re.compile(r"^docs/troubleshooting\.md#([a-z0-9_-]+)$")


def promtool():
    p = os.environ.get("PROMTOOL")
    if p:
        return p
    built = os.path.join(os.environ.get("ROCE_TUNE_BUILD_DIR") or os.path.join(here, ".build"), "bin", "promtool")
    if os.access(built, os.X_OK):
        return built
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if os.access(os.path.join(d, "promtool"), os.X_OK):
            return os.path.join(d, "promtool")
    return None


def duration_s(text):
    """Seconds of a Prometheus duration (5m, 1h30m, 90s); 0 for None."""
    if not text:
        return 0
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        raise ValueError("not a Prometheus duration: %r" % (text,))
    return sum(int(n) * units[u] for n, u in parts)


def anchor(heading):
    """GitHub's anchor of a heading (tests/it/references.rs has the same rule)."""
    out = []
    for c in heading.lower():
        if c == " ":
            out.append("-")
        elif c.isalnum() or c in "-_":
            out.append(c)
    return "".join(out)


def doc_anchors(path):
    with open(path) as f:
        text = f.read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {anchor(m.group(1).strip()) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}


def alerts_of(rule_docs):
    """[(group name, rule)] of every alerting rule."""
    return [(g.get("name"), r) for doc in rule_docs for g in doc.get("groups") or []
            for r in g.get("rules") or [] if "alert" in r]


def coverage_errors(rule_docs, test_docs):
    """What the tests leave unproven (module docstring, 3)."""
    errs = []
    cases = {}
    for path, doc in test_docs:
        for group in doc.get("tests") or []:
            for t in group.get("alert_rule_test") or []:
                cases.setdefault(t.get("alertname"), []).append((path, group.get("name"), t))
    for group, rule in alerts_of(rule_docs):
        name = rule["alert"]
        mine = cases.get(name, [])
        firing = [c for c in mine if c[2].get("exp_alerts")]
        wait = duration_s(rule.get("for"))
        quiet = [c for c in mine if not c[2].get("exp_alerts") and duration_s(c[2].get("eval_time")) > wait]
        if not firing:
            errs.append("%s: no promtool test where it fires (an alert_rule_test with exp_alerts)" % name)
        if not quiet:
            errs.append("%s: no promtool test where it stays quiet on a healthy node (exp_alerts: [] at an "
                        "eval_time past its for: %s)" % (name, rule.get("for", "0s")))
        for path, tname, t in firing:
            for i, exp in enumerate(t["exp_alerts"]):
                where = "%s: test %r at %s, alert %d" % (name, tname, t.get("eval_time"), i)
                labels = exp.get("exp_labels") or {}
                notes = exp.get("exp_annotations") or {}
                if group == RAIL_GROUP:
                    for label in ("namespace", "pod"):
                        if not labels.get(label):
                            errs.append("%s: asserts no %s label (a rail alert names the pod)" % (where, label))
                    pod = labels.get("pod")
                    for key in ("summary", "description"):
                        if pod and pod not in str(notes.get(key, "")):
                            errs.append("%s: the %s asserted does not name the pod %s" % (where, key, pod))
                else:
                    node = labels.get("node")
                    if not node:
                        errs.append("%s: asserts no node label (a node alert names the node)" % where)
                    elif node not in str(notes.get("description", "")):
                        errs.append("%s: the description asserted does not name the node %s" % (where, node))
                if set(notes) != set(rule.get("annotations") or {}):
                    errs.append("%s: asserts the annotations %s, the rule has %s"
                                % (where, sorted(notes), sorted(rule.get("annotations") or {})))
    known = {r["alert"] for _, r in alerts_of(rule_docs)}
    for name in sorted(set(cases) - known):
        errs.append("tests name the alert %s, which no rule file has" % name)
    return errs


def annotation_errors(rule_docs, anchors):
    errs = []
    for _, rule in alerts_of(rule_docs):
        name = rule["alert"]
        notes = rule.get("annotations") or {}
        for key in ("summary", "description", "runbook_url"):
            if not notes.get(key):
                errs.append("%s: no annotation %s" % (name, key))
        m = RUNBOOK.match(notes.get("runbook_url") or "")
        if not m:
            errs.append("%s: runbook_url %r is not docs/troubleshooting.md#<anchor>"
                        % (name, notes.get("runbook_url")))
            continue
        if m.group(1) not in anchors:
            errs.append("%s: runbook_url's anchor #%s is no heading of docs/troubleshooting.md"
                        % (name, m.group(1)))
        if "severity" not in (rule.get("labels") or {}):
            errs.append("%s: no severity label" % name)
    return errs


def self_test(rule_docs, test_docs):
    """The coverage check reports an alert without tests (module docstring, 5)."""
    errs = []
    victim = alerts_of(rule_docs)[0][1]["alert"]
    stripped = copy.deepcopy(test_docs)
    for _, doc in stripped:
        for group in doc.get("tests") or []:
            group["alert_rule_test"] = [t for t in group.get("alert_rule_test") or [] if t.get("alertname") != victim]
    if not any(victim in e for e in coverage_errors(rule_docs, stripped)):
        errs.append("self-test: the coverage check did not report %s once its tests were removed" % victim)
    grown = copy.deepcopy(rule_docs)
    grown[0]["groups"][0]["rules"].append({"alert": "RoceTuneUntested", "expr": "vector(1)"})
    if not any("RoceTuneUntested" in e for e in coverage_errors(grown, test_docs)):
        errs.append("self-test: the coverage check did not report a new alert without tests")
    return errs


def main():
    failed = []
    tool = promtool()
    if not tool:
        print("FAIL no promtool (run integration/setup.sh: it unpacks integration/.build/bin/promtool)")
        return 1
    rule_files = sorted(glob.glob(os.path.join(RULES_DIR, "*.rules.yaml")))
    test_files = sorted(glob.glob(os.path.join(TESTS_DIR, "*.test.yaml")))
    if not rule_files or not test_files:
        print("FAIL no rule file in %s or no test file in %s" % (RULES_DIR, TESTS_DIR))
        return 1
    for args in (["check", "rules"] + rule_files, ["test", "rules"] + test_files):
        out = subprocess.run([tool] + args, capture_output=True, text=True, timeout=300)
        label = "promtool %s %s" % (" ".join(args[:2]), " ".join(os.path.relpath(p, repo) for p in args[2:]))
        print(("ok   " if out.returncode == 0 else "FAIL ") + label)
        if out.returncode != 0:
            print((out.stdout + out.stderr).rstrip())
            failed.append(label)
    rule_docs = []
    for p in rule_files:
        with open(p) as f:
            rule_docs.append(yaml.safe_load(f))
    test_docs = []
    for p in test_files:
        with open(p) as f:
            doc = yaml.safe_load(f)
        test_docs.append((p, doc))
        named = {os.path.normpath(os.path.join(os.path.dirname(p), r)) for r in doc.get("rule_files") or []}
        if not named & set(rule_files):
            failed.append("%s: rule_files names none of %s" % (os.path.relpath(p, repo), rule_files))
            print("FAIL " + failed[-1])
    for label, errs in (("coverage: every alert fires and stays quiet in a test, naming its pod or node",
                         coverage_errors(rule_docs, test_docs)),
                        ("annotations: summary, description, runbook_url to docs/troubleshooting.md",
                         annotation_errors(rule_docs, doc_anchors(TROUBLESHOOTING))),
                        ("self-test of the coverage check", self_test(rule_docs, test_docs))):
        print(("ok   " if not errs else "FAIL ") + label)
        for e in errs:
            print("     " + e)
        if errs:
            failed.append(label)
    alerts = len(alerts_of(rule_docs))
    print("rules-test: %d alerts, %d rule files, %d test files; %d failed" % (alerts, len(rule_files), len(test_files), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
