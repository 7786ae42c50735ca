#!/usr/bin/env bash
# integration/demo.sh (`make demo`): one simulated RoCE rail through the real chain
# host-device -> roce-tune -> sbr, driven by cnitool, explained in a few lines.
#
# On a fresh Debian 12 machine, as root. It runs `integration/setup.sh --demo` (idempotent: the
# CNI plugins, iproute2, jq and cnitool, nothing the tests alone need), builds the release
# binaries, builds one rail (a veth "VF" vf0, a pod netns, an RDMA sysfs test tree with mlx5_2
# at 0000:0c:00.2, a simulated kernel that adds the GIDs once the address is there), runs
# cnitool ADD, CHECK and DEL with conf/cnitool/rdma-vf.conflist (a node config, handed over in
# ROCE_TUNE_NODE_CONFIG, points roce-tune at the test tree and a state dir), and while the rail
# is up shows the job's NCCL variables (`roce-tune inspect --env`) and the agent repairing a
# class changed behind roce-tune's back (`roce-tune-agent agent`, stopped after its first
# pass); then an ADD refused for a wrong GID index (101, naming the real one). It prints what it
# saw, and removes everything it created, also when a step fails.
#
# DEMO_SKIP_SETUP=1 / DEMO_SKIP_BUILD=1 skip those steps (the e2e target has done them).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source=integration/lib.sh
. "$here/lib.sh"
lib_require_root demo

say() { printf '%s\n' "$*"; }
die() {
    lib_die demo "all: integration/.build/demo-logs/demo.log" "$*"
}

# ---------------------------------------------------------------- setup and build
if [ "${DEMO_SKIP_SETUP:-0}" != 1 ]; then
    SETUP_QUIET=1 "$here/setup.sh" --demo >/tmp/roce-tune-demo-setup.$$ 2>&1 \
        || { cat /tmp/roce-tune-demo-setup.$$; rm -f /tmp/roce-tune-demo-setup.$$; die "integration/setup.sh --demo"; }
    rm -f /tmp/roce-tune-demo-setup.$$
    say "setup        the CNI plugins, jq and cnitool ready (integration/setup.sh --demo)"
fi
if [ "${DEMO_SKIP_BUILD:-0}" != 1 ]; then
    if make -C "$repo" -n build >/dev/null 2>&1; then
        build_cmd=(make -s -C "$repo" build)
    else
        build_cmd=(cargo build --release --manifest-path "$repo/Cargo.toml")
    fi
    "${build_cmd[@]}" >/tmp/roce-tune-demo-build.$$ 2>&1 \
        || { tail -n 30 /tmp/roce-tune-demo-build.$$; rm -f /tmp/roce-tune-demo-build.$$; die "build (${build_cmd[*]})"; }
    rm -f /tmp/roce-tune-demo-build.$$
    say "build        $E2E_BIN ($(stat -c %s "$E2E_BIN") bytes; the agent's binary, $(stat -c %s "$E2E_AGENT_BIN")) by: ${build_cmd[*]}"
fi
lib_check_tools ip jq sysctl sha512sum timeout unshare || die "prerequisites"

# ---------------------------------------------------------------- the node
export POD_NS_PREFIX=""               # read by lib.sh pod_ns: the pod netns is named roce-tune-demo
DEMO_POD=roce-tune-demo
TEMPLATE="$repo/conf/cnitool/rdma-vf.conflist"
NET="$(jq -r .name "$TEMPLATE")"
VF="$(jq -r '.plugins[0].device' "$TEMPLATE")"
PCI="$(jq -r '.plugins[] | select(.type == "roce-tune") | .deviceID' "$TEMPLATE")"
TC="$(jq -r '.plugins[] | select(.type == "roce-tune") | .trafficClass' "$TEMPLATE")"
GIDX="$(jq -r '.plugins[] | select(.type == "roce-tune") | .gidIndex // 3' "$TEMPLATE")"
CIDR="$(jq -r '.plugins[0].ipam.addresses[0].address' "$TEMPLATE")"
GW="$(jq -r '.plugins[0].ipam.addresses[0].gateway' "$TEMPLATE")"
IP="${CIDR%/*}"
DEV=mlx5_2
IFN=net1

demo_cleanup() {
    local cid
    if [ -n "${E2E_TMP:-}" ] && [ -n "${NODE:-}" ]; then
        cid="$(cnitool_cid "$DEMO_POD" 2>/dev/null)"
        rm -f "$LIBCNI_CACHE/$NET-$cid-$IFN" "$LIBCNI_CACHE/$NET-check-$cid-$IFN"
    fi
    ip netns del "$DEMO_POD" 2>/dev/null
    node_cleanup
    [ -n "${DEMO_VF_CREATED:-}" ] && ip link del "$VF" 2>/dev/null
    lib_cleanup
}
trap 'demo_cleanup' EXIT
trap 'say "demo: interrupted"; exit 130' INT TERM HUP

if ip netns list | awk '{print $1}' | grep -qx "$DEMO_POD"; then
    say "demo: removing netns $DEMO_POD left by an earlier demo"
    ip netns del "$DEMO_POD"
fi
if ip link show "$VF" >/dev/null 2>&1; then
    say "demo: a link named $VF already exists on this host; using vf0demo instead"
    VF=vf0demo
    ip link show "$VF" >/dev/null 2>&1 && die "$VF exists too"
fi

E2E_LOG_DIR="$here/.build/demo-logs"   # lib_cleanup keeps the logs there
lib_init
node_init demo 0 || die "node setup"
pod_create "$DEMO_POD" || die "creating netns $DEMO_POD"
RAIL_VF_NAME="$VF" rail_create 1 "$DEMO_POD" "$IFN" "$PCI" "$DEV" "$CIDR" "$GW" "" "$TC" || die "creating the rail"
DEMO_VF_CREATED=1
NS="$(pod_ns "$DEMO_POD")"
CID="$(cnitool_cid "$DEMO_POD")"
# roce-tune's own log, where the node config says (logFile): the code of a refused ADD is there
# (cnitool shows only the error's msg, and a failed plugin's stderr not at all: libcni).
ROCE_LOG="$E2E_RUN_DIR/$NODE/roce-tune.log"
jq --arg log "$ROCE_LOG" '. + {logFile: $log}' "$NODE_CONF" >"$NODE_CONF.new" && chmod 644 "$NODE_CONF.new" \
    && mv -f "$NODE_CONF.new" "$NODE_CONF" || die "node config"
# The shipped conflist, its host-device pointed at $VF. The test tree and state dir are the
# node's settings: $NODE_CONF names them, and ROCE_TUNE_NODE_CONFIG hands it to roce-tune.
jq --arg vf "$VF" '
    .plugins |= map(if .type == "host-device" then .device = $vf else . end)' \
    "$TEMPLATE" >"$NODE_NETD/$NET.conflist"
# CHECK runs on the same chain without sbr (see below).
jq '.name += "-check" | .plugins |= map(select(.type != "sbr"))' \
    "$NODE_NETD/$NET.conflist" >"$NODE_NETD/$NET-check.conflist"
# A NAD whose gidIndex is wrong: the kernel puts the RoCE v2 GID of an IPv4 address at 3.
BAD_GIDX=1
jq --argjson i "$BAD_GIDX" --arg n "$NET-gid$BAD_GIDX" '.name = $n | .plugins |= map(if .type == "roce-tune" then .gidIndex = $i else . end)' \
    "$NODE_NETD/$NET-check.conflist" >"$NODE_NETD/$NET-gid$BAD_GIDX.conflist"

say ""
say "chain        $(jq -r '[.plugins[].type] | join(" -> ")' "$TEMPLATE")   ($TEMPLATE, cniVersion $(jq -r .cniVersion "$TEMPLATE"))"
say "run as       NETCONFPATH=$NODE_NETD CNI_PATH=$E2E_CNI_PATH CNI_IFNAME=$IFN"
say "             cnitool add|del $NET /var/run/netns/$NS"
say ""
say "rail $IFN ($VF -> $DEV, $PCI) in netns $NS"

# ---------------------------------------------------------------- ADD
tc_before="$(tc_value 1)"
cnitool_run add "$NET" "$DEMO_POD" "$IFN" || die "cnitool add: $(tail -n1 <<<"$CNI_ERR")"
tc_add="$(tc_value 1)"
bad="$(sysctls_bad "$DEMO_POD" "$IFN")"
vals=""
for kv in $RAIL_SYSCTLS; do vals+="${kv%=*}=$(pod_sysctl "$DEMO_POD" "net.ipv4.conf.$IFN.${kv%=*}") "; done
for kv in $RAIL_SYSCTLS_ALL; do vals+="all.${kv%=*}=$(pod_sysctl "$DEMO_POD" "net.ipv4.conf.all.${kv%=*}") "; done
vals="${vals% }"
gid="$(gid_read 1 "$GIDX")"; gtype="$(gid_type 1 "$GIDX")"
table="$(sbr_rule_table "$DEMO_POD" "$IP")"
rule_add="$(ip -n "$NS" rule show | sed -n "s/^[0-9]*:[[:space:]]*\(from $IP lookup [0-9a-z]*\).*/\1/p" | head -n1)"
state_add="$(state_list | tr '\n' ' ')"
res_if="$(jq -r '[.interfaces[].name] | join(",")' <<<"$CNI_OUT")"
res_ip="$(jq -r '[.ips[].address] | join(",")' <<<"$CNI_OUT")"

# ---------------------------------------------------------------- the job's NCCL variables
# What the NRI plugin would inject into the pod's containers, from the rail ADD recorded.
nccl="$("$E2E_TMP/bin/roce-tune" inspect --netns "/var/run/netns/$NS" --env --node-config "$NODE_CONF" 2>>"$NODE_LOG")"
nccl_rc=$?
nccl_line="$(tr '\n' ' ' <<<"$nccl")"; nccl_line="${nccl_line% }"

# ---------------------------------------------------------------- drift, repaired by the agent
# The class set to 0 behind roce-tune's back (what NVIDIA's rdma CNI fork writes), all at once as
# the kernel changes it; then the agent, every second, stopped once its first pass is done.
tcf="$(tc_file 1)"
printf 'Global tclass=0\n' >"$tcf.new" && mv -f "$tcf.new" "$tcf"
tc_drifted="$(tc_value 1)"
AGENT_LOG="$E2E_TMP/logs/demo.agent.log"
repaired="" drift_line=""
if agent_start 1; then
    said_repaired() { grep -q 'repaired: it holds' "$AGENT_LOG"; }
    await 10 said_repaired && repaired=1
    bg_stop "$AGENT_PID"
    # The whole line names the likely writer too; the demo shows what and the repair.
    drift_line="$(grep -m1 'drift: ' "$AGENT_LOG" | sed 's/^.*drift: /drift: /; s/; likely [^;]*;/;/')"
fi
tc_repaired="$(tc_value 1)"

# ---------------------------------------------------------------- DEL
cnitool_run del "$NET" "$DEMO_POD" "$IFN" || die "cnitool del: $(tail -n1 <<<"$CNI_ERR")"
tc_del="$(tc_value 1)"
rule_del="$(sbr_rule_table "$DEMO_POD" "$IP")"
state_del="$(state_count)"
vf_home="no"; vf_in_host 1 && vf_home="yes"
kernel_settle 1

# ---------------------------------------------------------------- CHECK (chain without sbr)
check_clean="" check_drift="" drift_msg=""
if cnitool_run add "$NET-check" "$DEMO_POD" "$IFN"; then
    cnitool_run check "$NET-check" "$DEMO_POD" "$IFN" && check_clean=PASS || check_clean="FAIL: $(tail -n1 <<<"$CNI_ERR")"
    ip netns exec "$NS" sysctl -q -w "net.ipv4.conf.$IFN.arp_ignore=0"
    if cnitool_run check "$NET-check" "$DEMO_POD" "$IFN"; then
        check_drift="NOT detected (CHECK passed)"
    else
        check_drift="detected (CHECK failed)"; drift_msg="$(tail -n1 <<<"$CNI_ERR" | sed 's/^plugin type="roce-tune" failed (check): //' | cut -c1-110)"
    fi
    ip netns exec "$NS" sysctl -q -w "net.ipv4.conf.$IFN.arp_ignore=1"
    cnitool_run del "$NET-check" "$DEMO_POD" "$IFN" || die "cnitool del ($NET-check): $(tail -n1 <<<"$CNI_ERR")"
else
    check_clean="ADD of the check chain failed: $(tail -n1 <<<"$CNI_ERR")"
fi
tc_end="$(tc_value 1)"

# ---------------------------------------------------------------- a wrong GID index, refused
# cnitool shows the error's msg; its code is in roce-tune's log line (logFile). The chain's DEL
# then moves the VF back.
gid_code="" gid_at="" gid_msg=""
if cnitool_run add "$NET-gid$BAD_GIDX" "$DEMO_POD" "$IFN"; then
    gid_msg="ADD passed"
else
    gid_code="$(sed -n 's/.* error ADD [^ ]*: code \([0-9]*\): .*/\1/p' "$ROCE_LOG" | tail -n1)"
    gid_msg="$(tail -n1 <<<"$CNI_ERR" | sed 's/^plugin type="roce-tune" failed (add): //')"
    gid_at="$(sed -n 's/.*the expected RoCE v2 GID is at index \([0-9]*\).*/\1/p' <<<"$gid_msg")"
fi
cnitool_run del "$NET-gid$BAD_GIDX" "$DEMO_POD" "$IFN" || die "cnitool del ($NET-gid$BAD_GIDX): $(tail -n1 <<<"$CNI_ERR")"
gid_state="$(state_count)" gid_home=no
vf_in_host 1 && gid_home=yes
tc_gid="$(tc_value 1)"

# ---------------------------------------------------------------- report
# shellcheck disable=SC2016  # the conditions are eval-ed by mark, on purpose
mark() { if "$@"; then echo OK; else echo WRONG; fi; }
is() { [ "$1" = "$2" ]; }
want_gid="$(IFS=. read -r a b c d <<<"$IP"; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")"
report=()
report+=("  result       cnitool's final result: interface $res_if, address $res_ip   $(mark eval '[ "$res_if" = "$IFN" ] && [ "$res_ip" = "$CIDR" ]')")
report+=("  sysctls      $vals   $(mark is "$bad" "")")
report+=("  traffic class  before: $tc_before   after ADD: $tc_add   after DEL: $tc_del   $(mark eval '[ "$tc_add" = "$TC" ] && [ "$tc_del" = "$tc_before" ]')")
report+=("  GID index $GIDX  $gid $gtype = $IP   $(if [ "$gid" = "$want_gid" ] && [ "$gtype" = "RoCE v2" ]; then echo PASS; else echo "FAIL (want $want_gid RoCE v2)"; fi)")
report+=("  sbr          rule \"${rule_add:-none}\" present after ADD, $([ -z "$rule_del" ] && echo "gone after DEL" || echo "STILL THERE after DEL")   $(mark eval '[ -n "$table" ] && [ -z "$rule_del" ]')")
report+=("  stateDir     after ADD: ${state_add:-no record}  after DEL: $state_del records   $(mark eval '[ -n "$state_add" ] && [ "$state_del" = 0 ]')")
report+=("  NCCL env     roce-tune inspect --env: ${nccl_line:-nothing (exit $nccl_rc)}   $(mark eval '[ "$nccl_rc" = 0 ] && grep -qx "NCCL_IB_HCA==$DEV:1" <<<"$nccl" && grep -qx "NCCL_IB_GID_INDEX=$GIDX" <<<"$nccl" && grep -qx "NCCL_IB_TC=$TC" <<<"$nccl"')")
report+=("  agent        class set to $tc_drifted behind roce-tune's back; one pass of roce-tune-agent agent --every 1: $tc_repaired again   $(mark eval '[ -n "$repaired" ] && [ "$tc_drifted" = 0 ] && [ "$tc_repaired" = "$TC" ]')")
[ -z "$drift_line" ] || report+=("               roce-tune-agent: $drift_line")
report+=("  CHECK        clean: $check_clean   drift (arp_ignore=0 by hand): $check_drift   $(mark eval '[ "$check_clean" = PASS ] && [ -n "$drift_msg" ]')")
[ -z "$drift_msg" ] || report+=("               roce-tune: $drift_msg")
report+=("  VF           moved back to the host by DEL: $vf_home; class at the end: $tc_end   $(mark eval '[ "$vf_home" = yes ] && [ "$tc_end" = "$tc_before" ]')")
report+=("  GID index $BAD_GIDX  a NAD saying gidIndex $BAD_GIDX: ADD refused, code ${gid_code:-none}, the RoCE v2 GID is at index ${gid_at:-?}; class and state untouched, VF back: $gid_home   $(mark eval '[ "$gid_code" = 101 ] && [ "$gid_at" = "$GIDX" ] && [ "$gid_state" = 0 ] && [ "$tc_gid" = "$tc_before" ] && [ "$gid_home" = yes ]')")
[ -z "$gid_msg" ] || report+=("               roce-tune: ${gid_msg/#*; the expected/the expected}")
printf '%s\n' "${report[@]}"
ok=1
printf '%s\n' "${report[@]}" | grep -E "(WRONG|FAIL \(want)" >/dev/null && ok=0
say ""
say "  (CHECK runs on the same chain without sbr: once sbr has moved the routes into its own"
say "   table, host-device's CHECK of the reference plugins 1.1.1 fails with \"Failed to find"
say "   Gateway\", whatever roce-tune does. The traffic class is a test-tree file; the sysctls,"
say "   netns, veth, rules and routes are real.)"
say ""
if [ "$ok" = 1 ]; then
    say "demo: OK (cleaning up everything it created)"
    exit 0
fi
say "demo: FAILED (plugin and cnitool output: integration/.build/demo-logs/demo.log)"
exit 1
