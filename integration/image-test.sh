#!/usr/bin/env bash
# integration/image-test.sh: check the image `make image` built, from its own config and
# filesystem, then run its install script the way the DaemonSet does. Run by
# `make image-test` (mk/image.mk), which builds the image first and passes:
#   IMAGE_REF       the reference built (registry.example.com/roce-tune:<tag>)
#   IMAGE_VERSION   Cargo.toml's version     IMAGE_REVISION  git rev-parse HEAD[-dirty]
#   IMAGE_SOURCE    the source label         BUSYBOX         the busybox the image carries
# Optional: IMAGE_TEST_GC_LOOP=1 also asserts that the image's roce-tune accepts the repair
# loop command the DaemonSet runs (`gc --orphans --every N`).
#
# Root (podman's storage, chroot). What it checks:
#   1. config: entrypoint, no cmd, user root, architecture, OCI labels;
#   2. files (podman export of a created, never started container, listed with tar): exactly
#      /roce-tune, /bin/busybox, /bin/sh -> busybox, /install.sh, root-owned, 0755; the
#      binaries identical to target/release/roce-tune and $BUSYBOX, install.sh to
#      conf/image/install.sh; roce-tune static and its --version the crate's;
#   3. the install script, run with the exact command and args of the DaemonSet's
#      initContainer (from `kubectl kustomize conf/deploy/kubernetes`) in a chroot of the
#      exported root filesystem (with the /proc and /dev/null a runtime provides), against
#      host directories laid out where the DaemonSet mounts them: binary identical by checksum, 0755, root; replaced by rename (an open old file
#      keeps its bytes); node config identical, 0644; state dir 0700; no temporary file left;
#      a second run changes nothing; a missing bin dir or a directory in the way fails;
#   4. the uninstall command of conf/deploy/uninstall/kubernetes, the same way: refused while
#      an entry remains, then removes binary, node config and state dir;
#   5. `podman run` of the image's entrypoint: where the runtime works, the same install; on
#      this machine crun fails with "setrlimit ... Operation not permitted" (DESIGN 2.4), and
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
ctr=""
cleanup() {
    [ -z "$ctr" ] || podman rm -f "$ctr" >/dev/null 2>&1 || true
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
ok "config: entrypoint, labels (version $IMAGE_VERSION, revision $IMAGE_REVISION), linux/amd64, tag"

# ------------------------------------------------------------------ 2. files
ctr="$(podman create "$IMAGE_REF")"
podman export -o "$work/rootfs.tar" "$ctr"
podman rm "$ctr" >/dev/null; ctr=""
tar --numeric-owner -tvf "$work/rootfs.tar" | awk '{print $1, $2, $6, $7, $8}' | sort >"$work/listing"
cat >"$work/expected" <<'EOF'
-rwxr-xr-x 0/0 bin/busybox  
-rwxr-xr-x 0/0 install.sh  
-rwxr-xr-x 0/0 roce-tune  
drwxr-xr-x 0/0 bin/  
lrwxrwxrwx 0/0 bin/sh -> busybox
EOF
sort -o "$work/expected" "$work/expected"
diff -u "$work/expected" "$work/listing" >&2 || fail "the image's files differ from the expected list (above: - expected, + image)"
root="$work/root"
mkdir -p "$root"
tar -xf "$work/rootfs.tar" -C "$root"
cmp -s "$root/roce-tune" target/release/roce-tune || fail "/roce-tune is not target/release/roce-tune"
cmp -s "$root/bin/busybox" "$BUSYBOX" || fail "/bin/busybox is not $BUSYBOX"
cmp -s "$root/install.sh" conf/image/install.sh || fail "/install.sh is not conf/image/install.sh"
file "$root/roce-tune" | grep -Eq 'statically linked|static-pie linked' || fail "/roce-tune is not static: $(file "$root/roce-tune")"
version="$(env -i PATH=/bin "$chroot" "$root" /roce-tune --version)"
case "$version" in "roce-tune $IMAGE_VERSION "*) ;; *) fail "/roce-tune --version says: $version" ;; esac
ok "files: exactly roce-tune, bin/busybox, bin/sh, install.sh (0755 root); identical to their sources; $version"

gc_help="$(env -i PATH=/bin "$chroot" "$root" /roce-tune gc --help 2>&1 || true)"
if [ "${IMAGE_TEST_GC_LOOP:-0}" = 1 ]; then
    grep -q -- '--every' <<<"$gc_help" || fail "roce-tune gc --help does not mention --every, but the DaemonSet runs the repair loop: $gc_help"
    ok "roce-tune gc --help offers --every (the DaemonSet's repair loop)"
else
    echo "image-test: note IMAGE_TEST_GC_LOOP=0: the repair loop (gc --every) is not asserted; this binary's gc --help: $(head -n1 <<<"$gc_help")"
fi

# ------------------------------------------------------------------ 3. install, as the DaemonSet runs it
# The initContainer's command, args and mounts, from the built overlay.
kubectl_json() { "$kubectl" kustomize "$1" | "$py" -c '
import json, sys, yaml
ds = next(d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] == "DaemonSet")
pod = ds["spec"]["template"]["spec"]
c = next(iter(pod.get("initContainers") or []), None) or pod["containers"][0]
vols = {v["name"]: v for v in pod["volumes"]}
mounts = [[m["mountPath"], "hostPath" if "hostPath" in vols[m["name"]] else "configMap"] for m in c["volumeMounts"]]
print(json.dumps({"argv": c["command"] + c.get("args", []), "mounts": mounts}))'; }
install_spec="$(kubectl_json conf/deploy/kubernetes)" || fail "kubectl kustomize conf/deploy/kubernetes"
mapfile -t install_argv < <("$py" -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])["argv"]))' "$install_spec")
mapfile -t install_mounts < <("$py" -c 'import json,sys; print("\n".join(m[0] for m in json.loads(sys.argv[1])["mounts"]))' "$install_spec")
arg() { local i; for ((i = 0; i < ${#install_argv[@]}; i++)); do [ "${install_argv[$i]}" = "$1" ] && { echo "${install_argv[$((i + 1))]}"; return; }; done; fail "the initContainer has no $1"; }
bin_dir="$(arg --bin-dir)"; cfg_src="$(arg --node-config)"; cfg_dir="$(arg --node-config-dir)"; state_dir="$(arg --state-dir)"
for m in "${install_mounts[@]}"; do mkdir -p "$root$m"; done
# The ConfigMap's file, and what the host already has: an old binary (another version, wrong
# mode) that a "running" process holds open, a neighbour plugin, a loose state dir mode.
kubectl kustomize conf/deploy/kubernetes | "$py" -c '
import sys, yaml
cm = next(d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] == "ConfigMap")
sys.stdout.write(cm["data"]["node.json"])' >"$root$cfg_src"
printf 'old roce-tune\n' >"$root$bin_dir/roce-tune"; chmod 0600 "$root$bin_dir/roce-tune"
printf 'sbr\n' >"$root$bin_dir/sbr"; chmod 0755 "$root$bin_dir/sbr"
chmod 0755 "$root$state_dir"
exec 3<"$root$bin_dir/roce-tune"
old_inode="$(stat -c %i "$root$bin_dir/roce-tune")"
# What a runtime gives every container and the image does not carry: /proc (busybox's sh runs
# applets such as cmp by re-executing /proc/self/exe) and /dev/null. In a private mount
# namespace, so nothing stays mounted; the image's own PATH.
mkdir -p "$root/proc" "$root/dev"
run_install() {
    unshare --mount --propagation private /bin/sh -c '
        root=$1 chroot=$2; shift 2
        mount -t proc proc "$root/proc" &&
        mount -t tmpfs -o mode=0755,size=64k tmpfs "$root/dev" &&
        mknod -m 666 "$root/dev/null" c 1 3 && mknod -m 666 "$root/dev/zero" c 1 5 &&
        exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$chroot" "$root" "$@"
    ' sh "$root" "$chroot" "$@"
}
run_install "${install_argv[@]}" >"$work/install.out" 2>&1 || { cat "$work/install.out" >&2; fail "install script: ${install_argv[*]}"; }
sed 's/^/  | /' "$work/install.out"
[ "$(sha256sum <"$root$bin_dir/roce-tune")" = "$(sha256sum <target/release/roce-tune)" ] || fail "installed binary differs from target/release/roce-tune"
[ "$(stat -c '%a %u:%g %F' "$root$bin_dir/roce-tune")" = "755 0:0 regular file" ] || fail "installed binary: $(stat -c '%a %u:%g %F' "$root$bin_dir/roce-tune")"
[ "$(stat -c %i "$root$bin_dir/roce-tune")" != "$old_inode" ] || fail "the binary was rewritten in place, not renamed over the old one"
[ "$(cat <&3)" = "old roce-tune" ] || fail "a process holding the old binary open saw its bytes change"
exec 3<&-
cmp -s "$root$cfg_dir/node.json" "$root$cfg_src" || fail "installed node.json differs from the ConfigMap's"
[ "$(stat -c '%a %u:%g %F' "$root$cfg_dir/node.json")" = "644 0:0 regular file" ] || fail "node.json: $(stat -c '%a %u:%g %F' "$root$cfg_dir/node.json")"
[ "$(stat -c '%a %u:%g' "$root$state_dir")" = "700 0:0" ] || fail "state dir: $(stat -c '%a %u:%g' "$root$state_dir")"
[ "$(cat "$root$bin_dir/sbr")" = sbr ] || fail "a neighbour plugin was touched"
leftover="$(find "$root$bin_dir" "$root$cfg_dir" -name '.*install*')"
[ -z "$leftover" ] || fail "temporary files left: $leftover"
[ "$(ls -A "$root$bin_dir" | sort | tr '\n' ' ')" = "roce-tune sbr " ] || fail "bin dir holds: $(ls -A "$root$bin_dir")"
ok "install (${install_argv[*]}): binary identical (sha256 $(sha256sum <"$root$bin_dir/roce-tune" | cut -c1-16)...), 0755 root, renamed over the old one; node.json 0644; state dir 0700; no temporary file"

inode="$(stat -c %i "$root$bin_dir/roce-tune")"
run_install "${install_argv[@]}" >"$work/install2.out" 2>&1 || { cat "$work/install2.out" >&2; fail "second install run"; }
grep -q 'already up to date' "$work/install2.out" || fail "second run did not find the binary up to date: $(cat "$work/install2.out")"
[ "$(stat -c %i "$root$bin_dir/roce-tune")" = "$inode" ] || fail "second run replaced an identical binary"
ok "install again: nothing replaced"

mv "$root$bin_dir" "$root$bin_dir.away"
if run_install "${install_argv[@]}" >"$work/install3.out" 2>&1; then fail "install succeeded without a bin dir"; fi
grep -q 'is not a directory (is the hostPath volume mounted' "$work/install3.out" || fail "no clear message without a bin dir: $(cat "$work/install3.out")"
mv "$root$bin_dir.away" "$root$bin_dir"
mv "$root$bin_dir/roce-tune" "$root$bin_dir/roce-tune.file"; mkdir "$root$bin_dir/roce-tune"
if run_install "${install_argv[@]}" >"$work/install4.out" 2>&1; then fail "install replaced a directory"; fi
grep -q 'is a directory: refusing' "$work/install4.out" || fail "no clear message for a directory in the way: $(cat "$work/install4.out")"
rmdir "$root$bin_dir/roce-tune"; mv "$root$bin_dir/roce-tune.file" "$root$bin_dir/roce-tune"
ok "install fails loudly without a bin dir, and refuses to replace a directory"

# ------------------------------------------------------------------ 4. uninstall, as its overlay runs it
uninstall_spec="$(kubectl_json conf/deploy/uninstall/kubernetes)" || fail "kubectl kustomize conf/deploy/uninstall/kubernetes"
mapfile -t un_argv < <("$py" -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])["argv"]))' "$uninstall_spec")
# Without --sleep: the container would then wait for SIGTERM.
un_argv=("${un_argv[@]/--sleep/}")
mapfile -t un_argv < <(printf '%s\n' "${un_argv[@]}" | grep -v '^$')
install_argv=("${un_argv[@]}")
un_state="$(arg --state-dir)"; un_cfg="$(arg --node-config-dir)"; un_bin="$(arg --bin-dir)"
# The uninstall pod mounts the host's /run/cni and /etc/cni at the same paths; lay the
# installed files out there (what the install pod left on the "host").
mkdir -p "$root$(dirname "$un_state")" "$root$(dirname "$un_cfg")" "$root$un_bin"
[ "$state_dir" = "$un_state" ] || cp -a "$root$state_dir" "$root$un_state"
[ "$cfg_dir" = "$un_cfg" ] || cp -a "$root$cfg_dir" "$root$un_cfg"
[ "$bin_dir" = "$un_bin" ] || cp -a "$root$bin_dir/." "$root$un_bin/"
mkdir -p "$root$un_state/locks"; : >"$root$un_state/locks/mlx5_3.1.lock"
# An entry the repair cannot release (unreadable as an entry): a pod still holds its class.
printf 'not an entry\n' >"$root$un_state/c0ffee:net1.json"; chmod 0600 "$root$un_state/c0ffee:net1.json"
if run_install "${un_argv[@]}" >"$work/un1.out" 2>&1; then fail "uninstall went on with a recorded attachment: $(cat "$work/un1.out")"; fi
sed 's/^/  | /' "$work/un1.out"
# This roce-tune skips an entry it cannot read (the uninstall then refuses: still recorded);
# one that counts it as a failed repair makes the uninstall refuse earlier. Both keep the binary.
grep -Eq 'attachment\(s\) still recorded|orphan repair failed' "$work/un1.out" || fail "no clear refusal: $(cat "$work/un1.out")"
[ -f "$root$un_bin/roce-tune" ] || fail "the refused uninstall removed the binary"
rm "$root$un_state/c0ffee:net1.json"
run_install "${un_argv[@]}" >"$work/un2.out" 2>&1 || { cat "$work/un2.out" >&2; fail "uninstall with an empty state dir"; }
sed 's/^/  | /' "$work/un2.out"
[ ! -e "$root$un_bin/roce-tune" ] || fail "uninstall left the binary"
[ -f "$root$un_bin/sbr" ] || fail "uninstall removed a neighbour plugin"
[ ! -e "$root$un_cfg" ] || fail "uninstall left $un_cfg"
[ ! -e "$root$un_state" ] || fail "uninstall left $un_state"
ok "uninstall (${un_argv[*]}): refused while an entry remains; then binary, node config and state dir removed"

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
