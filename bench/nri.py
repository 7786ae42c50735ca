#!/usr/bin/env python3
"""bench/nri.py: how fast `roce-tune-agent nri` answers CreateContainer, on the runtime's own clock.

Run by bench/bench.sh after harness.py (root; it needs ../shared/nri's nri-sim, and says so
when it is absent). A node with BENCH_NRI_LIVE (128) live state entries: 4 are the rails of
the pod whose containers are created (its netns is the bench pod's), the others belong to
another live pod (a netns of their own). nri-sim (containerd's own NRI adaptation, v0.12.2 and
v0.11.0) runs RunPodSandbox for the annotated pod, then BENCH_NRI_CONTAINERS (500)
CreateContainer calls; its result records each call's duration as the runtime timed it
(`rpcs[].ms`: from sending the request to reading the answer). The target: the 99th percentile
under 5 ms (a CreateContainer answer must not slow a container's start). Prints a markdown section and appends it to BENCH_RESULTS/latest.md.

A second row, a busy node full of orphans: the same 128 live entries beside BENCH_NRI_DEAD
(10,000) entries whose netns is gone (orphans the agent has not released yet), while a
neighbour's rail comes and goes every BENCH_NRI_CHURN_MS (100) ms, its entry renamed into the
state dir and unlinked again as ADD and DEL do (the plugin's picture sees only those two
operations; the locks and the orphan sweep of a real ADD are not played). BENCH_NRI_DEAD_CALLS
(200) CreateContainer calls, BENCH_NRI_DEAD_GAP_MS (25) ms apart so the churn runs throughout.
Before the plugin followed the state dir through inotify, each call listed the dir and stat'ed
every entry while it had changed in the last 2 s: 35 ms at the median, 58 ms at the 99th
percentile. BENCH_NRI_CASES (`live,dead`) picks the rows.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

LIVE = int(os.environ.get("BENCH_NRI_LIVE", "128"))
CONTAINERS = int(os.environ.get("BENCH_NRI_CONTAINERS", "500"))
POD_RAILS = 4
DEAD = int(os.environ.get("BENCH_NRI_DEAD", "10000"))
DEAD_CALLS = int(os.environ.get("BENCH_NRI_DEAD_CALLS", "200"))
DEAD_GAP_MS = int(os.environ.get("BENCH_NRI_DEAD_GAP_MS", "25"))
CHURN_MS = int(os.environ.get("BENCH_NRI_CHURN_MS", "100"))
CASES = os.environ.get("BENCH_NRI_CASES", "live,dead").split(",")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def entry(cid, ifname, netns, dev, pci):
    st = os.stat(netns)
    return {"version": 2, "network": "b", "containerId": cid, "ifname": ifname, "netns": netns,
            "netnsId": {"dev": st.st_dev, "ino": st.st_ino}, "exclusive": False,
            "device": dev, "port": 1, "pci": pci, "guid": None,
            "trafficClass": {"original": None, "written": 41}, "rdmaCmTos": None,
            "createdNs": 1700000000 * 10**9}


def write_entry(state, cid, ifname, e):
    path = os.path.join(state, f"{cid}:{ifname}.state")
    with open(path, "w") as f:
        json.dump(e, f)
    os.chmod(path, 0o600)


def make_state(state, pod_ns, other_ns, dead):
    """The node's state dir: LIVE live entries (POD_RAILS of them the bench pod's) and `dead`
    entries whose netns is gone."""
    os.makedirs(os.path.join(state, "locks"), mode=0o700)
    os.chmod(state, 0o700)
    for i in range(LIVE):
        mine = i < POD_RAILS
        cid, ifname = ("benchpod0", f"net{i + 1}") if mine else (f"other{i // 8}", f"net{i % 8 + 1}")
        write_entry(state, cid, ifname,
                    entry(cid, ifname, pod_ns if mine else other_ns, f"mlx5_{i}",
                          "0000:5e:%02x.%d" % (i // 8, i % 8)))
    live = entry("x", "net1", other_ns, "mlx5_0", "0000:5e:00.0")
    for i in range(dead):
        e = dict(live, containerId=f"gone{i}", netns=f"/var/run/netns/gone-{i}",
                 netnsId={"dev": 4, "ino": 4026600000 + i}, device=f"mlx5_{i % 64}")
        write_entry(state, f"gone{i}", "net1", e)


class Churn(threading.Thread):
    """A neighbour's rail coming and going every `ms`: its entry written to a temporary name and
    renamed into place (an ADD's record), then unlinked (its DEL)."""

    def __init__(self, state, other_ns, ms):
        super().__init__(daemon=True)
        self.state, self.ms, self.stop = state, ms, threading.Event()
        self.e = entry("neighbour", "net1", other_ns, "mlx5_99", "0000:5f:00.0")
        self.ops = 0

    def run(self):
        name = os.path.join(self.state, "neighbour:net1.state")
        tmp = os.path.join(self.state, ".neighbour:net1.state.tmp")
        while not self.stop.wait(self.ms / 1000.0):
            if os.path.exists(name):
                os.unlink(name)
            else:
                with open(tmp, "w") as f:
                    json.dump(self.e, f)
                os.chmod(tmp, 0o600)
                os.rename(tmp, name)
            self.ops += 1


def run_sims(sims, bin_, work, node, script, results, tag, beside=None):
    """Each runtime runs `script` against a fresh plugin: per runtime (name, calls, p50, p99,
    max, steps that lost the plugin), or None when a script failed."""
    with open(os.path.join(work, f"{tag}-script.json"), "w") as f:
        json.dump(script, f)
    sock = os.path.join(work, "nri.sock")
    rows = []
    for name, sim in sims:
        out = os.path.join(work, f"{tag}-{name}.json")
        runtime = subprocess.Popen([sim, "--socket", sock, "--script", os.path.join(work, f"{tag}-script.json"),
                                    "--out", out], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        plugin = subprocess.Popen([bin_, "nri", "--node-config", node], stderr=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, env={})
        if beside:
            beside.start()
        try:
            runtime.wait(timeout=600)
        finally:
            if beside:
                beside.stop.set()
                beside.join()
            plugin.kill()
            plugin.wait()
        with open(out) as f:
            r = json.load(f)
        if not r.get("ok"):
            print(f"bench nri: {name}: the script failed: {[s.get('error') for s in r['steps'] if not s['ok']]}",
                  file=sys.stderr)
            return None
        ms = [c["ms"] for c in r["rpcs"] if c["method"].endswith("/CreateContainer")]
        dropped = [s for s in r["steps"] if "50-roce-tune" not in s["registered_after"]]
        rows.append((name, len(ms), pct(ms, 50), pct(ms, 99), max(ms), len(dropped)))
        with open(os.path.join(results, "raw", f"nri-{tag}-{name}.json"), "w") as f:
            json.dump(r, f)
        if beside:
            beside = Churn(beside.state, beside.e["netns"], beside.ms)
    return rows


def table(title, rows):
    text = [
        "",
        title,
        "",
        "| runtime | calls | p50 ms | p99 ms | max ms | steps that lost the plugin | target p99 < 5 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, n, p50, p99, mx, lost in rows:
        text.append(f"| {name} | {n} | {p50:.3f} | {p99:.3f} | {mx:.3f} | {lost} | {'met' if p99 < 5 else 'MISSED'} |")
    return text


def main():
    bin_, pod_ns, other_ns, state_base, results = sys.argv[1:6]
    sim_dir = os.environ.get("ROCE_TUNE_NRI_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "shared", "nri")
    sims = [("nri-sim-0.12", os.path.join(sim_dir, "bin", "nri-sim-0.12")),
            ("nri-sim-old", os.path.join(sim_dir, "bin", "nri-sim-old"))]
    if not all(os.access(p, os.X_OK) for _, p in sims):
        print(f"bench nri: SKIPPED: no nri-sim in {sim_dir} (set ROCE_TUNE_NRI_DIR)", file=sys.stderr)
        return 0
    os.makedirs(os.path.join(results, "raw"), exist_ok=True)
    pod = {"id": "benchpod0", "name": "bench-0", "namespace": "bench", "uid": "uid-bench",
           "netns": pod_ns, "annotations": {"roce-tune.io/nccl-env": "true"}}
    text = []
    for case in CASES:
        dead = DEAD if case == "dead" else 0
        state = os.path.join(state_base, f"nri-state-{case}")
        make_state(state, pod_ns, other_ns, dead)
        work = tempfile.mkdtemp(prefix="roce-bench-nri.", dir=state_base)
        node = os.path.join(work, "node.json")
        with open(node, "w") as f:
            json.dump({"stateDir": state, "nriSocket": os.path.join(work, "nri.sock")}, f)
        os.chmod(node, 0o644)
        script = [{"wait_plugins": ["roce-tune"], "timeout_ms": 10000}, {"run_pod": pod}]
        if case == "live":
            script += [{"create_container": {"id": f"c{i}", "pod_id": "benchpod0", "name": f"c{i}",
                                             "env": ["PATH=/bin"]}} for i in range(CONTAINERS)]
            rows = run_sims(sims, bin_, work, node, script, results, "live")
            title = (f"## NRI CreateContainer ({LIVE} live entries, {POD_RAILS} of them the pod's; "
                     "the runtime's own timing)")
        else:
            for i in range(DEAD_CALLS):
                script += [{"create_container": {"id": f"c{i}", "pod_id": "benchpod0", "name": f"c{i}",
                                                 "env": ["PATH=/bin"]}},
                           {"sleep_ms": DEAD_GAP_MS}]
            churn = Churn(state, other_ns, CHURN_MS)
            rows = run_sims(sims, bin_, work, node, script, results, "dead", beside=churn)
            title = (f"## NRI CreateContainer on a busy node of orphans ({DEAD} dead and {LIVE} live "
                     f"entries, a neighbour's rail added or deleted every {CHURN_MS} ms; the runtime's "
                     "own timing)")
        if rows is None:
            return 1
        text += table(title, rows)
    out = "\n".join(text) + "\n"
    print(out)
    with open(os.path.join(results, "latest.md"), "a") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
