#!/usr/bin/env python3
"""bench/nri_dra.py: RunPodSandbox of a 64-rail pod under one deadline, on the runtime's own clock.

Run by bench/bench.sh after nri.py (root; it needs ../shared/nri's nri-sim, and says so when it
is absent). A pod netns of its own with BENCH_DRA_RAILS (64) netdevs bound to VFs on a sysfs test
tree (docs/design.md, "Test trees"), `roce-tune-agent nri` with a `draRails` profile under
`gidCheck: enforce`, and nri-sim-0.12 (containerd's own NRI adaptation, v0.12.2, its default
2 s request timeout) running RunPodSandbox for the pod, BENCH_DRA_ROUNDS (10) times each:

- held: the last rail's RoCE GID never comes, and while it waits this process takes the device
  lock of every rail the plugin has tuned (as a stuck ADD or DEL would hold them): the sandbox
  fails, the answer must leave within three quarters of the timeout, + 100 ms (1,600 ms), with
  the rollback cut at the deadline; the rest is given back after it, once the locks are free.
- free: every GID there, nothing held, then StopPodSandbox: the answer's time and how many of
  the 64 rails it tuned itself (the plugin's line `N of 64 DRA rails tuned in`), the rest being
  tuned after it.

The time of each call is the runtime's (`rpcs[].ms`: request sent to answer read). Prints a
markdown section and appends it to BENCH_RESULTS/latest.md.
"""

import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  the test tree of the CNI cases, made the same way
from harness import ZERO_GID, pct, v4_gid  # noqa: E402

RAILS = int(os.environ.get("BENCH_DRA_RAILS", "64"))
ROUNDS = int(os.environ.get("BENCH_DRA_ROUNDS", "10"))
TIMEOUT_MS = 2000
BOUND_MS = TIMEOUT_MS * 0.75 + 100


class Node(harness.Bench):
    """The pod netns (made by bench.sh, filled here), the tree (harness.Bench's, for RAILS
    rails: net<i> on mlx5_<i>, 8 VFs a PCI device, GIDs of 10.10.<i>.2 at 2 and 3), the
    state dir, the plugin."""

    def __init__(self, agent, ns, work, state_base):
        self.ns, self.work = ns, work
        self.nspath = f"/run/netns/{ns}"
        self.a = types.SimpleNamespace(rails=RAILS)
        harness.pod_veths(ns, RAILS, "rtd%d" % (os.getpid() % 100000), self.addr)
        self.tree = os.path.join(work, "tree")
        self.make_tree()
        self.state = os.path.join(state_base, "nri-dra-state")
        os.makedirs(os.path.join(self.state, "locks"), mode=0o700)
        os.chmod(self.state, 0o700)
        self.sock = os.path.join(work, "nri.sock")
        self.node = os.path.join(work, "node.json")
        with open(self.node, "w") as f:
            json.dump({"stateDir": self.state, "sysfsRoot": self.tree, "nriSocket": self.sock,
                       "ncclEnv": "off",
                       "draRails": {"trafficClass": 41, "gidCheck": "enforce",
                                    "gidTimeoutMs": 5000}}, f)
        os.chmod(self.node, 0o644)
        self.log = os.path.join(work, "plugin.log")
        self.plugin = subprocess.Popen([agent, "nri", "--node-config", self.node],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=open(self.log, "w"), env={})

    def pci(self, i):
        # harness's 0000:3b:<i>.0 runs out of PCI device numbers (0 to 1f) past 31 rails.
        return "0000:5e:%02x.%d" % (i // 8, i % 8)

    def set_gids(self, i, there):
        gid = v4_gid(self.addr(i)) if there else ZERO_GID
        self.set_gid(i, 2, gid, "IB/RoCE v1" if there else "")
        self.set_gid(i, 3, gid, "RoCE v2" if there else "")

    def entries(self, sandbox=None):
        return [n for n in os.listdir(self.state)
                if n.endswith(".state") and (sandbox is None or n.startswith(sandbox + ":"))]

    def wait_clean(self, bound_s=60):
        t = time.monotonic()
        while self.entries():
            if time.monotonic() - t > bound_s:
                raise SystemExit(f"bench nri-dra: entries left after {bound_s} s: {self.entries()[:4]}")
            time.sleep(0.05)

    def log_text(self):
        with open(self.log) as f:
            return f.read()

    def stop(self):
        self.plugin.kill()
        self.plugin.wait()


def take_as_tuned(node, sandbox, done, held):
    """This process takes the lock of each rail the plugin has tuned (its entry written),
    rails 1 to n-1 in order, until `done` is set."""
    for i in range(1, RAILS):
        while not os.path.exists(os.path.join(node.state, f"{sandbox}:net{i}.state")):
            if done.is_set():
                return
            time.sleep(0.002)
        f = open(os.path.join(node.state, "locks", f"{node.pci(i)}.1.lock"), "a+")
        fcntl.flock(f, fcntl.LOCK_EX)
        held.append(f)


def run_sim(sim, node, script, work, name):
    path = os.path.join(work, f"{name}.script.json")
    out = os.path.join(work, f"{name}.json")
    with open(path, "w") as f:
        json.dump(script, f)
    subprocess.run([sim, "--socket", node.sock, "--script", path, "--out", out,
                    "--request-timeout-ms", str(TIMEOUT_MS)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
    with open(out) as f:
        return json.load(f)


def call_ms(result, method):
    return [c["ms"] for c in result["rpcs"] if c["method"].endswith("/" + method)]


def lost(result):
    return sum(1 for s in result["steps"] if "50-roce-tune" not in s["registered_after"])


def pod(sandbox, nspath):
    return {"id": sandbox, "name": sandbox, "namespace": "bench", "uid": f"uid-{sandbox}",
            "netns": nspath, "annotations": {}}


def main():
    agent, ns, state_base, results = sys.argv[1:5]
    sim_dir = os.environ.get("ROCE_TUNE_NRI_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "shared", "nri")
    sim = os.path.join(sim_dir, "bin", "nri-sim-0.12")
    if not os.access(sim, os.X_OK):
        print(f"bench nri-dra: SKIPPED: no nri-sim in {sim_dir} (set ROCE_TUNE_NRI_DIR)", file=sys.stderr)
        return 0
    work = tempfile.mkdtemp(prefix="roce-bench-nri-dra.", dir=state_base)
    node = Node(agent, ns, work, state_base)
    rows, raw = {}, {}
    try:
        # held: the last GID never comes, the tuned rails' locks taken while it waits.
        node.set_gids(RAILS, False)
        ms, locked, lost_steps = [], [], 0
        for r in range(ROUNDS):
            sandbox = f"held{r}"
            done, held = threading.Event(), []
            taker = threading.Thread(target=take_as_tuned, args=(node, sandbox, done, held))
            taker.start()
            result = run_sim(sim, node, [{"wait_plugins": ["roce-tune"], "timeout_ms": 10000},
                                         {"run_pod": pod(sandbox, node.nspath)}], work, sandbox)
            done.set()
            taker.join()
            if result["steps"][1]["ok"]:
                raise SystemExit(f"bench nri-dra: {sandbox}: the sandbox started under enforce")
            ms += call_ms(result, "RunPodSandbox")
            locked.append(len(held))
            lost_steps += lost(result)
            raw[sandbox] = result
            for f in held:
                f.close()
            node.wait_clean()
        rows["held"] = (ms, locked, lost_steps)
        # free: every GID there, nothing held; StopPodSandbox gives the rails back.
        node.set_gids(RAILS, True)
        ms, stop_ms, in_answer, lost_steps = [], [], [], 0
        for r in range(ROUNDS):
            sandbox = f"free{r}"
            result = run_sim(sim, node, [{"wait_plugins": ["roce-tune"], "timeout_ms": 10000},
                                         {"run_pod": pod(sandbox, node.nspath)},
                                         {"sleep_ms": 2000},
                                         {"stop_pod": sandbox}], work, sandbox)
            ms += call_ms(result, "RunPodSandbox")
            stop_ms += call_ms(result, "StopPodSandbox")
            said = re.findall(rf"\({sandbox}\): (\d+) of {RAILS} DRA rails tuned in", node.log_text())
            in_answer.append(int(said[0]) if said else -1)
            lost_steps += lost(result)
            raw[sandbox] = result
            node.wait_clean()
        rows["free"] = (ms, stop_ms, in_answer, lost_steps)
    finally:
        node.stop()
    with open(os.path.join(results, "raw", "nri-dra.json"), "w") as f:
        json.dump(raw, f)
    held_ms, locked, held_lost = rows["held"]
    free_ms, stop_ms, in_answer, free_lost = rows["free"]
    text = [
        "",
        f"## NRI RunPodSandbox of {RAILS} DRA rails under one deadline (nri-sim-0.12, {TIMEOUT_MS} ms "
        f"request timeout; the runtime's own timing; {ROUNDS} rounds each)",
        "",
        "| case | p50 ms | max ms | steps that lost the plugin | target |",
        "|---|---|---|---|---|",
        f"| held: last GID never comes, tuned rails' locks held ({min(locked)} to {max(locked)}), "
        f"enforce fails the sandbox | {pct(held_ms, 50):.1f} | {max(held_ms):.1f} | {held_lost} | "
        f"max <= {BOUND_MS:.0f}: {'met' if max(held_ms) <= BOUND_MS else 'MISSED'} |",
        f"| free: every GID there, nothing held ({min(in_answer)} to {max(in_answer)} of {RAILS} "
        f"rails tuned in the answer, the rest after it) | {pct(free_ms, 50):.1f} | {max(free_ms):.1f} "
        f"| {free_lost} | max <= {BOUND_MS:.0f}: {'met' if max(free_ms) <= BOUND_MS else 'MISSED'} |",
        f"| free: its StopPodSandbox | {pct(stop_ms, 50):.1f} | {max(stop_ms):.1f} | | "
        f"max <= {BOUND_MS:.0f}: {'met' if max(stop_ms) <= BOUND_MS else 'MISSED'} |",
    ]
    out = "\n".join(text) + "\n"
    print(out)
    with open(os.path.join(results, "latest.md"), "a") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
