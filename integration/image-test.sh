#!/usr/bin/env bash
# integration/image-test.sh: check the image `make image` built, from its own config and
# filesystem, then run its install script the way the DaemonSet does. Run by
# `make image-test` (mk/image.mk), which builds the image first and passes:
#   IMAGE_REF       the reference built (registry.example.com/roce-tune:<tag>)
#   IMAGE_VERSION   Cargo.toml's version     IMAGE_REVISION  git rev-parse HEAD[-dirty]
#   IMAGE_SOURCE    the source label         BUSYBOX         the busybox the image carries
#
# Root (podman's storage, chroot). What it checks:
#   1. config: entrypoint, no cmd, user root, architecture, OCI labels;
#   2. files (podman export of a created, never started container, listed with tar): exactly
#      /roce-tune, /roce-tune-agent, /bin/busybox, /bin/sh -> busybox, /install.sh,
#      root-owned, 0755; the binaries identical to target/release/roce-tune,
#      target/release/roce-tune-agent and $BUSYBOX, install.sh to conf/image/install.sh; both
#      static, both --version the crate's version and the image's revision, `roce-tune-agent agent --help` offering
#      --every and --nri (the DaemonSet's agent), `roce-tune agent` refused naming it;
#   3. the DaemonSet's containers of conf/deploy/kubernetes, each with its exact command, args
#      and volumes (from `kubectl kustomize`), run in a chroot of the exported root filesystem
#      with the volumes bind-mounted from a fake node, as the kubelet would: the
#      initContainer installs the CNI binary alone (identical by checksum, 0755, root, renamed over the
#      old one: an open old file keeps its bytes) and node.json (identical, 0644), makes the
#      state dir 0700, leaves no temporary file, changes nothing on a second run, fails
#      loudly without its bin dir or with a directory in the way; agent runs its loop (its liveness probe, from the built overlay, answered 200)
#      on the installed node config and state dir and exits 0 on SIGTERM;
#   4. the container of conf/deploy/uninstall/kubernetes the same way: refused while an
#      entry remains, then removes binary, node config and state dir;
#   5. `podman run` of the image's entrypoint: where the runtime works, the same install; on
#      this machine crun fails with "setrlimit ... Operation not permitted" (docs/design.md, "Real peers and the kernel lane"), and
#      that exact failure is reported as the reason the chroot path (3, 4) is the one tested.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

fail() { echo "image-test: FAIL: $*" >&2; exit 1; }
ok() { echo "image-test: ok   $*"; }
: "${IMAGE_REF:?set by make image-test}" "${IMAGE_VERSION:?}" "${IMAGE_REVISION:?}" "${IMAGE_SOURCE:?}"
BUSYBOX="${BUSYBOX:-/bin/busybox}"
[ "$(id -u)" = 0 ] || fail "must run as root (podman storage, chroot)"
command -v podman >/dev/null || fail "podman is missing (make setup)"
py=/usr/bin/python3
"$py" -c 'import yaml' 2>/dev/null || py=python3
kubectl="${KUBECTL:-kubectl}"
chroot="$(command -v chroot)" || fail "chroot is missing (coreutils)"

work="$(mktemp -d /tmp/roce-tune-image-test.XXXXXX)"
root="$work/root"
# Processes still running in the image's root (the chroot): a container must leave none
# once its main process has exited (a real pod's PID namespace would hide such a leak).
strays() { local p; for p in /proc/[0-9]*; do [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && echo "${p#/proc/}"; done; true; }
no_strays() { local s; s="$(strays | tr '\n' ' ')"; [ -z "$s" ] || fail "$1 left processes running: $s"; }
ctr=""
cleanup() {
    [ -z "$ctr" ] || podman rm -f "$ctr" >/dev/null 2>&1 || true
    # Only what this test started: processes whose root is its chroot.
    [ -z "${root:-}" ] || for p in $(strays); do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# ------------------------------------------------------------------ 1. config
podman image inspect "$IMAGE_REF" >"$work/inspect.json" || fail "no image $IMAGE_REF"
"$py" - "$work/inspect.json" <<'EOF' || fail "image config (above)"
import json, os, sys
img = json.load(open(sys.argv[1]))[0]
cfg = img.get("Config") or {}
want_labels = {
    "org.opencontainers.image.version": os.environ["IMAGE_VERSION"],
    "org.opencontainers.image.revision": os.environ["IMAGE_REVISION"],
    "org.opencontainers.image.source": os.environ["IMAGE_SOURCE"],
    "org.opencontainers.image.licenses": "Apache-2.0",
    "org.opencontainers.image.title": "roce-tune",
}
errs = []
if cfg.get("Entrypoint") != ["/bin/busybox", "sh", "/install.sh"]:
    errs.append("Entrypoint %r" % cfg.get("Entrypoint"))
if cfg.get("Cmd"):
    errs.append("Cmd %r (expected none: the DaemonSet passes args)" % cfg.get("Cmd"))
if cfg.get("User") not in (None, "", "0", "root"):
    errs.append("User %r (the installer writes root-owned host files)" % cfg.get("User"))
if img.get("Architecture") != "amd64" or img.get("Os") != "linux":
    errs.append("platform %s/%s, expected linux/amd64" % (img.get("Os"), img.get("Architecture")))
labels = cfg.get("Labels") or {}
for k, v in want_labels.items():
    if labels.get(k) != v:
        errs.append("label %s = %r, expected %r" % (k, labels.get(k), v))
tag = os.environ["IMAGE_REF"].rsplit(":", 1)[1]
rev = os.environ["IMAGE_REVISION"]
want_tag = "%s-%s%s" % (os.environ["IMAGE_VERSION"], rev[:12], "-dirty" if rev.endswith("-dirty") else "")
if tag != want_tag:
    errs.append("tag %s, expected <version>-<12 hex revision>[-dirty] = %s" % (tag, want_tag))
for e in errs:
    print("  " + e)
print("  size %d bytes, %d layer(s), created %s" % (img.get("Size", 0), len((img.get("RootFS") or {}).get("Layers") or []), img.get("Created")))
sys.exit(1 if errs else 0)
EOF
# Every tag `make image` gave (integration/image-tags.sh: the release's <version> too at its
# git tag) names this one image.
id="$(podman image inspect --format '{{.Id}}' "$IMAGE_REF")"
for ref in ${IMAGE_REFS:-$IMAGE_REF}; do
    [ "$(podman image inspect --format '{{.Id}}' "$ref")" = "$id" ] || fail "$ref is not the image $IMAGE_REF ($id)"
done
case " ${IMAGE_REFS:-} " in
    *":$IMAGE_VERSION "*) release="; also the release's $IMAGE_VERSION" ;;
    *) release="" ;;
esac
ok "config: entrypoint, labels (version $IMAGE_VERSION, revision $IMAGE_REVISION), linux/amd64, tag$release"

# ------------------------------------------------------------------ 2. files
ctr="$(podman create "$IMAGE_REF")"
podman export -o "$work/rootfs.tar" "$ctr"
podman rm "$ctr" >/dev/null; ctr=""
tar --numeric-owner -tvf "$work/rootfs.tar" | awk '{print $1, $2, $6, $7, $8}' | sort >"$work/listing"
cat >"$work/expected" <<'EOF'
-rwxr-xr-x 0/0 bin/busybox  
-rwxr-xr-x 0/0 install.sh  
-rwxr-xr-x 0/0 roce-tune  
-rwxr-xr-x 0/0 roce-tune-agent  
drwxr-xr-x 0/0 bin/  
lrwxrwxrwx 0/0 bin/sh -> busybox
EOF
sort -o "$work/expected" "$work/expected"
diff -u "$work/expected" "$work/listing" >&2 || fail "the image's files differ from the expected list (above: - expected, + image)"
mkdir -p "$root"
tar -xf "$work/rootfs.tar" -C "$root"
cmp -s "$root/roce-tune" target/release/roce-tune || fail "/roce-tune is not target/release/roce-tune"
cmp -s "$root/roce-tune-agent" target/release/roce-tune-agent || fail "/roce-tune-agent is not target/release/roce-tune-agent"
cmp -s "$root/bin/busybox" "$BUSYBOX" || fail "/bin/busybox is not $BUSYBOX"
cmp -s "$root/install.sh" conf/image/install.sh || fail "/install.sh is not conf/image/install.sh"
for b in roce-tune roce-tune-agent; do
    file "$root/$b" | grep -Eq 'statically linked|static-pie linked' || fail "/$b is not static: $(file "$root/$b")"
done
# Both binaries name the version and the revision the image is labelled with (the Makefile's
# ROCE_TUNE_REVISION: 12 hex digits, -dirty alike).
rev12="${IMAGE_REVISION:0:12}"; case "$IMAGE_REVISION" in *-dirty) rev12="$rev12-dirty" ;; esac
for b in roce-tune roce-tune-agent; do
    version="$(env -i PATH=/bin "$chroot" "$root" /$b --version)"
    case "$version" in "$b $IMAGE_VERSION (revision $rev12"[\;\)]*) ;; *) fail "/$b --version says: $version (want $IMAGE_VERSION, revision $rev12)" ;; esac
done
ok "files: exactly roce-tune, roce-tune-agent, bin/busybox, bin/sh, install.sh (0755 root); identical to their sources; $version"

# The DaemonSet's long-running container runs the repair loop: the agent binary must offer
# it, and the CNI binary must not (docs/design.md, "Two binaries").
agent_help="$(env -i PATH=/bin "$chroot" "$root" /roce-tune-agent agent --help 2>&1 || true)"
for flag in --every --nri; do
    grep -q -- "$flag" <<<"$agent_help" || fail "roce-tune-agent agent --help does not mention $flag, but the DaemonSet runs the agent with it: $agent_help"
done
rc=0; cni_agent="$(env -i PATH=/bin "$chroot" "$root" /roce-tune agent 2>&1)" || rc=$?
[ "$rc" = 2 ] && grep -q roce-tune-agent <<<"$cni_agent" || fail "/roce-tune agent: exit $rc, $cni_agent (want 2 naming roce-tune-agent)"
ok "roce-tune-agent agent --help offers --every and --nri (the DaemonSet's agent); roce-tune agent is 2, naming it"

# ------------------------------------------------------------------ 3. the containers, as the kubelet runs them
# A fake node: $host is its root file system. run_container OVERLAY CONTAINER [ARGS...] does
# what the kubelet and the runtime do for that container of the overlay's DaemonSet: checks
# the hostPath types (Directory must exist, DirectoryOrCreate is created 0755), writes the
# ConfigMap's files, then, in a private mount namespace, bind-mounts each volume at its
# mountPath in the image's root file system (read-only where the manifest says so), mounts
# what every container gets and the image does not carry (/proc: busybox's sh runs applets
# such as cmp by re-executing /proc/self/exe; /sys, read-only here: no entry in these tests
# names a real device; a /dev with null and zero) and executes the container's command and
# args, plus ARGS, with the image's PATH.
host="$work/host"
mkdir -p "$host/opt/cni/bin" "$host/etc" "$host/run" "$host/sys/kernel" "$root/proc" "$root/dev" "$root/sys"
container_spec() { # OVERLAY CONTAINER -> lines: argv, then "mount<TAB>source<TAB>target<TAB>ro|rw"
    "$kubectl" kustomize "$1" | CONTAINER="$2" HOST="$host" CMDIR="$work/configmaps" "$py" -c '
import os, sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
pod = ds["spec"]["template"]["spec"]
want = os.environ["CONTAINER"]
c = next(c for c in (pod.get("initContainers") or []) + pod["containers"] if c["name"] == want)
vols = {v["name"]: v for v in pod["volumes"]}
for a in c["command"] + c.get("args", []):
    print("arg\t" + a)
for m in c.get("volumeMounts", []):
    v = vols[m["name"]]
    if "hostPath" in v:
        src = os.environ["HOST"] + v["hostPath"]["path"]
        kind = v["hostPath"].get("type", "")
        if kind == "Directory" and not os.path.isdir(src):
            sys.exit("hostPath type check failed: %s is not a directory" % v["hostPath"]["path"])
        if kind == "DirectoryOrCreate" and not os.path.isdir(src):
            os.makedirs(src, mode=0o755)
    elif "configMap" in v:
        cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == v["configMap"]["name"])
        src = os.path.join(os.environ["CMDIR"], cm["metadata"]["name"])
        os.makedirs(src, exist_ok=True)
        for k, text in cm["data"].items():
            with open(os.path.join(src, k), "w") as f:
                f.write(text)
    else:
        sys.exit("volume %s: only hostPath and configMap are emulated" % m["name"])
    print("mount\t%s\t%s\t%s" % (src, m["mountPath"], "ro" if m.get("readOnly") else "rw"))
'
}
run_container() { # OVERLAY CONTAINER [ARGS...]; the container's output on stdout+stderr
    local overlay=$1 name=$2 spec; shift 2
    spec="$(container_spec "$overlay" "$name")" || { echo "kubelet: $spec"; return 125; }
    # NETNS=1: a network namespace of its own (loopback up), as a node's would be: the agent
    # listens on 127.0.0.1:9662 there without meeting another test's agent.
    local netns=""; [ "${NETNS:-}" != 1 ] || netns=--net
    unshare --mount $netns --propagation private /bin/sh -c '
        root=$1 chroot=$2 spec=$3 pidfile=$4; shift 4
        [ -z "'"$netns"'" ] || ip link set lo up || exit 125
        mount -t proc proc "$root/proc" && mount -t sysfs -o ro sysfs "$root/sys" &&
        mount -t tmpfs -o mode=0755,size=64k tmpfs "$root/dev" &&
        mknod -m 666 "$root/dev/null" c 1 3 && mknod -m 666 "$root/dev/zero" c 1 5 || exit 125
        tab=$(printf "\t")
        argv=""
        while IFS="$tab" read -r what a b c; do
            case "$what" in
                mount)
                    mkdir -p "$root$b" && mount --bind "$a" "$root$b" || exit 125
                    [ "$c" = rw ] || mount -o remount,bind,ro "$root$b" || exit 125 ;;
            esac
        done <<EOF
$spec
EOF
        # The command and args, then the extra ARGS: rebuild "$@" in that order.
        extra=$#
        while IFS="$tab" read -r what a; do
            [ "$what" = arg ] && set -- "$@" "$a"
        done <<EOF
$spec
EOF
        i=0; while [ $i -lt $extra ]; do set -- "$@" "$1"; shift; i=$((i + 1)); done
        # exec keeps this PID down to the container process: the test signals it there.
        [ -z "$pidfile" ] || echo $$ >"$pidfile"
        exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$chroot" "$root" "$@"
    ' sh "$root" "$chroot" "$spec" "${PIDFILE:-}" "$@"
}
mode_of() { stat -c '%a %u:%g %F' "$1"; }

# The node before the first install: an old roce-tune (another version, a wrong mode) that a
# "running" process holds open, and a neighbour plugin.
bin="$host/opt/cni/bin"
printf 'old roce-tune\n' >"$bin/roce-tune"; chmod 0600 "$bin/roce-tune"
printf 'sbr\n' >"$bin/sbr"; chmod 0755 "$bin/sbr"
exec 3<"$bin/roce-tune"
old_inode="$(stat -c %i "$bin/roce-tune")"
run_container conf/deploy/kubernetes install >"$work/install.out" 2>&1 || { cat "$work/install.out" >&2; fail "initContainer install of conf/deploy/kubernetes"; }
sed 's/^/  | /' "$work/install.out"
cmp -s "$bin/roce-tune" target/release/roce-tune || fail "installed binary differs from target/release/roce-tune"
[ ! -e "$bin/roce-tune-agent" ] || fail "the agent binary was installed into the CNI bin dir; only roce-tune belongs there"
[ "$(mode_of "$bin/roce-tune")" = "755 0:0 regular file" ] || fail "installed binary: $(mode_of "$bin/roce-tune")"
[ "$(stat -c %i "$bin/roce-tune")" != "$old_inode" ] || fail "the binary was rewritten in place, not renamed over the old one"
[ "$(cat <&3)" = "old roce-tune" ] || fail "a process holding the old binary open saw its bytes change"
exec 3<&-
node_json="$host/etc/cni/roce-tune/node.json"
cmp -s "$node_json" conf/deploy/base/node.json || fail "installed node.json differs from conf/deploy/base/node.json"
[ "$(mode_of "$node_json")" = "644 0:0 regular file" ] || fail "node.json: $(mode_of "$node_json")"
[ "$(stat -c '%a %u:%g' "$host/run/cni/roce-tune")" = "700 0:0" ] || fail "state dir: $(stat -c '%a %u:%g' "$host/run/cni/roce-tune")"
[ "$(cat "$bin/sbr")" = sbr ] || fail "a neighbour plugin was touched"
leftover="$(find "$bin" "$host/etc/cni/roce-tune" -name '.*install*')"
[ -z "$leftover" ] || fail "temporary files left: $leftover"
[ "$(find "$bin" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')" = "roce-tune sbr " ] || fail "bin dir holds: $(ls -A "$bin")"
ok "initContainer install: binary identical (sha256 $(sha256sum <"$bin/roce-tune" | cut -c1-16)...), 0755 root, renamed over the old one; node.json identical, 0644; state dir 0700; no temporary file"

inode="$(stat -c %i "$bin/roce-tune")"
run_container conf/deploy/kubernetes install >"$work/install2.out" 2>&1 || { cat "$work/install2.out" >&2; fail "second install"; }
grep -q 'already up to date' "$work/install2.out" || fail "second run did not find the binary up to date: $(cat "$work/install2.out")"
[ "$(stat -c %i "$bin/roce-tune")" = "$inode" ] || fail "second run replaced an identical binary"
ok "initContainer install again: nothing replaced"

if run_container conf/deploy/kubernetes install --bin-dir /not/mounted >"$work/install3.out" 2>&1; then fail "install succeeded without a bin dir"; fi
grep -q 'is not a directory (is the hostPath volume mounted' "$work/install3.out" || fail "no clear message without a bin dir: $(cat "$work/install3.out")"
mv "$bin/roce-tune" "$work/roce-tune.keep"; mkdir "$bin/roce-tune"
if run_container conf/deploy/kubernetes install >"$work/install4.out" 2>&1; then fail "install replaced a directory"; fi
grep -q 'is a directory: refusing' "$work/install4.out" || fail "no clear message for a directory in the way: $(cat "$work/install4.out")"
rmdir "$bin/roce-tune"; mv "$work/roce-tune.keep" "$bin/roce-tune"
mv "$bin" "$bin.away"
if run_container conf/deploy/kubernetes install >"$work/install5.out" 2>&1; then fail "the kubelet emulation mounted a missing Directory"; fi
grep -q 'hostPath type check failed' "$work/install5.out" || fail "no type check failure for a missing bin dir: $(cat "$work/install5.out")"
mv "$bin.away" "$bin"
ok "install fails loudly without its bin dir (the script's check, and the hostPath type Directory), and refuses to replace a directory"

# The long-running container: its exact command, with its mounts; the node config and the
# state dir the initContainer left must satisfy roce-tune's ownership checks there.
# Its liveness probe as the kubelet runs it: GET on the probe's host, port and path, from the
# node's network namespace (here the container's own, NETNS=1), answered 200 by /healthz.
probe="$("$kubectl" kustomize conf/deploy/kubernetes | "$py" -c '
import sys, yaml
ds = next(d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] == "DaemonSet")
c = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
g = c["livenessProbe"]["httpGet"]
print("http://%s:%s%s" % (g["host"], g["port"], g["path"]))')" || fail "no livenessProbe on container agent"
NETNS=1 PIDFILE="$work/repair.pid" run_container conf/deploy/kubernetes agent >"$work/repair.out" 2>&1 &
repair_pid=$!
healthz=""
for _ in $(seq 50); do
    sleep 0.1
    [ -s "$work/repair.pid" ] || continue
    healthz="$(nsenter --target "$(cat "$work/repair.pid")" --net curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$probe" || true)"
    [ "$healthz" = 200 ] && break
done
kill -0 "$repair_pid" 2>/dev/null || { wait "$repair_pid" || true; cat "$work/repair.out" >&2; fail "container agent exited by itself"; }
[ "$healthz" = 200 ] || { cat "$work/repair.out" >&2; fail "the liveness probe $probe got ${healthz:-no answer}, not 200"; }
kill -TERM "$(cat "$work/repair.pid")"
rc=0; wait "$repair_pid" || rc=$?
sed 's/^/  | /' "$work/repair.out"
[ "$rc" = 0 ] || fail "container agent exited $rc on SIGTERM"
no_strays "the agent container"
grep -q 'repairs every 10 s (state dir /run/cni/roce-tune,' "$work/repair.out" || fail "container agent did not start the agent on /run/cni/roce-tune"
grep -q 'the agent stops' "$work/repair.out" || fail "container agent did not say it stopped"
# --nri: the NRI plugin waits for a runtime socket this emulation has none of.
grep -q 'cannot connect to /var/run/nri/nri.sock: No such file or directory' "$work/repair.out" ||
    fail "container agent did not start the NRI plugin on /var/run/nri/nri.sock"
ok "container agent: its command runs the agent (and the NRI plugin, waiting for the runtime's socket) on the host's state dir and node config, its liveness probe ($probe) gets 200, and it exits 0 on SIGTERM"

# ------------------------------------------------------------------ 4. uninstall, as its overlay runs it
# Without --sleep's wait: the script parses arguments in order, so an extra --sleep is
# harmless, but the container would then wait for SIGTERM. Run it in the background instead.
state="$host/run/cni/roce-tune"
mkdir -p "$state/locks"; : >"$state/locks/mlx5_3.1.lock"
# An entry the repair cannot release (unreadable as an entry): a pod still holds its class.
printf 'not an entry\n' >"$state/c0ffee:net1.state"; chmod 0600 "$state/c0ffee:net1.state"
uninstall() { # -> rc; output in $work/un.out
    rm -f "$work/un.pid"
    PIDFILE="$work/un.pid" run_container conf/deploy/uninstall/kubernetes uninstall >"$work/un.out" 2>&1 &
    local pid=$! i
    for i in $(seq 1 50); do
        grep -q 'roce-tune is uninstalled from this node' "$work/un.out" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$(cat "$work/un.pid")"; fi
    wait "$pid"
}
if uninstall; then cat "$work/un.out" >&2; fail "uninstall went on with a recorded attachment"; fi
sed 's/^/  | /' "$work/un.out"
# This roce-tune skips an entry it cannot read (the uninstall then refuses: still recorded);
# one that counts it as a failed repair makes the uninstall refuse earlier. Both keep the binary.
grep -Eq 'attachment\(s\) still recorded|orphan repair failed' "$work/un.out" || fail "no clear refusal: $(cat "$work/un.out")"
[ -f "$bin/roce-tune" ] || fail "the refused uninstall removed the binary"
rm "$state/c0ffee:net1.state"
uninstall || { cat "$work/un.out" >&2; fail "uninstall with an empty state dir"; }
sed 's/^/  | /' "$work/un.out"
grep -q 'roce-tune is uninstalled from this node' "$work/un.out" || fail "uninstall did not finish"
[ ! -e "$bin/roce-tune" ] || fail "uninstall left the binary"
[ -f "$bin/sbr" ] || fail "uninstall removed a neighbour plugin"
[ ! -e "$host/etc/cni/roce-tune" ] || fail "uninstall left /etc/cni/roce-tune"
[ ! -e "$state" ] || fail "uninstall left /run/cni/roce-tune"
no_strays "the uninstall container"
ok "container uninstall (conf/deploy/uninstall/kubernetes): refused while an entry remains; then binary, node config and state dir removed, and it stays up (exit 0 on SIGTERM)"

# ------------------------------------------------------------------ 5. podman run
hostdir="$work/podman-host"
mkdir -p "$hostdir/bin" "$hostdir/etc" "$hostdir/state"
if podman run --rm --network=none \
    -v "$hostdir/bin:/host/cni/bin" -v "$hostdir/etc:/host/etc/cni/roce-tune" \
    -v "$hostdir/state:/host/run/cni/roce-tune" "$IMAGE_REF" \
    --bin-dir /host/cni/bin --state-dir /host/run/cni/roce-tune >"$work/run.out" 2>&1; then
    cmp -s "$hostdir/bin/roce-tune" target/release/roce-tune || fail "podman run: installed binary differs"
    [ "$(stat -c %a "$hostdir/bin/roce-tune")" = 755 ] || fail "podman run: binary mode $(stat -c %a "$hostdir/bin/roce-tune")"
    ok "podman run of the entrypoint installs the binary (0755, identical)"
elif grep -q 'setrlimit.*Operation not permitted' "$work/run.out"; then
    echo "image-test: note podman run cannot start containers on this machine ($(grep -o 'setrlimit[^:]*: Operation not permitted' "$work/run.out" | head -n1)); the install was tested through chroot of the exported root filesystem (3, 4)"
else
    cat "$work/run.out" >&2
    fail "podman run failed for another reason than the known setrlimit restriction"
fi
echo "image-test: all checks passed for $IMAGE_REF"
