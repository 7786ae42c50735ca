#!/usr/bin/env python3
"""integration/cni_runtime.py: a small, test-only CNI runtime for spec 1.1.0.

cnitool 1.1.2 (libcni 1.1.2, what Debian 12 ships) speaks up to 1.0.0; CRI-O and
containerd use libcni 1.3, which speaks 1.1.0. The e2e scenarios and the kernel lane
drive a 1.1.0 chain with this instead: it does what libcni does for a network
configuration list, step by step, each step next to the rule of the spec it follows
(containernetworking/cni SPEC.md, tag spec-v1.1.0; "S3 Adding an attachment" means
Section 3, subsection "Adding an attachment").

    cni_runtime.py ADD|CHECK|DEL <conflist> --netns PATH --ifname NAME --cid ID
    cni_runtime.py GC <conflist> --valid-attachments JSON
    cni_runtime.py STATUS <conflist>
    options: --cache DIR (results of ADD, for CHECK and DEL), --log FILE (every plugin's
             stdin, stdout and stderr, appended), --timeout SECONDS (per plugin, 60)

Plugins are looked up in CNI_PATH, which they also get. The rest of this process's
environment reaches them unchanged, as libcni passes its own (roce-tune reads
ROCE_TUNE_NODE_CONFIG from it).

Stdout is one JSON object, what the callers assert on (integration/lib.sh turns it into
RT_FAILED, PL_OUT, PL_RC, RT_RESULT, RT_OUTS, RT_SKIPPED):
    failed   types of the plugins that failed, in the order run (at most one, except GC)
    rc       exit status of the first that failed, 0 if none did
    error    stdout of the first that failed (the error object, with its code)
    result   ADD: the final result (what is cached)
    outputs  {type: stdout} of every plugin that succeeded
    skipped  types that were not run (GC, STATUS: the plugin does not speak 1.1.0)
The exit status is rc (2 for a usage error or a conflist this runtime cannot run).

Version bridging, the one thing here that is not in the spec: Debian's reference plugins
(host-device, sbr, static; libcni 1.1.2's skel) accept configs up to 1.0.0 and refuse
1.1.0. A runtime "MAY consider the set of supported plugin versions as reported by the
VERSION command" (S1 Version considerations); this one hands such a plugin 1.0.0 and a
prevResult without the 1.1.0 fields, and marks its result 1.1.0 again (the 1.1.0 fields
are all optional, so a 1.0.0 result is a valid 1.1.0 one). For the first plugin, the
interface plugin, it fills in interfaces[].mtu from the real link, as a 1.1.0 sriov-cni
would report it. roce-tune itself speaks 1.1.0 and always gets the list's version.

--cni-args and --capability-args give CNI_ARGS and the capability arguments, as Multus
hands them over (integration/lib.sh, multus_cni_args); runtimeConfig is inserted only into
the plugins that declare a capability (S3 Deriving runtimeConfig, libcni's
injectRuntimeConfig).

Left out, because no scenario needs it: what libcni adds on top of the spec (GC first DELs
the cached attachments missing from the valid list; here GC only sends GC, so a scenario
sees what the plugins' own GC does).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

# The versions this runtime can run a list in, oldest first.
VERSIONS = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]
# S5 ADD Success (1.1.0) against S5 Success (1.0.0): the fields 1.1.0 added, all optional.
NEW_IN_1_1_0 = {
    "interfaces": ("mtu", "socketPath", "pciID"),
    "routes": ("mtu", "advmss", "priority", "table", "scope"),
}


def ver(v):
    return tuple(int(p) for p in v.split("."))


class Runtime:
    def __init__(self, a):
        self.a = a
        self.path = os.environ.get("CNI_PATH", "")
        self.supported = {}  # plugin type -> the versions its VERSION reply lists
        self.failed, self.skipped, self.outputs = [], [], {}
        self.rc, self.error = 0, ""
        self.caps = json.loads(a.capability_args) if a.capability_args else {}
        with open(a.conflist) as f:
            self.conflist = json.load(f)
        self.name = self.conflist["name"]
        self.plugins = self.conflist["plugins"]
        self.version = self.select_version()

    # ------------------------------------------------------------ versions

    def select_version(self):
        # S1 Version considerations: "CNI runtimes MUST select the highest supported
        # version from the set of network configuration versions given by the cniVersion
        # and cniVersions fields."
        offered = [self.conflist.get("cniVersion")] + self.conflist.get("cniVersions", [])
        known = [v for v in offered if v in VERSIONS]
        if not known:
            usage(f"{self.a.conflist}: no cniVersion this runtime knows ({offered})")
        return max(known, key=ver)

    def plugin_versions(self, ptype, binary):
        # S2 VERSION: the input is {"cniVersion": <the version in use>}; the reply lists
        # supportedVersions.
        if ptype not in self.supported:
            p = subprocess.run([binary], input=json.dumps({"cniVersion": self.version}),
                               env=self.env("VERSION", "", "", ""), capture_output=True,
                               text=True, timeout=self.a.timeout)
            try:
                self.supported[ptype] = json.loads(p.stdout)["supportedVersions"]
            except (ValueError, KeyError, TypeError):
                self.supported[ptype] = []
            self.log(f"runtime: {ptype} VERSION lists {self.supported[ptype]}")
        return self.supported[ptype]

    def version_for(self, ptype, binary):
        """The version to hand plugin `ptype`: the list's, else the bridge (see the
        module's doc); None if the plugin cannot be run at all."""
        if self.version in self.plugin_versions(ptype, binary):
            return self.version
        if self.version == "1.1.0" and "1.0.0" in self.supported[ptype]:
            return "1.0.0"
        return None

    @staticmethod
    def downgrade(result, version):
        """A 1.1.0 result as a 1.0.0 plugin reads it: the 1.1.0 fields dropped."""
        r = json.loads(json.dumps(result))
        r["cniVersion"] = version
        if ver(version) < ver("1.1.0"):
            for key, fields in NEW_IN_1_1_0.items():
                for item in r.get(key) or []:
                    for f in fields:
                        item.pop(f, None)
        return r

    def add_mtu(self, result, netns):
        """interfaces[].mtu of a bridged interface plugin's result, from the links in the
        sandbox (S5 ADD Success: "mtu (uint) The MTU of the interface (if applicable)")."""
        for itf in result.get("interfaces") or []:
            if not netns or itf.get("sandbox") != netns:
                continue
            p = subprocess.run(["nsenter", f"--net={netns}", "ip", "-j", "link", "show",
                                "dev", itf["name"]], capture_output=True, text=True)
            try:
                itf["mtu"] = json.loads(p.stdout)[0]["mtu"]
            except (ValueError, IndexError, KeyError):
                self.log(f"runtime: no MTU for {itf['name']} in {netns}: {p.stderr.strip()}")
        return result

    # ------------------------------------------------------------ one plugin

    def find(self, ptype):
        # S3 Adding an attachment, step 1: "Look up the executable specified in the type
        # field. If this does not exist, then this is an error." (CNI_PATH, S2 Parameters)
        for d in self.path.split(":"):
            p = os.path.join(d, ptype)
            if d and os.access(p, os.X_OK):
                return p
        return None

    def env(self, command, cid, netns, ifname):
        # S2 Parameters: the six CNI_* variables. libcni sets all six for every command,
        # the unused ones empty; the rest of the environment passes through.
        e = dict(os.environ)
        e.update(CNI_COMMAND=command, CNI_CONTAINERID=cid, CNI_NETNS=netns,
                 CNI_IFNAME=ifname, CNI_ARGS=self.a.cni_args, CNI_PATH=self.path)
        return e

    def request(self, plugin, version, extra):
        # S3 Deriving request configuration from plugin configuration: the plugin's
        # configuration, with cniVersion and name inserted, "capabilities: must not be
        # set", keys prefixed cni.dev/ reserved to the runtime (S1 Plugin configuration
        # objects), every other field passed through unaltered.
        conf = {k: v for k, v in plugin.items()
                if k != "capabilities" and not k.startswith("cni.dev/")}
        conf.update(cniVersion=version, name=self.name)
        # S3 Deriving runtimeConfig: "for every capability the plugin declares (true), the
        # runtime inserts the matching capability argument" into runtimeConfig; libcni 1.1.2
        # (api.go, injectRuntimeConfig) replaces the key with that map when it is not empty,
        # and leaves a runtimeConfig the config carries itself when it is.
        declared = plugin.get("capabilities") or {}
        rc = {c: self.caps[c] for c, on in declared.items() if on and c in self.caps}
        if rc:
            conf["runtimeConfig"] = rc
        conf.update(extra)
        return conf

    def execute(self, command, plugin, cid, netns, ifname, extra, prev=None):
        """Run one plugin. Returns (ok, its result as the list's version or None)."""
        ptype = plugin["type"]
        binary = self.find(ptype)
        if binary is None:
            return self.fail(ptype, 127, f"plugin {ptype} not found in CNI_PATH {self.path}")
        version = self.version_for(ptype, binary)
        if version is None:
            return self.fail(ptype, 2, f"{ptype} supports none of {self.version}, 1.0.0")
        if command in ("GC", "STATUS") and version != self.version:
            # S2 CNI operations: GC and STATUS are 1.1.0's; a plugin that does not speak
            # 1.1.0 does not know them (libcni 1.1.2's skel answers "missing containerID").
            self.log(f"runtime: {command} not sent to {ptype}, which does not speak 1.1.0")
            self.skipped.append(ptype)
            return True, None
        if version != self.version:
            self.log(f"runtime: {ptype} does not speak {self.version}; bridging with {version}")
        if prev is not None:
            extra = dict(extra, prevResult=self.downgrade(prev, version))
        conf = json.dumps(self.request(plugin, version, extra))
        try:
            p = subprocess.run([binary], input=conf, env=self.env(command, cid, netns, ifname),
                               capture_output=True, text=True, timeout=self.a.timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = 124, e.stdout or "", f"killed after {self.a.timeout} s"
            out = out.decode() if isinstance(out, bytes) else out
        self.log(f"exec {ptype} {command} cid={cid} netns={netns} if={ifname}: rc={rc}",
                 ("in ", conf), ("out", out), ("err", err))
        if rc != 0:
            return self.fail(ptype, rc, out)
        self.outputs[ptype] = out
        if command != "ADD":
            return True, None
        result = json.loads(out)
        if version != self.version:
            result["cniVersion"] = self.version
            if plugin is self.plugins[0]:
                result = self.add_mtu(result, netns)
        return True, result

    def fail(self, ptype, rc, out):
        if not self.failed:
            self.rc, self.error = rc, out
        self.failed.append(ptype)
        return False, None

    # ------------------------------------------------------------ the list

    def cache_file(self):
        # S3 Adding an attachment: "The runtime must store the result returned by the final
        # plugin persistently, as it is required for check and delete operations." An
        # attachment is (CNI_CONTAINERID, CNI_IFNAME) (S3, its introduction), per network.
        return os.path.join(self.a.cache, f"{self.name}-{self.a.cid}-{self.a.ifname}.json")

    def cached(self):
        try:
            with open(self.cache_file()) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def add(self):
        # S3 Adding an attachment: every plugin in order; "If this is the first plugin in
        # the list, no previous result is provided", then "the previous result is the
        # result of the previous plugins" (prevResult "must not be set for the first add
        # in a chain", S3 Deriving request configuration); "If the plugin returns an
        # error, halt execution and return the error to the caller."
        prev = None
        for plugin in self.plugins:
            ok, prev = self.execute("ADD", plugin, self.a.cid, self.a.netns, self.a.ifname,
                                    {}, prev)
            if not ok:
                return None
        os.makedirs(self.a.cache, exist_ok=True)
        with open(self.cache_file(), "w") as f:
            json.dump(prev, f)
        return prev

    def check(self):
        # S3 Checking an attachment: like add, but "the previous result provided is always
        # the final result of the add operation", and "If the network configuration
        # defines disableCheck, then always return success to the caller." S2 CHECK exists
        # from 0.4.0 on.
        if self.conflist.get("disableCheck") or ver(self.version) < ver("0.4.0"):
            self.log("runtime: CHECK not run (disableCheck, or a version before 0.4.0)")
            return
        prev = self.cached()
        for plugin in self.plugins:
            ok, _ = self.execute("CHECK", plugin, self.a.cid, self.a.netns, self.a.ifname,
                                 {}, prev)
            if not ok:
                return

    def delete(self):
        # S3 Deleting an attachment: the plugins "in reverse order", "the previous result
        # provided is always the final result of the add operation" (none when there was
        # no ADD), halt at the first error. libcni drops the cached result once every
        # plugin succeeded (so did S2 DEL of spec 0.4.0: "it must delete that cached
        # response on a successful DEL").
        prev = self.cached()
        for plugin in reversed(self.plugins):
            ok, _ = self.execute("DEL", plugin, self.a.cid, self.a.netns, self.a.ifname,
                                 {}, prev)
            if not ok:
                return
        try:
            os.remove(self.cache_file())
        except FileNotFoundError:
            pass

    def gc(self):
        # S3 Garbage-collecting a network: no attachment parameters; every plugin gets the
        # request configuration plus cni.dev/valid-attachments (S2 GC); "If the plugin
        # returns an error, continue with execution, returning all errors to the caller."
        # S1 Configuration format: "If disableGC is true, runtimes must not call GC".
        if self.conflist.get("disableGC") or ver(self.version) < ver("1.1.0"):
            self.log("runtime: GC not run (disableGC, or a version before 1.1.0)")
            return
        valid = json.loads(self.a.valid_attachments)
        for plugin in self.plugins:
            self.execute("GC", plugin, "", "", "", {"cni.dev/valid-attachments": valid})

    def status(self):
        # S2 STATUS: every plugin is asked whether it can service ADD. S3 gives no list
        # procedure; libcni 1.2 asks the plugins in order and stops at the first error.
        if ver(self.version) < ver("1.1.0"):
            self.log("runtime: STATUS not run (a version before 1.1.0)")
            return
        for plugin in self.plugins:
            ok, _ = self.execute("STATUS", plugin, "", "", "", {})
            if not ok:
                return

    # ------------------------------------------------------------ report

    def log(self, line, *blocks):
        if not self.a.log:
            return
        now = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
        with open(self.a.log, "a") as f:
            f.write(f"[{now}] {line}\n")
            for tag, text in blocks:
                for t in text.splitlines():
                    f.write(f"    {tag}| {t}\n")


def usage(msg):
    print(f"cni_runtime: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["ADD", "CHECK", "DEL", "GC", "STATUS"])
    ap.add_argument("conflist")
    ap.add_argument("--netns", default="")
    ap.add_argument("--ifname", default="")
    ap.add_argument("--cid", default="")
    ap.add_argument("--valid-attachments", default=None)
    ap.add_argument("--cache", default="/var/lib/cni/roce-tune-test-runtime")
    ap.add_argument("--log", default=None)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--cni-args", default="", help="CNI_ARGS for every plugin")
    ap.add_argument("--capability-args", default="",
                    help="capability arguments (JSON object), as CAP_ARGS for cnitool")
    a = ap.parse_args()
    if a.command in ("ADD", "CHECK", "DEL") and not (a.cid and a.ifname):
        usage(f"{a.command} needs --cid and --ifname (--netns may be empty on DEL)")
    if a.command == "GC" and a.valid_attachments is None:
        usage("GC needs --valid-attachments (a JSON list, [] for none)")
    rt = Runtime(a)
    result = None
    if a.command == "ADD":
        result = rt.add()
    else:
        {"CHECK": rt.check, "DEL": rt.delete, "GC": rt.gc, "STATUS": rt.status}[a.command]()
    if rt.failed:
        rt.log(f"runtime: {a.command} failed at {', '.join(rt.failed)} (rc {rt.rc})")
    json.dump({"failed": rt.failed, "rc": rt.rc, "error": rt.error, "result": result,
               "outputs": rt.outputs, "skipped": rt.skipped}, sys.stdout)
    print()
    sys.exit(rt.rc)


if __name__ == "__main__":
    main()
