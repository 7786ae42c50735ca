#!/usr/bin/env python3
"""bench/nri.py: how fast `roce-tune-agent nri` answers CreateContainer, on the runtime's own clock.

Run by bench/bench.sh after harness.py (root; it needs ../shared/nri's nri-sim, and says so
when it is absent). A node with BENCH_NRI_LIVE (128) live state entries: 4 are the rails of
the pod whose containers are created (its netns is the bench pod's), the others belong to
another live pod (a netns of their own). nri-sim (containerd's own NRI adaptation, v0.12.2 and
v0.11.0) runs RunPodSandbox for the annotated pod, then BENCH_NRI_CONTAINERS (500)
CreateContainer calls; its result records each call's duration as the runtime timed it
(`rpcs[].ms`: from sending the request to reading the answer). The target: the 99th percentile
under 5 ms (issue 26). Prints a markdown section and appends it to BENCH_RESULTS/latest.md.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

LIVE = int(os.environ.get("BENCH_NRI_LIVE", "128"))
CONTAINERS = int(os.environ.get("BENCH_NRI_CONTAINERS", "500"))
POD_RAILS = 4


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


def main():
    bin_, pod_ns, other_ns, state_base, results = sys.argv[1:6]
    sim_dir = os.environ.get("ROCE_TUNE_NRI_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "shared", "nri")
    sims = [("nri-sim-0.12", os.path.join(sim_dir, "bin", "nri-sim-0.12")),
            ("nri-sim-old", os.path.join(sim_dir, "bin", "nri-sim-old"))]
    if not all(os.access(p, os.X_OK) for _, p in sims):
        print(f"bench nri: SKIPPED: no nri-sim in {sim_dir} (set ROCE_TUNE_NRI_DIR)", file=sys.stderr)
        return 0
    state = os.path.join(state_base, "nri-state")
    os.makedirs(os.path.join(state, "locks"), mode=0o700)
    os.chmod(state, 0o700)
    for i in range(LIVE):
        mine = i < POD_RAILS
        cid, ifname = ("benchpod0", f"net{i + 1}") if mine else (f"other{i // 8}", f"net{i % 8 + 1}")
        e = entry(cid, ifname, pod_ns if mine else other_ns, f"mlx5_{i}", "0000:5e:%02x.%d" % (i // 8, i % 8))
        path = os.path.join(state, f"{cid}:{ifname}.state")
        with open(path, "w") as f:
            json.dump(e, f)
        os.chmod(path, 0o600)
    work = tempfile.mkdtemp(prefix="roce-bench-nri.", dir=state_base)
    sock = os.path.join(work, "nri.sock")
    node = os.path.join(work, "node.json")
    with open(node, "w") as f:
        json.dump({"stateDir": state, "nriSocket": sock}, f)
    os.chmod(node, 0o644)
    pod = {"id": "benchpod0", "name": "bench-0", "namespace": "bench", "uid": "uid-bench",
           "netns": pod_ns, "annotations": {"roce-tune.io/nccl-env": "true"}}
    script = [{"wait_plugins": ["roce-tune"], "timeout_ms": 10000}, {"run_pod": pod}]
    script += [{"create_container": {"id": f"c{i}", "pod_id": "benchpod0", "name": f"c{i}",
                                     "env": ["PATH=/bin"]}} for i in range(CONTAINERS)]
    with open(os.path.join(work, "script.json"), "w") as f:
        json.dump(script, f)
    rows = []
    for name, sim in sims:
        out = os.path.join(work, f"{name}.json")
        runtime = subprocess.Popen([sim, "--socket", sock, "--script", os.path.join(work, "script.json"),
                                    "--out", out], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        plugin = subprocess.Popen([bin_, "nri", "--node-config", node], stderr=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, env={})
        try:
            runtime.wait(timeout=600)
        finally:
            plugin.kill()
            plugin.wait()
        with open(out) as f:
            r = json.load(f)
        if not r.get("ok"):
            print(f"bench nri: {name}: the script failed: {[s.get('error') for s in r['steps'] if not s['ok']]}",
                  file=sys.stderr)
            return 1
        ms = [c["ms"] for c in r["rpcs"] if c["method"].endswith("/CreateContainer")]
        dropped = [s for s in r["steps"] if "50-roce-tune" not in s["registered_after"]]
        rows.append((name, len(ms), pct(ms, 50), pct(ms, 99), max(ms), len(dropped)))
        with open(os.path.join(results, "raw", f"nri-{name}.json"), "w") as f:
            json.dump(r, f)
    text = [
        "",
        f"## NRI CreateContainer ({LIVE} live entries, {POD_RAILS} of them the pod's; the runtime's own timing)",
        "",
        "| runtime | calls | p50 ms | p99 ms | max ms | steps that lost the plugin | target p99 < 5 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, n, p50, p99, mx, lost in rows:
        text.append(f"| {name} | {n} | {p50:.3f} | {p99:.3f} | {mx:.3f} | {lost} | {'met' if p99 < 5 else 'MISSED'} |")
    out = "\n".join(text) + "\n"
    print(out)
    with open(os.path.join(results, "latest.md"), "a") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
