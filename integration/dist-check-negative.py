#!/usr/bin/env python3
"""Negative cases of integration/dist-check.py: each breaks one thing in a copy of a release
directory that dist-check passes, and requires dist-check to FAIL naming it. Run by `make
dist-test` and `make dist` after the real check.

Usage: dist-check-negative.py DIR    (exit 1 when a case passes or fails for another reason)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def version(d):
    return next(n for n in os.listdir(d) if n.endswith(".tgz"))[len("roce-tune-"):-len(".tgz")]


def append_byte(name):
    def apply(d, v):
        with open(os.path.join(d, name.format(v=v)), "ab") as f:
            f.write(b"\0")
    return apply


def edit_sbom(change):
    def apply(d, v):
        p = os.path.join(d, "roce-tune-%s.cdx.json" % v)
        with open(p) as f:
            bom = json.load(f)
        change(bom)
        with open(p, "w") as f:
            json.dump(bom, f)
        resum(d)
    return apply


def resum(d):
    names = sorted(n for n in os.listdir(d) if n != "SHA256SUMS")
    out = subprocess.run(["sha256sum"] + names, cwd=d, capture_output=True, text=True, check=True).stdout
    with open(os.path.join(d, "SHA256SUMS"), "w") as f:
        f.write(out)


def drop_component(bom):
    bom["components"] = [c for c in bom["components"] if c["name"] != "serde_json"]


def old_version(bom):
    for c in bom["components"]:
        if c["name"] == "nix":
            c["version"] = "0.29.0"
            c["purl"] = "pkg:cargo/nix@0.29.0"


def extra_file(d, v):
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("x\n")


CASES = [
    ("a-binary-changed-after-its-sum", append_byte("roce-tune"), ["sha256sum -c SHA256SUMS failed", "roce-tune: FAILED"]),
    ("a-file-not-in-the-sums", extra_file, ["SHA256SUMS lists"]),
    ("sbom-lacks-a-crate", edit_sbom(drop_component), ["missing [('serde_json'"]),
    ("sbom-names-another-version", edit_sbom(old_version), ["('nix', '0.30.1')", "not used [('nix', '0.29.0')]"]),
]


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 2
    src = argv[0]
    v = version(src)
    sbom = os.path.exists(os.path.join(src, "roce-tune-%s.cdx.json" % v))
    failed = 0
    for name, mutate, messages in CASES:
        if name.startswith("sbom-") and not sbom:
            print("SKIPPED %s: no SBOM in %s (cargo-cyclonedx not installed)" % (name, src))
            continue
        tmp = tempfile.mkdtemp(prefix="dist-check-neg-")
        try:
            d = os.path.join(tmp, "dist")
            shutil.copytree(src, d)
            mutate(d, v)
            out = subprocess.run([sys.executable, os.path.join(here, "dist-check.py"), d],
                                 capture_output=True, text=True, env=os.environ)
            text = out.stdout + out.stderr
            missing = [m for m in messages if m not in text]
            ok = out.returncode != 0 and not missing
            print("%s %s" % ("ok  " if ok else "FAIL", name))
            if not ok:
                failed += 1
                print("     dist-check exit %d; missing %s in:\n%s" % (out.returncode, missing, text))
        finally:
            shutil.rmtree(tmp)
    print("dist-check negative cases: %d, failed %d" % (len(CASES), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
