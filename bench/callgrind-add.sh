#!/usr/bin/env bash
# bench/callgrind-add.sh BINARY...: the user-space instructions (callgrind's Ir, repeatable on
# a loaded machine where timings are not) of one full ADD and its DEL, for each binary, as root,
# and the system calls of the same runs without valgrind (`strace -f -c`).
#
# Valgrind 3.19 (Debian 12) has no openat2 (syscall 437: ENOSYS under it), so under callgrind
# every openat2 takes its fallback: the sysfs views' openat, and the host paths' walk of every
# component where a real kernel proves most of them link-free in one call (src/safe_dir.rs).
# The Ir are then an upper bound of the real runs'; the system calls are the real runs' own.
#
# The ADD is the bench's full one (sysctls, traffic class, GID check) plus a device-info file,
# on a one-device test tree, for a pod netns with net1. It runs twice per binary: with every
# node config path real ("plain"), and with the state dir, log file and device-info dir behind
# <base>/var/run -> ../run, root's link in a root-only dir, as /var/run is on Debian, Ubuntu
# and RHEL ("linked"; a binary that refuses such paths says so in its row). A third row ("rail")
# is an ADD of a rail that owns nothing (no class, no device-info file: the default GID check
# alone), plain paths, in a state dir an earlier ADD of the node already made: before state
# format 4 such an ADD wrote nothing, now it records its rail (docs/performance.md, "The job
# environment").
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "callgrind-add: run as root (a netns, a root-owned state dir)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

base="$(mktemp -d /run/roce-tune-callgrind.XXXXXX)"
ns="rtcg$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$base"; }
trap cleanup EXIT
chmod 755 "$base"
ip netns add "$ns"
ip link add "rtcg$$h" type veth peer name "rtcg$$p"
ip link set "rtcg$$h" netns "$ns"
ip -n "$ns" link set "rtcg$$h" name net1
ip -n "$ns" link set net1 up
ip -n "$ns" addr add 192.168.0.34/16 dev net1
ino="$(stat -L -c %i "/var/run/netns/$ns")"

sys="$base/sys" pci=0000:0c:00.2 dev=mlx5_2
d="$sys/class/infiniband/$dev"
mkdir -p "$sys/module/ib_core/parameters" "$sys/bus/pci/devices/$pci/infiniband/$dev" \
    "$d/tc/1" "$d/ports/1/gids" "$d/ports/1/gid_attrs/types" "$sys/netns/$ino/class/net/net1"
echo Y >"$sys/module/ib_core/parameters/netns_mode"
ln -s "../../../bus/pci/devices/$pci" "$d/device"
ln -s "../../../../../bus/pci/devices/$pci" "$sys/netns/$ino/class/net/net1/device"
echo 0000:0000:0000:0c02 >"$d/node_guid"
for i in 0 1 2 3; do
    echo 0000:0000:0000:0000:0000:0000:0000:0000 >"$d/ports/1/gids/$i"
    : >"$d/ports/1/gid_attrs/types/$i"
done
echo 0000:0000:0000:0000:0000:ffff:c0a8:0022 >"$d/ports/1/gids/3"
echo "RoCE v2" >"$d/ports/1/gid_attrs/types/3"
: >"$d/tc/1/traffic_class"

mkdir -m 755 "$base/var" "$base/run"
ln -s ../run "$base/var/run"

# node_config <dir the paths live in>: prints the node config's path.
node_config() {
    jq -n --arg sys "$sys" --arg at "$1" \
        '{sysfsRoot: $sys, stateDir: "\($at)/state", logFile: "\($at)/roce-tune.log",
          deviceInfoDir: "\($at)/devinfo"}' >"$base/node-$2.json"
    chmod 644 "$base/node-$2.json"
    echo "$base/node-$2.json"
}
plain="$(node_config "$base/run" plain)"
linked="$(node_config "$base/var/run" linked)"

# conf <dir of the paths> [rail]: the full ADD's config, or the rail's that owns nothing.
conf() {
    if [ "${2:-}" = rail ]; then
        jq -cn --arg ns "/var/run/netns/$ns" '{cniVersion: "1.0.0", name: "rail", type: "roce-tune",
            prevResult: {cniVersion: "1.0.0", interfaces: [{name: "net1", sandbox: $ns}],
                         ips: [{address: "192.168.0.34/16", interface: 0}]}}'
        return
    fi
    jq -cn --arg ns "/var/run/netns/$ns" --arg f "$1/devinfo/default-rail-cg1_net1" '{
        cniVersion: "1.0.0", name: "rail", type: "roce-tune", trafficClass: 41,
        capabilities: {CNIDeviceInfoFile: true}, runtimeConfig: {CNIDeviceInfoFile: $f},
        prevResult: {cniVersion: "1.0.0", interfaces: [{name: "net1", sandbox: $ns}],
                     ips: [{address: "192.168.0.34/16", interface: 0}]}}'
}

# run <binary> <command> <node config> <conf> <wrapper...>: the plugin run as a runtime runs it.
run() {
    local bin="$1" cmd="$2" node="$3" conf="$4"
    shift 4
    CNI_COMMAND="$cmd" CNI_CONTAINERID=cg1 CNI_NETNS="/var/run/netns/$ns" CNI_IFNAME=net1 \
        CNI_ARGS="" CNI_PATH=/usr/lib/cni ROCE_TUNE_NODE_CONFIG="$node" \
        "$@" "$bin" <<<"$conf" 2>/dev/null
}

# ir <binary> <command> <node config> <conf>: the run's Ir, or "failed (code N)".
ir() {
    local out="$base/cg.out" rc=0 res
    res="$(run "$@" valgrind --tool=callgrind --callgrind-out-file="$out")" || rc=$?
    if [ "$rc" != 0 ]; then
        echo "failed (code $(jq -r .code <<<"$res" 2>/dev/null))"
    else
        awk '/^summary:/ {print $2}' "$out"
    fi
    rm -f "$out"
}

# calls <binary> <command> <node config> <conf>: the run's system calls (all threads).
calls() {
    local out="$base/strace.out"
    run "$@" strace -f -qq -c -o "$out" >/dev/null || true
    awk '$NF == "total" {print $4}' "$out"
    rm -f "$out"
}

# The DEL needs the ADD's state: each row runs ADD, DEL, then both again for their calls.
reset() {
    rm -rf "$base/run/state" "$base/run/devinfo" "$base/run/roce-tune.log"
    : >"$d/tc/1/traffic_class"
    [ "${1:-}" != rail ] || mkdir -p -m 700 "$base/run/state/locks"
}

printf '%-40s %-7s %12s %12s %9s %9s\n' binary paths "ADD Ir" "DEL Ir" "ADD calls" "DEL calls"
for bin in "$@"; do
    for layout in plain linked rail; do
        node="$plain" at="$base/run"
        [ "$layout" != linked ] || { node="$linked"; at="$base/var/run"; }
        c="$(conf "$at" "$layout")"
        reset "$layout"
        add="$(ir "$bin" ADD "$node" "$c")"
        del="$(ir "$bin" DEL "$node" "$c")"
        reset "$layout"
        add_calls="$(calls "$bin" ADD "$node" "$c")"
        del_calls="$(calls "$bin" DEL "$node" "$c")"
        reset
        printf '%-40s %-7s %12s %12s %9s %9s\n' "$bin" "$layout" "$add" "$del" "$add_calls" "$del_calls"
    done
done
