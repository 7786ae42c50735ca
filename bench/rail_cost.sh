#!/usr/bin/env bash
# bench/rail_cost.sh BINARY...: the cost of a rail record (docs/performance.md, "The job
# environment"): user-space instructions (valgrind's callgrind, repeatable on a loaded machine)
# and system calls (strace -f -c) of one ADD of a rail that owns no setting (the default GID
# check at index 3, no class, no ToS) and of its DEL, three times per binary. Before format 4
# such an ADD wrote no entry; now it writes its rail record, one file.
#
# Root: it makes a netns (a veth renamed net1, 10.10.1.2/24), a sysfs test tree with one VF
# bound to it (docs/design.md, "Test trees") and a state dir on /run (tmpfs, as on a node),
# which already exists with its locks/, as an earlier ADD leaves it. Everything goes in a trap.
# Usage: bench/rail_cost.sh /path/to/old/roce-tune target/release/roce-tune
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "rail_cost: must run as root" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
command -v valgrind >/dev/null && command -v strace >/dev/null ||
    { echo "rail_cost: needs valgrind and strace (Debian packages)" >&2; exit 1; }
w=/run/roce-tune-rail-cost; ns=rtrailcost$$; host=rtrc$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$w"; }
trap cleanup EXIT INT TERM
rm -rf "$w"; mkdir -p -m 700 "$w"; t=$w/tree
ip netns add "$ns"
ip link add "$host" type veth peer name "${host}p"
ip link set "$host" netns "$ns"; ip -n "$ns" link set "$host" name net1
ip -n "$ns" link set net1 up; ip -n "$ns" addr add 10.10.1.2/24 dev net1
ino=$(stat -L -c %i "/run/netns/$ns")
pci=0000:0c:00.2; dev=mlx5_2; d=$t/class/infiniband/$dev
mkdir -p "$t/module/ib_core/parameters" "$t/bus/pci/devices/$pci/infiniband/$dev" \
    "$d/tc/1" "$d/ports/1/gids" "$d/ports/1/gid_attrs/types" "$t/netns/$ino/class/net/net1"
echo Y > "$t/module/ib_core/parameters/netns_mode"
: > "$d/tc/1/traffic_class"
ln -s "../../../bus/pci/devices/$pci" "$d/device"
echo 0000:0000:0c00:0002 > "$d/node_guid"
ln -s "../../../../../bus/pci/devices/$pci" "$t/netns/$ino/class/net/net1/device"
gid() { echo "$2" > "$d/ports/1/gids/$1"; echo "$3" > "$d/ports/1/gid_attrs/types/$1"; }
for i in 0 1 2 3 4 5 6 7; do gid "$i" 0000:0000:0000:0000:0000:0000:0000:0000 ""; done
gid 0 fe80:0000:0000:0000:8cca:d1ff:fed4:647d "IB/RoCE v1"
gid 1 fe80:0000:0000:0000:8cca:d1ff:fed4:647d "RoCE v2"
gid 2 0000:0000:0000:0000:0000:ffff:0a0a:0102 "IB/RoCE v1"
gid 3 0000:0000:0000:0000:0000:ffff:0a0a:0102 "RoCE v2"
mkdir -m 700 "$w/state" "$w/state/locks"
echo "{\"stateDir\":\"$w/state\",\"sysfsRoot\":\"$t\"}" > "$w/node.json"; chmod 644 "$w/node.json"
# RAIL_COST_CLASS=41: the same ADD with a class to own (it wrote its entry before format 4 too).
class=${RAIL_COST_CLASS:+"\"trafficClass\":$RAIL_COST_CLASS,"}
conf=$(cat <<JSON
{"cniVersion":"1.1.0","name":"rdma-vf","type":"roce-tune","gidTimeoutMs":500,$class
 "prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/var/run/netns/$ns"}],
 "ips":[{"address":"10.10.1.2/24","interface":0}],"dns":{}}}
JSON
)
run() { # binary command container-id [wrapper...]
    local bin=$1 cmd=$2 cid=$3; shift 3
    echo "$conf" | env -i PATH=/usr/bin:/bin CNI_COMMAND="$cmd" CNI_CONTAINERID="$cid" \
        CNI_NETNS="/var/run/netns/$ns" CNI_IFNAME=net1 CNI_ARGS= CNI_PATH=/usr/lib/cni \
        ROCE_TUNE_NODE_CONFIG="$w/node.json" "$@" "$bin" >/dev/null 2>"$w/err" ||
        { cat "$w/err" >&2; exit 1; }
}
instructions() { grep -h '^summary:' "$w/cg.out" | awk '{print $2}'; }
calls() { tail -1 "$w/st.out" | awk '{print $(NF-2)}'; }
for bin in "$@"; do
    for k in 1 2 3; do
        run "$bin" ADD "cg$k" valgrind --tool=callgrind --callgrind-out-file="$w/cg.out"
        add=$(instructions)
        entries=$(find "$w/state" -maxdepth 1 -name '*.state' | wc -l)
        run "$bin" DEL "cg$k" valgrind --tool=callgrind --callgrind-out-file="$w/cg.out"
        del=$(instructions)
        run "$bin" ADD "st$k" strace -f -c -o "$w/st.out"; addc=$(calls)
        run "$bin" DEL "st$k" strace -f -c -o "$w/st.out"; delc=$(calls)
        echo "$bin: ADD $add instructions, $addc system calls, $entries entry; DEL $del instructions, $delc system calls"
    done
done
