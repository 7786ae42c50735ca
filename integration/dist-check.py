#!/usr/bin/env python3
"""Verify a release directory (mk/dist.mk: `make dist`, `make dist-test`) as its user would,
each artifact against what it claims, never against a copy of itself:

1. SHA256SUMS: `sha256sum -c SHA256SUMS` passes, and it lists every other file of the directory.
2. roce-tune and roce-tune-agent: static; `--version` names Cargo.toml's version and the revision
   they were built from (DIST_REVISION, the Makefile's: 12 hex digits, -dirty, or unknown).
3. roce-tune-<v>.cdx.json: a CycloneDX JSON SBOM whose root component is roce-tune <v> and whose
   components are exactly the crates the binaries are built from, at Cargo.lock's versions: the
   normal dependencies of the package, transitively, for the binaries' target
   (`cargo metadata --locked --filter-platform`), build-only and dev-only crates left out.
   Missing: a failure with ROCE_TUNE_REQUIRE_SBOM=1 (`make dist`), else a SKIPPED line.
4. roce-tune-<v>.tgz: `helm package`'s archive of conf/helm/roce-tune: its Chart.yaml's version
   and appVersion are Cargo.toml's, and every file is conf/helm/roce-tune's (the dashboard link
   followed).
5. roce-tune-image-<v>.oci.tar (required with DIST_REQUIRE_IMAGE=1): an OCI image layout
   (`podman save --format oci-archive`) of one image, linux/amd64, whose labels name the
   version and the revision, and whose layer holds the two binaries, identical to the ones
   beside it.

Usage: dist-check.py DIR    (one line per check; exit 1 on any failure)
"""
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile

TARGET = "x86_64-unknown-linux-gnu"
here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


def cargo_version():
    with open(os.path.join(repo, "Cargo.toml")) as f:
        return re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M).group(1)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def check_sums(d):
    errs = []
    path = os.path.join(d, "SHA256SUMS")
    if not os.path.isfile(path):
        return ["no SHA256SUMS"]
    out = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=d, capture_output=True, text=True)
    if out.returncode != 0:
        errs.append("sha256sum -c SHA256SUMS failed: %s" % (out.stdout + out.stderr).strip())
    with open(path) as f:
        listed = {line.split(None, 1)[1].strip().lstrip("*") for line in f if line.strip()}
    present = {n for n in os.listdir(d) if n != "SHA256SUMS"}
    if listed != present:
        errs.append("SHA256SUMS lists %s, the directory holds %s" % (sorted(listed), sorted(present)))
    return errs


def check_binaries(d, version, revision):
    errs = []
    for name in ("roce-tune", "roce-tune-agent"):
        path = os.path.join(d, name)
        if not os.access(path, os.X_OK):
            errs.append("%s: missing or not executable" % name)
            continue
        kind = subprocess.run(["file", "-L", path], capture_output=True, text=True).stdout
        if not re.search(r"static(-pie)? linked|statically linked", kind):
            errs.append("%s: not static: %s" % (name, kind.strip()))
        line = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip()
        want = "%s %s (revision %s" % (name, version, revision)
        if not (line.startswith(want) and line[len(want):len(want) + 1] in (")", ";")):
            errs.append("%s --version says %r, want %r...: the version and the revision it was built from"
                        % (name, line, want))
    return errs


def used_crates():
    """{(name, version)} of the crates the binaries are built from, by cargo's own resolution."""
    out = subprocess.run(["cargo", "metadata", "--locked", "--format-version", "1",
                          "--filter-platform", TARGET], cwd=repo, capture_output=True, text=True)
    if out.returncode != 0:
        raise ValueError("cargo metadata failed: %s" % out.stderr.strip())
    meta = json.loads(out.stdout)
    pkgs = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = meta["resolve"]["root"]
    seen, todo = set(), [root]
    while todo:
        node = nodes[todo.pop()]
        for dep in node.get("deps") or []:
            # kind None: a normal dependency; "build" and "dev" ones are not in the binaries.
            if any(k.get("kind") is None for k in dep.get("dep_kinds") or []) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    return {(pkgs[i]["name"], pkgs[i]["version"]) for i in seen}, pkgs[root]


def check_sbom(path, version):
    try:
        with open(path) as f:
            bom = json.load(f)
    except (OSError, ValueError) as e:
        return ["%s: not JSON: %s" % (os.path.basename(path), e)]
    errs = []
    if bom.get("bomFormat") != "CycloneDX" or not str(bom.get("specVersion", "")).startswith("1."):
        errs.append("not a CycloneDX document: bomFormat %r, specVersion %r" % (bom.get("bomFormat"), bom.get("specVersion")))
    top = (bom.get("metadata") or {}).get("component") or {}
    if (top.get("name"), top.get("version")) != ("roce-tune", version):
        errs.append("its component is %s %s, not roce-tune %s" % (top.get("name"), top.get("version"), version))
    apps = {c.get("name") for c in top.get("components") or [] if c.get("type") == "application"}
    if not {"roce-tune", "roce-tune-agent"} <= apps:
        errs.append("its component's applications are %s, not both binaries" % sorted(apps))
    try:
        want, _ = used_crates()
    except ValueError as e:
        return errs + [str(e)]
    got = {(c.get("name"), c.get("version")) for c in bom.get("components") or []}
    if got != want:
        errs.append("its components differ from the crates the binaries use (cargo metadata, Cargo.lock): "
                    "missing %s; not used %s" % (sorted(want - got), sorted(got - want)))
    for c in bom.get("components") or []:
        if not str(c.get("purl", "")).startswith("pkg:cargo/%s@%s" % (c.get("name"), c.get("version"))):
            errs.append("component %s %s: purl %r is not pkg:cargo/<name>@<version>"
                        % (c.get("name"), c.get("version"), c.get("purl")))
    return errs


def chart_files():
    """{path in the package: bytes} of conf/helm/roce-tune, links followed."""
    base = os.path.join(repo, "conf", "helm", "roce-tune")
    out = {}
    for root, _, files in os.walk(base):
        for fn in files:
            p = os.path.join(root, fn)
            with open(p, "rb") as f:
                out["roce-tune/" + os.path.relpath(p, base)] = f.read()
    return out


def check_chart(path, version):
    import yaml
    errs = []
    try:
        with tarfile.open(path, "r:gz") as t:
            got = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    except (OSError, tarfile.TarError) as e:
        return ["%s: not a gzipped tar: %s" % (os.path.basename(path), e)]
    chart = yaml.safe_load(got.get("roce-tune/Chart.yaml", b"{}")) or {}
    if str(chart.get("version")) != version or str(chart.get("appVersion")) != version:
        errs.append("Chart.yaml: version %r, appVersion %r: both must be %s"
                    % (chart.get("version"), chart.get("appVersion"), version))
    want = chart_files()
    # helm package writes Chart.yaml anew (same fields); every other file is the chart's own.
    for name in sorted(set(want) | set(got)):
        if name == "roce-tune/Chart.yaml":
            continue
        if name not in got:
            errs.append("%s: not in the package" % name)
        elif name not in want:
            errs.append("%s: in the package but not in conf/helm/roce-tune" % name)
        elif got[name] != want[name]:
            errs.append("%s: differs from conf/helm/roce-tune's" % name)
    return errs


def check_image(path, version, revision, d):
    errs = []
    try:
        t = tarfile.open(path)
    except (OSError, tarfile.TarError) as e:
        return ["%s: not a tar: %s" % (os.path.basename(path), e)], ""
    ref = ""
    with t:
        names = set(t.getnames())

        def blob(digest):
            algo, hexd = digest.split(":", 1)
            data = t.extractfile("blobs/%s/%s" % (algo, hexd)).read()
            if sha256(data) != hexd:
                raise ValueError("blob %s does not have its digest" % digest)
            return data
        try:
            layout = json.loads(t.extractfile("oci-layout").read())
            index = json.loads(t.extractfile("index.json").read())
            if layout.get("imageLayoutVersion") != "1.0.0":
                errs.append("oci-layout: imageLayoutVersion %r" % layout.get("imageLayoutVersion"))
            manifests = index.get("manifests") or []
            if len(manifests) != 1:
                return errs + ["index.json holds %d images, not one" % len(manifests)], ""
            ref = (manifests[0].get("annotations") or {}).get("org.opencontainers.image.ref.name", "")
            manifest = json.loads(blob(manifests[0]["digest"]))
            config = json.loads(blob(manifest["config"]["digest"]))
            if (config.get("os"), config.get("architecture")) != ("linux", "amd64"):
                errs.append("platform %s/%s, not linux/amd64" % (config.get("os"), config.get("architecture")))
            labels = (config.get("config") or {}).get("Labels") or {}
            rev = labels.get("org.opencontainers.image.revision", "")
            if labels.get("org.opencontainers.image.version") != version:
                errs.append("label version %r, not %s" % (labels.get("org.opencontainers.image.version"), version))
            want_rev = revision[:12] + ("-dirty" if revision.endswith("-dirty") else "")
            if rev[:12] + ("-dirty" if rev.endswith("-dirty") else "") != want_rev:
                errs.append("label revision %r is not the binaries' %s" % (rev, revision))
            files = {}
            for layer in manifest.get("layers") or []:
                data = blob(layer["digest"])
                if layer.get("mediaType", "").endswith("gzip"):
                    data = gzip.decompress(data)
                with tarfile.open(fileobj=io.BytesIO(data)) as lt:
                    for m in lt.getmembers():
                        if m.isfile():
                            files[m.name.lstrip("./")] = lt.extractfile(m).read()
            for name in ("roce-tune", "roce-tune-agent"):
                with open(os.path.join(d, name), "rb") as f:
                    if files.get(name) != f.read():
                        errs.append("the image's /%s is not the %s beside it" % (name, name))
        except (KeyError, ValueError) as e:
            errs.append("not an OCI archive of one image (%s): %s" % (", ".join(sorted(names))[:200], e))
    return errs, ref


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 2
    d = argv[0]
    version = cargo_version()
    revision = os.environ.get("DIST_REVISION") or "unknown"
    failed = 0

    def report(what, errs):
        nonlocal failed
        print("%s %s" % ("FAIL" if errs else "ok  ", what))
        for e in errs:
            print("     " + e)
        failed += bool(errs)

    report("SHA256SUMS: sha256sum -c, every file listed", check_sums(d))
    report("roce-tune, roce-tune-agent: static, --version %s (revision %s)" % (version, revision),
           check_binaries(d, version, revision))
    sbom = os.path.join(d, "roce-tune-%s.cdx.json" % version)
    if os.path.exists(sbom):
        report("%s: CycloneDX, the crates of Cargo.lock the binaries use" % os.path.basename(sbom),
               check_sbom(sbom, version))
    elif os.environ.get("ROCE_TUNE_REQUIRE_SBOM") == "1":
        report(os.path.basename(sbom), ["missing (make dist-setup installs cargo-cyclonedx)"])
    else:
        print("SKIPPED %s: cargo-cyclonedx is not installed (make dist-setup); make dist requires it"
              % os.path.basename(sbom))
    report("roce-tune-%s.tgz: helm package of conf/helm/roce-tune, version and appVersion %s" % (version, version),
           check_chart(os.path.join(d, "roce-tune-%s.tgz" % version), version))
    image = os.path.join(d, "roce-tune-image-%s.oci.tar" % version)
    if os.path.exists(image):
        errs, ref = check_image(image, version, revision, d)
        report("%s: OCI archive of %s, labels and binaries" % (os.path.basename(image), ref or "?"), errs)
    elif os.environ.get("DIST_REQUIRE_IMAGE") == "1":
        report(os.path.basename(image), ["missing"])
    print("dist-check: %s, %d failed" % (d, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
