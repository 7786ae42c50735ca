#!/usr/bin/env bash
# integration/kernel/demo.sh (`make demo-kernel`): the demo's chain on a REAL kernel RDMA stack,
# explained step by step. It runs INSIDE the guest integration/kernel/run.sh boots (Debian 12's
# kernel under qemu, soft-RoCE), so nothing here touches the host.
#
# `make demo` shows roce-tune against a test tree whose GIDs a shell loop writes. Here the
# kernel does everything: rdma_rxe is a real RDMA driver, the GID table is the kernel's own,
# RDMA netlink answers from the kernel. The chain is conf/cnitool/rdma-vf.conflist with what
# soft-RoCE changes:
#   host-device -> rxe-link -> roce-tune -> sbr
#   * rxe-link (test-only, integration/kernel/rxe-link) creates the RDMA device on net1 inside
#     the pod, which is what a VF's driver provides: an RDMA device whose port reports net1;
#   * roce-tune gets no deviceID (a veth has no PCI address: the device comes from RDMA
#     netlink), no trafficClass (rxe has no tc/ file: that file is MLNX_OFED/DOCA-OFED's), and
#     gidIndex 1 (rxe's GID table is RoCE v2 only: 0 is the link-local GID, 1 the first address;
#     mlx5 has v1/v2 pairs, so there it is 3).
# roce-tune reads a node config the demo writes (stateDir, logFile in a tmpfs, sysfsRoot /sys).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$(dirname "$here")")"
# shellcheck source=integration/lib.sh
. "$here/../lib.sh"
grep -q 'virtme_hostname' /proc/cmdline \
    || { echo "demo-kernel: run it in the lane's guest: make demo-kernel (or integration/kernel/run.sh $0)" >&2; exit 2; }
lib_require_root demo-kernel

say() { printf '%s\n' "$*"; }
die() {
    lib_die demo-kernel "" "$*"
}
lib_check_tools || die "prerequisites (make demo-kernel installs them)"

# ---------------------------------------------------------------- the node
E2E_TMP="$(mktemp -d /run/roce-tune-demo.XXXXXX)"
E2E_RUN=demo NODE=demo-kernel NODE_LOG="${KERNEL_LOG_DIR:-$E2E_TMP}/demo-kernel.log"
NODE_NETD="$E2E_TMP/netd"
mkdir -p "$E2E_TMP/bin" "$NODE_NETD" "$E2E_TMP/state"; chmod 0700 "$E2E_TMP/state"; : >"$NODE_LOG"
cp "$E2E_BIN" "$here/rxe-link" "$E2E_TMP/bin/"
E2E_CNI_PATH="$CNI_PLUGIN_DIR:$E2E_TMP/bin"
NODE_CONF="$E2E_TMP/node.json"        # lib.sh's cnitool_run and plugin_exec pass it on
export ROCE_TUNE_NODE_CONFIG="$NODE_CONF"
jq -n --arg s "$E2E_TMP/state" --arg l "$E2E_TMP/roce-tune.log" \
    '{stateDir: $s, sysfsRoot: "/sys", logFile: $l}' >"$ROCE_TUNE_NODE_CONFIG"
export POD_NS_PREFIX=""
POD=roce-tune-demo
IFN=net1
RXE=rxe_demo
TEMPLATE="$repo/conf/cnitool/rdma-vf.conflist"
NET="$(jq -r .name "$TEMPLATE")"
VF="$(jq -r '.plugins[0].device' "$TEMPLATE")"
CIDR="$(jq -r '.plugins[0].ipam.addresses[0].address' "$TEMPLATE")"
IP="${CIDR%/*}"
GIDX=1

demo_cleanup() {
    ip netns del "$POD" 2>/dev/null
    ip link del "$VF" 2>/dev/null
    rdma link delete "$RXE" 2>/dev/null
    rm -f "$LIBCNI_CACHE/$NET"-* 2>/dev/null
    rm -rf "$E2E_TMP"
}
trap demo_cleanup EXIT

# The shipped conflist, as soft-RoCE needs it (see the header): rxe-link after host-device;
# roce-tune and sbr without the PCI keys and host paths; gidIndex 1; no trafficClass; logLevel
# debug, so that roce-tune's log says how it found the device.
jq --arg rxe "$RXE" --argjson gidx "$GIDX" '
    .plugins |= (map(del(.pciBusID, .sysfsRoot, .stateDir, .logFile)
                     | if .type == "host-device" then del(.deviceID)
                       elif .type == "roce-tune" then del(.deviceID, .trafficClass) | .gidIndex = $gidx | .logLevel = "debug"
                       elif .type == "sbr" then del(.deviceID) else . end)
                 | .[:1] + [{type: "rxe-link", rdmaDevice: $rxe}] + .[1:])' \
    "$TEMPLATE" >"$NODE_NETD/$NET.conflist"
ip link add "$VF" type veth peer name "${VF}sw" || die "creating the veth $VF"
ip link set "${VF}sw" up
pod_create "$POD" || die "creating netns $POD"
NS="$POD"

say "kernel       $(uname -r) (Debian 12's own kernel package) under qemu; RDMA driver rdma_rxe (soft-RoCE); RDMA netns mode $(cat /sys/module/ib_core/parameters/netns_mode) (shared)"
say "chain        $(jq -r '[.plugins[].type] | join(" -> ")' "$NODE_NETD/$NET.conflist")   (from $TEMPLATE)"
say "             roce-tune: $(jq -c '.plugins[] | select(.type == "roce-tune")' "$NODE_NETD/$NET.conflist")"
say "             rxe-link is test-only: it creates $RXE on $IFN inside the pod, as a VF's driver gives a VF its RDMA device"
say "node config  ROCE_TUNE_NODE_CONFIG=$ROCE_TUNE_NODE_CONFIG: $(jq -c . "$ROCE_TUNE_NODE_CONFIG")"
say "run as       NETCONFPATH=$NODE_NETD CNI_PATH=$E2E_CNI_PATH CNI_IFNAME=$IFN"
say "             cnitool add|del $NET /var/run/netns/$NS"
say ""

# ---------------------------------------------------------------- ADD
t0="${EPOCHREALTIME/./}"
cnitool_run add "$NET" "$POD" "$IFN"
add_rc=$CNI_RC add_err="$CNI_ERR" add_out="$CNI_OUT"
add_ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
say "1. cnitool add ($add_ms ms under emulation)"
say "   host-device  moved $VF into $NS as $IFN and gave it $(ip -n "$NS" -4 -o addr show dev "$IFN" 2>/dev/null | awk '{print $4}' | head -n1) (static IPAM)"
say "   rxe-link     $(rdma dev show "$RXE" >/dev/null 2>&1 && echo "created $RXE on $IFN, from inside the pod" || echo "did NOT create $RXE")"
pod_link="$(ip netns exec "$NS" rdma -j link show 2>/dev/null | jq -c --arg d "$RXE" '.[] | select(.ifname == $d) | {ifname, port, netdev, netdev_index} | with_entries(select(.value != null))')"
host_link="$(rdma -j link show 2>/dev/null | jq -c --arg d "$RXE" '.[] | select(.ifname == $d) | {ifname, port, netdev, netdev_index} | with_entries(select(.value != null))')"
say "   RDMA netlink, asked from the pod: $pod_link"
say "                 asked from the host: $host_link"
say "                 (the kernel names a port's netdev only to its own netns: roce-tune asks from inside the pod)"
say "   GID table of $RXE port 1, as the kernel filled it:"
for i in 0 1 2; do
    g="$(cat "/sys/class/infiniband/$RXE/ports/1/gids/$i" 2>/dev/null)"
    t="$(cat "/sys/class/infiniband/$RXE/ports/1/gid_attrs/types/$i" 2>/dev/null || echo "(unused: reading its type fails with EINVAL)")"
    say "     $i  $g  $t"
done
if [ "$add_rc" != 0 ]; then
    die "cnitool add: $(tail -n1 <<<"$add_err")"
fi

mark() { if "$@"; then echo OK; else echo WRONG; fi; }
want_gid="$(IFS=. read -r a b c d <<<"$IP"; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")"
gid="$(cat "/sys/class/infiniband/$RXE/ports/1/gids/$GIDX")"
bad="$(sysctls_bad "$POD" "$IFN")"
vals=""
for kv in $RAIL_SYSCTLS; do vals+="${kv%=*}=$(pod_sysctl "$POD" "net.ipv4.conf.$IFN.${kv%=*}") "; done
vals+="all.rp_filter=$(pod_sysctl "$POD" net.ipv4.conf.all.rp_filter)"
rule="$(ip -n "$NS" rule show | sed -n "s/^[0-9]*:[[:space:]]*\(from $IP lookup [0-9a-z]*\).*/\1/p" | head -n1)"
found="$(grep -F -- '-> RDMA device' "$E2E_TMP/roce-tune.log" 2>/dev/null | tail -n1 | sed 's/^.*: net1 ->/net1 ->/')"
report=()
report+=("   lookup       no deviceID given; roce-tune's log: \"${found:-nothing}\"   $(mark grep -qF "RDMA device $RXE port 1 (by RDMA netlink)" <<<"$found")")
report+=("   GID check    index $GIDX holds $gid = RoCE v2 GID of $IP   $(mark test "$gid" = "$want_gid")")
report+=("   sysctls      $vals   $(mark test -z "$bad")")
report+=("   sbr          rule \"${rule:-none}\"   $(mark test -n "$rule")")
report+=("   result       interface $(jq -r '[.interfaces[].name] | join(",")' <<<"$add_out"), address $(jq -r '[.ips[].address] | join(",")' <<<"$add_out")")
printf '%s\n' "${report[@]}"
say ""

# ---------------------------------------------------------------- inspect
say "2. roce-tune inspect --netns /var/run/netns/$NS --ifname $IFN --gid-index $GIDX (the check pod, from the node)"
insp="$("$E2E_TMP/bin/roce-tune" inspect --netns "/var/run/netns/$NS" --ifname "$IFN" --gid-index "$GIDX" 2>&1)"; insp_rc=$?
while IFS= read -r line; do say "   | $line"; done <<<"$insp"
say "   exit status $insp_rc   $(mark test "$insp_rc" = 0)"
report+=("inspect $(mark test "$insp_rc" = 0)")
say ""

# ---------------------------------------------------------------- the default index
say "3. The same ADD with the default gidIndex 3, roce-tune called alone as a runtime calls it:"
conf="$(jq -c '(.plugins[] | select(.type == "roce-tune")) + {name: .name, cniVersion: .cniVersion} | del(.gidIndex)' "$NODE_NETD/$NET.conflist")"
conf="$(jq -c --argjson p "$add_out" '. + {prevResult: $p}' <<<"$conf")"
plugin_exec ADD "$conf" "/var/run/netns/$NS" "$IFN" demo-default-index
say "   exit $PL_RC, stdout: $PL_OUT"
code="$(jq -r '.code // ""' <<<"$PL_OUT" 2>/dev/null)"
say "   code $code (101: the GID check failed; the message names the index the kernel used)   $(mark test "$code" = 101)"
report+=("default index $(mark test "$code" = 101)")
say ""

# ---------------------------------------------------------------- DEL
cnitool_run del "$NET" "$POD" "$IFN" || die "cnitool del: $(tail -n1 <<<"$CNI_ERR")"
rxe_gone=yes; rdma dev show "$RXE" >/dev/null 2>&1 && rxe_gone=no
vf_home=no; ip link show "$VF" >/dev/null 2>&1 && vf_home=yes
rule_del="$(sbr_rule_table "$POD" "$IP")"
state_left="$(find "$E2E_TMP/state" -maxdepth 1 -name '*.state' | wc -l)"
say "4. cnitool del"
report+=("   DEL          $RXE removed by rxe-link: $rxe_gone; $VF back on the host: $vf_home; sbr rule: ${rule_del:-gone}; roce-tune state entries: $state_left   $(mark test "$rxe_gone$vf_home${rule_del}$state_left" = yesyes0)")
say "${report[-1]}"
say ""
say "   What this cannot show: the traffic class (rxe has no tc/ file; it exists only with"
say "   MLNX_OFED/DOCA-OFED), and an RDMA device moved into the pod (exclusive mode: rxe cannot"
say "   be moved into a netns, EOPNOTSUPP). Those stay with the test tree of \`make demo\`."
say ""
if printf '%s\n' "${report[@]}" | grep -q WRONG; then
    say "demo-kernel: FAILED (plugin and cnitool output: ${KERNEL_LOG_DIR:+integration/.build/kernel-logs/demo-kernel/}demo-kernel.log)"
    exit 1
fi
say "demo-kernel: OK (everything it created was inside the guest, and is removed)"
