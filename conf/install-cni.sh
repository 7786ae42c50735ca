#!/bin/sh
# Copy the roce-tune binary into the node's CNI bin directory (mounted at /host/opt/cni/bin).
# Used by conf/Containerfile and conf/daemonset.yaml. Argument "--sleep": stay running after the
# copy (the DaemonSet's main container), so the pod is Ready while the binary is installed.
set -eu
src="${ROCE_TUNE_SRC:-/roce-tune}"
dir="${CNI_BIN_DIR:-/host/opt/cni/bin}"
[ -d "$dir" ] || { echo "install-cni: $dir is not a directory (hostPath not mounted?)" >&2; exit 1; }
tmp="$dir/.roce-tune.tmp.$$"
cp "$src" "$tmp"
chmod 0755 "$tmp"
mv -f "$tmp" "$dir/roce-tune"
echo "install-cni: installed $dir/roce-tune"
if [ "${1:-}" = "--sleep" ]; then
    trap 'exit 0' TERM INT
    while :; do sleep 3600 & wait $!; done
fi
