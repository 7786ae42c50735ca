#!/usr/bin/env python3
"""The kernel lane's rxe counters, held to the shipped loss alert.

The lane's scenario rxe-counters (integration/kernel/scenarios.sh) writes each reading of its
two rxe devices' hw_counters, before and after a clean and a lossy (netem loss 5%) run of
ibv_rc_pingpong, to rxe-counters.readings: "READING <run> <before|after> <unix ms> <dev> <name>
<value>". This script turns those readings into the series the agent would export for each run
(`roce_tune_rail_hw_counter_total`, one rail per run and device: pod = the run's name), as if
the rail kept counting at the rate measured over the run, scraped every 15 s for 20 minutes
(a run lasts seconds; an alert with `for: 5m` needs minutes), writes a `promtool test rules`
file that loads the rule file, and asks promtool whether RoceTuneRailLossRising is firing at the
end: for the lossy run's rails, and for no rail of the clean run. The rule's expression and
threshold are the rule file's own, never restated here.

Usage: lane_rules.py READINGS [RULES] [PROMTOOL]
  READINGS  the lane's rxe-counters.readings
  RULES     the rule file (default: conf/alerts/roce-tune.rules.yaml beside this script's repo)
  PROMTOOL  promtool (default: integration/.build/bin/promtool, else promtool on PATH)

Exit 0 when promtool agrees, 1 when it does not (its output printed), 2 on bad input. Without a
rule file it says SKIPPED loudly and exits 77, which ROCE_TUNE_REQUIRE_KERNEL=1 turns into 1.
"""

import os
import shutil
import subprocess
import sys
import tempfile

ALERT = "RoceTuneRailLossRising"
SCRAPE_S = 15
STEPS = 80  # 20 minutes of scrapes
EVAL = "20m"
LOSSY, CLEAN = "lossy", "clean"


def readings(path):
    """{run: {dev: {name: {phase: (ms, value)}}}}."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0] != "READING":
                continue
            if len(parts) != 7 or parts[2] not in ("before", "after"):
                raise ValueError("%s:%d: not a READING line: %r" % (path, n, line))
            _, run, phase, ms, dev, name, value = parts
            out.setdefault(run, {}).setdefault(dev, {}).setdefault(name, {})[phase] = (
                int(ms), int(value))
    return out


def series(data):
    """The input_series of a promtool test: one per run, device and counter."""
    lines = []
    for run, devs in sorted(data.items()):
        for dev, names in sorted(devs.items()):
            for name, phases in sorted(names.items()):
                if "before" not in phases or "after" not in phases:
                    continue
                (t0, v0), (t1, v1) = phases["before"], phases["after"]
                secs = max(t1 - t0, 1) / 1000.0
                per_scrape = max(v1 - v0, 0) / secs * SCRAPE_S
                labels = ('{namespace="lane",pod="%s",interface="%s",rdma_device="%s",'
                          'pci_address="",network="rxe",port="1",counter="%s",node="lane"}'
                          % (run, dev, dev, name))
                lines.append("      - series: 'roce_tune_rail_hw_counter_total%s'\n"
                             "        values: '%d+%.6fx%d'\n" % (labels, v0, per_scrape, STEPS))
    return "".join(lines)


def test_file(rules, data):
    runs = sorted(data)
    if LOSSY not in runs or CLEAN not in runs:
        raise ValueError("the readings hold runs %s, not %s and %s" % (runs, CLEAN, LOSSY))
    # Which runs have a rail firing at the end: 1 for each such run, none for the others.
    expr = ('clamp_max(count by (pod) (ALERTS{alertname="%s",alertstate="firing"}), 1)' % ALERT)
    return ("rule_files:\n  - %s\nevaluation_interval: %ds\ntests:\n  - interval: %ds\n"
            "    input_series:\n%s"
            "    promql_expr_test:\n"
            "      - expr: '%s'\n        eval_time: %s\n        exp_samples:\n"
            "          - labels: '{pod=\"%s\"}'\n            value: 1\n"
            % (rules, SCRAPE_S, SCRAPE_S, series(data), expr, EVAL, LOSSY))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rules = os.path.abspath(argv[2] if len(argv) > 2 else
                            os.path.join(repo, "conf", "alerts", "roce-tune.rules.yaml"))
    promtool = argv[3] if len(argv) > 3 else os.path.join(repo, "integration", ".build", "bin", "promtool")
    if not os.access(promtool, os.X_OK):
        promtool = shutil.which("promtool") or promtool
    if not os.path.exists(rules):
        print("lane_rules: SKIPPED: no rule file %s, so %s cannot be held to the lane's readings"
              % (rules, ALERT), file=sys.stderr)
        return 1 if os.environ.get("ROCE_TUNE_REQUIRE_KERNEL") == "1" else 77
    try:
        data = readings(argv[1])
        text = test_file(rules, data)
    except (OSError, ValueError) as e:
        print("lane_rules: %s" % e, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lane-test.yaml")
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([promtool, "test", "rules", path], capture_output=True, text=True)
        if r.returncode != 0:
            print("lane_rules: promtool says %s does not fire as the lane's readings want "
                  "(the lossy run's rails firing, the clean run's not):\n%s%s\n--- test file ---\n%s"
                  % (ALERT, r.stdout, r.stderr, text), file=sys.stderr)
            return 1
    fired = {run: sum(1 for _ in devs) for run, devs in data.items()}
    print("lane_rules: %s fires for the lossy run's rails and not the clean run's (devices per run: %s), "
          "promtool test rules over the lane's readings" % (ALERT, fired))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
