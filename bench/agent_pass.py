#!/usr/bin/env python3
"""bench/agent_pass.py: one agent pass over 128 live rails and their RDMA counters.

Run by bench/bench.sh after nri_dra.py (root). A pod netns of its own with BENCH_AGENT_RAILS
(128) netdevs bound to VFs on a sysfs test tree (docs/design.md, "Test trees"), each ADDed by
roce-tune (trafficClass 41, so each pass also judges drift), each device's port holding
`hw_counters/` with the 12 names of mlx5's default set and 10 others the default leaves out
(about a third of a real mlx5 port's files). Then `roce-tune-agent agent --every 1` twice: with
the default `railCounters` (12 series a rail) and with `railCounters: []` (none), each for
BENCH_AGENT_PASSES (20) passes; the pass's time is the agent's own
(`roce_tune_repair_pass_duration_seconds`, read after each pass). The target: under 100 ms
with the counters (docs/performance.md). Prints a markdown section and appends it to
BENCH_RESULTS/latest.md.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  the test tree of the CNI cases, made the same way
from harness import pct, rail_sysctls  # noqa: E402

RAILS = int(os.environ.get("BENCH_AGENT_RAILS", "128"))
PASSES = int(os.environ.get("BENCH_AGENT_PASSES", "20"))
DEFAULT_NAMES = ["out_of_sequence", "packet_seq_err", "implied_nak_seq_err",
                 "local_ack_timeout_err", "duplicate_request", "rnr_nak_retry_err",
                 "out_of_buffer", "req_transport_retries_exceeded", "roce_adp_retrans",
                 "np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled"]
OTHER_NAMES = ["rx_write_requests", "rx_read_requests", "rx_atomic_requests",
               "resp_local_length_error", "resp_cqe_error", "req_cqe_error",
               "req_remote_access_errors", "roce_adp_retrans_to", "rp_cnp_ignored",
               "rx_icrc_encapsulated"]


class Node(harness.Bench):
    """The pod netns (made by bench.sh, filled here), the tree (harness.Bench's, for RAILS
    rails), the rails ADDed, the counters planted."""

    def __init__(self, bin, ns, work, state_base):
        self.ns, self.work = ns, work
        self.nspath = f"/run/netns/{ns}"
        self.a = types.SimpleNamespace(rails=RAILS)
        self.out = os.path.join(work, "stdout")
        self.err = os.path.join(work, "stderr")
        self.node = {}
        harness.pod_veths(ns, RAILS, "rta%d" % (os.getpid() % 100000), self.addr)
        self.tree = os.path.join(work, "tree")
        self.make_tree()
        for i in range(1, RAILS + 1):
            hw = f"{self.devdir(i)}/ports/1/hw_counters"
            os.makedirs(hw)
            for k, name in enumerate(DEFAULT_NAMES + OTHER_NAMES + ["lifespan"]):
                self.write(f"{hw}/{name}", "%d\n" % (i * 1000 + k))
        self.state = os.path.join(state_base, "agent-pass-state")
        os.makedirs(self.state, mode=0o700)
        os.chmod(self.state, 0o700)
        for i in range(1, RAILS + 1):
            cfg = self.cfg(f"rail{i}", {
                "cniVersion": "1.0.0", "name": "b", "type": "roce-tune",
                "sysctl": dict(rail_sysctls(f"net{i}")), "trafficClass": 41,
                "deviceID": self.pci(i), "prevResult": self.prev(i)}, self.state)
            self.run(bin, "ADD", cfg, i)

    def pci(self, i):
        # harness's 0000:3b:<i>.0 runs out of PCI device numbers past 31 rails.
        return "0000:5e:%02x.%d" % (i // 8, i % 8)


def agent_passes(agent, node, work, counters):
    """The agent's pass durations (seconds) over PASSES passes, and its last exposition."""
    conf = os.path.join(work, f"agent-{len(counters) if counters is not None else 'default'}.json")
    body = {"stateDir": node.state, "sysfsRoot": node.tree, "metricsAddress": "127.0.0.1:0",
            "driftPolicy": "report"}
    if counters is not None:
        body["railCounters"] = counters
    with open(conf, "w") as f:
        json.dump(body, f)
    os.chmod(conf, 0o644)
    log = os.path.join(work, "agent.log")
    p = subprocess.Popen([agent, "agent", "--every", "1", "--node-config", conf],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(log, "w"), env={})
    try:
        addr, t = None, time.monotonic()
        while addr is None:
            m = re.search(r"metrics on http://([^/]+)/", open(log).read())
            addr = m and m.group(1)
            if time.monotonic() - t > 10:
                raise SystemExit("bench agent-pass: the agent never said where it serves: "
                                 + open(log).read())
            time.sleep(0.02)
        durations, seen, text = [], 0, ""
        deadline = time.monotonic() + PASSES * 3 + 30
        while len(durations) < PASSES and time.monotonic() < deadline:
            text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=5).read().decode()
            n = int(float(re.search(r"^roce_tune_repair_passes_total (\S+)$", text, re.M).group(1)))
            d = re.search(r"^roce_tune_repair_pass_duration_seconds (\S+)$", text, re.M)
            if n > seen and d:
                seen = n
                if n > 1:  # the first pass reads cold caches of a freshly written tree
                    durations.append(float(d.group(1)))
            time.sleep(0.2)
        return durations, text
    finally:
        p.terminate()
        p.wait()


def main():
    bin, agent, ns, state_base, results = sys.argv[1:6]
    work = tempfile.mkdtemp(prefix="roce-bench-agent.", dir=state_base)
    node = Node(bin, ns, work, state_base)
    rows = {}
    for label, counters in (("default railCounters (12 a rail)", None), ("railCounters: []", [])):
        durations, text = agent_passes(agent, node, work, counters)
        series = len(re.findall(r"^roce_tune_rail_hw_counter_total\{", text, re.M))
        rails = len(re.findall(r"^roce_tune_rail_info\{", text, re.M))
        want = RAILS * (len(DEFAULT_NAMES) if counters is None else 0)
        if rails != RAILS or series != want:
            raise SystemExit(f"bench agent-pass: {label}: {rails} rails and {series} counter "
                             f"series exported, not {RAILS} and {want}")
        rows[label] = (durations, series)
    lines = [f"## Agent pass: {RAILS} live rails and their RDMA counters (bench/agent_pass.py)", "",
             f"`roce-tune-agent agent --every 1`, {PASSES} passes each (the first left out), the "
             "agent's own `roce_tune_repair_pass_duration_seconds`; each rail ADDed with "
             "trafficClass 41, its port's `hw_counters/` holding 22 files and `lifespan`. "
             "Target: under 100 ms with the counters.", "",
             "| case | counter series | passes | p50 ms | p95 ms | max ms |", "|---|---|---|---|---|---|"]
    for label, (d, series) in rows.items():
        ms = [x * 1000 for x in d]
        lines.append(f"| {label} | {series} | {len(ms)} | {pct(ms, 50):.1f} | {pct(ms, 95):.1f} "
                     f"| {max(ms):.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(results, "latest.md"), "a") as f:
        f.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
