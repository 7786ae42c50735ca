#!/usr/bin/env python3
"""bench/harness.py: the timing harness behind `make bench` (called by bench/bench.sh,
which prepares the netns and veths and removes them afterwards).

Every timed run is one process, started the way a runtime starts a plugin: posix_spawn
(vfork+exec) with the CNI_* environment, the config on stdin, stdout to a file. The time
is spawn -> reaped exit (perf_counter_ns, CLOCK_MONOTONIC). The single-process cases run
in rounds, one run of each case per round in a shuffled order, so machine drift (2 shared
cores) hits every case alike; the ratios are also taken per round (paired). Peak RSS is
measured in separate interleaved rounds through GNU time (see rss_run for why not wait4).

Fairness: before every ADD the six sysctls are put back to values that differ from the
targets (a fresh pod), so both plugins really write all six; a full ADD is followed by
its DEL in the same round, so every ADD is a first ADD and every DEL has a restore to do.

With --baseline, a second roce-tune binary runs the roce-tune cases in the same rounds
and the report adds per-round A-B differences: how a fix is measured on a noisy machine.

With --fake-kubelet (a python with grpcio: integration/.build/venv-grpc/bin/python), the
placement check is measured too, on a second tree whose 16 rails are VFs of a PCI tree with
8 GPUs (GpuNode): the 16-rail pod's ADDs with `placementCheck: warn` against the fake kubelet
(integration/fake_kubelet) and the same ADDs with `off`, in the same rounds (row 6), and an
ADD against a kubelet that never stops sending (the fake's --flood kinds, row 7).
"""

import argparse
import atexit
import ctypes
import gc
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)

RAIL_TARGET = [  # docs/design.md, "The sysctls", in the order of the seed's tuning config
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.{if}.arp_announce", "2"),
    ("net.ipv4.conf.{if}.arp_filter", "1"),
    ("net.ipv4.conf.{if}.arp_ignore", "1"),
    ("net.ipv4.conf.{if}.rp_filter", "0"),
    ("net.ipv4.conf.{if}.accept_local", "1"),
]
# A fresh pod's values, chosen to differ from every target.
FRESH = {"rp_filter": "1", "arp_announce": "0", "arp_filter": "0", "arp_ignore": "0",
         "accept_local": "0"}
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
CONTAINER = "benchpod0"
# CNI_ARGS as Multus 4.2 in thin mode passes them (its five pairs, then the
# runtime's again; integration/lib.sh multus_cni_args): the pod's identity,
# so the placement check asks the kubelet, whose socket this machine lacks.
_POD = ("K8S_POD_NAMESPACE=bench;K8S_POD_NAME=bench-0;"
        f"K8S_POD_INFRA_CONTAINER_ID={CONTAINER};K8S_POD_UID=6f1b7d8e-1c2a-4b3c-8d4e-5f6a7b8c9d0e")
CNI_ARGS = f"IgnoreUnknown=true;{_POD};IgnoreUnknown=1;{_POD}"
TC = 41
# The PF of every VF of the tree (its `physfn`), whose net/ holds `lo`.
PF_PCI = "0000:3a:00.0"


def die(msg):
    print(f"bench: ERROR: {msg}", file=sys.stderr)
    sys.exit(1)


def setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


def v4_gid(ip):
    o = [int(p) for p in ip.split(".")]
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(o)


def sysctl_path(key):
    return "/proc/sys/" + key.replace(".", "/")


def rail_sysctls(ifname):
    return [(k.replace("{if}", ifname), v) for k, v in RAIL_TARGET]


def pod_veths(ns, rails, tag, addr):
    """`rails` veth pairs, the pod's end of each moved into `ns`, renamed net<i>, up, with
    addr(i)/24; the netns's deletion takes both ends."""
    def batch(cmd, text):
        subprocess.run(cmd, input=text, check=True, text=True, stdout=subprocess.DEVNULL)
    batch(["ip", "-batch", "-"], "".join(f"link add {tag}h{i} type veth peer name {tag}p{i}\n"
                                         f"link set {tag}p{i} netns {ns}\n"
                                         for i in range(1, rails + 1)))
    batch(["ip", "-n", ns, "-batch", "-"], "".join(f"link set {tag}p{i} name net{i}\n"
                                                   f"link set net{i} up\n"
                                                   f"addr add {addr(i)}/24 dev net{i}\n"
                                                   for i in range(1, rails + 1)))


# ---------------------------------------------------------------- statistics

def pct(xs, p):
    """Linear-interpolated percentile (p in 0..100) of a non-empty list."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(ns_list):
    ms = [x / 1e6 for x in ns_list]
    med = statistics.median(ms)
    return {
        "runs": len(ms),
        "median_ms": med,
        "p10_ms": pct(ms, 10),
        "p90_ms": pct(ms, 90),
        "mad_ms": statistics.median([abs(x - med) for x in ms]),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "mean_ms": statistics.fmean(ms),
    }


# ---------------------------------------------------------------- the bench

class Bench:
    def __init__(self, a):
        self.a = a
        self.gpu = None
        self.nspath = a.netns
        self.work = a.work
        self.ns_fd = os.open(self.nspath, os.O_RDONLY)
        self.host_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        self.out = os.path.join(self.work, "stdout")
        self.err = os.path.join(self.work, "stderr")
        self.tree = os.path.join(self.work, "sys")
        self.state = os.path.join(a.state_base, "state")
        self.crowded = os.path.join(a.state_base, "state-crowded")
        self.node = {}      # config file -> the node config it runs with
        self.samples = {}   # case -> [ns]
        self.rss_kib = {}   # case -> [KiB]
        self.paired = {}    # "x/tuning" -> [ratio], "A-B:case" -> [ns], per round
        self.extra = {}
        self.make_tree()
        self.make_configs()
        self.make_crowd()
        self.empty = self.make_empty()
        self.nolibc = self.make_nolibc()
        if a.fake_kubelet:
            self.gpu = GpuNode(self)

    # -- the kernel's part: a sysfs test tree (docs/design.md, "Test trees")
    def pci(self, i):
        return "0000:3b:%02x.0" % i

    def dev(self, i):
        return f"mlx5_{i}"

    def addr(self, i):
        return f"10.10.{i}.2"

    def devdir(self, i):
        return os.path.join(self.tree, "class/infiniband", self.dev(i))

    def write(self, path, text):
        with open(path, "w") as f:
            f.write(text)

    def set_gid(self, i, index, gid, typ):
        d = self.devdir(i)
        self.write(f"{d}/ports/1/gid_attrs/types/{index}", typ + "\n" if typ else "")
        self.write(f"{d}/ports/1/gids/{index}", gid + "\n")

    def make_tree(self):
        os.makedirs(f"{self.tree}/module/ib_core/parameters")
        self.write(f"{self.tree}/module/ib_core/parameters/netns_mode", "Y\n")
        # The kernel's answer from inside the pod: net<i> is the netdev of the VF
        # (docs/design.md, "Test trees": <root>/netns/<inode>/class/net/<if>/device).
        ino = os.stat(self.nspath).st_ino
        for i in range(1, self.a.rails + 1):
            os.makedirs(f"{self.tree}/bus/pci/devices/{self.pci(i)}/infiniband/{self.dev(i)}")
            net = f"{self.tree}/netns/{ino}/class/net/net{i}"
            os.makedirs(net)
            os.symlink(f"../../../../../bus/pci/devices/{self.pci(i)}", f"{net}/device")
            d = self.devdir(i)
            for sub in ("tc/1", "ports/1/gids", "ports/1/gid_attrs/types",
                        "ports/1/gid_attrs/ndevs"):
                os.makedirs(f"{d}/{sub}")
            self.write(f"{d}/tc/1/traffic_class", "")
            os.symlink(f"../../../bus/pci/devices/{self.pci(i)}", f"{d}/device")
            self.write(f"{d}/node_guid", "506b:4b03:00f3:%04x\n" % i)
            for g in range(8):
                self.set_gid(i, g, ZERO_GID, "")
            ll = "fe80:0000:0000:0000:8cca:d1ff:fed4:%04x" % i
            self.set_gid(i, 0, ll, "IB/RoCE v1")
            self.set_gid(i, 1, ll, "RoCE v2")
            self.set_gid(i, 2, v4_gid(self.addr(i)), "IB/RoCE v1")
            self.set_gid(i, 3, v4_gid(self.addr(i)), "RoCE v2")
            # Every VF's PF (`physfn`) shows `lo` under its net/: a netdev of the host's netns
            # without DCB, so each ADD's QoS step (qosCheck warn, the default) makes its real
            # RTM_GETDCB exchange (EOPNOTSUPP) as on a node whose NICs have no DCB.
            os.symlink(f"../{PF_PCI}", f"{self.tree}/bus/pci/devices/{self.pci(i)}/physfn")
        os.makedirs(f"{self.tree}/bus/pci/devices/{PF_PCI}/net/lo")

    def tc(self, i):
        with open(f"{self.devdir(i)}/tc/1/traffic_class") as f:
            return f.read().strip()

    # -- configs
    def prev(self, i):
        return {"cniVersion": "1.0.0",
                "interfaces": [{"name": f"net{i}", "mac": "8e:ca:d1:d4:64:%02x" % i,
                                "sandbox": self.nspath}],
                "ips": [{"address": f"{self.addr(i)}/24", "interface": 0}],
                "dns": {}}

    def cfg(self, name, obj, state=None, node=None):
        """A network config file; with `state`, also the node config naming the test
        tree and that state dir (roce-tune takes host paths from the node only), and the
        node keys of `node`."""
        p = os.path.join(self.work, f"{name}.json")
        with open(p, "w") as f:
            json.dump(obj, f)
        if state:
            n = os.path.join(self.work, f"{name}.node.json")
            with open(n, "w") as f:
                json.dump({"sysfsRoot": self.tree, "stateDir": state, **(node or {})}, f)
            os.chmod(n, 0o644)
            self.node[p] = n
        return p

    def make_configs(self):
        six = lambda i: dict(rail_sysctls(f"net{i}"))
        base = {"cniVersion": "1.0.0", "name": "b"}   # what every config of the bench shares
        self.c_tuning = {}
        self.c_full = {}
        for i in range(1, self.a.rails + 1):
            self.c_tuning[i] = self.cfg(f"tuning{i}", {**base, "type": "tuning",
                                                      "sysctl": six(i), "prevResult": self.prev(i)})
            self.c_full[i] = self.cfg(f"full{i}", {
                **base, "type": "roce-tune", "sysctl": six(i), "trafficClass": TC,
                "deviceID": self.pci(i), "pciBusID": self.pci(i),
                "prevResult": self.prev(i)}, self.state)
        self.c_sysctl = self.cfg("sysctl1", {
            **base, "type": "roce-tune", "sysctl": six(1), "gidCheck": "off",
            "prevResult": self.prev(1)}, self.state)
        full = json.load(open(self.c_full[1]))
        self.c_full_disk = self.cfg("full1-disk", full, self.a.disk_state)
        self.c_full_crowded = self.cfg("full1-crowded", full, self.crowded)
        self.c_full_qos_off = self.cfg("full1-qosoff", full, self.state, {"qosCheck": "off"})
        self.c_late = self.cfg("late1", {**full, "gidTimeoutMs": 3000}, self.state)
        self.c_version = self.cfg("version", {"cniVersion": "1.0.0"})

    def make_crowd(self):
        """A state dir that already holds the entries of other live pods on other
        devices (their netns exists, so none is an orphan): what every ADD and DEL
        reads while it scans for co-owners and orphans."""
        os.makedirs(os.path.join(self.crowded, "locks"))
        os.chmod(self.crowded, 0o700)
        os.chmod(os.path.join(self.crowded, "locks"), 0o700)
        for pod in range(self.a.crowd // 8 + (1 if self.a.crowd % 8 else 0)):
            for r in range(8):
                if pod * 8 + r >= self.a.crowd:
                    break
                st = os.stat(self.nspath)
                e = {"version": 2, "network": "b", "containerId": f"otherpod{pod}",
                     "ifname": f"net{r + 1}", "netns": self.nspath,
                     "netnsId": {"dev": st.st_dev, "ino": st.st_ino},
                     "exclusive": False, "device": f"mlx5_{100 + pod * 8 + r}", "port": 1,
                     "pci": "0000:5e:%02x.%d" % (pod % 32, r), "guid": None,
                     "trafficClass": {"original": None, "written": TC}, "rdmaCmTos": None,
                     "createdNs": (1700000000 + pod) * 10**9}
                path = os.path.join(self.crowded, f"otherpod{pod}:net{r + 1}.state")
                with open(path, "w") as f:
                    json.dump(e, f, indent=2)
                os.chmod(path, 0o600)

    def make_empty(self):
        """An empty static C program: this machine's floor for spawn + exec + exit."""
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            return None
        src = os.path.join(self.work, "empty.c")
        exe = os.path.join(self.work, "empty")
        self.write(src, "int main(void) { return 0; }\n")
        r = subprocess.run([cc, "-O2", "-static", "-o", exe, src], capture_output=True)
        return exe if r.returncode == 0 else None

    def make_nolibc(self):
        """A static program without a C library (x86-64: its _start is exit(0)): the
        kernel's spawn + exec + exit alone. Less than the empty C program's time by what
        glibc's static start-up costs every process here, roce-tune's too: its CPU
        feature and cache probes are CPUID instructions, each a trap to the hypervisor
        on a VM (docs/performance.md, "What is left")."""
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc or platform.machine() != "x86_64":
            return None
        src = os.path.join(self.work, "nolibc.c")
        exe = os.path.join(self.work, "nolibc")
        self.write(src, 'void _start(void) { __asm__ volatile('
                        '"mov $60, %eax\\n xor %edi, %edi\\n syscall"); }\n')
        r = subprocess.run([cc, "-O2", "-static", "-nostdlib", "-o", exe, src],
                           capture_output=True)
        return exe if r.returncode == 0 else None

    # -- sysctls of the pod (set from this process, entering the netns briefly)
    def in_pod(self, fn):
        setns(self.ns_fd)
        try:
            return fn()
        finally:
            setns(self.host_fd)

    def reset_sysctls(self, rails):
        def go():
            for i in rails:
                for k, _ in rail_sysctls(f"net{i}"):
                    leaf = k.rsplit(".", 1)[1]
                    with open(sysctl_path(k), "w") as f:
                        f.write(FRESH[leaf])
        self.in_pod(go)

    def read_sysctls(self, i):
        def go():
            return {k: open(sysctl_path(k)).read().strip() for k, _ in rail_sysctls(f"net{i}")}
        return self.in_pod(go)

    def assert_sysctls(self, i, who):
        got = self.read_sysctls(i)
        want = dict(rail_sysctls(f"net{i}"))
        if got != want:
            die(f"{who} did not set the sysctls of net{i}: {got}")

    # -- one plugin process
    def env(self, command, i=1, cfg=None):
        e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command,
             "CNI_CONTAINERID": CONTAINER, "CNI_NETNS": self.nspath,
             "CNI_IFNAME": f"net{i}", "CNI_ARGS": CNI_ARGS, "CNI_PATH": "/usr/lib/cni"}
        if cfg in self.node:
            e["ROCE_TUNE_NODE_CONFIG"] = self.node[cfg]
        return e

    def spawn(self, binary, command, cfg, i=1):
        fa = [(os.POSIX_SPAWN_OPEN, 0, cfg, os.O_RDONLY, 0),
              (os.POSIX_SPAWN_OPEN, 1, self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
              (os.POSIX_SPAWN_OPEN, 2, self.err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
        return os.posix_spawn(binary, [binary], self.env(command, i, cfg), file_actions=fa)

    @staticmethod
    def entries(sd):
        # Entries only: the first request makes the tally (src/tally.rs) and
        # the lock dir, which stay for the agent by design.
        if not os.path.isdir(sd):
            return 0
        return sum(1 for n in os.listdir(sd) if n.endswith(".state"))

    def run(self, binary, command, cfg, i=1):
        """Elapsed ns, spawn to reaped exit; dies on a failed run."""
        t0 = time.perf_counter_ns()
        pid = self.spawn(binary, command, cfg, i)
        _, status = os.waitpid(pid, 0)
        t1 = time.perf_counter_ns()
        self.check(status, binary, command, cfg)
        return t1 - t0

    def rss_run(self, binary, command, cfg, i=1):
        """Peak RSS (KiB) of one run, from GNU time. Not wait4 here: posix_spawn is a
        vfork, and at exec the kernel folds the OLD mm's high-water mark (this 17 MB
        Python's) into the child's ru_maxrss. GNU time forks from a small process, so
        what it reports is the plugin's own peak (floor: ~0.5 MiB for an empty static
        C program)."""
        rssf = os.path.join(self.work, "rss")
        argv = ["/usr/bin/time", "-f", "%M", "-o", rssf, binary]
        fa = [(os.POSIX_SPAWN_OPEN, 0, cfg, os.O_RDONLY, 0),
              (os.POSIX_SPAWN_OPEN, 1, self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
              (os.POSIX_SPAWN_OPEN, 2, self.err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
        pid = os.posix_spawn(argv[0], argv, self.env(command, i, cfg), file_actions=fa)
        _, status = os.waitpid(pid, 0)
        self.check(status, binary, command, cfg)
        return int(open(rssf).read().split()[-1])

    def check(self, status, binary, command, cfg):
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            out = open(self.out).read()
            err = open(self.err).read()
            die(f"{binary} {command} < {cfg} exited {code}\nstdout: {out}\nstderr: {err}")

    def record(self, case, t):
        self.samples.setdefault(case, []).append(t)

    # -- cases; each returns {case: ns}
    def case_tuning(self):
        self.reset_sysctls([1])
        return {"tuning": self.run(self.a.tuning, "ADD", self.c_tuning[1])}

    # `base` runs the same case with the --baseline binary (A/B of two roce-tune builds);
    # its samples are recorded as "B:<case>".
    def case_sysctl(self, base=False):
        self.reset_sysctls([1])
        b, pre = (self.a.baseline, "B:") if base else (self.a.bin, "")
        return {pre + "roce-sysctl": self.run(b, "ADD", self.c_sysctl)}

    def case_full(self, cfg=None, suffix="", base=False):
        cfg = cfg or self.c_full[1]
        b, pre = (self.a.baseline, "B:") if base else (self.a.bin, "")
        self.reset_sysctls([1])
        add = self.run(b, "ADD", cfg)
        dele = self.run(b, "DEL", cfg)
        return {pre + "roce-full" + suffix: add, pre + "roce-del" + suffix: dele}

    def case_full_disk(self):
        return self.case_full(self.c_full_disk, "-disk")

    def case_full_qos_off(self):
        return self.case_full(self.c_full_qos_off, "-qosoff")

    def case_full_crowded(self, base=False):
        return self.case_full(self.c_full_crowded, "-crowded", base)

    def case_tuning_version(self):
        return {"tuning-version": self.run(self.a.tuning, "VERSION", self.c_version)}

    def case_roce_version(self, base=False):
        b, pre = (self.a.baseline, "B:") if base else (self.a.bin, "")
        return {pre + "roce-version": self.run(b, "VERSION", self.c_version)}

    def case_empty(self):
        return {"empty-c": self.run(self.empty, "VERSION", self.c_version)}

    def case_nolibc(self):
        return {"nolibc": self.run(self.nolibc, "VERSION", self.c_version)}

    def verify_once(self):
        """Each case does what it claims, before anything is timed."""
        self.reset_sysctls([1])
        self.run(self.a.tuning, "ADD", self.c_tuning[1])
        self.assert_sysctls(1, "tuning")
        self.reset_sysctls([1])
        self.run(self.a.bin, "ADD", self.c_sysctl)
        out = json.load(open(self.out))
        if out.get("ips", [{}])[0].get("address") != f"{self.addr(1)}/24":
            die(f"roce-tune ADD did not pass prevResult on: {out}")
        self.assert_sysctls(1, "roce-tune (sysctls only)")
        for cfg, sd in ((self.c_full[1], self.state), (self.c_full_disk, self.a.disk_state),
                        (self.c_full_crowded, self.crowded)):
            before = self.entries(sd)
            self.reset_sysctls([1])
            self.run(self.a.bin, "ADD", cfg)
            self.assert_sysctls(1, "roce-tune (full)")
            if self.tc(1) not in ("tclass=41", "41"):
                die(f"full ADD left traffic_class {self.tc(1)!r}, expected tclass=41")
            if not os.path.exists(os.path.join(sd, f"{CONTAINER}:net1.state")):
                die(f"full ADD left no state entry in {sd}")
            self.run(self.a.bin, "DEL", cfg)
            if self.tc(1) not in ("tclass=-1", ""):
                die(f"DEL left traffic_class {self.tc(1)!r}, expected the unset original")
            if os.path.exists(os.path.join(sd, f"{CONTAINER}:net1.state")):
                die("DEL left its state entry behind")
            after = self.entries(sd)
            if after != before:
                die(f"{sd}: {before} state entries before ADD+DEL, {after} after")
        # The QoS step asks the PF (`lo`: no DCB) with qosCheck warn, and not with off.
        for cfg, asked in ((self.c_full[1], True), (self.c_full_qos_off, False)):
            self.reset_sysctls([1])
            self.run(self.a.bin, "ADD", cfg)
            said = "QoS of the rails on PF lo" in open(self.err).read()
            self.run(self.a.bin, "DEL", cfg)
            if said != asked:
                die(f"ADD with {cfg}: the PF was {'not ' if asked else ''}asked for its DCB")
        # A GID check that fails must fail: the GID check really runs.
        self.set_gid(1, 3, ZERO_GID, "")
        bad = self.cfg("full1-bad", {**json.load(open(self.c_full[1])), "gidTimeoutMs": 0},
                       self.state)
        self.reset_sysctls([1])
        pid = self.spawn(self.a.bin, "ADD", bad)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
            die("ADD passed with no GID at index 3: the GID check did not run")
        self.set_gid(1, 3, v4_gid(self.addr(1)), "RoCE v2")

    # -- 1-4 (and the floors): interleaved rounds
    def single(self):
        cases = [self.case_tuning, self.case_sysctl, self.case_full, self.case_full_disk,
                 self.case_full_crowded, self.case_full_qos_off, self.case_tuning_version,
                 self.case_roce_version]
        if self.empty:
            cases.append(self.case_empty)
        if self.nolibc:
            cases.append(self.case_nolibc)
        if self.a.baseline:
            cases += [lambda: self.case_sysctl(base=True), lambda: self.case_full(base=True),
                      lambda: self.case_full_crowded(base=True),
                      lambda: self.case_roce_version(base=True)]
        rng = random.Random(6)
        for _ in range(self.a.warmup):
            for c in rng.sample(cases, len(cases)):
                c()
        pairs = {"sysctl/tuning": [], "full/tuning": [], "del/tuning": [], "qos warn/off": []}
        for _ in range(self.a.runs):
            got = {}
            for c in rng.sample(cases, len(cases)):
                got.update(c())
            for case, t in got.items():
                self.record(case, t)
            tun = got["tuning"]
            pairs["sysctl/tuning"].append(got["roce-sysctl"] / tun)
            pairs["full/tuning"].append(got["roce-full"] / tun)
            pairs["del/tuning"].append(got["roce-del"] / tun)
            pairs["qos warn/off"].append(got["roce-full"] / got["roce-full-qosoff"])
            for k in list(got):
                if k.startswith("B:"):
                    pairs.setdefault("A-B:" + k[2:], []).append(got[k[2:]] - got[k])
        self.paired.update(pairs)

    # -- 5: a 16-rail pod
    def rail_pod_roce(self, rss=False, base=False):
        """16 sequential full ADDs (timed together), then the 16 DELs (untimed).
        With rss: no timing, the peak RSS of the 16 ADDs."""
        binary = self.a.baseline if base else self.a.bin
        allr = list(range(1, self.a.rails + 1))
        self.reset_sysctls(allr)
        for i in allr:
            self.write(f"{self.devdir(i)}/tc/1/traffic_class", "")
        each, peak = [], 0
        t0 = time.perf_counter_ns()
        for i in allr:
            if rss:
                peak = max(peak, self.rss_run(binary, "ADD", self.c_full[i], i))
            else:
                each.append(self.run(binary, "ADD", self.c_full[i], i))
        total = time.perf_counter_ns() - t0
        for i in reversed(allr):
            self.run(binary, "DEL", self.c_full[i], i)
        return peak if rss else (total, each)

    def rail_pod_tuning(self, rss=False):
        allr = list(range(1, self.a.rails + 1))
        self.reset_sysctls(allr)
        peak = 0
        t0 = time.perf_counter_ns()
        for i in allr:
            if rss:
                peak = max(peak, self.rss_run(self.a.tuning, "ADD", self.c_tuning[i], i))
            else:
                self.run(self.a.tuning, "ADD", self.c_tuning[i], i)
        return peak if rss else time.perf_counter_ns() - t0

    def rails(self):
        allr = list(range(1, self.a.rails + 1))
        per_rail = {i: [] for i in allr}
        rng = random.Random(16)
        for _ in range(max(2, self.a.warmup // 5)):
            self.rail_pod_roce()
            self.rail_pod_tuning()
        for i in allr:
            self.assert_sysctls(i, "16-rail `tuning`")
            if self.tc(i) not in ("tclass=-1", ""):
                die(f"16-rail DEL left {self.dev(i)} at {self.tc(i)!r}")
        kinds = ["roce", "tuning"] + (["base"] if self.a.baseline else [])
        for _ in range(self.a.rail_rounds):
            got = {}
            for kind in rng.sample(kinds, len(kinds)):
                if kind == "roce":
                    total, each = self.rail_pod_roce()
                    got["rails16-roce"] = total
                    for i, t in zip(allr, each):
                        per_rail[i].append(t)
                elif kind == "base":
                    got["B:rails16-roce"] = self.rail_pod_roce(base=True)[0]
                else:
                    got["rails16-tuning"] = self.rail_pod_tuning()
            for k, t in got.items():
                self.record(k, t)
            if "B:rails16-roce" in got:
                self.paired.setdefault("A-B:rails16-roce", []).append(
                    got["rails16-roce"] - got["B:rails16-roce"])
        self.extra["rails16_per_rail_median_ms"] = {
            f"net{i}": statistics.median(per_rail[i]) / 1e6 for i in allr}

    # -- peak RSS, through GNU time (see rss_run), interleaved rounds
    def rss(self):
        def add(case, binary, cfg):
            def go():
                self.reset_sysctls([1])
                return {case: self.rss_run(binary, "ADD", cfg)}
            return go

        def full(cfg, suffix):
            def go():
                self.reset_sysctls([1])
                a = self.rss_run(self.a.bin, "ADD", cfg)
                d = self.rss_run(self.a.bin, "DEL", cfg)
                return {"roce-full" + suffix: a, "roce-del" + suffix: d}
            return go

        def version(case, binary):
            return lambda: {case: self.rss_run(binary, "VERSION", self.c_version)}

        cases = [add("tuning", self.a.tuning, self.c_tuning[1]),
                 add("roce-sysctl", self.a.bin, self.c_sysctl),
                 full(self.c_full[1], ""), full(self.c_full_disk, "-disk"),
                 full(self.c_full_crowded, "-crowded"),
                 version("tuning-version", self.a.tuning),
                 version("roce-version", self.a.bin),
                 lambda: {"rails16-roce": self.rail_pod_roce(rss=True)},
                 lambda: {"rails16-tuning": self.rail_pod_tuning(rss=True)}]
        if self.empty:
            cases.append(version("empty-c", self.empty))
        rng = random.Random(7)
        for _ in range(self.a.rss_rounds):
            for c in rng.sample(cases, len(cases)):
                for case, kib in c().items():
                    self.rss_kib.setdefault(case, []).append(kib)

    # -- the late GID: reaction from the write to ADD's exit
    def late(self):
        if self.a.late <= 0:
            return
        react = []
        rng = random.Random(3)
        for _ in range(self.a.late):
            self.set_gid(1, 3, ZERO_GID, "")
            self.reset_sysctls([1])
            pid = self.spawn(self.a.bin, "ADD", self.c_late)
            time.sleep(0.2 + rng.random() / 1000)
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                die("ADD exited before the GID was written: the GID check did not wait")
            d = self.devdir(1)
            # The type first, then the GID: the entry is complete when the GID lands.
            self.write(f"{d}/ports/1/gid_attrs/types/3", "RoCE v2\n")
            self.write(f"{d}/ports/1/gids/3", v4_gid(self.addr(1)) + "\n")
            tw = time.perf_counter_ns()
            _, status, _ = os.wait4(pid, 0)
            te = time.perf_counter_ns()
            self.check(status, self.a.bin, "ADD", self.c_late)
            react.append(te - tw)
            self.run(self.a.bin, "DEL", self.c_late)
        self.set_gid(1, 3, v4_gid(self.addr(1)), "RoCE v2")
        self.samples["late-gid"] = react

    # -- hyperfine in short alternating batches: a cross-check of the harness
    def hyperfine(self, raw):
        """Debian's hyperfine 1.15 has no --input (stdin), so each command runs as
        `sh -c 'exec PLUGIN <cfg'` under -N: no shell-spawn correction (hyperfine says it
        cannot calibrate below 5 ms), and the same wrapper around an empty program gives
        the floor to subtract. The sh wrapper costs every command alike."""
        reset = os.path.join(self.work, "reset.sh")
        with open(reset, "w") as f:
            for k, _ in rail_sysctls("net1"):
                f.write(f"echo {FRESH[k.rsplit('.', 1)[1]]} > {sysctl_path(k)}\n")
        prep_reset = f"nsenter --net={self.nspath} sh {reset}"
        b, full, sc, tun = self.a.bin, self.c_full[1], self.c_sysctl, self.c_tuning[1]
        q = ">/dev/null 2>&1"
        sh = lambda cmd: f"sh -c '{cmd}'"
        cmds = [
            ("tuning", sh(prep_reset), sh(f"exec {self.a.tuning} <{tun} {q}")),
            ("roce-sysctl", sh(prep_reset), sh(f"exec {b} <{sc} {q}")),
            ("roce-full", sh(f"{prep_reset}; CNI_COMMAND=DEL {b} <{full} {q}"),
             sh(f"exec {b} <{full} {q}")),
            ("roce-del", sh(f"{b} <{full} {q}"), sh(f"CNI_COMMAND=DEL exec {b} <{full} {q}")),
            ("floor", sh(":"), sh(f"exec {self.empty or '/bin/true'} {q}")),
        ]
        env = {**os.environ, **self.env("ADD", 1, full)}
        times = {c[0]: [] for c in cmds}
        rng = random.Random(9)
        files = []
        for k in range(self.a.hf_batches):
            order = rng.sample(cmds, len(cmds))
            path = os.path.join(raw, f"hyperfine-batch{k}.json")
            argv = ["hyperfine", "-N", "--style=none", "--warmup", "3",
                    "--runs", str(self.a.hf_runs), "--export-json", path]
            for _, prep, _ in order:
                argv += ["--prepare", prep]
            argv += [c for _, _, c in order]
            r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                die(f"hyperfine failed:\n{r.stderr}")
            data = json.load(open(path))
            for (name, _, _), res in zip(order, data["results"]):
                times[name] += [t * 1e9 for t in res["times"]]
            files.append(os.path.basename(path))
        self.run(self.a.bin, "DEL", full)   # the last roce-del prepare left an ADD
        return {name: summary(ts) for name, ts in times.items()}, files


# ---------------------------------------------------------------- the placement rows

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration",
                    "fake_kubelet", "fake_kubelet.py")
# fake_kubelet.py's FLOODS: each an endless run of frames RFC 9113 allows.
FLOODS = ["informational", "unknown", "window-update", "ping", "settings", "priority", "padding"]
POD_UID = "6f1b7d8e-1c2a-4b3c-8d4e-5f6a7b8c9d0e"


class GpuNode:
    """A second sysfs tree (docs/design.md, "Test trees") for the placement rows: 4 PCIe
    roots, one NUMA node each, each a root port and a switch (its upstream port and four
    downstream ports) above 2 GPUs (NVIDIA A100, class 0x0302) and 2 dual-port NICs (mlx5,
    one VF per port): 8 GPUs and 16 ports, 64 PCI functions, every bus/pci/devices entry the
    link into devices/ the kernel makes. The pod's net<i> is the VF of port i; the pod holds
    all 8 GPUs and the 16 VFs (a whole-node pod, clean: one info line per ADD). The NVIDIA
    proc stand-in maps each GPU's UUID; the fake kubelet lists the pod's devices."""

    def __init__(self, bench):
        self.b = b = bench
        self.root = os.path.join(b.work, "sys-gpu")
        self.proc = os.path.join(b.work, "nvidia-gpus")
        self.state = os.path.join(b.a.state_base, "state-gpu")
        self.rails = {}     # i -> (vf bdf, rdma device)
        self.each = {}      # (binary, warn) -> [[ns of ADD 1..16] per round]
        self.gpus = []      # (bdf, uuid)
        self.build()
        self.sock = os.path.join(b.work, "kubelet.sock")
        self.calls = os.path.join(b.work, "kubelet-calls")
        self.fake = self.serve([], self.sock)
        # A bench that dies (die() exits) leaves no fake kubelet behind.
        atexit.register(self.close)
        self.c_warn, self.c_off = {}, {}
        for i in range(1, b.a.rails + 1):
            vf, _ = self.rails[i]
            conf = {"cniVersion": "1.0.0", "name": "b", "type": "roce-tune",
                    "sysctl": dict(rail_sysctls(f"net{i}")), "trafficClass": TC,
                    "deviceID": vf, "pciBusID": vf, "prevResult": b.prev(i)}
            self.c_warn[i] = self.cfg(f"gpu-warn{i}", conf)
            self.c_off[i] = self.cfg(f"gpu-off{i}", {**conf, "placementCheck": "off"})

    def cfg(self, name, obj, sock=None, extra=None):
        p = os.path.join(self.b.work, f"{name}.json")
        with open(p, "w") as f:
            json.dump(obj, f)
        n = os.path.join(self.b.work, f"{name}.node.json")
        with open(n, "w") as f:
            json.dump({"sysfsRoot": self.root, "stateDir": self.state,
                       "nvidiaGpusDir": self.proc, "podResourcesSocket": sock or self.sock,
                       "podResourcesCheckpoint": None, **(extra or {})}, f)
        os.chmod(n, 0o644)
        self.b.node[p] = n
        return p

    def function(self, chain, ids, numa):
        rel = os.path.join("devices", *chain)
        d = os.path.join(self.root, rel)
        os.makedirs(d)
        for name, v in zip(("class", "vendor", "device", "subsystem_vendor",
                            "subsystem_device"), ids):
            self.b.write(os.path.join(d, name), v + "\n")
        self.b.write(os.path.join(d, "numa_node"), f"{numa}\n")
        self.b.write(os.path.join(d, "max_link_speed"), "16.0 GT/s PCIe\n")
        self.b.write(os.path.join(d, "max_link_width"), "16\n")
        os.symlink(os.path.join("../../..", rel),
                   os.path.join(self.root, "bus/pci/devices", chain[-1]))
        return d

    def build(self):
        b = self.b
        bridge = ("0x060400", "0x1000", "0xc010", "0x1000", "0xa096")
        a100 = ("0x030200", "0x10de", "0x20b2", "0x10de", "0x1463")
        pf_ids = ("0x020000", "0x15b3", "0x101d", "0x15b3", "0x0016")
        vf_ids = ("0x020000", "0x15b3", "0x101e", "0x15b3", "0x0016")
        os.makedirs(os.path.join(self.root, "bus/pci/devices"))
        os.makedirs(os.path.join(self.root, "module/ib_core/parameters"))
        b.write(os.path.join(self.root, "module/ib_core/parameters/netns_mode"), "Y\n")
        os.makedirs(self.proc)
        ino = os.stat(b.nspath).st_ino
        port, minor = 0, 0
        vfs = []
        for r in range(4):
            h = r * 0x40
            host, rp, up = f"pci0000:{h:02x}", f"0000:{h:02x}:01.0", f"0000:{h + 1:02x}:00.0"
            self.function([host, rp], bridge, r)
            self.function([host, rp, up], bridge, r)
            for k in range(4):
                down = f"0000:{h + 2:02x}:{k:02x}.0"
                at = [host, rp, up, down]
                self.function(at, bridge, r)
                bus = h + 3 + k
                if k < 2:
                    g = f"0000:{bus:02x}:00.0"
                    self.function(at + [g], a100, r)
                    uuid = f"GPU-{bus:02x}a100b4-4b08-4000-8000-0000000000{bus:02x}"
                    self.gpus.append((g, uuid))
                    os.makedirs(os.path.join(self.proc, g))
                    b.write(os.path.join(self.proc, g, "information"),
                            f"Model: \t\t NVIDIA A100-SXM4-80GB\nGPU UUID: \t {uuid}\n"
                            f"Bus Location: \t {g}\nDevice Minor: \t {minor}\n")
                    minor += 1
                    continue
                for p in range(2):
                    pf = f"0000:{bus:02x}:00.{p}"
                    vf = f"0000:{bus:02x}:00.{p + 2}"
                    pdir = self.function(at + [pf], pf_ids, r)
                    os.makedirs(os.path.join(pdir, "infiniband", f"mlx5_{port}"))
                    vdir = self.function(at + [vf], vf_ids, r)
                    os.symlink(f"../{pf}", os.path.join(vdir, "physfn"))
                    os.symlink(f"../{vf}", os.path.join(pdir, "virtfn0"))
                    port += 1
                    vfs.append((vdir, vf))
        for i, (vdir, vf) in enumerate(vfs, start=1):
            dev = f"mlx5_{16 + i - 1}"
            os.makedirs(os.path.join(vdir, "infiniband", dev))
            self.rails[i] = (vf, dev)
            d = os.path.join(self.root, "class/infiniband", dev)
            for sub in ("tc/1", "ports/1/gids", "ports/1/gid_attrs/types"):
                os.makedirs(os.path.join(d, sub))
            b.write(os.path.join(d, "tc/1/traffic_class"), "")
            os.symlink(f"../../../bus/pci/devices/{vf}", os.path.join(d, "device"))
            b.write(os.path.join(d, "node_guid"), "506b:4b03:00f4:%04x\n" % i)
            ll = "fe80:0000:0000:0000:8cca:d1ff:fed5:%04x" % i
            gids = [(ll, "IB/RoCE v1"), (ll, "RoCE v2"), (v4_gid(b.addr(i)), "IB/RoCE v1"),
                    (v4_gid(b.addr(i)), "RoCE v2")]
            for g, (gid, typ) in enumerate(gids):
                b.write(os.path.join(d, f"ports/1/gid_attrs/types/{g}"), typ + "\n")
                b.write(os.path.join(d, f"ports/1/gids/{g}"), gid + "\n")
            net = os.path.join(self.root, f"netns/{ino}/class/net/net{i}")
            os.makedirs(net)
            os.symlink(f"../../../../../bus/pci/devices/{vf}", os.path.join(net, "device"))

    def pods(self):
        gpu_ids = [u for _, u in self.gpus]
        vf_ids = [self.rails[i][0] for i in sorted(self.rails)]
        return {"pods": [{"name": "bench-0", "namespace": "bench", "containers": [
            {"name": "main", "devices": [{"resource": "nvidia.com/gpu", "ids": gpu_ids},
                                         {"resource": "nvidia.com/rdma_vf", "ids": vf_ids}]}]}]}

    def serve(self, flags, sock):
        pods = os.path.join(self.b.work, "kubelet-pods.json")
        with open(pods, "w") as f:
            json.dump(self.pods(), f)
        p = subprocess.Popen([self.b.a.fake_kubelet, FAKE, "--socket", sock, "--pods", pods,
                              "--calls", self.calls, *flags], stdout=subprocess.PIPE,
                             env={**os.environ, "FAKE_KUBELET_LIFETIME_S": "7200"})
        line = p.stdout.readline().decode()
        if not line.startswith("listening "):
            die(f"fake kubelet {flags} did not start: {line!r}")
        return p

    def stop(self, p):
        p.terminate()
        p.wait(timeout=10)

    def calls_made(self):
        try:
            with open(self.calls) as f:
                return len(f.read().splitlines())
        except FileNotFoundError:
            return 0

    def pod(self, binary, warn):
        """The 16-rail pod's ADDs (timed together), then its DELs (untimed, releasing the
        pod's kubelet answer with the last rail)."""
        b = self.b
        allr = list(range(1, b.a.rails + 1))
        confs = self.c_warn if warn else self.c_off
        b.reset_sysctls(allr)
        for i in allr:
            b.write(os.path.join(self.root, "class/infiniband", self.rails[i][1],
                                 "tc/1/traffic_class"), "")
        each = []
        t0 = time.perf_counter_ns()
        for i in allr:
            each.append(b.run(binary, "ADD", confs[i], i))
        total = time.perf_counter_ns() - t0
        for i in reversed(allr):
            b.run(binary, "DEL", confs[i], i)
        self.each.setdefault((binary, warn), []).append(each)
        return total

    def verify(self):
        """The warn ADDs judge the pod (one info verdict line each) with one kubelet call;
        the off ADDs ask nothing."""
        b = self.b
        before = self.calls_made()
        self.pod(b.a.bin, warn=True)
        if self.calls_made() - before != 1:
            die(f"the 16-rail pod made {self.calls_made() - before} kubelet calls, not 1")
        b.reset_sysctls([3])
        b.run(b.a.bin, "ADD", self.c_warn[3], 3)
        err = open(b.err).read()
        if " info " not in err or "placement: rail net3" not in err \
                or "every GPU has its share" not in err:
            die(f"the warn ADD did not judge the pod: {err}")
        b.run(b.a.bin, "DEL", self.c_warn[3], 3)
        before = self.calls_made()
        self.pod(b.a.bin, warn=False)
        if self.calls_made() != before:
            die("placementCheck off asked the kubelet")

    def rounds(self):
        b = self.b
        self.verify()
        kinds = [("rails16-warn", b.a.bin, True), ("rails16-off", b.a.bin, False)]
        if b.a.baseline:
            kinds += [("B:rails16-warn", b.a.baseline, True),
                      ("B:rails16-off", b.a.baseline, False)]
        rng = random.Random(61)
        for _ in range(max(2, b.a.warmup // 5)):
            for _, binary, warn in kinds:
                self.pod(binary, warn)
        ratios = []
        for _ in range(b.a.rail_rounds):
            got = {}
            for case, binary, warn in rng.sample(kinds, len(kinds)):
                got[case] = self.pod(binary, warn)
            for k, t in got.items():
                b.record(k, t)
            ratios.append(got["rails16-warn"] / got["rails16-off"])
            for k in ("rails16-warn", "rails16-off"):
                if "B:" + k in got:
                    b.paired.setdefault("A-B:" + k, []).append(got[k] - got["B:" + k])
        b.paired["warn/off"] = ratios
        # Each ADD's median by its place: the first rail asks and judges, the others read.
        for warn in (True, False):
            rows = self.each[(b.a.bin, warn)][-b.a.rail_rounds:]
            b.extra["rails16_%s_per_rail_median_ms" % ("warn" if warn else "off")] = [
                statistics.median(r[i] for r in rows) / 1e6 for i in range(len(rows[0]))]

    def hostile(self):
        """One ADD of rail 1 with placementCheck warn and podResourcesTimeoutMs 250 against
        each --flood kind, `late` times each (its DEL untimed): the longest is the figure."""
        b = self.b
        sock = os.path.join(b.work, "hostile.sock")
        conf = {"cniVersion": "1.0.0", "name": "b", "type": "roce-tune",
                "sysctl": dict(rail_sysctls("net1")), "trafficClass": TC,
                "deviceID": self.rails[1][0], "prevResult": b.prev(1)}
        cfg = self.cfg("hostile1", conf, sock=sock, extra={"podResourcesTimeoutMs": 250})
        worst = {}
        for kind in FLOODS:
            if os.path.exists(sock):
                os.unlink(sock)
            p = self.serve(["--flood", kind], sock)
            try:
                for _ in range(max(5, b.a.late)):
                    b.reset_sysctls([1])
                    t = b.run(b.a.bin, "ADD", cfg, 1)
                    if "placement check skipped" not in open(b.err).read():
                        die(f"--flood {kind}: the ADD did not skip the check")
                    b.record("hostile", t)
                    worst[kind] = max(worst.get(kind, 0), t)
                    b.run(b.a.bin, "DEL", cfg, 1)
            finally:
                self.stop(p)
        b.extra["hostile_max_ms"] = {k: v / 1e6 for k, v in worst.items()}

    def close(self):
        if self.fake.poll() is None:
            self.stop(self.fake)



def machine(load_start):
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = next((l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")), "?")
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
            "mem_gib": round(int(mem) / 1048576, 1) if mem != "?" else "?",
            "loadavg_start": load_start,
            "loadavg_end": " ".join(open("/proc/loadavg").read().split()[:3])}


def versions(a):
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, shell=True,
                                  cwd=a.repo).stdout.strip()
        except OSError:
            return "?"
    head = sh("git rev-parse --short HEAD")
    dirty = sh("git status --porcelain --untracked-files=no -- src Cargo.toml Cargo.lock")
    return {"roce_tune": f"{head}{' + uncommitted src changes' if dirty else ''}",
            "tuning": sh("dpkg-query -W -f='${Version}' containernetworking-plugins")
            or "?",
            "hyperfine": sh("hyperfine --version") or "-",
            "python": platform.python_version()}


def fmt(s, rss=None):
    r = "-" if not rss else f"{statistics.median(rss):.0f} ({max(rss)})"
    return (f"{s['median_ms']:.3f} | {s['p10_ms']:.3f}–{s['p90_ms']:.3f} | "
            f"±{s['mad_ms']:.3f} | {s['runs']} | {r}")


ROWS = [
    ("1. `tuning` ADD, the 6 sysctls", "tuning"),
    ("2. roce-tune ADD, the same 6 sysctls only (gidCheck off)", "roce-sysctl"),
    ("3. roce-tune ADD full: sysctls + trafficClass 41 + GID check (deviceID; state dir "
     "on tmpfs, like a node's /run)", "roce-full"),
    ("4. roce-tune DEL with restore (each right after its own ADD, the run of case 3)",
     "roce-del"),
    ("3b. = 3 with the state dir on ext4 (/var/tmp): fsync cost", "roce-full-disk"),
    ("4b. = 4 with the state dir on ext4", "roce-del-disk"),
    ("3c. = 3 with {crowd} other live attachments in the state dir", "roce-full-crowded"),
    ("3q. = 3 with `qosCheck: off` (3 has the default, warn: it asks the VF's PF, `lo` here, "
     "for its DCB and gets EOPNOTSUPP)", "roce-full-qosoff"),
    ("4c. = 4 with {crowd} other live attachments in the state dir", "roce-del-crowded"),
    ("5. 16-rail pod: 16 sequential roce-tune full ADDs, total", "rails16-roce"),
    ("5r. reference: 16 sequential `tuning` ADDs (sysctls only), total", "rails16-tuning"),
    ("6. 16-rail pod, `placementCheck: warn` against the fake kubelet (8 GPUs, one kubelet "
     "call, one judgement), 16 ADDs, total", "rails16-warn"),
    ("6o. the same 16 ADDs with `placementCheck: off`", "rails16-off"),
    ("7. ADD against a kubelet that never stops sending (each --flood kind), "
     "`podResourcesTimeoutMs: 250`", "hostile"),
    ("floor: `tuning` VERSION (process start + exit)", "tuning-version"),
    ("floor: roce-tune VERSION (process start + exit)", "roce-version"),
    ("floor: empty static C program (this machine's spawn + exec + exit)", "empty-c"),
    ("floor: a static program without a C library (the kernel's spawn + exec + exit alone)",
     "nolibc"),
]


def report(a, b, res):
    S = {k: summary(v) for k, v in b.samples.items() if v}
    R = b.rss_kib
    m, ver = res["machine"], res["versions"]
    size_r = os.path.getsize(a.bin)
    size_t = os.path.getsize(a.tuning)
    L = ["| case | median ms | p10–p90 ms | ±MAD ms | runs | peak RSS KiB, median (max) |",
         "|---|---:|---:|---:|---:|---:|"]
    for label, k in ROWS:
        label = label.replace("{crowd}", str(a.crowd))
        if k in S:
            L.append(f"| {label} | {fmt(S[k], R.get(k))} |")
    late = S.get("late-gid")
    if late:
        L.append(f"| late GID: from the GID's write to ADD's exit | {fmt(late)} |")

    def pr(name):
        xs = b.paired[name]
        return statistics.median(xs), pct(xs, 10), pct(xs, 90)

    med = lambda k: S[k]["median_ms"]
    r_sys, r_full, r_del = pr("sysctl/tuning"), pr("full/tuning"), pr("del/tuning")
    ratio_full = med("roce-full") / med("tuning")
    roce_keys = [k for k in R if k.startswith("roce-") or k == "rails16-roce"] or ["-"]
    rss_roce = max(max(R.get(k, [0])) for k in roce_keys)
    rss_roce_key = max(roce_keys, key=lambda k: max(R.get(k, [0])))
    rss_tuning = min(R.get("tuning", [0]))
    late_max = late["max_ms"] if late else float("nan")
    targets = [
        ("full ADD at most ½ the wall time of `tuning` (which does less)",
         f"{ratio_full:.2f}× (medians; paired per round {r_full[0]:.2f}×, p90 {r_full[2]:.2f}×)",
         ratio_full <= 0.5 and r_full[0] <= 0.5),
        ("peak RSS no higher than `tuning`'s",
         f"roce-tune {rss_roce} KiB at most (any case; {rss_roce_key}) vs `tuning` "
         f"{rss_tuning} KiB at least", rss_roce <= rss_tuning),
        ("binary smaller than `tuning`'s", f"{size_r:,} vs {size_t:,} bytes "
         f"({size_r / size_t:.0%})", size_r < size_t),
        ("late GID noticed within 10 ms", f"median {late['median_ms']:.2f} ms, max "
         f"{late_max:.2f} ms ({late['runs']} trials)" if late else "-",
         late is not None and late_max <= 10.0),
    ]
    def at_most(label, on, off, paired, limit):
        """A target: case `on` at most `limit` times case `off`, medians and per round."""
        if on in S and off in S:
            p = pr(paired)
            ratio = med(on) / med(off)
            targets.append((label, f"{ratio:.2f}× (medians; paired per round {p[0]:.2f}×, "
                            f"p10–p90 {p[1]:.2f}–{p[2]:.2f}×)", ratio <= limit and p[0] <= limit))

    at_most("ADD with `qosCheck: warn` at most 1.1× `off`", "roce-full", "roce-full-qosoff",
            "qos warn/off", 1.1)
    at_most("16-rail pod with `placementCheck: warn` at most 1.2× `off`", "rails16-warn",
            "rails16-off", "warn/off", 1.2)
    if "hostile" in S:
        worst = b.extra["hostile_max_ms"]
        top = max(worst, key=worst.get)
        targets.append(("ADD with a hostile kubelet within podResourcesTimeoutMs + 50 ms "
                        "(300 ms)", f"longest {worst[top]:.1f} ms ({top}); median "
                        f"{S['hostile']['median_ms']:.1f} ms over {S['hostile']['runs']} ADDs",
                        worst[top] <= 300.0))
    out = ["# roce-tune benchmark (`make bench`)", "",
           f"Measured {res['date']} with `{res['command']}` (as root), in {res['elapsed_s']} s.", "",
           f"Machine: {m['nproc']} vCPU ({m['cpu']}), {m['mem_gib']} GiB, Linux {m['kernel']}; "
           f"loadavg {m['loadavg_start']} at the start, {m['loadavg_end']} at the end. The 2 "
           "cores are shared with other engineers' builds and tests: absolute figures "
           "drift with their load, the interleaved ratios much less.", "",
           f"Versions: roce-tune {ver['roce_tune']} (static-pie, stripped, `make release`); "
           f"`tuning` from Debian containernetworking-plugins {ver['tuning']} (Go, dynamic); "
           f"{ver['hyperfine']}; Python {ver['python']}.", "",
           "Method: each run is one plugin process started as a runtime starts it "
           "(posix_spawn, the six CNI_* variables, config on stdin, stdout to a file), "
           "timed from spawn to reaped exit with CLOCK_MONOTONIC. The single-process cases "
           f"run in {S['tuning']['runs']} rounds after {a.warmup} warm-up rounds, one run "
           "of each case per round in a shuffled order. Before every ADD the six sysctls "
           "are set to non-target values (a fresh pod: both plugins write all six). Each "
           "full ADD is followed by its DEL in the same round, so every ADD is a first ADD "
           "(original unset, no state entry) and every DEL has a class to restore. One pod "
           "netns with net1..net16 (veths, 10.10.<i>.2/24) and one sysfs test tree "
           "(docs/design.md, Test trees: 16 devices, deviceID, RoCE v2 GID at index 3, on tmpfs) are "
           "prepared once. Peak RSS comes from GNU time (`-f %M`) in "
           f"{a.rss_rounds} separate interleaved rounds (not from the harness's wait4: a "
           "posix_spawn child inherits the Python parent's RSS high-water mark at exec).",
           "",
           "\n".join(L), "",
           "Ratios roce-tune / `tuning` (paired per round: median, p10–p90; then the "
           "ratio of the medians):", "",
           f"- 2 / 1, sysctls only: {r_sys[0]:.2f}× ({r_sys[1]:.2f}–{r_sys[2]:.2f}); "
           f"medians {med('roce-sysctl') / med('tuning'):.2f}×",
           f"- 3 / 1, full ADD: {r_full[0]:.2f}× ({r_full[1]:.2f}–{r_full[2]:.2f}); "
           f"medians {ratio_full:.2f}×",
           f"- 4 / 1, DEL vs `tuning` ADD: {r_del[0]:.2f}× ({r_del[1]:.2f}–{r_del[2]:.2f}); "
           f"medians {med('roce-del') / med('tuning'):.2f}×"]
    if "rails16-roce" in S:
        out.append(f"- 5 / 5r, 16 rails: {med('rails16-roce') / med('rails16-tuning'):.2f}× "
                   f"(16 full ADDs vs 16 sysctl-only `tuning` ADDs); "
                   f"{med('rails16-roce') / a.rails:.3f} ms per ADD")
    if "roce-version" in S:
        fl = med("roce-version")
        out.append("")
        out.append(f"Work above roce-tune's own process floor ({fl:.3f} ms): sysctls only "
                   f"{med('roce-sysctl') - fl:+.3f} ms, full ADD {med('roce-full') - fl:+.3f} ms, "
                   f"DEL {med('roce-del') - fl:+.3f} ms. `tuning`'s floor is "
                   f"{med('tuning-version'):.3f} ms and its ADD "
                   f"{med('tuning') - med('tuning-version'):+.3f} ms from it: the Go runtime's "
                   "start (several threads) is most of `tuning`'s time, and it suffers most "
                   "when the other core is busy.")
        if "empty-c" in S and "nolibc" in S:
            out.append("")
            out.append(f"glibc's static start-up costs every process here "
                       f"{med('empty-c') - med('nolibc'):.3f} ms (the empty C program less "
                       f"one without a C library, {med('nolibc'):.3f} ms): its CPU feature "
                       "and cache probes are CPUID instructions, each a trap to the "
                       "hypervisor on a VM. roce-tune pays it as the empty program does; "
                       "`tuning`'s dynamic loader runs the same probes.")
    out.append("")
    pr16 = b.extra.get("rails16_per_rail_median_ms")
    if pr16:
        vals = list(pr16.values())
        out.append("16-rail pod, median time of each ADD by its place in the sequence "
                   "(ms, net1..net16; ADD k finds k-1 entries of its own pod in the state "
                   "dir): " + ", ".join(f"{v:.3f}" for v in vals) + ".")
        out.append("")
    out.append(f"Binary size: roce-tune {size_r:,} bytes (static, stripped) vs `tuning` "
               f"{size_t:,} bytes (dynamically linked Go, stripped): {size_r / size_t:.0%}.")
    out.append("")
    if late:
        out.append(f"Late GID ({late['runs']} trials): ADD starts with index 3 unused; "
                   "~200 ms later the harness writes the type then the GID, and times "
                   "from the end of that write to ADD's exit: median "
                   f"{late['median_ms']:.2f} ms, p90 {late['p90_ms']:.2f} ms, max "
                   f"{late_max:.2f} ms.")
        out.append("")
    hf = res.get("hyperfine")
    if hf:
        fl_h = hf["floor"]["median_ms"]
        fl_e = S["empty-c"]["median_ms"] if "empty-c" in S else None
        out.append(f"hyperfine cross-check ({a.hf_batches} batches × {a.hf_runs} runs, "
                   "the order of the commands shuffled per batch, warm-up 3). Debian's "
                   "hyperfine 1.15 has no `--input`, so each command is `hyperfine -N "
                   "\"sh -c 'exec PLUGIN <config'\"`; the same wrapper around the empty "
                   "program is the floor, and the last column compares work above the "
                   "floor with the harness's (median minus the empty program's median):")
        out.append("")
        out.append("| case | hyperfine median ms | p10–p90 ms | runs | above floor: hyperfine / harness ms |")
        out.append("|---|---:|---:|---:|---:|")
        for k in ("tuning", "roce-sysctl", "roce-full", "roce-del", "floor"):
            s = hf[k]
            above = "-"
            if k != "floor" and fl_e is not None:
                above = f"{s['median_ms'] - fl_h:.3f} / {med(k) - fl_e:.3f}"
            label = "floor (wrapper + empty program)" if k == "floor" else k
            out.append(f"| {label} | {s['median_ms']:.3f} | {s['p10_ms']:.3f}–{s['p90_ms']:.3f} "
                       f"| {s['runs']} | {above} |")
        out.append("")
    ab = [k[4:] for k in b.paired if k.startswith("A-B:")]
    if ab:
        out.append(f"A/B against the baseline binary {a.baseline} (same rounds, "
                   "interleaved; A = the binary under test). The difference is taken per "
                   "round, so drift cancels:")
        out.append("")
        out.append("| case | A median ms | B median ms | A − B per round: median (p10–p90) ms | A / B |")
        out.append("|---|---:|---:|---:|---:|")
        for k in ab:
            d = [x / 1e6 for x in b.paired["A-B:" + k]]
            out.append(f"| {k} | {med(k):.3f} | {med('B:' + k):.3f} | "
                       f"{statistics.median(d):+.3f} ({pct(d, 10):+.3f}–{pct(d, 90):+.3f}) | "
                       f"{med(k) / med('B:' + k):.2f}× |")
        out.append("")
    out.append("Targets (set when `make bench` was introduced):")
    out.append("")
    out.append("| target | measured | |")
    out.append("|---|---|---|")
    for name, what, ok in targets:
        out.append(f"| {name} | {what} | {'met' if ok else '**not met**'} |")
    out.append("")
    out.append("Raw samples: bench/results/raw/harness.json (+ hyperfine-batch*.json).")
    return "\n".join(out) + "\n", {"summary": S,
                                   "targets": [{"target": n, "measured": w, "met": ok}
                                               for n, w, ok in targets],
                                   "sizes": {"roce-tune": size_r, "tuning": size_t}}


def main():
    p = argparse.ArgumentParser()
    for opt in ("bin", "tuning", "netns", "work", "state-base", "disk-state", "load-start", "results",
                "repo"):
        p.add_argument(f"--{opt}", required=True)
    for opt, d in (("rails", 16), ("runs", 1000), ("warmup", 50), ("rail-rounds", 100),
                   ("late", 30), ("rss-rounds", 20), ("crowd", 128), ("hyperfine", 1),
                   ("hf-batches", 4), ("hf-runs", 40)):
        p.add_argument(f"--{opt}", type=int, default=d)
    p.add_argument("--command", default="make bench")
    p.add_argument("--baseline", default="", help="another roce-tune binary to A/B against")
    p.add_argument("--fake-kubelet", default="",
                   help="a python with grpcio: the placement rows (6, 7) against the fake kubelet")
    a = p.parse_args()
    if not os.path.exists("/usr/bin/time"):
        die("/usr/bin/time (Debian package time) is needed for peak RSS")
    raw = os.path.join(a.results, "raw")
    os.makedirs(raw, exist_ok=True)
    for old in os.listdir(raw):   # raw/ holds the latest run only
        if old.startswith("hyperfine-batch") or old == "harness.json":
            os.remove(os.path.join(raw, old))
    t_start = time.monotonic()
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": a.command, "versions": versions(a),
           "settings": {k: getattr(a, k) for k in ("runs", "warmup", "rail_rounds", "late",
                                                   "rss_rounds", "crowd", "hf_batches",
                                                   "hf_runs", "rails")}}
    b = Bench(a)
    phases = [("verify", b.verify_once), ("cases 1-4 + floors", b.single),
              ("16-rail pod", b.rails), ("late GID", b.late), ("peak RSS", b.rss)]
    if b.gpu:
        phases += [("16-rail pod, placement warn and off", b.gpu.rounds),
                   ("hostile kubelet", b.gpu.hostile)]
    if a.hyperfine:
        phases.append(("hyperfine cross-check", lambda: res.update(
            zip(("hyperfine", "hyperfine_files"), b.hyperfine(raw)))))
    only = [p for p in os.environ.get("BENCH_PHASES", "").split(",") if p]
    for name, fn in phases:
        if only and name != "verify" and not any(o in name for o in only):
            continue
        t = time.monotonic()
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        gc.disable()
        fn()
        gc.enable()
        print(f"bench: {name} done in {time.monotonic() - t:.1f} s", file=sys.stderr,
              flush=True)
    if only:
        # Some phases only (BENCH_PHASES, while working on one): their figures, no report.
        for k, v in sorted(b.samples.items()):
            print(f"{k}: {fmt(summary(v))}")
        for k, v in b.paired.items():
            print(f"paired {k}: median {statistics.median(v):.3f}")
        print(json.dumps(b.extra, indent=1))
        return
    res["machine"] = machine(a.load_start)
    res["elapsed_s"] = round(time.monotonic() - t_start, 1)
    md, extra = report(a, b, res)
    res.update(extra)
    res["samples_ns"] = b.samples
    res["rss_kib"] = b.rss_kib
    res["paired_ratios"] = b.paired
    res["extra"] = b.extra
    with open(os.path.join(raw, "harness.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(a.results, "latest.md"), "w") as f:
        f.write(md)
    print(md)
    print(f"bench: wrote {os.path.join(a.results, 'latest.md')} and {raw}/", file=sys.stderr)


if __name__ == "__main__":
    main()
