#!/bin/sh
# /install.sh in the roce-tune image (conf/image/Containerfile), run by the DaemonSet's
# privileged initContainer (conf/deploy/base/daemonset.yaml) with busybox's sh:
#
#   install.sh [--bin-dir DIR] [--node-config FILE --node-config-dir DIR] [--state-dir DIR]
#       Copy /roce-tune into DIR (the node's CNI bin dir, mounted from the host; not
#       /roce-tune-agent, which the agent container runs from the image) and the
#       node config FILE (the ConfigMap's node.json) into the node config dir, each
#       atomically: written under a temporary name in the destination directory, flushed,
#       checked, then renamed over the old file, so the runtime never executes, and roce-tune
#       never reads, a half-written file. Binary mode 0755, node config 0644 (roce-tune
#       refuses a node config that group or others can write). The state dir, when given, is
#       made 0700 (docs/design.md, "Node config").
#
#   install.sh --uninstall [--bin-dir DIR] [--node-config-dir DIR] [--state-dir DIR] [--sleep]
#       Run the orphan repair once (`roce-tune gc --orphans`), then refuse to go on while the
#       state dir still records an attachment (a pod on this node still holds a traffic class
#       roce-tune must restore on its DEL). Otherwise remove the binary, the node config (and
#       its dir when empty) and the state dir (only when empty). --sleep: stay running after
#       success, so `kubectl rollout status` reports every node done.
#
# Every path is explicit so that the same script serves the hostPath layout of every
# overlay (only the host side of the volumes differs). Exit status: 0 done, 1 refused or
# failed (the message says why), 2 usage.
set -eu

src=/roce-tune
bin_dir=/host/cni/bin
node_config=
node_config_dir=
state_dir=
mode=install
sleep_after=0

say() { echo "roce-tune-install: $*"; }
die() { echo "roce-tune-install: ERROR: $*" >&2; exit 1; }
usage() { echo "roce-tune-install: $*" >&2; sed -n '4,20p' "$0" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) [ $# -ge 2 ] || usage "$1 needs a value"; bin_dir=$2; shift 2 ;;
        --node-config) [ $# -ge 2 ] || usage "$1 needs a value"; node_config=$2; shift 2 ;;
        --node-config-dir) [ $# -ge 2 ] || usage "$1 needs a value"; node_config_dir=$2; shift 2 ;;
        --state-dir) [ $# -ge 2 ] || usage "$1 needs a value"; state_dir=$2; shift 2 ;;
        --source) [ $# -ge 2 ] || usage "$1 needs a value"; src=$2; shift 2 ;;
        --uninstall) mode=uninstall; shift ;;
        --sleep) sleep_after=1; shift ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) usage "unknown argument: $1" ;;
    esac
done
if [ -n "$node_config" ] && [ -z "$node_config_dir" ]; then
    usage "--node-config needs --node-config-dir"
fi

# The bin dir is a hostPath of type Directory: a wrong host path already fails the pod. This
# check also catches a mount left out of the container.
require_dir() {
    if [ ! -d "$1" ] || [ -L "$1" ]; then die "$1 is not a directory (is the hostPath volume mounted? OpenShift's CNI bin dir is /var/lib/cni/bin, plain Kubernetes' /opt/cni/bin)"; fi
}

tmp_files=
cleanup() {
    for f in $tmp_files; do rm -f "$f"; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# install_file SRC DIR NAME MODE: atomic replace of DIR/NAME by a copy of SRC.
install_file() {
    from=$1 dir=$2 name=$3 perm=$4
    dest=$dir/$name
    [ -f "$from" ] || die "$from is missing from the image or the ConfigMap"
    if [ -d "$dest" ] && [ ! -L "$dest" ]; then
        die "$dest is a directory: refusing to replace it"
    fi
    if [ -f "$dest" ] && [ ! -L "$dest" ] && cmp -s "$from" "$dest"; then
        # Same bytes: only the mode and owner can be wrong (someone chmod-ed it).
        chown 0:0 "$dest"
        chmod "$perm" "$dest"
        say "$dest already up to date ($(sha256sum "$dest" | cut -d' ' -f1))"
        return 0
    fi
    # Same directory as the destination, so the rename below stays on one file system and
    # is atomic; a leading dot keeps it out of globbing tools' way while it exists.
    tmp=$dir/.$name.install.$$
    tmp_files="$tmp_files $tmp"
    rm -f "$tmp"
    cp "$from" "$tmp"
    chown 0:0 "$tmp"
    chmod "$perm" "$tmp"
    sync "$tmp"
    cmp -s "$from" "$tmp" || die "copy of $from to $tmp differs from its source (disk full?)"
    # -T: never move into a directory of that name; rename(2) replaces a file or a link.
    mv -fT "$tmp" "$dest"
    sync "$dir"
    say "installed $dest (mode $perm, sha256 $(sha256sum "$dest" | cut -d' ' -f1))"
}

if [ "$mode" = install ]; then
    [ -x "$src" ] || die "$src is missing or not executable"
    # The binary must run on this node before it replaces anything (a wrong architecture
    # fails here, not in every pod's ADD).
    version=$("$src" --version) || die "$src --version failed: wrong architecture or a broken image?"
    say "image binary: $version"
    require_dir "$bin_dir"
    install_file "$src" "$bin_dir" roce-tune 0755
    if [ -n "$node_config" ]; then
        require_dir "$node_config_dir"
        install_file "$node_config" "$node_config_dir" node.json 0644
    fi
    if [ -n "$state_dir" ]; then
        require_dir "$state_dir"
        chown 0:0 "$state_dir"
        chmod 0700 "$state_dir"
    fi
    exit 0
fi

# ---------------------------------------------------------------------------- uninstall
require_dir "$bin_dir"
if [ -n "$state_dir" ] && [ -d "$state_dir" ]; then
    # The repair reads the node config at its default path and the state dir it names:
    # the uninstall patch mounts both at their host paths.
    say "orphan repair: $src gc --orphans"
    "$src" gc --orphans || die "orphan repair failed: see its output above; the node keeps roce-tune"
    # Entries are <container>:<ifname>.state (.json: format 1; src/state/store.rs); locks/ and a crashed
    # write's .<entry>.tmp<pid> (not matched by *) hold no state.
    left="" n=0
    for f in "$state_dir"/*; do
        [ -e "$f" ] || continue
        [ "${f##*/}" = locks ] && continue
        left="$left ${f##*/}" n=$((n + 1))
    done
    if [ "$n" -gt 0 ]; then
        die "$n attachment(s) still recorded in $state_dir (pods on this node still hold a traffic class roce-tune restores on DEL); drain them first:$left"
    fi
fi
rm -f "$bin_dir/roce-tune"
say "removed $bin_dir/roce-tune"
if [ -n "$node_config_dir" ] && [ -d "$node_config_dir" ]; then
    rm -f "$node_config_dir/node.json"
    if rmdir "$node_config_dir" 2>/dev/null; then
        say "removed $node_config_dir"
    else
        say "kept $node_config_dir: not empty ($(ls -A "$node_config_dir" | tr '\n' ' '))"
    fi
fi
if [ -n "$state_dir" ] && [ -d "$state_dir" ]; then
    rm -f "$state_dir"/locks/*.lock "$state_dir"/.*.tmp*
    [ ! -d "$state_dir/locks" ] || rmdir "$state_dir/locks" || die "$state_dir/locks holds more than lock files: $(ls -A "$state_dir/locks" | tr '\n' ' ')"
    rmdir "$state_dir" || die "$state_dir is not empty after the repair: $(ls -A "$state_dir" | tr '\n' ' ')"
    say "removed $state_dir"
fi
say "roce-tune is uninstalled from this node"
if [ "$sleep_after" = 1 ]; then
    # The sleep is a child process: take it along on SIGTERM.
    trap 'kill "$sleeper" 2>/dev/null; exit 0' INT TERM
    while :; do sleep 3600 & sleeper=$!; wait "$sleeper"; done
fi
