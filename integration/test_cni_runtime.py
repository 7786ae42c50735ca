#!/usr/bin/env python3
"""integration/test_cni_runtime.py: the spec rules of integration/cni_runtime.py, checked
against fake plugins that record what they were given (no root, no netns; `make e2e` runs
it first). The e2e scenarios check the same runtime against the real plugins.

    python3 integration/test_cni_runtime.py [-v]
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = os.path.join(HERE, "cni_runtime.py")

# A plugin that appends what it got to $FAKE_RECORD and answers: VERSION lists up to 1.1.0,
# or up to 1.0.0 for the plugin named "old" (as Debian's reference plugins do); a command in
# its config's "fails" ({COMMAND: code}) fails with an error object; ADD prints prevResult (or
# an empty result) with its own interface "<type>0" appended.
FAKE = r'''#!/usr/bin/env python3
import json, os, sys
me = os.path.basename(sys.argv[0])
stdin = sys.stdin.read()
conf = json.loads(stdin)
cni = {k: v for k, v in os.environ.items() if k.startswith("CNI_")}
with open(os.environ["FAKE_RECORD"], "a") as f:
    f.write(json.dumps({"type": me, "env": cni, "conf": conf,
                        "node": os.environ.get("ROCE_TUNE_NODE_CONFIG")}) + "\n")
cmd = cni.get("CNI_COMMAND")
if cmd == "VERSION":
    versions = ["0.3.0", "0.3.1", "0.4.0", "1.0.0"] + ([] if me == "old" else ["1.1.0"])
    print(json.dumps({"cniVersion": conf["cniVersion"], "supportedVersions": versions}))
    sys.exit(0)
code = conf.get("fails", {}).get(cmd)
if code:
    print(json.dumps({"cniVersion": conf["cniVersion"], "code": code, "msg": me + " says no"}))
    sys.exit(1)
if cmd == "ADD":
    r = conf.get("prevResult") or {"interfaces": [], "ips": []}
    r["cniVersion"] = conf["cniVersion"]
    r["interfaces"].append({"name": me + "0", "sandbox": ""})
    print(json.dumps(r))
'''

class RuntimeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.bin = os.path.join(self.dir, "bin")
        os.mkdir(self.bin)
        for name in ["a", "b", "c", "old"]:
            p = os.path.join(self.bin, name)
            with open(p, "w") as f:
                f.write(FAKE)
            os.chmod(p, 0o755)
        self.record = os.path.join(self.dir, "record")
        self.cache = os.path.join(self.dir, "cache")

    def tearDown(self):
        self.tmp.cleanup()

    def conflist(self, plugins, **top):
        doc = {"cniVersion": "1.1.0", "name": "net", "plugins": plugins}
        doc.update(top)
        path = os.path.join(self.dir, "net.conflist")
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def run_rt(self, command, conflist, *args):
        """The runtime's report and exit status; the plugin runs it made (VERSION aside)."""
        if os.path.exists(self.record):
            os.remove(self.record)
        env = dict(os.environ, CNI_PATH=self.bin, FAKE_RECORD=self.record,
                   ROCE_TUNE_NODE_CONFIG="/etc/node.json")
        p = subprocess.run([sys.executable, RUNTIME, command, conflist, "--cache", self.cache,
                            *args], env=env, capture_output=True, text=True)
        self.assertEqual(p.stderr, "", "the runtime wrote to stderr")
        runs = []
        if os.path.exists(self.record):
            with open(self.record) as f:
                runs = [json.loads(line) for line in f]
        return json.loads(p.stdout), p.returncode, [r for r in runs
                                                    if r["env"]["CNI_COMMAND"] != "VERSION"]

    def attach(self, command, conflist):
        return self.run_rt(command, conflist, "--netns", "/run/netns/p", "--ifname", "net1",
                           "--cid", "c1")

    def test_add_runs_in_order_with_name_version_and_the_previous_result(self):
        f = self.conflist([{"type": "a", "keep": {"x": 1}, "capabilities": {"mtu": True},
                            "cni.dev/mine": 1}, {"type": "b"}, {"type": "c"}])
        report, rc, runs = self.attach("ADD", f)
        self.assertEqual((rc, report["failed"]), (0, []))
        self.assertEqual([r["type"] for r in runs], ["a", "b", "c"])
        first = runs[0]["conf"]
        self.assertNotIn("prevResult", first, "no prevResult for the first ADD")
        self.assertEqual((first["name"], first["cniVersion"], first["keep"]),
                         ("net", "1.1.0", {"x": 1}))
        self.assertNotIn("capabilities", first)
        self.assertNotIn("cni.dev/mine", first)
        self.assertEqual([i["name"] for i in runs[1]["conf"]["prevResult"]["interfaces"]],
                         ["a0"])
        self.assertEqual([i["name"] for i in runs[2]["conf"]["prevResult"]["interfaces"]],
                         ["a0", "b0"])
        self.assertEqual(runs[0]["env"], {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1",
                                          "CNI_NETNS": "/run/netns/p", "CNI_IFNAME": "net1",
                                          "CNI_ARGS": "", "CNI_PATH": self.bin})
        self.assertEqual(runs[0]["node"], "/etc/node.json", "the environment passes through")
        self.assertEqual([i["name"] for i in report["result"]["interfaces"]], ["a0", "b0", "c0"])
        self.assertEqual(sorted(report["outputs"]), ["a", "b", "c"])
        with open(os.path.join(self.cache, "net-c1-net1.json")) as f:
            self.assertEqual(json.load(f), report["result"], "the final result is cached")

    def test_runtime_config_goes_only_to_plugins_that_declare_the_capability(self):
        # libcni 1.1.2 api.go injectRuntimeConfig: each declared (true) capability whose
        # argument the runtime has; the map replaces a runtimeConfig the config carries;
        # a plugin declaring none keeps its own runtimeConfig (tenant input, as roce-tune
        # treats it).
        f = self.conflist([
            {"type": "a", "capabilities": {"deviceID": True, "mac": False}},
            {"type": "b", "runtimeConfig": {"CNIDeviceInfoFile": "/mine"}},
            {"type": "c", "capabilities": {"CNIDeviceInfoFile": True},
             "runtimeConfig": {"x": 1}}])
        caps = json.dumps({"deviceID": "0000:0c:00.2", "mac": "aa:bb:cc:dd:ee:ff",
                           "CNIDeviceInfoFile": "/run/devinfo/f"})
        args = "IgnoreUnknown=true;K8S_POD_NAME=p;IgnoreUnknown=1;K8S_POD_NAME=p"
        _, rc, runs = self.run_rt("ADD", f, "--netns", "/run/netns/p", "--ifname", "net1",
                                  "--cid", "c1", "--capability-args", caps,
                                  "--cni-args", args)
        self.assertEqual(rc, 0)
        conf = {r["type"]: r["conf"] for r in runs}
        self.assertEqual(conf["a"]["runtimeConfig"], {"deviceID": "0000:0c:00.2"})
        self.assertEqual(conf["b"]["runtimeConfig"], {"CNIDeviceInfoFile": "/mine"})
        self.assertEqual(conf["c"]["runtimeConfig"], {"CNIDeviceInfoFile": "/run/devinfo/f"})
        self.assertTrue(all(r["env"]["CNI_ARGS"] == args for r in runs))

    def test_check_and_del_get_the_cached_result_del_in_reverse_and_drops_it(self):
        f = self.conflist([{"type": "a"}, {"type": "b"}, {"type": "c"}])
        added, _, _ = self.attach("ADD", f)
        report, rc, runs = self.attach("CHECK", f)
        self.assertEqual((rc, [r["type"] for r in runs]), (0, ["a", "b", "c"]))
        self.assertTrue(all(r["conf"]["prevResult"] == added["result"] for r in runs))
        report, rc, runs = self.attach("DEL", f)
        self.assertEqual((rc, [r["type"] for r in runs]), (0, ["c", "b", "a"]))
        self.assertTrue(all(r["conf"]["prevResult"] == added["result"] for r in runs))
        self.assertFalse(os.path.exists(os.path.join(self.cache, "net-c1-net1.json")))
        # DEL again: no cached result, so no prevResult, and still in reverse.
        report, rc, runs = self.attach("DEL", f)
        self.assertEqual((rc, [r["type"] for r in runs]), (0, ["c", "b", "a"]))
        self.assertTrue(all("prevResult" not in r["conf"] for r in runs))

    def test_a_failure_halts_add_check_and_del_and_reports_the_plugins_stdout(self):
        f = self.conflist([{"type": "a"}, {"type": "b", "fails": {"ADD": 101, "DEL": 5}},
                           {"type": "c"}])
        report, rc, runs = self.attach("ADD", f)
        self.assertEqual((rc, report["failed"], [r["type"] for r in runs]),
                         (1, ["b"], ["a", "b"]))
        self.assertEqual(json.loads(report["error"])["code"], 101)
        self.assertEqual(sorted(report["outputs"]), ["a"])
        self.assertIsNone(report["result"])
        self.assertFalse(os.path.exists(os.path.join(self.cache, "net-c1-net1.json")))
        report, rc, runs = self.attach("DEL", f)
        self.assertEqual((report["failed"], [r["type"] for r in runs]), (["b"], ["c", "b"]))
        self.assertEqual(json.loads(report["error"])["code"], 5)

    def test_a_1_0_0_plugin_is_bridged(self):
        f = self.conflist([{"type": "a"}, {"type": "old"}, {"type": "c"}])
        report, rc, runs = self.attach("ADD", f)
        self.assertEqual(rc, 0)
        self.assertEqual([r["conf"]["cniVersion"] for r in runs], ["1.1.0", "1.0.0", "1.1.0"])
        self.assertEqual(runs[1]["conf"]["prevResult"]["cniVersion"], "1.0.0")
        self.assertEqual(runs[2]["conf"]["prevResult"]["cniVersion"], "1.1.0",
                         "the bridged plugin's result is marked 1.1.0 again")
        # The fields 1.1.0 added are not shown to a 1.0.0 plugin.
        cached = report["result"]
        cached["interfaces"][0].update(mtu=9000, socketPath="/s", pciID="0000:0c:00.2")
        cached["routes"] = [{"dst": "0.0.0.0/0", "mtu": 9000, "advmss": 1, "priority": 2,
                             "table": 100, "scope": 0}]
        with open(os.path.join(self.cache, "net-c1-net1.json"), "w") as out:
            json.dump(cached, out)
        report, rc, runs = self.attach("CHECK", f)
        seen = {r["type"]: r["conf"]["prevResult"] for r in runs}
        self.assertEqual(seen["old"]["interfaces"][0], {"name": "a0", "sandbox": ""})
        self.assertEqual(seen["old"]["routes"], [{"dst": "0.0.0.0/0"}])
        self.assertEqual(seen["a"], dict(cached, cniVersion="1.1.0"), "1.1.0 plugins see all")

    def test_gc_goes_to_every_1_1_0_plugin_and_goes_on_after_an_error(self):
        f = self.conflist([{"type": "a", "fails": {"GC": 5}}, {"type": "old"},
                           {"type": "c", "fails": {"GC": 7}}])
        valid = [{"containerID": "c1", "ifname": "net1"}]
        report, rc, runs = self.run_rt("GC", f, "--valid-attachments", json.dumps(valid))
        self.assertEqual([r["type"] for r in runs], ["a", "c"])
        self.assertEqual((rc, report["failed"], report["skipped"]), (1, ["a", "c"], ["old"]))
        self.assertEqual(json.loads(report["error"])["code"], 5, "the first error")
        for r in runs:
            self.assertEqual(r["conf"]["cni.dev/valid-attachments"], valid)
            self.assertEqual((r["env"]["CNI_CONTAINERID"], r["env"]["CNI_NETNS"],
                              r["env"]["CNI_IFNAME"]), ("", "", ""))
            self.assertNotIn("prevResult", r["conf"])
        f = self.conflist([{"type": "a"}], disableGC=True)
        report, rc, runs = self.run_rt("GC", f, "--valid-attachments", "[]")
        self.assertEqual((rc, runs), (0, []), "disableGC: no GC at all")

    def test_status_stops_at_the_first_error_and_skips_1_0_0_plugins(self):
        f = self.conflist([{"type": "old"}, {"type": "a", "fails": {"STATUS": 50}},
                           {"type": "c"}])
        report, rc, runs = self.run_rt("STATUS", f)
        self.assertEqual([r["type"] for r in runs], ["a"])
        self.assertEqual((rc, report["failed"], report["skipped"]), (1, ["a"], ["old"]))
        self.assertEqual(json.loads(report["error"])["code"], 50)

    def test_disable_check_and_old_versions_skip_what_they_must(self):
        f = self.conflist([{"type": "a"}], disableCheck=True)
        self.attach("ADD", f)
        report, rc, runs = self.attach("CHECK", f)
        self.assertEqual((rc, runs), (0, []))
        f = self.conflist([{"type": "a"}], cniVersion="0.3.1")
        for cmd in ["CHECK", "STATUS"]:
            report, rc, runs = (self.attach if cmd == "CHECK" else self.run_rt)(cmd, f)
            self.assertEqual((cmd, rc, runs), (cmd, 0, []), f"{cmd} does not exist in 0.3.1")

    def test_the_highest_version_offered_is_used(self):
        f = self.conflist([{"type": "a"}], cniVersion="0.4.0", cniVersions=["1.0.0", "9.9.9"])
        report, rc, runs = self.attach("ADD", f)
        self.assertEqual((rc, runs[0]["conf"]["cniVersion"]), (0, "1.0.0"))

    def test_a_missing_plugin_is_an_error(self):
        f = self.conflist([{"type": "a"}, {"type": "nosuch"}])
        report, rc, runs = self.attach("ADD", f)
        self.assertEqual((rc, report["failed"]), (127, ["nosuch"]))
        self.assertIn("not found", report["error"])


if __name__ == "__main__":
    unittest.main()
