#!/usr/bin/env bash
# integration/kernel/scenarios.sh: roce-tune on a REAL kernel RDMA stack (soft-RoCE, rxe),
# every scenario in one boot. It runs INSIDE the guest that integration/kernel/run.sh boots
# (`make kernel-lane`); on any other machine it refuses to start, because it switches the
# kernel's RDMA netns mode.
#
# The chain, driven by the real cnitool with the release binary, as on a node:
#   host-device (moves a host veth end into the pod as net1; static IPAM gives the address)
#   -> rxe-link  (TEST-ONLY, integration/kernel/rxe-link: `rdma link add <dev> type rxe netdev
#                 net1` inside the pod netns, what a VF's driver gives: an RDMA device whose
#                 port reports net1)
#   -> roce-tune (no deviceID: a veth has no PCI address; the device comes from RDMA netlink)
#   -> sbr
# The kernel fills the GID table itself: no simulated GID manager (lib.sh's loop) here. Error
# codes are asserted on roce-tune's own stdout, by calling it the way a runtime does (lib.sh
# plugin_exec / cni_runtime): cnitool shows only the message.
#
# roce-tune reads the node config the lane writes ($ROCE_TUNE_NODE_CONFIG: stateDir and
# logFile in a tmpfs, sysfsRoot /sys); the network configs carry no host path.
#
# Scenarios (KERNEL_SCENARIOS="lookup ipv6" runs only those; exclusive, when it runs, runs
# first, before any netns exists, because the mode can only change then):
#   exclusive      netns mode exclusive, the rxe device left on the host: ADD fails with 100
#                  naming exclusive mode and the rdma plugin; the mode is set back to shared
#   lookup         ADD without deviceID finds rxe by RDMA netlink; GID index 1 (where the kernel
#                  put it) passes; the default index 3 fails with 101 naming index 1
#   pci-lookup     the device is the pod netdev's, whatever deviceID says: on the lane's e1000e
#                  NICs (PCI functions, as VFs are) a deviceID of the pod's own NIC passes (by
#                  RDMA netlink); another pod's NIC, an address with no device, and a veth pod
#                  naming a NIC's address fail with 100, nothing changed (the other pod's
#                  rdma_cm ToS, the pod's own ToS and sysctls, the state); CASE line per case
#   gid-late       ADD starts before the address exists; the GID arrives while ADD waits;
#                  with a short gidTimeoutMs the same fails with 101
#   ipv6           IPv6 before IPv4, with the addresses added after the device exists (a VF's
#                  order: IPv6 at 1, IPv4 at 2) and before (rxe created after IPAM: the kernel
#                  enumerates IPv4 first, so IPv4 at 1, IPv6 at 2); IPv6 only (at 1)
#   two-pods       two pods, each with net1 on its own rxe device
#   inspect        `roce-tune inspect`: node view and pod view (--netns) on the real kernel
#   traffic-class  trafficClass on rxe (no tc/ directory): 102, the message names MLNX_OFED
#                  and DOCA-OFED
#   del-gone       DEL after the pod netns is gone: roce-tune succeeds with the path gone or
#                  empty; the chain (without sbr, which cannot) with CNI_NETNS empty
#   rdma-cm-tos    rdmaCmTos: default_roce_tos written on ADD, the original restored on DEL;
#                  when the binary leaves the value alone: "not supported by this binary yet",
#                  a FAIL only with KERNEL_EXPECT_RDMA_CM_TOS=1
#   agent-drift    `roce-tune-agent agent --every 1` running: another writer puts 8, then 0, into the
#                  default_roce_tos roce-tune wrote; the agent writes it back within two periods
#                  each time and counts both; SIGTERM stops it; DEL restores the original
#   nri-dra        a DRA rail, no CNI chain: NIC A moved into a pod beside its primary
#                  eth0 (as dranet does), rxe made on it there; `roce-tune-agent nri` (KERNEL_NRI_PLUGIN)
#                  under containerd's NRI adaptation (nri-sim-0.12, ../shared/nri or
#                  ROCE_TUNE_NRI_DIR): RunPodSandbox writes draRails' rdmaCmTos on the real
#                  configfs, the GID check (enforce, index 1) passes, a state entry per rail under
#                  the sandbox id, eth0 untouched; CreateContainer gets NCCL_IB_HCA; after the
#                  NIC went back to the host, StopPodSandbox restores the original ToS exactly
#   rxe-counters   what a rail's RDMA device counts: two rxe devices over a veth pair kept in the
#                  host netns, ibv_rc_pingpong between them, ports/1/hw_counters read before and
#                  after (sent_pkts rises), then netem loss 5% and the retransmission and sequence
#                  counters rise well above the clean run's; the pod's view (shared mode) has no
#                  hw_counters; RTM_GETDCB through roce-tune's DCB codec (examples/dcb_probe.rs)
#                  answers "no DCB" for veth and e1000e, so the QoS verdict is unknown
# Each prints PASS, FAIL (with the reason) or NOT-SUPPORTED; FACT lines record what the real
# kernel did (GID tables, `rdma -j link show` in the pod and on the host, roce-tune's messages).
# Exit status: 0 when nothing FAILed. Logs: $KERNEL_LOG_DIR/<scenario>.log (on the host:
# integration/.build/kernel-logs/kernel-lane/), E2E_VERBOSE=1 also prints a failed scenario's.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=integration/lib.sh
. "$here/../lib.sh"

die() { echo "kernel scenarios: $*" >&2; exit 2; }
grep -q 'virtme_hostname' /proc/cmdline \
    || die "not inside the lane's guest (it changes the RDMA netns mode): run integration/kernel/run.sh $0"
lib_require_root kernel-lane
lib_check_tools || die "prerequisites missing"
for t in rdma nsenter; do command -v "$t" >/dev/null || die "$t missing"; done
[ -d /sys/module/rdma_rxe ] || die "rdma_rxe is not loaded (integration/kernel/guest.sh loads it)"

# ---------------------------------------------------------------- the run
KL_TMP="$(mktemp -d /run/roce-tune-kl.XXXXXX)"      # tmpfs in the guest
E2E_TMP="$KL_TMP"
E2E_RUN=kl
LOG_DIR="${KERNEL_LOG_DIR:-$KL_TMP/logs}"
mkdir -p "$KL_TMP/bin" "$KL_TMP/netd" "$KL_TMP/state" "$LOG_DIR"
chmod 0700 "$KL_TMP/state"
cp "$E2E_BIN" "$KL_TMP/bin/roce-tune"               # a rebuild on the host cannot change it mid-run
cp "$E2E_AGENT_BIN" "$KL_TMP/bin/roce-tune-agent"   # agent_start runs it (agent-drift)
cp "$here/rxe-link" "$KL_TMP/bin/rxe-link"
# The DCB codec's probe (rxe-counters): make kernel-lane builds it (cargo build --example dcb_probe).
DCB_PROBE="${KERNEL_DCB_PROBE:-$E2E_REPO/target/debug/examples/dcb_probe}"
[ ! -x "$DCB_PROBE" ] || cp "$DCB_PROBE" "$KL_TMP/bin/dcb_probe"
BIN="$KL_TMP/bin/roce-tune"
E2E_CNI_PATH="$CNI_PLUGIN_DIR:$KL_TMP/bin"
NODE_CONF="$KL_TMP/node.json"                       # lib.sh's cnitool_run and plugin_exec pass it on
jq -n --arg s "$KL_TMP/state" --arg l "$KL_TMP/roce-tune.log" \
    '{stateDir: $s, sysfsRoot: "/sys", logFile: $l}' >"$NODE_CONF"
chmod 0644 "$NODE_CONF"
export ROCE_TUNE_NODE_CONFIG="$NODE_CONF"           # cnitool passes its environment to plugins
export E2E_TMP E2E_RUN E2E_CNI_PATH
NODE=lane NODE_LOG="$LOG_DIR/lane.log"; : >"$NODE_LOG"
CONFIGFS=/sys/kernel/config/rdma_cm
MODE_FILE=/sys/module/ib_core/parameters/netns_mode

lane_cleanup() {
    local ns l d
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^kl-' || true); do ip netns del "$ns" 2>/dev/null; done
    for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^k[vs][0-9]' || true); do
        ip link del "$l" 2>/dev/null
    done
    for d in $(rdma -j dev show 2>/dev/null | jq -r '.[].ifname' | grep '^rxe_kl' || true); do rdma link delete "$d" 2>/dev/null; done
    for d in "$CONFIGFS"/rxe_kl*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
    rm -f "$LIBCNI_CACHE"/kl[0-9]* 2>/dev/null
    if [ -n "${KERNEL_LOG_DIR:-}" ] && [ -s "$KL_TMP/roce-tune.log" ]; then
        cp "$KL_TMP/roce-tune.log" "$KERNEL_LOG_DIR/roce-tune.log"
    fi
    rm -rf "$KL_TMP"
}
trap lane_cleanup EXIT

# ---------------------------------------------------------------- helpers
# Names carry the scenario's index SIDX (two digits) so a scenario's cleanup finds its own:
#   netns kl-<SIDX>-<pod>, VF kv<SIDX><pod> (peer ks<SIDX><pod>, up, in the host netns),
#   RDMA device rxe_kl<SIDX><pod>, network kl<SIDX>-<name>.
vf_of() { echo "kv$SIDX$1"; }
rxe_of() { echo "rxe_kl$SIDX$1"; }
pod_netns() { pod_ns "$1"; }

fact() { echo "FACT $NODE: $*"; log "FACT $*"; }
# cni_note: "rc N" of the last cnitool_run, with its last stderr line when it failed.
cni_note() { if [ "$CNI_RC" = 0 ]; then echo "rc 0"; else echo "rc $CNI_RC: $(tail -n1 <<<"$CNI_ERR")"; fi; }

# make_vf <pod>: the stand-in VF, a veth end in the host netns.
make_vf() {
    local vf; vf="$(vf_of "$1")"
    ip link add "$vf" type veth peer name "ks$SIDX$1" || return 1
    ip link set "ks$SIDX$1" up
}

# chain_conf <name> <pod> <addresses JSON> <roce-tune JSON | -> <sbr|nosbr> [rxe-link extra JSON]
# Writes $NODE_NETD/kl<SIDX>-<name>.conflist, prints the network name. "-" leaves roce-tune out.
chain_conf() {
    local name="kl$SIDX-$1" pod="$2" addresses="$3" rt="$4" tail="$5" rxe_extra="${6:-}"
    [ -n "$rxe_extra" ] || rxe_extra='{}'
    [ "$rt" != - ] || rt=null
    jq -n --arg name "$name" --arg vf "$(vf_of "$pod")" --arg rxe "$(rxe_of "$pod")" \
        --argjson addrs "$addresses" --argjson rt "$rt" --arg tail "$tail" --argjson rx "$rxe_extra" '
      {cniVersion: "1.0.0", name: $name, plugins: ([
        {type: "host-device", device: $vf, ipam: {type: "static", addresses: $addrs}},
        ({type: "rxe-link", rdmaDevice: $rxe} + $rx)]
        + (if $rt == null then [] else [{type: "roce-tune"} + $rt] end)
        + (if $tail == "sbr" then [{type: "sbr"}] else [] end))}' >"$NODE_NETD/$name.conflist" || return 1
    echo "$name"
}

# rt_conf <network> [extra JSON]: roce-tune's element of the conflist as a runtime hands it over.
rt_conf() {
    local extra="${2:-}"
    [ -n "$extra" ] || extra='{}'
    jq -c --argjson x "$extra" '(.plugins[] | select(.type == "roce-tune")) + {name: .name, cniVersion: .cniVersion} + $x' \
        "$NODE_NETD/$1.conflist"
}
# prev_result <pod> <cidr>...: a 1.0.0 result for net1 in the pod, as host-device gives it.
prev_result() {
    local pod="$1"; shift
    jq -cn --arg sb "$(pod_path "$pod")" --args '{cniVersion: "1.0.0",
        interfaces: [{name: "net1", sandbox: $sb}],
        ips: [$ARGS.positional[] | {address: ., interface: 0}]}' "$@"
}
# rt_exec <ADD|DEL|CHECK> <conf JSON> <prevResult JSON | ""> <pod | ""> <containerID>
# roce-tune alone, as a runtime runs it: PL_RC, PL_OUT (its stdout: the result or the error).
rt_exec() {
    local cmd="$1" conf="$2" prev="$3" pod="$4" cid="$5" netns=""
    [ -z "$prev" ] || conf="$(jq -c --argjson p "$prev" '. + {prevResult: $p}' <<<"$conf")"
    [ -z "$pod" ] || netns="$(pod_path "$pod")"
    plugin_exec "$cmd" "$conf" "$netns" net1 "$cid"
}
pl_code() { jq -r '.code // "none"' <<<"$PL_OUT" 2>/dev/null || echo "not JSON"; }
pl_msg() { jq -r '(.msg // "") + " " + (.details // "")' <<<"$PL_OUT" 2>/dev/null || printf '%s' "$PL_OUT"; }

gid_at() { cat "/sys/class/infiniband/$1/ports/1/gids/$2" 2>/dev/null || echo "unreadable"; }
gtype_at() { cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$2" 2>/dev/null || echo "EINVAL"; }
gid_table() { # <dev> [n]: "i gid type" lines for indexes 0..n-1 (default 4)
    local i
    for ((i = 0; i < ${2:-4}; i++)); do echo "$i $(gid_at "$1" "$i") $(gtype_at "$1" "$i")"; done
}
v4_gid() { local a b c d; IFS=. read -r a b c d <<<"${1%/*}"; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"; }
v6_gid() { # the kernel's uncompressed form of an IPv6 address
    local a="${1%/*}" head tail n x out=() h=() t=()
    if [[ "$a" == *::* ]]; then head="${a%%::*}"; tail="${a#*::}"; else head="$a"; tail=""; fi
    [ -z "$head" ] || IFS=: read -ra h <<<"$head"
    [ -z "$tail" ] || IFS=: read -ra t <<<"$tail"
    n=0; [[ "$a" == *::* ]] && n=$(( 8 - ${#h[@]} - ${#t[@]} ))
    for x in "${h[@]}"; do out+=("$(printf '%04x' "0x$x")"); done
    for ((x = 0; x < n; x++)); do out+=(0000); done
    for x in "${t[@]}"; do out+=("$(printf '%04x' "0x$x")"); done
    (IFS=:; echo "${out[*]}")
}
# wait_gid <dev> <index> <gid> [ms]: the kernel adds GIDs from a workqueue.
wait_gid() {
    local i
    for ((i = 0; i < ${4:-3000} / 50; i++)); do
        [ "$(gid_at "$1" "$2")" = "$3" ] && return 0
        sleep 0.05
    done
    return 1
}
# expect_gid <what> <dev> <index> <gid>: the entry holds the GID as RoCE v2 (waits up to 3 s).
expect_gid() {
    wait_gid "$2" "$3" "$4" || { fail "$1: GID $3 of $2 is $(gid_at "$2" "$3") ($(gtype_at "$2" "$3")), want $4"; return 1; }
    expect_eq "$1: type of GID $3 of $2" "$(gtype_at "$2" "$3")" "RoCE v2"
}
# The pod's and the host's view of one RDMA device through RDMA netlink.
link_json_pod() { ip netns exec "$(pod_netns "$1")" rdma -j link show 2>/dev/null | jq -c --arg d "$2" '[.[] | select(.ifname == $d)]'; }
link_json_host() { rdma -j link show 2>/dev/null | jq -c --arg d "$1" '[.[] | select(.ifname == $d)]'; }
pod_ifindex() { ip -n "$(pod_netns "$1")" -j link show "${2:-net1}" 2>/dev/null | jq -r '.[0].ifindex'; }
pod_mac() { ip -n "$(pod_netns "$1")" -j link show "${2:-net1}" 2>/dev/null | jq -r '.[0].address'; }
rdma_dev_exists() { rdma dev show "$1" >/dev/null 2>&1; }
# lookup_line <containerID>: roce-tune's own account of the device it took for net1 (its debug
# line "net1 -> RDMA device <dev> port <n> (by <how>)"; the configs that need it set logLevel
# debug), from the node config's logFile.
lookup_line() { grep -F " $1/net1: " "$KL_TMP/roce-tune.log" 2>/dev/null | grep -F -- '-> RDMA device' | tail -n1 | sed 's/^.*: net1 ->/net1 ->/'; }

# state_records: roce-tune's state entries in the node config's stateDir.
state_records() { find "$KL_TMP/state" -maxdepth 1 -name '*.state' -printf '%f\n' 2>/dev/null | sort; }
expect_no_state() { expect_eq "$1: roce-tune state entries" "$(state_records | tr '\n' ' ')" ""; }

# facts_link <pod> <dev>: record what RDMA netlink says, in the pod and on the host.
facts_link() {
    fact "rdma -j link show, in pod $(pod_netns "$1"): $(link_json_pod "$1" "$2")"
    fact "rdma -j link show, on the host:            $(link_json_host "$2")"
}
facts_gids() { # <dev> [n]
    local line
    while read -r line; do fact "$1 GID $line"; done < <(gid_table "$1" "${2:-4}")
}

# bg_exec <file prefix> <conf JSON> <prevResult JSON> <pod> <containerID>: roce-tune ADD in the
# background, run as a runtime runs it; writes <p>.rc, <p>.out and <p>.ms, the time the plugin
# process itself ran (what the bounds below are about, without the harness's own jq and sed).
bg_exec() {
    local p="$1" conf="$2" prev="$3" pod="$4" cid="$5"
    conf="$(jq -c --argjson p "$prev" '. + {prevResult: $p}' <<<"$conf")"
    (
        local t0 rc
        t0="${EPOCHREALTIME/./}"
        printf '%s' "$conf" | env CNI_COMMAND=ADD CNI_CONTAINERID="$cid" CNI_NETNS="$(pod_path "$pod")" \
            CNI_IFNAME=net1 CNI_ARGS="" CNI_PATH="$E2E_CNI_PATH" timeout 60 "$BIN" >"$p.out" 2>>"$NODE_LOG"
        rc=$?
        echo $(( (${EPOCHREALTIME/./} - t0) / 1000 )) >"$p.ms"
        echo "$rc" >"$p.rc"
        log "roce-tune ADD (background) cid=$cid: rc $rc after $(cat "$p.ms") ms: $(cat "$p.out")"
    ) &
}

# ================================================================ scenarios
# ---------------------------------------------------------------- exclusive
s_exclusive() {
    expect_eq "precondition: RDMA netns mode ($MODE_FILE)" "$(cat "$MODE_FILE")" Y || return 1
    local others; others="$(ip netns list | awk '{print $1}' | tr '\n' ' ')"
    [ -z "$others" ] || { fail "precondition: netns $others exist; exclusive mode can only be set while none does"; return 1; }
    local out; out="$(rdma system set netns exclusive 2>&1)" || { fail "rdma system set netns exclusive: $out"; return 1; }
    touch "$KL_TMP/exclusive-set"
    expect_eq "netns_mode after 'rdma system set netns exclusive'" "$(cat "$MODE_FILE")" N || return 1
    fact "rdma system show: $(rdma system show 2>&1)"

    pod_create x || return 1; make_vf x || return 1
    local rxe net ns cid; rxe="$(rxe_of x)"; ns="$(pod_netns x)"; cid="$(cnitool_cid x)"
    net="$(chain_conf excl x '[{"address": "192.168.50.2/24"}]' '{"gidIndex": 1}' sbr)" || return 1
    cnitool_run add "$net" x net1
    fact "cnitool add (exclusive mode, $rxe on the host): $(cni_note)"
    fact "rdma -j dev show, in pod $ns: $(ip netns exec "$ns" rdma -j dev show 2>&1)"
    fact "rdma -j link show, on the host: $(link_json_host "$rxe")"
    # The setup itself: rxe-link made the device, and it stayed in the initial netns.
    rdma_dev_exists "$rxe" || { fail "setup: rxe-link did not create $rxe (rc $CNI_RC: $(tail -n1 <<<"$CNI_ERR"))"; return 1; }
    expect_eq "setup: RDMA devices the pod sees" "$(ip netns exec "$ns" rdma -j dev show | jq -c '[.[].ifname]')" "[]" || return 1

    [ "$CNI_RC" != 0 ] || { fail "cnitool add succeeded in exclusive mode with the RDMA device left on the host"; return 1; }
    expect_contains "cnitool's message names exclusive mode" "$CNI_ERR" "exclusive" || return 1
    expect_contains "cnitool's message names the rdma plugin" "$CNI_ERR" "rdma[ -]?(cni|plugin)|\"rdma\"|rdma'|plugin rdma" || return 1
    sbr_rule_present x 192.168.50.2 && { fail "sbr ran after a failed roce-tune"; return 1; }
    expect_no_state "after the failed ADD" || return 1

    rt_exec ADD "$(rt_conf "$net")" "$(prev_result x 192.168.50.2/24)" x kl-excl-direct
    fact "roce-tune ADD (direct): rc $PL_RC, stdout $PL_OUT"
    expect_eq "roce-tune's error code (its own stdout)" "$(pl_code)" 100 || return 1
    expect_contains "roce-tune's message names exclusive mode" "$(pl_msg)" "exclusive" || return 1

    cnitool_run del "$net" x net1; expect_rc0 "cnitool del" || return 1
    rdma_dev_exists "$rxe" && { fail "rxe-link DEL left $rxe"; return 1; }
    expect_no_state "after DEL" || return 1
    # The mode goes back in the runner (exclusive_restore), also when this failed half-way.
}

# exclusive_restore: back to shared mode, which again needs every other netns gone (the kernel
# frees a netns asynchronously: retry for up to 10 s).
exclusive_restore() {
    [ -e "$KL_TMP/exclusive-set" ] || return 0
    local ns i out
    for ns in $(ip netns list | awk '{print $1}'); do ip netns del "$ns"; done
    for ((i = 0; i < 100; i++)); do
        out="$(rdma system set netns shared 2>&1)" && break
        sleep 0.1
    done
    rm -f "$KL_TMP/exclusive-set"
    [ "$(cat "$MODE_FILE")" = Y ] || { echo "could not set the RDMA netns mode back to shared: $out"; return 1; }
}

# ---------------------------------------------------------------- lookup
s_lookup() {
    pod_create a || return 1; make_vf a || return 1
    local rxe net ip=192.168.10.2; rxe="$(rxe_of a)"
    net="$(chain_conf lookup a "[{\"address\": \"$ip/24\", \"gateway\": \"192.168.10.1\"}]" '{"gidIndex": 1, "logLevel": "debug"}' sbr)" || return 1
    cnitool_run add "$net" a net1
    fact "cnitool add (no deviceID, gidIndex 1): $(cni_note)"
    facts_link a "$rxe"; facts_gids "$rxe"

    # What the kernel did (the lane's own ground truth; roce-tune is not involved yet).
    rdma_dev_exists "$rxe" || { fail "setup: rxe-link did not create $rxe: $(tail -n1 <<<"$CNI_ERR")"; return 1; }
    expect_eq "pod view: netdev of $rxe" "$(link_json_pod a "$rxe" | jq -r '.[0].netdev // "none"')" net1 || return 1
    expect_eq "pod view: netdev_index of $rxe" "$(link_json_pod a "$rxe" | jq -r '.[0].netdev_index // "none"')" "$(pod_ifindex a)" || return 1
    expect_eq "host view: netdev of $rxe (reported only to the netdev's netns)" "$(link_json_host "$rxe" | jq -r '.[0].netdev // "none"')" none || return 1
    expect_gid "link-local" "$rxe" 0 "$(gid_from_mac "$(pod_mac a)")" || return 1
    expect_gid "the first address" "$rxe" 1 "$(v4_gid $ip)" || return 1
    expect_eq "GID 2 of $rxe (unused)" "$(gid_at "$rxe" 2) $(gtype_at "$rxe" 2)" "$ZERO_GID EINVAL" || return 1

    expect_rc0 "cnitool add without deviceID (RDMA netlink lookup)" || return 1
    local how; how="$(lookup_line "$(cnitool_cid a)")"
    fact "roce-tune's log: $how"
    expect_contains "roce-tune's account of the lookup" "$how" "RDMA device $rxe port 1 \(by RDMA netlink\)" || return 1
    expect_eq "result interfaces" "$(jq -r '[.interfaces[].name] | join(",")' <<<"$CNI_OUT")" net1 || return 1
    expect_eq "result addresses" "$(jq -r '[.ips[].address] | join(",")' <<<"$CNI_OUT")" "$ip/24" || return 1
    local bad; bad="$(sysctls_bad a net1)"
    [ -z "$bad" ] || { fail "sysctls in the pod: $bad"; return 1; }
    sbr_rule_present a "$ip" || { fail "no sbr rule for $ip after ADD"; return 1; }

    # The default index (3) on a second pod, the whole chain driven as a runtime does.
    pod_create b || return 1; make_vf b || return 1
    local rxeb netb ipb=192.168.10.3; rxeb="$(rxe_of b)"
    netb="$(chain_conf lookup-default b "[{\"address\": \"$ipb/24\"}]" '{}' sbr)" || return 1
    cni_runtime ADD "$NODE_NETD/$netb.conflist" "$(pod_path b)" net1 kl-lookup-default
    fact "roce-tune ADD, default gidIndex (runtime-driven chain): failed at '${RT_FAILED:-none}', stdout $PL_OUT"
    expect_eq "the chain stopped at" "$RT_FAILED" roce-tune || return 1
    expect_eq "roce-tune's error code (its own stdout)" "$(pl_code)" 101 || return 1
    expect_contains "101 names the device" "$(pl_msg)" "$rxeb" || return 1
    expect_contains "101 names index 1, where the kernel put the GID" "$(pl_msg)" "index 1([^0-9]|$)|GID_INDEX=1([^0-9]|$)" || return 1
    cni_runtime DEL "$NODE_NETD/$netb.conflist" "$(pod_path b)" net1 kl-lookup-default
    expect_eq "runtime DEL after the failed ADD, failed at" "${RT_FAILED:-none}" none || return 1

    cnitool_run del "$net" a net1; expect_rc0 "cnitool del" || return 1
    rdma_dev_exists "$rxe" && { fail "$rxe still there after DEL"; return 1; }
    sbr_rule_present a "$ip" && { fail "sbr rule for $ip still there after DEL"; return 1; }
    ip link show "$(vf_of a)" >/dev/null 2>&1 || { fail "the VF did not come back to the host"; return 1; }
    expect_no_state "after DEL" || return 1
}

# ---------------------------------------------------------------- pci-lookup
# The device roce-tune touches is the one whose netdev is CNI_IFNAME in the pod's own netns, as
# the kernel says from inside it; deviceID (tenant input: the network config) is only checked
# against it. A netdev that is a PCI function's, as a VF's is, comes from the lane's e1000e
# NICs (run.sh: 0000:00:10.0 and 0000:00:11.0, one qemu hub, fixed MACs): rtnetlink in the pod
# reports their parent as "pci 0000:00:1x.0", and a sysfs mounted in the pod netns links
# class/net/net1/device to that function. Their RDMA device cannot hang off the function (rxe
# is a virtual device since Linux 5.11, a9d2e9ae953f) and moving a netdev to another netns
# deletes an rxe device on it, so rxe-link makes it in the pod after host-device (pciBusID, as
# Multus gives it: host-device 1.1.1 moves the netdev it finds in
# /sys/bus/pci/devices/<pciBusID>/net) has moved the NIC in.
#   a         pod A, NIC A, deviceID = NIC A: ADD succeeds by RDMA netlink; rdma_cm ToS 106
#   b         pod B, NIC B, deviceID = NIC A: 100 naming both addresses; nothing changed
#   c         pod C, NIC B, deviceID = an address with no device: 100 naming both; nothing changed
#   d-rxe     a veth pod with an rxe device on net1, deviceID = NIC A: 100, "not a VF" (or "no
#             PCI function"); nothing changed
#   d-norxe   a veth pod without an RDMA device, deviceID = NIC A: 100, "not a VF"; nothing
# Each through cnitool (the whole chain) and, as <case>-direct, roce-tune alone as a runtime
# runs it (the code from its own stdout), the pod's ToS set by hand first. "Nothing changed":
# pod A's ToS still 106, the case pod's own ToS as it was, the roce-tune state entries pod A's
# alone, the pod's sysctls as the pod had them, no sbr rule. Every case runs and prints its
# own CASE line; the scenario fails if any did. Then DEL: pod A's ToS back to the original.
PCI_A=0000:00:10.0 PCI_B=0000:00:11.0 PCI_NONE=0000:00:1f.7
MAC_A=52:54:00:4b:00:10 MAC_B=52:54:00:4b:00:11      # run.sh's KERNEL_NICS
declare -A PCI_IF=()                                 # the NICs' host names at the start

pci_netdev() { find "/sys/bus/pci/devices/$1/net" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | head -n1; }
tos_of() { # <rdma dev>: its rdma_cm default ToS, "unset" while nobody made its configfs directory
    if [ -d "$CONFIGFS/$1" ]; then cat "$CONFIGFS/$1/ports/1/default_roce_tos" 2>/dev/null || echo unreadable; else echo unset; fi
}
# pod_rt_sysctls <pod>: the sysctls roce-tune sets, "all.k=v ... net1.k=v ...", in one
# process: nsenter --net is enough for /proc/sys/net (it follows the reader's netns), and
# 'ip netns exec' (lib.sh's pod_sysctl) remounts /sys for each key: 13 such reads and one write
# took 6 s of one case under TCG (the first run of this scenario).
pci_sysctls_read() { # <pod> <keys...>
    local pod="$1"; shift
    nsenter --net="$(pod_path "$pod")" sysctl "$@" 2>/dev/null | sed 's/^net\.ipv4\.conf\.//; s/ = /=/' | tr '\n' ' ' | sed 's/ $//'
}
pod_rt_sysctls() {
    local kv keys=()
    for kv in $RAIL_SYSCTLS_ALL; do keys+=("net.ipv4.conf.all.${kv%=*}"); done
    for kv in $RAIL_SYSCTLS; do keys+=("net.ipv4.conf.net1.${kv%=*}"); done
    pci_sysctls_read "$1" "${keys[@]}"
}
# pod_rt_sysctls_new <pod>: what they are on a net1 just moved into the pod: a netdev that
# enters a netns gets that netns's conf/default values (its IPv4 config is made anew).
pod_rt_sysctls_new() {
    local kv keys=()
    for kv in $RAIL_SYSCTLS_ALL; do keys+=("net.ipv4.conf.all.${kv%=*}"); done
    for kv in $RAIL_SYSCTLS; do keys+=("net.ipv4.conf.default.${kv%=*}"); done
    pci_sysctls_read "$1" "${keys[@]}" | sed 's/default\./net1./g'
}
# rail_sysctls: the values roce-tune must set (lib.sh's list), in pod_rt_sysctls's form.
rail_sysctls() {
    local kv out=()
    for kv in $RAIL_SYSCTLS_ALL; do out+=("all.$kv"); done
    for kv in $RAIL_SYSCTLS; do out+=("net1.$kv"); done
    echo "${out[*]}"
}
pod_rt_sysctls_set() { # <pod> <"scope.k=v ..."> : put them back by hand
    local kv args=()
    for kv in $2; do args+=("net.ipv4.conf.$kv"); done
    nsenter --net="$(pod_path "$1")" sysctl -q -w "${args[@]}" >/dev/null
}

# pci_conf <name> <pod> <host-device JSON> <addresses JSON> <roce-tune JSON> <rxe|norxe>
pci_conf() {
    local name="kl$SIDX-$1"
    jq -n --arg name "$name" --argjson hd "$3" --argjson addrs "$4" --argjson rt "$5" \
        --arg rxe "$(rxe_of "$2")" --arg with "$6" '
      {cniVersion: "1.0.0", name: $name, plugins: ([
        {type: "host-device"} + $hd + {ipam: {type: "static", addresses: $addrs}}]
        + (if $with == "rxe" then [{type: "rxe-link", rdmaDevice: $rxe}] else [] end)
        + [{type: "roce-tune"} + $rt, {type: "sbr"}])}' >"$NODE_NETD/$name.conflist" || return 1
    echo "$name"
}

# pci_unchanged <what> <pod> <its rdma dev | -> <its ToS, extended regex> <sysctls before> [ip]
pci_unchanged() {
    local what="$1" pod="$2" dev="$3" tos="$4" before="$5" ip="${6:-}"
    expect_eq "$what: pod A's $PCI_RXE_A ToS" "$(tos_of "$PCI_RXE_A")" 106 || return 1
    if [ "$dev" != - ]; then
        expect_contains "$what: $dev's own ToS" "$(tos_of "$dev")" "^($tos)$" || return 1
    fi
    expect_eq "$what: roce-tune state entries (pod A's alone)" "$(state_records | tr '\n' ' ')" "$PCI_STATE_A" || return 1
    expect_eq "$what: the sysctls roce-tune sets, in pod $pod" "$(pod_rt_sysctls "$pod")" "$before" || return 1
    if [ -n "$ip" ] && sbr_rule_present "$pod" "$ip"; then fail "$what: sbr ran (a rule for $ip)"; return 1; fi
    return 0
}

# pci_attach_case <pod> <network> <rdma dev | -> <ip> <deviceID> <message regex> <what>:
# cnitool ADD of the whole chain must fail at roce-tune with 100's message; nothing changed.
pci_attach_case() {
    local pod="$1" net="$2" dev="$3" ip="$4" devid="$5" re="$6" before
    before="$(pod_rt_sysctls_new "$pod")"
    cnitool_run add "$net" "$pod" net1
    PCI_ADDED=0; [ "$CNI_RC" != 0 ] || PCI_ADDED=1
    fact "$7 (deviceID $devid): cnitool add $(cni_note)"
    [ "$dev" = - ] || fact "$7: $dev: $(link_json_pod "$pod" "$dev"), ToS $(tos_of "$dev")"
    fact "$7: pod $pod net1: $(ip -n "$(pod_netns "$pod")" -d -j link show net1 2>/dev/null | jq -c '.[0] | {parentbus, parentdev, address}')"
    [ "$CNI_RC" != 0 ] || { fail "cnitool add with deviceID $devid succeeded: roce-tune took the pod's device though deviceID is not its netdev's PCI function"; return 1; }
    expect_contains "cnitool's error comes from roce-tune" "$CNI_ERR" 'plugin type="roce-tune"' || return 1
    expect_contains "cnitool's message" "$CNI_ERR" "$re" || return 1
    pci_unchanged "after the failed cnitool add" "$pod" "$dev" "unset|0" "$before" "$ip"
}
# pci_direct_case <pod> <network> <rdma dev | -> <cidr> <message regex> <what>: roce-tune alone
# on the attached pod, the pod's ToS set to 64 first: 100 and the message; nothing changed.
pci_direct_case() {
    local pod="$1" net="$2" dev="$3" cidr="$4" re="$5" before
    ip -n "$(pod_netns "$pod")" link show net1 >/dev/null 2>&1 || { fail "setup: no net1 in pod $pod"; return 1; }
    if [ "$dev" != - ]; then
        rdma_dev_exists "$dev" || { fail "setup: no $dev"; return 1; }
        mkdir -p "$CONFIGFS/$dev" && echo 64 >"$CONFIGFS/$dev/ports/1/default_roce_tos" || { fail "setup: ToS 64 on $dev"; return 1; }
    fi
    before="$(pod_rt_sysctls "$pod")"
    rt_exec ADD "$(rt_conf "$net")" "$(prev_result "$pod" "$cidr")" "$pod" "kl-pci-$pod-direct"
    PCI_DIRECT_ADDED=0; [ "$PL_RC" != 0 ] || PCI_DIRECT_ADDED=1
    fact "$6, roce-tune alone: rc $PL_RC, stdout $(head -c 400 <<<"$PL_OUT")"
    expect_eq "roce-tune's error code (its own stdout: $(head -c 200 <<<"$PL_OUT"))" "$(pl_code)" 100 || return 1
    expect_contains "roce-tune's message" "$(pl_msg)" "$re" || return 1
    pci_unchanged "after the failed direct ADD" "$pod" "$dev" 64 "$before"
}
# pci_detach <pod> <network> <NIC's PCI address | ->: undo what a wrongly successful direct
# ADD did (its DEL restores the ToS), then DEL the chain, the NIC back under its name.
pci_detach() {
    local pod="$1" net="$2" pci="$3" i
    [ "${PCI_DIRECT_ADDED:-0}" = 0 ] || rt_exec DEL "$(rt_conf "$net")" "" "$pod" "kl-pci-$pod-direct"
    PCI_DIRECT_ADDED=0
    cnitool_run del "$net" "$pod" net1
    local del_rc="$CNI_RC"
    ip netns del "$(pod_netns "$pod")" 2>/dev/null
    if [ "$pci" != - ]; then
        for ((i = 0; i < 50; i++)); do [ -n "$(pci_netdev "$pci")" ] && break; sleep 0.1; done
        pci_restore_name "$pci" || { fail "NIC $pci is '$(pci_netdev "$pci")' in the host netns after DEL, not ${PCI_IF[$pci]}"; return 1; }
    fi
    CNI_RC="$del_rc"; expect_rc0 "cnitool del $net"
}
# pci_restore_name <pci>: a NIC that came back from a deleted netns keeps the pod's name (net1).
pci_restore_name() {
    local cur; cur="$(pci_netdev "$1")"
    [ -n "$cur" ] && [ "$cur" != "${PCI_IF[$1]}" ] && ip link set "$cur" down && ip link set "$cur" name "${PCI_IF[$1]}"
    [ "$(pci_netdev "$1")" = "${PCI_IF[$1]}" ]
}

# pci_case <label> <function> [args...]: one case; its verdict on a CASE line, the lane goes on.
pci_case() {
    local label="$1" rc reason; shift
    rm -f "$E2E_TMP/reason.$NODE"
    "$@"; rc=$?
    reason="$(cat "$E2E_TMP/reason.$NODE" 2>/dev/null)"; rm -f "$E2E_TMP/reason.$NODE"
    if [ "$rc" = 0 ]; then
        echo "CASE $NODE $label: PASS"; log "CASE $label: PASS"
    else
        echo "CASE $NODE $label: FAIL: ${reason:-rc $rc}"; log "CASE $label: FAIL: $reason"
        PCI_FAILED+="${PCI_FAILED:+; }$label: $(cut -c1-160 <<<"${reason:-rc $rc}")"
    fi
}

# pci_facts <pod> <pci>: what the kernel shows of a NIC's netdev moved into a pod.
pci_facts() {
    local pod="$1" pci="$2" ns path; ns="$(pod_netns "$pod")"; path="$(pod_path "$pod")"
    fact "$pci in pod $pod: ip -d -j link show net1: $(ip -n "$ns" -d -j link show net1 | jq -c '.[0] | {ifname, address, parentbus, parentdev, ifalias, operstate}')"
    fact "$pci in pod $pod: class/net/net1/device, sysfs of 'ip netns exec': $(ip netns exec "$ns" readlink /sys/class/net/net1/device 2>&1)"
    fact "$pci in pod $pod: class/net/net1/device, sysfs mounted in the pod netns (nsenter --net, unshare -m): $(nsenter --net="$path" unshare -m sh -c 'mount -t sysfs sysfs /sys && readlink -f /sys/class/net/net1/device' 2>&1)"
    fact "$pci in pod $pod: host's sysfs: /sys/bus/pci/devices/$pci/net holds [$(pci_netdev "$pci")], /sys/class/net/net1 $([ -e /sys/class/net/net1 ] && echo exists || echo absent)"
}

s_pci_lookup() {
    local pci n t0 i
    PCI_FAILED=""
    trap 'pci_cleanup; scen_cleanup' EXIT
    # Preconditions: the NICs run.sh gives, and no device at PCI_NONE.
    for pci in "$PCI_A" "$PCI_B"; do
        n="$(pci_netdev "$pci")"
        [ -n "$n" ] || { fail "no netdev at PCI $pci: the lane boots with two e1000e NICs (run.sh; KERNEL_LANE_NICS=${KERNEL_LANE_NICS:-1})"; return 1; }
        PCI_IF[$pci]="$n"
        fact "NIC $pci: driver $(basename "$(readlink "/sys/bus/pci/devices/$pci/driver")"), netdev $n: $(ip -d -j link show "$n" | jq -c '.[0] | {address, parentbus, parentdev}')"
    done
    [ ! -e "/sys/bus/pci/devices/$PCI_NONE" ] || { fail "precondition: a device exists at $PCI_NONE"; return 1; }
    expect_eq "NIC A's MAC (run.sh's fixed one)" "$(cat "/sys/class/net/${PCI_IF[$PCI_A]}/address")" "$MAC_A" || return 1
    expect_eq "NIC B's MAC (run.sh's fixed one)" "$(cat "/sys/class/net/${PCI_IF[$PCI_B]}/address")" "$MAC_B" || return 1
    expect_eq "NIC A's rtnetlink parent" "$(ip -d -j link show "${PCI_IF[$PCI_A]}" | jq -r '.[0] | "\(.parentbus) \(.parentdev)"')" "pci $PCI_A" || return 1
    # Carrier: how long e1000e takes to report it after 'ip link set up' (both NICs at once).
    t0="${EPOCHREALTIME/./}"
    ip link set "${PCI_IF[$PCI_A]}" up; ip link set "${PCI_IF[$PCI_B]}" up
    declare -A up=()
    for ((i = 0; i < 300; i++)); do
        for pci in "$PCI_A" "$PCI_B"; do
            [ -z "${up[$pci]:-}" ] && [ "$(cat "/sys/class/net/${PCI_IF[$pci]}/carrier" 2>/dev/null)" = 1 ] \
                && up[$pci]=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
        done
        [ -n "${up[$PCI_A]:-}" ] && [ -n "${up[$PCI_B]:-}" ] && break
        sleep 0.05
    done
    fact "carrier after 'ip link set up' (host netns): $PCI_A ${up[$PCI_A]:-none within 15 s} ms, $PCI_B ${up[$PCI_B]:-none within 15 s} ms"
    ip link set "${PCI_IF[$PCI_A]}" down; ip link set "${PCI_IF[$PCI_B]}" down

    # ---- a: pod A, deviceID = its own NIC
    PCI_RXE_A="$(rxe_of a)"
    pod_create a || return 1
    local neta ipa=192.168.70.1 ms
    neta="$(pci_conf a-own a "{\"pciBusID\": \"$PCI_A\"}" "[{\"address\": \"$ipa/24\"}]" \
        "{\"gidIndex\": 1, \"logLevel\": \"debug\", \"deviceID\": \"$PCI_A\", \"rdmaCmTos\": 106}" rxe)" || return 1
    t0="${EPOCHREALTIME/./}"
    cnitool_run add "$neta" a net1
    ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
    for ((i = 0; i < 300; i++)); do [ "$(ip -n "$(pod_netns a)" -j link show net1 2>/dev/null | jq -r '.[0].operstate')" = UP ] && break; sleep 0.05; done
    fact "a (deviceID $PCI_A, its own NIC): cnitool add $(cni_note) in $ms ms; net1's operstate $(ip -n "$(pod_netns a)" -j link show net1 2>/dev/null | jq -r '.[0].operstate') $((i * 50)) ms after cnitool returned"
    pci_facts a "$PCI_A"
    facts_link a "$PCI_RXE_A"
    fact "$PCI_RXE_A: sysfs $(readlink -f "/sys/class/infiniband/$PCI_RXE_A"), device link $([ -e "/sys/class/infiniband/$PCI_RXE_A/device" ] && readlink -f "/sys/class/infiniband/$PCI_RXE_A/device" || echo none), node_guid $(cat "/sys/class/infiniband/$PCI_RXE_A/node_guid" 2>&1)"
    facts_gids "$PCI_RXE_A" 2
    fact "a: roce-tune's log: $(lookup_line "$(cnitool_cid a)"); ToS of $PCI_RXE_A $(tos_of "$PCI_RXE_A")"
    pci_case a pci_case_a "$neta" "$ipa" || true
    [ -z "$PCI_FAILED" ] || { printf '%s' "$PCI_FAILED" >"$E2E_TMP/reason.$NODE"; return 1; }
    PCI_STATE_A="$(state_records | tr '\n' ' ')"

    # ---- b: pod B on NIC B, deviceID = NIC A
    local netb ipb=192.168.70.2 re_both="($PCI_A.*$PCI_B|$PCI_B.*$PCI_A)"
    pod_create b || return 1
    netb="$(pci_conf b-other b "{\"pciBusID\": \"$PCI_B\"}" "[{\"address\": \"$ipb/24\"}]" \
        "{\"gidIndex\": 1, \"logLevel\": \"debug\", \"deviceID\": \"$PCI_A\", \"rdmaCmTos\": 74}" rxe)" || return 1
    pci_case b pci_attach_case b "$netb" "$(rxe_of b)" "$ipb" "$PCI_A" "$re_both" "b (pod B on $PCI_B)"
    pci_undo_add b "$netb"
    pci_case b-direct pci_direct_case b "$netb" "$(rxe_of b)" "$ipb/24" "$re_both" "b (pod B on $PCI_B, deviceID $PCI_A)"
    pci_case b-detach pci_detach b "$netb" "$PCI_B"

    # ---- c: pod C on NIC B, deviceID = no device
    local netc ipc=192.168.70.3 re_none="($PCI_NONE.*$PCI_B|$PCI_B.*$PCI_NONE)"
    pod_create c || return 1
    netc="$(pci_conf c-none c "{\"pciBusID\": \"$PCI_B\"}" "[{\"address\": \"$ipc/24\"}]" \
        "{\"gidIndex\": 1, \"logLevel\": \"debug\", \"deviceID\": \"$PCI_NONE\", \"rdmaCmTos\": 74}" rxe)" || return 1
    pci_case c pci_attach_case c "$netc" "$(rxe_of c)" "$ipc" "$PCI_NONE" "$re_none" "c (pod C on $PCI_B)"
    pci_undo_add c "$netc"
    pci_case c-direct pci_direct_case c "$netc" "$(rxe_of c)" "$ipc/24" "$re_none" "c (pod C on $PCI_B, deviceID $PCI_NONE)"
    pci_case c-detach pci_detach c "$netc" "$PCI_B"

    # ---- d: veth pods naming NIC A, with an rxe device on net1 and without one
    local netv netw ipv=192.168.71.2 ipw=192.168.71.3
    pod_create v || return 1; make_vf v || return 1
    netv="$(pci_conf d-veth-rxe v "{\"device\": \"$(vf_of v)\"}" "[{\"address\": \"$ipv/24\"}]" \
        "{\"gidIndex\": 1, \"logLevel\": \"debug\", \"deviceID\": \"$PCI_A\", \"rdmaCmTos\": 74}" rxe)" || return 1
    pci_case d-rxe pci_attach_case v "$netv" "$(rxe_of v)" "$ipv" "$PCI_A" "not a VF|no PCI function" "d-rxe (a veth pod with $(rxe_of v))"
    pci_undo_add v "$netv"
    pci_case d-rxe-direct pci_direct_case v "$netv" "$(rxe_of v)" "$ipv/24" "not a VF|no PCI function" "d-rxe (a veth pod with $(rxe_of v), deviceID $PCI_A)"
    pci_case d-rxe-detach pci_detach v "$netv" -
    pod_create w || return 1; make_vf w || return 1
    netw="$(pci_conf d-veth w "{\"device\": \"$(vf_of w)\"}" "[{\"address\": \"$ipw/24\"}]" \
        "{\"gidIndex\": 1, \"logLevel\": \"debug\", \"deviceID\": \"$PCI_A\", \"rdmaCmTos\": 74}" norxe)" || return 1
    fact "d-norxe: RDMA devices the veth pod sees before ADD: $(ip netns exec "$(pod_netns w)" rdma -j link show 2>/dev/null | jq -c '[.[] | select(.netdev != null) | .ifname]')"
    pci_case d-norxe pci_attach_case w "$netw" - "$ipw" "$PCI_A" "not a VF" "d-norxe (a veth pod, no RDMA device)"
    pci_undo_add w "$netw"
    pci_case d-norxe-direct pci_direct_case w "$netw" - "$ipw/24" "not a VF" "d-norxe (a veth pod, no RDMA device, deviceID $PCI_A)"
    pci_case d-norxe-detach pci_detach w "$netw" -

    # ---- DEL: roce-tune first (the rxe device goes with rxe-link's DEL), then the chain.
    pci_case del pci_case_del "$neta" "$ipa"
    [ -z "$PCI_FAILED" ] || { printf '%s' "$PCI_FAILED" >"$E2E_TMP/reason.$NODE"; return 1; }
}

pci_case_a() {
    local net="$1" ip="$2" ns; ns="$(pod_netns a)"
    expect_rc0 "cnitool add with deviceID $PCI_A, the pod's own NIC" || return 1
    expect_eq "pod A's net1: rtnetlink parent, asked in the pod" "$(ip -n "$ns" -d -j link show net1 | jq -r '.[0] | "\(.parentbus) \(.parentdev)"')" "pci $PCI_A" || return 1
    expect_contains "pod A's class/net/net1/device, sysfs made in the pod netns" \
        "$(nsenter --net="$(pod_path a)" unshare -m sh -c 'mount -t sysfs sysfs /sys && readlink -f /sys/class/net/net1/device' 2>&1)" "/$PCI_A$" || return 1
    expect_eq "host's /sys/bus/pci/devices/$PCI_A/net after host-device moved it" "$(pci_netdev "$PCI_A")" "" || return 1
    expect_eq "pod view: netdev of $PCI_RXE_A" "$(link_json_pod a "$PCI_RXE_A" | jq -r '.[0].netdev // "none"')" net1 || return 1
    expect_gid "link-local GID of the fixed MAC" "$PCI_RXE_A" 0 "$(gid_from_mac "$MAC_A")" || return 1
    expect_eq "node GUID of $PCI_RXE_A (from the fixed MAC)" "$(cat "/sys/class/infiniband/$PCI_RXE_A/node_guid")" 5054:00ff:fe4b:0010 || return 1
    expect_gid "pod A's address" "$PCI_RXE_A" 1 "$(v4_gid "$ip")" || return 1
    expect_contains "roce-tune's account of the lookup" "$(lookup_line "$(cnitool_cid a)")" "RDMA device $PCI_RXE_A port 1 \(by RDMA netlink\)" || return 1
    expect_eq "pod A's rdma_cm ToS after ADD" "$(tos_of "$PCI_RXE_A")" 106 || return 1
    expect_eq "the sysctls roce-tune sets, in pod A" "$(pod_rt_sysctls a)" "$(rail_sysctls)" || return 1
    sbr_rule_present a "$ip" || { fail "no sbr rule for $ip after ADD"; return 1; }
}
# pci_undo_add <pod> <network>: what a wrongly successful cnitool ADD did, undone before the
# direct case: roce-tune's DEL restores the ToS it wrote, the sysctls go back by hand.
pci_undo_add() {
    [ "${PCI_ADDED:-0}" = 1 ] || return 0
    rt_exec DEL "$(rt_conf "$2")" "" "$1" "$(cnitool_cid "$1")"
    pod_rt_sysctls_set "$1" "$(pod_rt_sysctls_new "$1")"
}
pci_case_del() {
    local net="$1" ip="$2"
    rt_exec DEL "$(rt_conf "$net")" "" a "$(cnitool_cid a)"
    expect_eq "roce-tune DEL of pod A (stdout: $PL_OUT)" "$PL_RC" 0 || return 1
    # The original: the kernel's 0 of a new cma device (rxe-link made it in the same chain).
    expect_eq "pod A's ToS after roce-tune's DEL (the original)" "$(tos_of "$PCI_RXE_A")" 0 || return 1
    cnitool_run del "$net" a net1; expect_rc0 "cnitool del pod A" || return 1
    rdma_dev_exists "$PCI_RXE_A" && { fail "$PCI_RXE_A still there after DEL"; return 1; }
    expect_eq "NIC A back in the host netns, under its name" "$(pci_netdev "$PCI_A")" "${PCI_IF[$PCI_A]}" || return 1
    expect_no_state "after DEL" || return 1
}
pci_cleanup() {
    local ns pci i
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^kl-$SIDX-" || true); do ip netns del "$ns" 2>/dev/null; done
    for pci in "${!PCI_IF[@]}"; do
        for ((i = 0; i < 50; i++)); do [ -n "$(pci_netdev "$pci")" ] && break; sleep 0.1; done
        pci_restore_name "$pci" || echo "kernel scenarios: NIC $pci is '$(pci_netdev "$pci")' after pci-lookup, not ${PCI_IF[$pci]}" >&2
    done
}

# ---------------------------------------------------------------- gid-late
# By hand, as a VF is before the runtime calls ADD: net1 in the pod, its RDMA device there, no
# address yet. roce-tune's ADD starts; the address comes 800 ms later; the kernel adds the GID
# while ADD polls for it.
s_gid_late() {
    pod_create l || return 1; make_vf l || return 1
    local ns vf rxe ip=10.40.0.2; ns="$(pod_netns l)"; vf="$(vf_of l)"; rxe="$(rxe_of l)"
    ip link set "$vf" netns "$ns" && ip -n "$ns" link set "$vf" name net1 && ip -n "$ns" link set net1 up || return 1
    local out; out="$(ip netns exec "$ns" rdma link add "$rxe" type rxe netdev net1 2>&1)" || { fail "rdma link add: $out"; return 1; }
    expect_gid "link-local" "$rxe" 0 "$(gid_from_mac "$(pod_mac l)")" || return 1
    chain_conf late l '[]' '{"gidIndex": 1, "gidTimeoutMs": 5000}' nosbr >/dev/null || return 1
    local conf prev; conf="$(rt_conf "kl$SIDX-late")"; prev="$(prev_result l "$ip/24")"

    bg_exec "$KL_TMP/late" "$conf" "$prev" l kl-late-1
    sleep 0.8
    local before; before="$(gid_at "$rxe" 1)"
    ip -n "$ns" addr add "$ip/24" dev net1
    wait
    local rc ms; rc="$(cat "$KL_TMP/late.rc")"; ms="$(cat "$KL_TMP/late.ms")"; PL_OUT="$(cat "$KL_TMP/late.out")"
    fact "GID 1 of $rxe 800 ms into ADD, just before 'ip addr add': $before"
    fact "roce-tune ADD with the address added 800 ms after it started: rc $rc after $ms ms${PL_OUT:+, stdout $(head -c 300 <<<"$PL_OUT")}"
    expect_eq "GID 1 when the address was added" "$before" "$ZERO_GID" || return 1
    expect_eq "ADD exit code (stdout: $(head -c 200 <<<"$PL_OUT"))" "$rc" 0 || return 1
    [ "$ms" -ge 800 ] || { fail "ADD returned after $ms ms, before the address existed"; return 1; }
    expect_gid "the late address" "$rxe" 1 "$(v4_gid $ip)" || return 1
    rt_exec DEL "$conf" "$prev" l kl-late-1; expect_eq "DEL exit code" "$PL_RC" 0 || return 1

    # The bound: gidTimeoutMs 300 and the address 2500 ms late: 101 before the address exists
    # (under emulation a roce-tune ADD costs about 0.9 s on its own).
    ip -n "$ns" addr del "$ip/24" dev net1
    wait_gid "$rxe" 1 "$ZERO_GID" || { fail "the kernel kept GID 1 after the address went"; return 1; }
    conf="$(rt_conf "kl$SIDX-late" '{"gidTimeoutMs": 300}')"
    bg_exec "$KL_TMP/late2" "$conf" "$prev" l kl-late-2
    sleep 2.5
    ip -n "$ns" addr add "$ip/24" dev net1
    wait
    rc="$(cat "$KL_TMP/late2.rc")"; ms="$(cat "$KL_TMP/late2.ms")"; PL_OUT="$(cat "$KL_TMP/late2.out")"
    fact "roce-tune ADD, gidTimeoutMs 300, address 2500 ms late: rc $rc after $ms ms: $(pl_msg)"
    expect_eq "error code with the GID too late" "$(pl_code)" 101 || return 1
    [ "$ms" -lt 2500 ] || { fail "ADD with gidTimeoutMs 300 took $ms ms: it waited for the late address"; return 1; }
    expect_gid "the address added after ADD gave up" "$rxe" 1 "$(v4_gid $ip)" || return 1
    expect_no_state "after both ADDs" || return 1
}

# ---------------------------------------------------------------- ipv6
s_ipv6() {
    local r
    # a: IPAM adds IPv6 then IPv4, then rxe is created: the kernel enumerates the existing
    #    addresses, IPv4 first. roce-tune checks the IPv4 GID.
    pod_create a || return 1; make_vf a || return 1
    local rxea neta v6a=fd00:10::2 v4a=192.168.11.2; rxea="$(rxe_of a)"
    neta="$(chain_conf v6-after a "[{\"address\": \"$v6a/64\"}, {\"address\": \"$v4a/24\"}]" '{"gidIndex": 1}' sbr)" || return 1
    cnitool_run add "$neta" a net1
    fact "IPAM: $v6a then $v4a, rxe created after them: cnitool add $(cni_note)"
    facts_gids "$rxea"
    expect_gid "rxe after IPAM, index 1" "$rxea" 1 "$(v4_gid $v4a)" || return 1
    expect_gid "rxe after IPAM, index 2" "$rxea" 2 "$(v6_gid $v6a)" || return 1
    expect_rc0 "cnitool add (rxe after IPAM, gidIndex 1)" || return 1

    # b: the device exists before the addresses (a VF's order; rxe-link replays IPAM's
    #    addresses): IPv6 takes index 1, IPv4 index 2.
    pod_create b || return 1; make_vf b || return 1
    local rxeb netb v6b=fd00:11::2 v4b=192.168.12.2; rxeb="$(rxe_of b)"
    netb="$(chain_conf v6-first b "[{\"address\": \"$v6b/64\"}, {\"address\": \"$v4b/24\"}]" '{"gidIndex": 2}' sbr '{"replayAddresses": true}')" || return 1
    cnitool_run add "$netb" b net1
    fact "IPv6 $v6b added before IPv4 $v4b, device first: cnitool add $(cni_note)"
    facts_gids "$rxeb"
    expect_gid "IPv6 first, index 1" "$rxeb" 1 "$(v6_gid $v6b)" || return 1
    expect_gid "IPv6 first, index 2" "$rxeb" 2 "$(v4_gid $v4b)" || return 1
    expect_rc0 "cnitool add (IPv6 first, gidIndex 2)" || return 1
    rt_exec ADD "$(rt_conf "$netb" '{"gidIndex": 3}')" "$(prev_result b "$v6b/64" "$v4b/24")" b kl-v6-first-3
    fact "roce-tune ADD, IPv6 first, gidIndex 3: rc $PL_RC: $(pl_msg)"
    expect_eq "error code at index 3" "$(pl_code)" 101 || return 1
    expect_contains "101 names index 2, where the IPv4 GID is" "$(pl_msg)" "index 2([^0-9]|$)|GID_INDEX=2([^0-9]|$)" || return 1

    # c: IPv6 only: index 1, and roce-tune checks the IPv6 GID itself.
    pod_create c || return 1; make_vf c || return 1
    local rxec netc v6c=fd00:12::2; rxec="$(rxe_of c)"
    netc="$(chain_conf v6-only c "[{\"address\": \"$v6c/64\"}]" '{"gidIndex": 1}' sbr)" || return 1
    cnitool_run add "$netc" c net1
    fact "IPv6 only ($v6c): cnitool add $(cni_note)"
    facts_gids "$rxec" 3
    expect_gid "IPv6 only, index 1" "$rxec" 1 "$(v6_gid $v6c)" || return 1
    expect_rc0 "cnitool add (IPv6 only, gidIndex 1)" || return 1
    rt_exec ADD "$(rt_conf "$netc" '{"gidIndex": 3}')" "$(prev_result c "$v6c/64")" c kl-v6-only-3
    fact "roce-tune ADD, IPv6 only, gidIndex 3: rc $PL_RC: $(pl_msg)"
    expect_eq "error code at index 3 (IPv6 only)" "$(pl_code)" 101 || return 1
    expect_contains "101 names the IPv6 GID's index 1" "$(pl_msg)" "index 1([^0-9]|$)|GID_INDEX=1([^0-9]|$)" || return 1

    local pod net
    for r in "a $neta" "b $netb" "c $netc"; do
        read -r pod net <<<"$r"
        cnitool_run del "$net" "$pod" net1; expect_rc0 "cnitool del pod $pod" || return 1
    done
    expect_no_state "after DEL" || return 1
}

# ---------------------------------------------------------------- two-pods
s_two_pods() {
    local p rxe other out
    declare -A NET=() IP=([p]=10.30.0.1 [q]=10.30.0.2)
    for p in p q; do
        pod_create "$p" || return 1; make_vf "$p" || return 1
        NET[$p]="$(chain_conf "pod-$p" "$p" "[{\"address\": \"${IP[$p]}/24\"}]" '{"gidIndex": 1, "logLevel": "debug"}' sbr)" || return 1
    done
    for p in p q; do
        cnitool_run add "${NET[$p]}" "$p" net1
        fact "pod $p: cnitool add $(cni_note)"
        [ "$CNI_RC" = 0 ] || { fail "cnitool add pod $p: $(tail -n1 <<<"$CNI_ERR")"; return 1; }
    done
    for p in p q; do
        rxe="$(rxe_of "$p")"; other="$(rxe_of "$([ "$p" = p ] && echo q || echo p)")"
        fact "pod $p: rdma -j link show: $(ip netns exec "$(pod_netns "$p")" rdma -j link show | jq -c --arg a "$rxe" --arg b "$other" '[.[] | select(.ifname == $a or .ifname == $b)]')"
        expect_eq "pod $p: netdev of its own $rxe" "$(link_json_pod "$p" "$rxe" | jq -r '.[0].netdev // "none"')" net1 || return 1
        expect_eq "pod $p: netdev_index of $rxe" "$(link_json_pod "$p" "$rxe" | jq -r '.[0].netdev_index')" "$(pod_ifindex "$p")" || return 1
        expect_eq "pod $p: netdev of the other pod's $other" "$(link_json_pod "$p" "$other" | jq -r '.[0].netdev // "none"')" none || return 1
        expect_gid "pod $p" "$rxe" 1 "$(v4_gid "${IP[$p]}")" || return 1
        # Which device roce-tune took: the GID check at 1 passes only on the device that holds
        # this pod's address, and roce-tune's log names it.
        out="$(lookup_line "$(cnitool_cid "$p")")"
        fact "pod $p: roce-tune's log: $out"
        expect_contains "pod $p: the device roce-tune took for net1" "$out" "RDMA device $rxe port 1 \(by RDMA netlink\)" || return 1
    done
    for p in q p; do
        cnitool_run del "${NET[$p]}" "$p" net1; expect_rc0 "cnitool del pod $p" || return 1
    done
    expect_no_state "after both DELs" || return 1
}

# ---------------------------------------------------------------- inspect
s_inspect() {
    pod_create i || return 1; make_vf i || return 1
    local rxe net ip=192.168.20.2 out rc ndev; rxe="$(rxe_of i)"
    net="$(chain_conf inspect i "[{\"address\": \"$ip/24\"}]" '{"gidIndex": 1}' sbr)" || return 1
    cnitool_run add "$net" i net1
    local add_rc="$CNI_RC" add_err="$CNI_ERR"
    rdma_dev_exists "$rxe" || { fail "setup: rxe-link did not create $rxe: $(tail -n1 <<<"$CNI_ERR")"; return 1; }

    out="$("$BIN" inspect 2>&1)"; rc=$?
    log "roce-tune inspect (rc $rc):"$'\n'"$out"
    fact "inspect node view: rc $rc; $(grep -E '^(RDMA netns mode|RDMA devices|DEVICE )' <<<"$out" | tr -s ' ' | tr '\n' ';') row: $(grep -E "^$rxe " <<<"$out" | tr -s ' ')"
    expect_eq "node view exit status" "$rc" 0 || return 1
    expect_contains "node view: mode" "$out" "^RDMA netns mode: Y" || return 1
    ndev="$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 | wc -l)"
    expect_contains "node view: device count" "$out" "^RDMA devices: $ndev$" || return 1
    # A column per setting: the traffic class (soft-RoCE has no tc/ file), and the rdma_cm ToS,
    # n/a while configfs has no directory for the device; reading it would take a mkdir, and
    # inspect makes none. Then one made and set is read back from the real configfs.
    node_cell() { grep -E "^$rxe " <<<"$out" | sed -E 's/  +/\t/g' | cut -f"$1"; }
    expect_eq "node view: $rxe's traffic class (no tc/ file)" "$(node_cell 7)" "n/a" || return 1
    expect_eq "node view: $rxe's rdma_cm ToS (no configfs directory)" "$(node_cell 8)" "n/a" || return 1
    [ ! -e "$CONFIGFS/$rxe" ] || { fail "inspect made $CONFIGFS/$rxe"; return 1; }
    mkdir "$CONFIGFS/$rxe" && echo 106 >"$CONFIGFS/$rxe/ports/1/default_roce_tos" \
        || { fail "setting the ToS of $rxe in $CONFIGFS"; return 1; }
    out="$("$BIN" inspect --device "$rxe" 2>&1)"
    fact "inspect node view, ToS 106 set: $(grep -E "^(DEVICE|$rxe) " <<<"$out" | tr -s ' ' | tr '\n' ';')"
    expect_eq "node view: $rxe's rdma_cm ToS, read from configfs" "$(node_cell 8)" 106 || return 1

    out="$("$BIN" inspect --netns "$(pod_path i)" --ifname net1 --gid-index 1 2>&1)"; rc=$?
    log "roce-tune inspect --netns (rc $rc):"$'\n'"$out"
    fact "inspect pod view --gid-index 1: rc $rc; $(grep -E '^(Interface net1|PASS|FAIL|Result)' <<<"$out" | tr -s ' ' | tr '\n' ';')"
    expect_contains "pod view: net1's device" "$(grep '^Interface net1:' <<<"$out")" "rdma_device=$rxe( |$)" || return 1
    expect_contains "pod view: net1's traffic class" "$(grep '^Interface net1:' <<<"$out")" " traffic_class=n/a( |$)" || return 1
    expect_contains "pod view: net1's rdma_cm ToS" "$(grep '^Interface net1:' <<<"$out")" " rdma_cm_tos=106( |$)" || return 1
    expect_contains "pod view: the GID check" "$out" "^PASS gid-index" || return 1
    [ "$add_rc" = 0 ] || { fail "cnitool add (the sysctls the pod view checks): $(tail -n1 <<<"$add_err")"; return 1; }
    expect_eq "pod view exit status (output: $(grep -E '^(FAIL|Result)' <<<"$out" | tr '\n' ' '))" "$rc" 0 || return 1
    expect_contains "pod view: result" "$out" "^Result: PASS" || return 1

    out="$("$BIN" inspect --netns "$(pod_path i)" --ifname net1 2>&1)"; rc=$?
    log "roce-tune inspect --netns, default index (rc $rc):"$'\n'"$out"
    fact "inspect pod view, default index: rc $rc; $(grep -E '^(FAIL|Result)' <<<"$out" | tr '\n' ';')"
    expect_eq "pod view at index 3: exit status" "$rc" 1 || return 1
    expect_contains "pod view at index 3 names index 1" "$(grep '^FAIL gid-index' <<<"$out")" "index 1([^0-9]|$)" || return 1

    cnitool_run del "$net" i net1; expect_rc0 "cnitool del" || return 1
}

# ---------------------------------------------------------------- traffic-class
s_traffic_class() {
    pod_create t || return 1; make_vf t || return 1
    local rxe net ip=192.168.30.2; rxe="$(rxe_of t)"
    net="$(chain_conf tc t "[{\"address\": \"$ip/24\"}]" '{"gidIndex": 1, "trafficClass": 41}' sbr)" || return 1
    cnitool_run add "$net" t net1
    fact "trafficClass 41 on $rxe: cnitool add $(cni_note)"
    fact "$rxe has a tc/ directory: $([ -e "/sys/class/infiniband/$rxe/tc" ] && echo yes || echo no)"
    [ "$CNI_RC" != 0 ] || { fail "cnitool add with trafficClass succeeded on rxe (no tc/ file)"; return 1; }
    expect_contains "cnitool's message names MLNX_OFED" "$CNI_ERR" "MLNX_OFED" || return 1
    expect_contains "cnitool's message names DOCA-OFED" "$CNI_ERR" "DOCA-OFED" || return 1
    sbr_rule_present t "$ip" && { fail "sbr ran after a failed roce-tune"; return 1; }
    expect_no_state "after the failed ADD" || return 1
    rt_exec ADD "$(rt_conf "$net")" "$(prev_result t "$ip/24")" t kl-tc-direct
    fact "roce-tune ADD (direct): rc $PL_RC, stdout $PL_OUT"
    expect_eq "roce-tune's error code (its own stdout)" "$(pl_code)" 102 || return 1
    expect_contains "roce-tune's message names MLNX_OFED/DOCA-OFED" "$(pl_msg)" "MLNX_OFED.*DOCA-OFED|DOCA-OFED.*MLNX_OFED" || return 1
    expect_no_state "after the direct ADD" || return 1
    cnitool_run del "$net" t net1; expect_rc0 "cnitool del" || return 1
}

# ---------------------------------------------------------------- del-gone
# Once the netns is gone, the reference plugins 1.1.1 succeed at DEL only with CNI_NETNS empty
# (the spec allows a runtime to leave it out then): host-device fails on a path that no longer
# exists ("failed to open netns"), and sbr fails either way (it locks the path with a file
# mutex that opens it O_CREAT, so it creates an empty file where the netns was, then fails on
# it: "unknown FS magic ... 1021994"; with CNI_NETNS empty it fails to open ""). So: cnitool's
# DEL, which always passes the path, must get past roce-tune; the chain without sbr, driven
# as a runtime that knows the netns is gone, must succeed; roce-tune alone must succeed both
# ways. What sbr does is recorded as a FACT.
s_del_gone() {
    pod_create g || return 1; make_vf g || return 1
    local rxe net ip=192.168.40.2 i path; rxe="$(rxe_of g)"; path="$(pod_path g)"
    net="$(chain_conf gone g "[{\"address\": \"$ip/24\"}]" '{"gidIndex": 1}' nosbr)" || return 1
    cnitool_run add "$net" g net1; expect_rc0 "cnitool add" || return 1
    ip netns del "$(pod_netns g)"
    # The veth dies with its netns, and with it the rxe device on it.
    for ((i = 0; i < 100; i++)); do rdma_dev_exists "$rxe" || break; sleep 0.1; done
    fact "after 'ip netns del': $rxe $(rdma_dev_exists "$rxe" && echo "still exists" || echo "is gone") after $((i * 100)) ms"
    [ ! -e "$path" ] || { fail "setup: $path still exists after ip netns del"; return 1; }

    cnitool_run del "$net" g net1
    fact "cnitool del with the netns path gone: $(cni_note)"
    if [ "$CNI_RC" != 0 ]; then
        expect_contains "cnitool del failed past roce-tune (DEL runs roce-tune, rxe-link, host-device)" \
            "$(tail -n1 <<<"$CNI_ERR")" 'plugin type="(host-device|rxe-link)"' || return 1
    fi
    cni_runtime DEL "$NODE_NETD/$net.conflist" "" net1 "$(cnitool_cid g)"
    fact "runtime-driven DEL with CNI_NETNS empty: failed at '${RT_FAILED:-none}'${RT_FAILED:+: $PL_OUT}"
    expect_eq "runtime-driven DEL with CNI_NETNS empty, failed at" "${RT_FAILED:-none}" none || return 1
    expect_no_state "after DEL" || return 1
    rt_exec DEL "$(rt_conf "$net")" "" g "$(cnitool_cid g)"
    expect_eq "roce-tune DEL with the netns path gone (stdout: $PL_OUT)" "$PL_RC" 0 || return 1
    rt_exec DEL "$(rt_conf "$net")" "" "" "$(cnitool_cid g)"
    expect_eq "roce-tune DEL without CNI_NETNS (stdout: $PL_OUT)" "$PL_RC" 0 || return 1
    [ ! -e "$path" ] || { fail "something created $path during DEL"; return 1; }

    plugin_exec DEL '{"cniVersion": "1.0.0", "name": "sbr-probe", "type": "sbr"}' "$path" net1 kl-sbr-probe
    fact "sbr DEL with the netns path gone: rc $PL_RC, $(jq -c . <<<"$PL_OUT" 2>/dev/null | head -c 200); left at $path: $(stat -c '%F' "$path" 2>/dev/null || echo nothing)"
    rm -f "$path"
}

# ---------------------------------------------------------------- rdma-cm-tos
# The pod and its device come from the chain without roce-tune; the original ToS is set by
# hand; roce-tune runs alone, as a runtime runs it. Exit 3 = the binary leaves the value alone.
s_rdma_cm_tos() {
    pod_create c || return 1; make_vf c || return 1
    local rxe net ip=192.168.60.2 tos prev conf; rxe="$(rxe_of c)"
    net="$(chain_conf cm c "[{\"address\": \"$ip/24\"}]" '{"gidIndex": 1, "rdmaCmTos": 106}' nosbr)" || return 1
    # The same network without roce-tune: what the runtime has done before roce-tune's turn.
    jq '.name += "-pre" | .plugins |= map(select(.type != "roce-tune"))' "$NODE_NETD/$net.conflist" >"$NODE_NETD/$net-pre.conflist"
    cnitool_run add "$net-pre" c net1; expect_rc0 "cnitool add (host-device, rxe-link)" || return 1
    prev="$CNI_OUT"
    tos="$CONFIGFS/$rxe/ports/1/default_roce_tos"
    mkdir -p "$CONFIGFS/$rxe" || { fail "mkdir $CONFIGFS/$rxe"; return 1; }
    echo 32 >"$tos" || { fail "writing 32 to $tos"; return 1; }
    expect_eq "original default_roce_tos" "$(cat "$tos")" 32 || return 1
    conf="$(rt_conf "$net")"

    rt_exec ADD "$conf" "$prev" c kl-cm-1
    fact "rdmaCmTos 106, original 32: ADD rc $PL_RC; default_roce_tos now $(cat "$tos")"
    expect_eq "ADD exit code (stdout: $(head -c 300 <<<"$PL_OUT"))" "$PL_RC" 0 || return 1
    if [ "$(cat "$tos")" = 32 ]; then
        rt_exec DEL "$conf" "$prev" c kl-cm-1
        local why="not supported by this binary yet: ADD with rdmaCmTos 106 succeeded and left $tos at 32"
        if [ "${KERNEL_EXPECT_RDMA_CM_TOS:-0}" = 1 ]; then fail "$why (KERNEL_EXPECT_RDMA_CM_TOS=1)"; return 1; fi
        printf '%s' "$why" >"$E2E_TMP/reason.$NODE"
        return 3
    fi
    expect_eq "default_roce_tos after ADD" "$(cat "$tos")" 106 || return 1
    rt_exec DEL "$conf" "$prev" c kl-cm-1; expect_eq "DEL exit code" "$PL_RC" 0 || return 1
    expect_eq "default_roce_tos after DEL (the original, exactly)" "$(cat "$tos")" 32 || return 1
    # A failed ADD (the GID is at 1, not 3) leaves the original in place.
    rt_exec ADD "$(rt_conf "$net" '{"gidIndex": 3, "gidTimeoutMs": 300}')" "$prev" c kl-cm-2
    expect_eq "ADD at index 3: code" "$(pl_code)" 101 || return 1
    expect_eq "default_roce_tos after a failed ADD" "$(cat "$tos")" 32 || return 1
    expect_no_state "after DEL and the failed ADD" || return 1
    cnitool_run del "$net-pre" c net1; expect_rc0 "cnitool del" || return 1
}

# ---------------------------------------------------------------- agent-drift
# `roce-tune-agent agent` repairs drift of the rdma_cm ToS on the real configfs: ADD with rdmaCmTos
# 106 (original 32), the agent running every second; another writer puts 8, then 0 (the
# kernel's default, what a re-made cma device holds) into default_roce_tos: each time the agent
# writes 106 back within two periods, and counts it. SIGTERM stops it; DEL restores 32.
s_agent_drift() {
    pod_create d || return 1; make_vf d || return 1
    local rxe net ip=192.168.70.2 tos prev conf v; rxe="$(rxe_of d)"
    net="$(chain_conf drift d "[{\"address\": \"$ip/24\"}]" '{"gidIndex": 1, "rdmaCmTos": 106}' nosbr)" || return 1
    jq '.name += "-pre" | .plugins |= map(select(.type != "roce-tune"))' "$NODE_NETD/$net.conflist" >"$NODE_NETD/$net-pre.conflist"
    cnitool_run add "$net-pre" d net1; expect_rc0 "cnitool add (host-device, rxe-link)" || return 1
    prev="$CNI_OUT"
    tos="$CONFIGFS/$rxe/ports/1/default_roce_tos"
    mkdir -p "$CONFIGFS/$rxe" && echo 32 >"$tos" || { fail "setting the original ToS in $tos"; return 1; }
    conf="$(rt_conf "$net")"
    rt_exec ADD "$conf" "$prev" d kl-drift-1
    expect_eq "ADD exit code (stdout: $(head -c 300 <<<"$PL_OUT"))" "$PL_RC" 0 || return 1
    expect_eq "default_roce_tos after ADD" "$(cat "$tos")" 106 || return 1

    ip link set lo up    # the guest's loopback, for the agent's metrics
    AGENT_LOG="$LOG_DIR/$NODE.agent.log"
    agent_start 1 || return 1
    tos_back() { [ "$(cat "$tos")" = 106 ]; }
    for v in 8 0; do
        echo "$v" >"$tos" || { fail "writing $v to $tos"; return 1; }
        await 2 tos_back || { fail "default_roce_tos still $(cat "$tos") two periods after $v was written"; return 1; }
        fact "default_roce_tos set to $v by another writer: 106 again after $WAITED_MS ms"
    done
    repairs() { [ "$(agent_metric 'roce_tune_drift_repairs_total{setting="rdma_cm_tos"}')" = 2 ]; }
    await 3 repairs || { fail "drift repairs $(agent_metric 'roce_tune_drift_repairs_total{setting="rdma_cm_tos"}'), want 2"; return 1; }
    expect_eq "drifts counted" "$(agent_metric 'roce_tune_drift_total{setting="rdma_cm_tos"}')" 2 || return 1
    expect_eq "the rail's ToS in the metrics" \
        "$(agent_metric "roce_tune_rail_rdma_cm_tos{namespace=\"\",pod=\"\",interface=\"net1\",rdma_device=\"$rxe\",pci_address=\"\",network=\"$net\"}")" 106 || return 1
    grep -q "drift: the rdma_cm default ToS of $rxe port 1 .* is 8, roce-tune wrote 106" "$AGENT_LOG" \
        || { fail "the agent's log does not say what drifted: $(grep drift "$AGENT_LOG" | tail -n1)"; return 1; }
    local t0; t0="${EPOCHREALTIME/./}"
    bg_stop_all
    fact "the agent stopped $(( (${EPOCHREALTIME/./} - t0) / 1000 )) ms after SIGTERM"
    grep -q "the agent stops" "$AGENT_LOG" || { fail "the agent did not stop on SIGTERM"; return 1; }

    rt_exec DEL "$conf" "$prev" d kl-drift-1; expect_eq "DEL exit code" "$PL_RC" 0 || return 1
    expect_eq "default_roce_tos after DEL (the original, exactly)" "$(cat "$tos")" 32 || return 1
    expect_no_state "after DEL" || return 1
    cnitool_run del "$net-pre" d net1; expect_rc0 "cnitool del" || return 1
}

# ---------------------------------------------------------------- nri-dra
# A rail no CNI chain touches: a DRA driver (dranet, NRI index 00) moves a PCI
# function's netdev into the pod at RunPodSandbox, before roce-tune's NRI plugin (index 50) gets
# the same event, and no ADD ever runs for it. dranet's part is played by hand, in its order;
# the runtime is containerd's own NRI adaptation (../shared/nri's nri-sim-0.12) with a script:
#   1. the pod netns; its primary eth0 (a veth holding the default route); NIC A (e1000e,
#      $PCI_A) moved in as dra0, 192.168.90.2/24, up; rxe made on it from inside the pod netns
#      (moving a netdev destroys its rxe; made after the address, the kernel puts the IPv4 RoCE
#      v2 GID at 1: checked first); its rdma_cm ToS set to 32 by hand (the original)
#   2. the plugin ($NRI_PLUGIN) on a node config whose draRails is {rdmaCmTos 106, gidIndex 1,
#      gidCheck enforce}; nri-sim: RunPodSandbox (the netns in the pod's linux namespaces), then
#      CreateContainer of a pod that asks for the NCCL environment
#   3. asserted: default_roce_tos 106 on the real configfs, the rail sysctls on dra0, one state
#      entry <sandbox id>:dra0.state (containerId the sandbox id, network nri:dra-rails), the
#      plugin's log line of the GID check at index 1, eth0's sysctls, address and the default
#      route as they were
#   4. dranet's StopPodSandbox (index 00, before roce-tune's): dra0 back to the host under its
#      host name, which destroys rxe; rxe made again on the host netdev and given 106, what a
#      VF's RDMA device is then (still there, holding what roce-tune wrote; soft-RoCE cannot
#      keep it); then nri-sim's StopPodSandbox: asserted 32 again, exactly, and no state entry
#   5. the netns deleted (containerd tears it down after StopPodSandbox), RemovePodSandbox with
#      the stale path: no error, nothing changed
#   6. nri-sim's result: every step ok, 50-roce-tune registered after each one; CreateContainer's
#      adjustment NCCL_IB_HCA==<rxe>:1, NCCL_IB_GID_INDEX=1, NCCL_IB_TC=106
# nri-sim runs its script alone: it waits at two gates, wait_plugins steps for a plugin the
# scenario registers once the kernel side is ready (the smoke plugin of ../shared/nri as
# 90-gatestop and 90-gateremove, after roce-tune). FACT lines: the RPCs' times, what the kernel
# did to rxe and its configfs directory on the way back.
NRI_DIR="${ROCE_TUNE_NRI_DIR:-$E2E_REPO/../shared/nri}"
# The plugin's command, one place (KERNEL_NRI_PLUGIN): the long-running commands' binary,
# roce-tune-agent. The first word is a binary of the lane's bin dir, or one beside $E2E_BIN.
NRI_PLUGIN="${KERNEL_NRI_PLUGIN:-roce-tune-agent nri}"
NRI_REGISTERED=50-roce-tune

# nri_sim_end <step> <kind>: nri-sim's "end" line of that step, "" while it has not ended.
nri_sim_end() { grep -F "nri-sim: step $1 $2: end" "$NRI_SIM_LOG" 2>/dev/null | head -n1 | sed 's/^.*nri-sim: step/step/'; }
nri_sim_ended() { [ -n "$(nri_sim_end "$@")" ]; }
nri_sim_begun() { grep -qF "nri-sim: step $1 $2: begin" "$NRI_SIM_LOG" 2>/dev/null; }
# nri_step <step> <kind> <what> [bound s]: wait for the step's end; fail unless ok=true.
nri_step() {
    local line
    if ! await "${4:-30}" nri_sim_ended "$1" "$2"; then
        fail "$3: nri-sim's step $1 ($2) did not end within ${4:-30} s; nri-sim: $(tail -n2 "$NRI_SIM_LOG" | tr '\n' ' ' | cut -c1-300); plugin: $(tail -n2 "$NRI_PLUGIN_LOG" | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
    line="$(nri_sim_end "$1" "$2")"
    fact "$3: nri-sim $line"
    expect_contains "$3: nri-sim's $2" "$line" "end ok=true" || return 1
}
# nri_gate <name>: the smoke plugin registers as 90-<name>: nri-sim's wait_plugins step passes.
nri_gate() {
    "$NRI_DIR/bin/nri-smoke-plugin" -socket "$NRI_SOCK" -name "$1" -idx 90 \
        </dev/null >/dev/null 2>"$LOG_DIR/$NODE.gate-$1.log" &
    bg_track $!
}
# dra_sysctls <pod>: the rail sysctls roce-tune sets, read on dra0; dra_sysctls_want: the values.
dra_sysctls() {
    local kv keys=()
    for kv in $RAIL_SYSCTLS_ALL; do keys+=("net.ipv4.conf.all.${kv%=*}"); done
    for kv in $RAIL_SYSCTLS; do keys+=("net.ipv4.conf.dra0.${kv%=*}"); done
    pci_sysctls_read "$1" "${keys[@]}"
}
dra_sysctls_want() { rail_sysctls | sed 's/net1\./dra0./g'; }
# eth0_view <pod>: everything of the primary the scenario holds unchanged: its sysctls (IPv4
# and IPv6), its IPv4 address, the default route.
eth0_view() {
    local path; path="$(pod_path "$1")"
    nsenter --net="$path" sysctl net.ipv4.conf.eth0 net.ipv6.conf.eth0 2>/dev/null | sort
    ip -n "$(pod_netns "$1")" -4 -o addr show dev eth0 | awk '{print "addr", $4}'
    ip -n "$(pod_netns "$1")" route show default | sed 's/^/route /'
}
nri_dra_logs() { # what a failed run needs on the host
    [ -s "$KL_TMP/nri-dra.plugin.log" ] && cp "$KL_TMP/nri-dra.plugin.log" "$LOG_DIR/$NODE.plugin-logfile.log"
    [ -s "$NRI_RESULT" ] && cp "$NRI_RESULT" "$LOG_DIR/$NODE.result.json"
    return 0
}
nri_dra_cleanup() { # after scen_cleanup: NIC A back under its host name
    nri_dra_logs
    local i
    [ -n "${PCI_IF[$PCI_A]:-}" ] || return 0
    for ((i = 0; i < 50; i++)); do [ -n "$(pci_netdev "$PCI_A")" ] && break; sleep 0.1; done
    # Back from a deleted netns as dra0, it carries udev's altname of its host name: drop it first.
    local cur; cur="$(pci_netdev "$PCI_A")"
    [ -z "$cur" ] || [ "$cur" = "${PCI_IF[$PCI_A]}" ] || ip link property del dev "$cur" altname "${PCI_IF[$PCI_A]}" 2>/dev/null
    pci_restore_name "$PCI_A" || echo "kernel scenarios: NIC $PCI_A is '$(pci_netdev "$PCI_A")' after nri-dra, not ${PCI_IF[$PCI_A]}" >&2
}

s_nri_dra() {
    trap 'scen_cleanup; nri_dra_cleanup' EXIT
    local sim="$NRI_DIR/bin/nri-sim-0.12" w
    for w in "$sim" "$NRI_DIR/bin/nri-smoke-plugin"; do
        [ -x "$w" ] || { fail "no $w: nri-sim lives in ../shared/nri beside the clone (or set ROCE_TUNE_NRI_DIR)"; return 1; }
    done
    local words; read -ra words <<<"$NRI_PLUGIN"
    [ -x "$KL_TMP/bin/${words[0]}" ] || cp "$(dirname "$E2E_BIN")/${words[0]}" "$KL_TMP/bin/" \
        || { fail "no plugin binary ${words[0]} beside $E2E_BIN (NRI_PLUGIN '$NRI_PLUGIN')"; return 1; }
    local nic; nic="$(pci_netdev "$PCI_A")"
    [ -n "$nic" ] || { fail "no netdev at PCI $PCI_A: the lane boots with two e1000e NICs (run.sh; KERNEL_LANE_NICS=${KERNEL_LANE_NICS:-1})"; return 1; }
    PCI_IF[$PCI_A]="$nic"

    # ---- 1. the pod as dranet leaves it at RunPodSandbox
    local ns path rxe=rxe_kl${SIDX}d ip=192.168.90.2 tos
    pod_create d || return 1
    ns="$(pod_netns d)"; path="$(pod_path d)"; tos="$CONFIGFS/$rxe/ports/1/default_roce_tos"
    ip link add "ks${SIDX}d" type veth peer name eth0 netns "$ns" || { fail "setup: the primary veth"; return 1; }
    ip addr add 10.90.0.1/24 dev "ks${SIDX}d" && ip link set "ks${SIDX}d" up \
        && ip -n "$ns" addr add 10.90.0.2/24 dev eth0 && ip -n "$ns" link set eth0 up \
        && ip -n "$ns" route add default via 10.90.0.1 dev eth0 || { fail "setup: eth0 and the default route"; return 1; }
    # dranet's nsAttachNetdev: down, then moved and renamed in one RTM_NEWLINK, addresses, up.
    local out
    out="$({ ip link set "$nic" down && ip link set dev "$nic" netns "$ns" name dra0 \
        && ip -n "$ns" addr add "$ip/24" dev dra0 && ip -n "$ns" link set dra0 up; } 2>&1)" \
        || { fail "setup: moving $nic ($PCI_A) into $ns as dra0: $out"; return 1; }
    out="$(nsenter --net="$path" rdma link add "$rxe" type rxe netdev dra0 2>&1)" \
        || { fail "setup: rdma link add $rxe type rxe netdev dra0 in $ns: $out"; return 1; }
    expect_eq "setup: pod view, netdev of $rxe" "$(link_json_pod d "$rxe" | jq -r '.[0].netdev // "none"')" dra0 || return 1
    expect_gid "setup: the link-local GID of NIC A's fixed MAC" "$rxe" 0 "$(gid_from_mac "$MAC_A")" || return 1
    expect_gid "setup: dra0's IPv4 address (rxe made after it)" "$rxe" 1 "$(v4_gid "$ip")" || return 1
    facts_link d "$rxe"; facts_gids "$rxe" 3
    mkdir -p "$CONFIGFS/$rxe" && echo 32 >"$tos" || { fail "setup: the original ToS 32 in $tos"; return 1; }
    fact "dra0 before RunPodSandbox: $(dra_sysctls d)"
    local eth0_before; eth0_before="$(eth0_view d)"
    [ "$(grep -c '^net\.ipv4\.conf\.eth0\.' <<<"$eth0_before")" -ge 6 ] || { fail "setup: eth0's sysctls unread: $(head -c 200 <<<"$eth0_before")"; return 1; }

    # ---- 2. the plugin and the runtime
    NRI_SOCK="$KL_TMP/nri-$SIDX/nri.sock"                 # nri-sim makes the dir (0700)
    NRI_SIM_LOG="$LOG_DIR/$NODE.nri-sim.log"
    NRI_PLUGIN_LOG="$LOG_DIR/$NODE.plugin.log"
    NRI_RESULT="$KL_TMP/nri-dra.result.json"
    local conf="$KL_TMP/nri-dra.node.json" script="$KL_TMP/nri-dra.script.json"
    jq -n --arg s "$KL_TMP/state" --arg l "$KL_TMP/nri-dra.plugin.log" --arg sock "$NRI_SOCK" \
        '{stateDir: $s, sysfsRoot: "/sys", logFile: $l, nriSocket: $sock,
          draRails: {rdmaCmTos: 106, gidIndex: 1, gidCheck: "enforce", gidTimeoutMs: 1000}}' >"$conf" \
        && chmod 0644 "$conf" || return 1
    local sandbox; sandbox="$(printf 'kernel-lane nri-dra' | sha256sum | cut -c1-64)"
    jq -n --arg id "$sandbox" --arg netns "$path" '
        {id: $id, name: "dra-pod", namespace: "team-a", uid: "uid-dra-pod", netns: $netns,
         annotations: {"roce-tune.io/nccl-env": "true"}} as $pod
        | [{comment: "the plugin", wait_plugins: ["roce-tune"], timeout_ms: 60000},
           {run_pod: $pod},
           {create_container: {id: "ctr-dra", pod_id: $id, name: "trainer", env: ["PATH=/usr/bin:/bin"]}},
           {comment: "dranet has moved dra0 back", wait_plugins: ["gatestop"], timeout_ms: 300000},
           {stop_pod: $id},
           {comment: "the netns is gone", wait_plugins: ["gateremove"], timeout_ms: 300000},
           {remove_pod: $id}]' >"$script" || return 1
    fact "node config: $(jq -c . "$conf")"
    "$sim" --socket "$NRI_SOCK" --script "$script" --out "$NRI_RESULT" </dev/null >/dev/null 2>"$NRI_SIM_LOG" &
    local sim_pid=$!; bg_track "$sim_pid"
    sock_up() { [ -S "$NRI_SOCK" ]; }
    await 20 sock_up || { fail "nri-sim made no socket $NRI_SOCK within 20 s: $(tail -n3 "$NRI_SIM_LOG" | tr '\n' ' ')"; return 1; }
    ROCE_TUNE_NODE_CONFIG="$conf" "$KL_TMP/bin/${words[0]}" "${words[@]:1}" --node-config "$conf" \
        </dev/null >/dev/null 2>"$NRI_PLUGIN_LOG" &
    local plugin_pid=$!; bg_track "$plugin_pid"
    plugin_in() { nri_sim_ended 0 wait_plugins || ! kill -0 "$plugin_pid" 2>/dev/null; }
    await 60 plugin_in
    kill -0 "$plugin_pid" 2>/dev/null \
        || { fail "the plugin ($NRI_PLUGIN) exited before registering (the draRails feature in this binary?): $(tail -n3 "$NRI_PLUGIN_LOG" | tr '\n' ' ' | cut -c1-400)"; return 1; }
    nri_step 0 wait_plugins "the plugin registered" || return 1
    fact "plugin: $(grep -E 'registered as|configured by' "$NRI_PLUGIN_LOG" | tr '\n' ' ' | cut -c1-300)"
    nri_step 1 run_pod "RunPodSandbox" || return 1
    nri_step 2 create_container "CreateContainer" || return 1
    await 30 nri_sim_begun 3 wait_plugins || { fail "nri-sim did not reach its first gate"; return 1; }

    # ---- 3. what RunPodSandbox did
    fact "after RunPodSandbox: ToS of $rxe $(tos_of "$rxe"); dra0 $(dra_sysctls d); state [$(state_records | tr '\n' ' ')]"
    fact "plugin's log: $(grep -F "$rxe" "$KL_TMP/nri-dra.plugin.log" 2>/dev/null | tail -n4 | tr '\n' ' ' | cut -c1-600)"
    expect_eq "rdma_cm default_roce_tos of $rxe after RunPodSandbox (draRails.rdmaCmTos)" "$(tos_of "$rxe")" 106 || return 1
    expect_eq "the rail sysctls on dra0" "$(dra_sysctls d)" "$(dra_sysctls_want)" || return 1
    local entry="$sandbox:dra0.state"
    expect_eq "roce-tune state entries (dra0's alone)" "$(state_records | tr '\n' ' ')" "$entry " || return 1
    expect_eq "the state entry's containerId, ifname, network, device, rdmaCmTos original/written" \
        "$(jq -r '[.containerId, .ifname, .network, .device, "\(.owned.rdmaCmTos.original)/\(.owned.rdmaCmTos.written)"] | join(" ")' "$KL_TMP/state/$entry" 2>&1)" \
        "$sandbox dra0 nri:dra-rails $rxe 32/106" || return 1
    expect_contains "the plugin's log: the GID check at index 1 passed" "$(cat "$KL_TMP/nri-dra.plugin.log" 2>/dev/null)" \
        "GID index 1 of $rxe is the RoCE v2 GID" || return 1
    expect_eq "eth0 (the primary): sysctls, address, default route" "$(eth0_view d)" "$eth0_before" || return 1

    # ---- 4. dranet's StopPodSandbox, then the runtime's to roce-tune
    local i
    # dranet's nsDetachNetdev: down, then moved to the host and renamed in one RTM_NEWLINK, up.
    # In two steps the rename loses to udev, which gives the arriving dra0 its path name as an
    # altname at once: renaming to it is EEXIST.
    out="$({ ip -n "$ns" link set dra0 down && ip -n "$ns" link set dev dra0 netns 1 name "$nic" \
        && ip link set "$nic" up; } 2>&1)" || { fail "moving dra0 back to the host as $nic: $out"; return 1; }
    for ((i = 0; i < 100; i++)); do rdma_dev_exists "$rxe" || break; sleep 0.05; done
    fact "dra0 back on the host as $nic (altnames $(ip -j link show "$nic" | jq -c '.[0].altnames')): $rxe $(rdma_dev_exists "$rxe" && echo "still exists" || echo "gone after $((i * 50)) ms"); its configfs directory $([ -d "$CONFIGFS/$rxe" ] && echo stays || echo went), reads '$(cat "$tos" 2>&1)'"
    out="$(rdma link add "$rxe" type rxe netdev "$nic" 2>&1)" || { fail "rdma link add $rxe on $nic (host): $out"; return 1; }
    fact "$rxe made again on $nic (host): ToS $(tos_of "$rxe"); host view $(link_json_host "$rxe")"
    echo 106 >"$tos" || { fail "putting 106 back into $tos"; return 1; }
    nri_gate gatestop
    nri_step 3 wait_plugins "gate before StopPodSandbox" || return 1
    nri_step 4 stop_pod "StopPodSandbox" || return 1
    fact "after StopPodSandbox: ToS of $rxe $(tos_of "$rxe"); state [$(state_records | tr '\n' ' ')]; plugin's log: $(tail -n3 "$KL_TMP/nri-dra.plugin.log" 2>/dev/null | tr '\n' ' ' | cut -c1-500)"
    expect_eq "default_roce_tos of $rxe after StopPodSandbox (the original, exactly)" "$(tos_of "$rxe")" 32 || return 1
    expect_no_state "after StopPodSandbox" || return 1

    # ---- 5. the netns torn down, RemovePodSandbox
    ip netns del "$ns"
    nri_gate gateremove
    nri_step 5 wait_plugins "gate before RemovePodSandbox" || return 1
    nri_step 6 remove_pod "RemovePodSandbox (netns gone)" || return 1
    expect_eq "default_roce_tos of $rxe after RemovePodSandbox" "$(tos_of "$rxe")" 32 || return 1
    expect_no_state "after RemovePodSandbox" || return 1

    # ---- 6. nri-sim's account
    sim_done() { ! kill -0 "$sim_pid" 2>/dev/null; }
    await 20 sim_done || { fail "nri-sim did not end after its last step"; return 1; }
    wait "$sim_pid"; local sim_rc=$?
    expect_eq "nri-sim's exit status" "$sim_rc" 0 || return 1
    # The adaptation calls the plugins of an event in index order: roce-tune's (50) comes first.
    local first='[.rpcs[] | select(.dir == "runtime->plugin" and (.method | test("PodSandbox|CreateContainer")))]
        | group_by(.step) | map(.[0] | {key: (.method | sub(".*/"; "")), value: .ms}) | from_entries'
    fact "roce-tune's answers (ms): $(jq -c "$first" "$NRI_RESULT" 2>&1 | cut -c1-300)"
    local ms; ms="$(jq -r "$first | .RunPodSandbox // \"none\"" "$NRI_RESULT")"
    awk -v ms="$ms" 'BEGIN { exit !(ms + 0 < 1500 && ms != "none") }' \
        || { fail "roce-tune answered RunPodSandbox in $ms ms: the bound is 3/4 of the 2000 ms request timeout"; return 1; }
    expect_eq "nri-sim: every step ok" "$(jq -r '[.steps[] | select(.ok != true) | "\(.step) \(.kind): \(.error)"] | join("; ")' "$NRI_RESULT")" "" || return 1
    expect_eq "nri-sim: steps after which $NRI_REGISTERED was not registered" \
        "$(jq -r --arg p "$NRI_REGISTERED" '[.steps[] | select((.registered_after // []) | index($p) | not) | "\(.step) \(.kind)"] | join("; ")' "$NRI_RESULT")" "" || return 1
    local env; env="$(jq -r '.steps[2].adjust.env // [] | map("\(.key)=\(.value)") | join(" ")' "$NRI_RESULT")"
    fact "CreateContainer's adjustment: env $env"
    expect_contains "CreateContainer: NCCL_IB_HCA names $rxe" "$env" "(^| )NCCL_IB_HCA==$rxe:1( |$)" || return 1
    expect_contains "CreateContainer: NCCL_IB_GID_INDEX" "$env" "(^| )NCCL_IB_GID_INDEX=1( |$)" || return 1
    expect_contains "CreateContainer: NCCL_IB_TC (draRails.rdmaCmTos)" "$env" "(^| )NCCL_IB_TC=106( |$)" || return 1
}

# ---------------------------------------------------------------- rxe-counters
# What a rail's RDMA device counts, read the way the agent will (the port's hw_counters/), with
# real RDMA traffic: two rxe devices over a veth pair that stays in the host netns (Debian's 6.1
# carries rxe traffic only there: rxe's UDP socket lives in init_net, rxe_net.c
# `rxe_net_ipv4_init`). Two runs of ibv_rc_pingpong, clean and under netem loss; then what
# RTM_GETDCB answers for the netdevs, through roce-tune's own DCB codec (examples/dcb_probe.rs).
# The scenario reads the files itself (with `read`: exact before and after each run), and
# `roce-tune inspect --counters` reads them too, around each run: its rates show sent_pkts rising
# and, under loss, the retransmission counters. Every reading goes to $LOG_DIR/rxe-counters.readings
# with its time; on the host, integration/lane_rules.py builds promtool series from them and
# checks that the shipped RoceTuneRailLossRising fires for the lossy run and not the clean one.
RC_IPS=(192.168.213.1 192.168.213.2)
RC_ITERS="${KERNEL_RXE_ITERS:-200}"
# inspect's interval: longer than a run takes (clean 2 to 4.3 s, lossy 5.4 to 8.7 s on TCG), so its
# two readings hold the whole run whatever its process start-up costs.
RC_INSPECT_S="${KERNEL_RXE_INSPECT_S:-12}"
# The counters that tell loss and retransmission on rxe (rxe_hw_counters.c): compared between
# the clean and the lossy run, summed over both devices (each is requester and responder).
RC_LOSS_COUNTERS=(completer_retry_err duplicate_request out_of_seq_request rcvd_seq_err)

# rc_read <dev> <array>: port 1's counters into an associative array, name -> value, lifespan
# left out (a setting: the milliseconds a read may be served from the last query, sysfs.c
# `set_stats_lifespan`). With `read`, not a process per file: under TCG each costs about a second.
declare -A RC_BEFORE_a RC_BEFORE_b RC_AFTER_a RC_AFTER_b
# rc_read <dev> <array> <run> <phase>: also one line per counter to the readings file,
# "READING <run> <phase> <unix ms> <dev> <name> <value>".
RC_READINGS="$LOG_DIR/rxe-counters.readings"
rc_read() {
    local -n into="$2"
    local f v at="${EPOCHREALTIME/./}"
    into=()
    for f in "/sys/class/infiniband/$1/ports/1/hw_counters/"*; do
        [ "${f##*/}" = lifespan ] && continue
        read -r v <"$f" && into["${f##*/}"]="$v"
        echo "READING $3 $4 $((at / 1000)) $1 ${f##*/} $v" >>"$RC_READINGS"
    done
}
# rc_delta <a|b> <name>: RC_D, how much one counter of device a or b rose in the last run (a
# variable, not $(...): a subshell is a fork).
rc_delta() {
    local -n before="RC_BEFORE_$1" after="RC_AFTER_$1"
    RC_D=$(( ${after[$2]:-0} - ${before[$2]:-0} ))
}
# rc_gid_index <dev> <ipv4>: the index of the address's RoCE v2 GID (waits up to 3 s).
rc_gid_index() {
    local i want; want="$(v4_gid "$2")"
    for ((i = 0; i < 60; i++)); do
        local g
        for g in 0 1 2 3; do
            [ "$(gid_at "$1" "$g")" = "$want" ] && [ "$(gtype_at "$1" "$g")" = "RoCE v2" ] && { echo "$g"; return 0; }
        done
        sleep 0.05
    done
    return 1
}

# rc_run <label>: one ibv_rc_pingpong between the two devices; fills RC_BEFORE_a/b and
# RC_AFTER_a/b, sets RC_MS, RC_OUT and RC_DELTAS ("a.name+N ...").
rc_run() {
    local label="$1" port=$((18515 + RANDOM % 1000)) t0 srv rc insp
    rc_read "$RC_A" RC_BEFORE_a "$label" before; rc_read "$RC_B" RC_BEFORE_b "$label" before
    # roce-tune inspect --counters: its first reading now, its second RC_INSPECT_S later, which
    # the run falls within (2 to 9 s under TCG: docs/design.md, "RDMA counters").
    "$BIN" inspect --counters="$RC_INSPECT_S" --json >"$KL_TMP/rc-$label.inspect" 2>"$KL_TMP/rc-$label.inspect.err" &
    insp=$!
    t0="${EPOCHREALTIME/./}"
    timeout 120 ibv_rc_pingpong -d "$RC_B" -g "$RC_GB" -s 1024 -m 1024 -n "$RC_ITERS" -p "$port" \
        >"$KL_TMP/rc-$label.server" 2>&1 &
    srv=$!
    listening() { ss -Hltn "sport = :$port" | grep -q .; }
    await 20 listening || { kill "$srv" 2>/dev/null; fail "$label: ibv_rc_pingpong's server did not listen on $port: $(cat "$KL_TMP/rc-$label.server")"; return 1; }
    # The out-of-band exchange (QPN, PSN, GID) goes over loopback TCP; the RDMA traffic over
    # the veth, by the GIDs.
    RC_OUT="$(timeout 120 ibv_rc_pingpong -d "$RC_A" -g "$RC_GA" -s 1024 -m 1024 -n "$RC_ITERS" -p "$port" 127.0.0.1 2>&1)"
    rc=$?
    # Under loss the server can wait for ever on the end of a run the client finished: the
    # client exits on its last completion, and a retransmission the server still needs then
    # meets a QP that is gone (seen once in CI: client rc 0 after 3 s, server killed by its
    # timeout at 120 s). The counters, not pingpong's goodbye, are what this scenario checks:
    # once the client has finished, the server gets 15 s more, then is stopped and said so.
    local src waited=0
    if [ "$rc" = 0 ] && [ "$label" = lossy ]; then
        while kill -0 "$srv" 2>/dev/null && [ "$waited" -lt 300 ]; do sleep 0.05; waited=$((waited + 1)); done
    fi
    if [ "$rc" = 0 ] && [ "$label" = lossy ] && kill -0 "$srv" 2>/dev/null; then
        kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
        fact "$label: the client finished; the server still waited 15 s later and was stopped (its last exchange lost to netem): $(cat "$KL_TMP/rc-$label.server")"
        src=0
    else
        wait "$srv"; src=$?
    fi
    RC_MS=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
    rc_read "$RC_A" RC_AFTER_a "$label" after; rc_read "$RC_B" RC_AFTER_b "$label" after
    wait "$insp"; local irc=$?
    RC_INSPECT="$(cat "$KL_TMP/rc-$label.inspect")"
    fact "$label: roce-tune inspect --counters=$RC_INSPECT_S (rc $irc): $(jq -c '[.ports[] | {d: .device, c: [.counters[] | select(.second > .first) | "\(.name)+\(.second - .first)"]}]' <<<"$RC_INSPECT" 2>&1) $(head -c 300 "$KL_TMP/rc-$label.inspect.err")"
    [ "$irc" = 0 ] || { fail "$label: roce-tune inspect --counters failed (rc $irc): $(cat "$KL_TMP/rc-$label.inspect.err")"; return 1; }
    fact "$label run: client rc $rc, server rc $src, ${RC_MS} ms: ${RC_OUT//$'\n'/ }"
    [ "$rc" = 0 ] && [ "$src" = 0 ] \
        || { fail "$label: ibv_rc_pingpong failed (client rc $rc, server rc $src): ${RC_OUT//$'\n'/ } / $(cat "$KL_TMP/rc-$label.server")"; return 1; }
    local d n
    RC_DELTAS=""
    for d in a b; do
        local -n after="RC_AFTER_$d"
        for n in $(printf '%s\n' "${!after[@]}" | sort); do rc_delta "$d" "$n"; RC_DELTAS+=" $d.$n+$RC_D"; done
    done
    fact "$label deltas:$RC_DELTAS"
}
# rc_inspect_rise <dev> <name>: RC_D, how much inspect's two readings of one counter differ.
rc_inspect_rise() {
    RC_D="$(jq -r --arg d "$1" --arg n "$2" \
        '[.ports[] | select(.device == $d) | .counters[] | select(.name == $n) | .second - .first] | add // 0' <<<"$RC_INSPECT")"
}
# rc_inspect_loss: RC_ILOSS, the loss counters' rise between inspect's readings, both devices.
rc_inspect_loss() {
    local d n
    RC_ILOSS=0
    for d in "$RC_A" "$RC_B"; do
        for n in "${RC_LOSS_COUNTERS[@]}"; do rc_inspect_rise "$d" "$n"; RC_ILOSS=$(( RC_ILOSS + RC_D )); done
    done
}
# rc_loss_sum: RC_LOSS, the loss counters' rise in the last run, summed over both devices.
rc_loss_sum() {
    local d n
    RC_LOSS=0
    for d in a b; do
        for n in "${RC_LOSS_COUNTERS[@]}"; do rc_delta "$d" "$n"; RC_LOSS=$(( RC_LOSS + RC_D )); done
    done
}

rc_restore() {
    # The rule order every other scenario expects: the local table first (pref 0).
    ip rule show | grep -q '^0:' || ip rule add pref 0 lookup local
    ip rule del pref 1000 lookup local 2>/dev/null
    ip rule del pref 100 2>/dev/null; ip rule del pref 101 2>/dev/null
    ip route flush table 213 2>/dev/null; ip route flush table 214 2>/dev/null
    [ -z "${RC_RP_FILTER:-}" ] || sysctl -q -w "net.ipv4.conf.all.rp_filter=$RC_RP_FILTER"
}

s_rxe_counters() {
    trap 'rc_restore; scen_cleanup' EXIT
    : >"$RC_READINGS"
    local t; for t in ibv_rc_pingpong tc ss; do
        command -v "$t" >/dev/null || { fail "$t is missing: integration/kernel/setup.sh installs ibverbs-utils and ibverbs-providers (rxe's provider) on the host"; return 1; }
    done
    local probe="$KL_TMP/bin/dcb_probe"
    [ -x "$probe" ] || { fail "no DCB probe ($DCB_PROBE): cargo build --example dcb_probe (make kernel-lane builds it)"; return 1; }
    local out; out="$(modprobe ib_uverbs 2>&1 && modprobe sch_netem 2>&1)" || { fail "modprobe ib_uverbs sch_netem: $out"; return 1; }

    # ---- 1. the link: A and B, one veth pair in the host netns, an rxe device on each
    local a="kv${SIDX}a" b="ks${SIDX}a"
    RC_A="rxe_kl${SIDX}a" RC_B="rxe_kl${SIDX}b"
    ip link add "$a" type veth peer name "$b" && ip addr add "${RC_IPS[0]}/24" dev "$a" && ip addr add "${RC_IPS[1]}/24" dev "$b" \
        && ip link set "$a" up && ip link set "$b" up || { fail "setup: the veth pair"; return 1; }
    # Both addresses are local, so the kernel would take A -> B through lo, where rxe has no
    # device (rxe_udp_encap_recv drops what came in on a netdev without one). Locally sent
    # packets to the other address go out of the veth instead (policy routing, the local table
    # moved after those rules); received ones still find the local table. A packet arriving with
    # a local source address needs accept_local.
    RC_RP_FILTER="$(sysctl -n net.ipv4.conf.all.rp_filter)"
    ip rule add pref 1000 lookup local && ip rule del pref 0 lookup local \
        && ip route add "${RC_IPS[1]}" dev "$a" table 213 && ip route add "${RC_IPS[0]}" dev "$b" table 214 \
        && ip rule add pref 100 iif lo to "${RC_IPS[1]}" lookup 213 && ip rule add pref 101 iif lo to "${RC_IPS[0]}" lookup 214 \
        && sysctl -q -w net.ipv4.conf.all.rp_filter=0 "net.ipv4.conf.$a.rp_filter=0" "net.ipv4.conf.$b.rp_filter=0" \
            "net.ipv4.conf.$a.accept_local=1" "net.ipv4.conf.$b.accept_local=1" \
        || { fail "setup: the routing that keeps A -> B on the veth"; return 1; }
    out="$(ip route get "${RC_IPS[1]}" from "${RC_IPS[0]}" oif "$a" 2>&1)"
    expect_contains "setup: the route from A to B" "$out" "dev $a" || return 1
    out="$(rdma link add "$RC_A" type rxe netdev "$a" 2>&1 && rdma link add "$RC_B" type rxe netdev "$b" 2>&1)" \
        || { fail "setup: rdma link add: $out"; return 1; }
    RC_GA="$(rc_gid_index "$RC_A" "${RC_IPS[0]}")" && RC_GB="$(rc_gid_index "$RC_B" "${RC_IPS[1]}")" \
        || { fail "setup: no RoCE v2 GID for the addresses: $(gid_table "$RC_A" | tr '\n' ' ')"; return 1; }
    fact "$RC_A on $a (GID index $RC_GA), $RC_B on $b (GID index $RC_GB); uverbs: $(ls /dev/infiniband 2>&1 | tr '\n' ' ')"

    # ---- 2. the files: hw_counters/ under the port, lifespan a setting, no counters/ (rxe has
    # no process_mad: sysfs.c `setup_port`)
    local dir="/sys/class/infiniband/$RC_A/ports/1"
    fact "$dir: $(ls "$dir" | tr '\n' ' ')"
    fact "$dir/hw_counters: $(ls "$dir/hw_counters" | tr '\n' ' '); lifespan $(cat "$dir/hw_counters/lifespan") ms"
    [ -d "$dir/hw_counters" ] || { fail "$dir has no hw_counters/"; return 1; }
    [ ! -e "$dir/counters" ] || { fail "$dir has counters/ (rxe has no process_mad)"; return 1; }
    # RDMA_HW_STATS_DEFAULT_LIFESPAN is 10 ms, kept in jiffies: read back, it is rounded up to
    # a whole tick (12 ms at Debian's HZ=250).
    local life; life="$(cat "$dir/hw_counters/lifespan")"
    [ "$life" -ge 10 ] && [ "$life" -le 20 ] || { fail "hw_counters/lifespan is $life ms, not the default 10 ms rounded to a tick"; return 1; }
    local n; for n in sent_pkts rcvd_pkts "${RC_LOSS_COUNTERS[@]}"; do
        [ -r "$dir/hw_counters/$n" ] || { fail "no hw_counters/$n on $RC_A"; return 1; }
    done
    # The shared mode's view from another netns: the compat device, no hw_counters (sysfs.c
    # `setup_port`: hw_counters and counters only for the full device).
    ip netns add "kl-$SIDX-view" || { fail "setup: netns"; return 1; }
    local pod_view; pod_view="$(ip netns exec "kl-$SIDX-view" ls "/sys/class/infiniband/$RC_A/ports/1" 2>&1 | tr '\n' ' ')"
    fact "shared mode, $RC_A port 1 seen from a pod's sysfs: $pod_view"
    [[ " $pod_view " != *" hw_counters "* ]] || { fail "the pod's view (shared mode) has hw_counters: $pod_view"; return 1; }
    [[ " $pod_view " == *" gids "* ]] || { fail "the pod's view (shared mode) lacks the device: $pod_view"; return 1; }
    # The same counters through RDMA netlink (RDMA_NLDEV_CMD_STAT_GET, one driver query for all).
    fact "rdma statistic show link $RC_A/1: $(rdma statistic show link "$RC_A/1" 2>&1 | tr '\n' ' ')"

    # ---- 3. traffic, clean
    RC_TX0="$(cat "/sys/class/net/$a/statistics/tx_packets")"
    rc_run clean || return 1
    # It crossed the veth (not lo): A's netdev sent at least a packet per message.
    local veth_tx=$(( $(cat "/sys/class/net/$a/statistics/tx_packets") - RC_TX0 ))
    [ "$veth_tx" -ge "$RC_ITERS" ] || { fail "clean run: $a sent $veth_tx packets for $RC_ITERS messages: the traffic did not cross the veth"; return 1; }
    rc_delta a sent_pkts
    [ "$RC_D" -ge "$RC_ITERS" ] || { fail "clean run: sent_pkts of $RC_A rose by $RC_D, fewer than the $RC_ITERS messages sent"; return 1; }
    rc_delta b rcvd_pkts
    [ "$RC_D" -ge "$RC_ITERS" ] || { fail "clean run: rcvd_pkts of $RC_B rose by $RC_D, fewer than the $RC_ITERS messages sent"; return 1; }
    rc_loss_sum
    local clean_loss="$RC_LOSS" clean_ms="$RC_MS"
    # What roce-tune itself read: inspect's rates show sent_pkts rising on A.
    rc_inspect_rise "$RC_A" sent_pkts
    [ "$RC_D" -gt 0 ] || { fail "clean run: roce-tune inspect --counters saw sent_pkts of $RC_A rise by $RC_D: $RC_INSPECT"; return 1; }
    rc_inspect_loss; local clean_iloss="$RC_ILOSS"

    # ---- 4. traffic, 5% loss each way
    tc qdisc add dev "$a" root netem loss 5% && tc qdisc add dev "$b" root netem loss 5% \
        || { fail "tc qdisc add ... netem loss 5%"; return 1; }
    rc_run lossy || return 1
    rc_loss_sum
    local lossy_loss="$RC_LOSS" lossy_ms="$RC_MS"
    rc_inspect_loss; local lossy_iloss="$RC_ILOSS"
    fact "netem on $a: $(tc -s qdisc show dev "$a" | tr '\n' ' ' | cut -c1-200)"
    tc qdisc del dev "$a" root; tc qdisc del dev "$b" root
    fact "loss counters (${RC_LOSS_COUNTERS[*]}, both devices): clean +$clean_loss in $clean_ms ms, lossy +$lossy_loss in $lossy_ms ms"
    # Well above the clean run's: at least twice it and 5 more (an emulated guest retries a
    # little without loss too, so zero is never asserted).
    [ "$lossy_loss" -ge $(( 2 * clean_loss + 5 )) ] \
        || { fail "under 5% loss the loss counters rose by $lossy_loss, not well above the clean run's $clean_loss"; return 1; }
    fact "loss counters as roce-tune inspect --counters read them: clean +$clean_iloss, lossy +$lossy_iloss"
    [ "$lossy_iloss" -ge $(( 2 * clean_iloss + 5 )) ] \
        || { fail "roce-tune inspect --counters: under 5% loss the loss counters rose by $lossy_iloss, not well above the clean run's $clean_iloss"; return 1; }

    # ---- 5. DCB: what RTM_GETDCB answers for these netdevs, through roce-tune's codec
    local nic dev missing="kl${SIDX}none" devs=("$a" "$b")
    nic="$(ls "/sys/bus/pci/devices/$PCI_A/net" 2>/dev/null | head -n1)"
    [ -z "$nic" ] || devs+=("$nic")
    out="$("$probe" "${devs[@]}" "$missing" 2>&1)"
    fact "dcb_probe ${devs[*]} $missing: ${out//$'\n'/ | }"
    # has <what> <line>: the probe printed a line that starts so (no grep: a process each).
    has() { [[ $'\n'"$out" == *$'\n'"$2"* ]] || fail "$1: no line '$2' in: ${out//$'\n'/ | }"; }
    for dev in "${devs[@]}"; do
        has "DCB answer for $dev" "$dev: answer: NoDcb(NotSupported)" || return 1
        has "QoS verdict for $dev" "$dev: verdict: unknown: not judged" || return 1
        has "the raw exchange and ask_dcb agree for $dev" "$dev: agree:" || return 1
    done
    has "DCB answer for a missing netdev" "$missing: answer: NoDcb(NoDevice)" || return 1
    local verdicts="${devs[*]}"
    fact "QoS verdict unknown (no DCB: EOPNOTSUPP) for $verdicts ($nic: e1000e)"
}

# ================================================================ runner
SCENARIOS=(exclusive:s_exclusive lookup:s_lookup pci-lookup:s_pci_lookup gid-late:s_gid_late ipv6:s_ipv6
           two-pods:s_two_pods inspect:s_inspect traffic-class:s_traffic_class
           del-gone:s_del_gone rdma-cm-tos:s_rdma_cm_tos agent-drift:s_agent_drift nri-dra:s_nri_dra
           rxe-counters:s_rxe_counters)
read -ra want <<<"${KERNEL_SCENARIOS:-}"

# scen_cleanup: everything of scenario SIDX, also when it failed half-way.
scen_cleanup() {
    local ns l d
    bg_stop_all                                       # the agent of agent-drift
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^kl-$SIDX-" || true); do ip netns del "$ns" 2>/dev/null; done
    rm -f /var/run/netns/kl-"$SIDX"-* 2>/dev/null     # what a DEL of sbr creates where a netns was
    for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^k[vs]$SIDX" || true); do
        ip link del "$l" 2>/dev/null
    done
    for d in $(rdma -j dev show 2>/dev/null | jq -r '.[].ifname' | grep "^rxe_kl$SIDX" || true); do rdma link delete "$d" 2>/dev/null; done
    for d in "$CONFIGFS"/rxe_kl"$SIDX"*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
    rm -f "$LIBCNI_CACHE/kl$SIDX-"* 2>/dev/null
    find "$KL_TMP/state" -maxdepth 1 -name '*.state' -delete 2>/dev/null
    return 0
}

commit="$(git -C "$E2E_REPO" log -1 --format='%h %s' 2>/dev/null | cut -c1-70)"
git -C "$E2E_REPO" diff --quiet HEAD 2>/dev/null || commit+=" (+ uncommitted changes)"
echo "kernel-lane: kernel $(uname -r), RDMA netns mode $(cat "$MODE_FILE"), tree ${commit:-unknown}"
echo "kernel-lane: roce-tune $E2E_BIN ($(stat -c %s "$E2E_BIN") bytes, $(stat -c %y "$E2E_BIN" | cut -d. -f1)), cnitool $CNITOOL, plugins $CNI_PLUGIN_DIR"
echo "kernel-lane: node config $NODE_CONF: $(jq -c . "$NODE_CONF")"
passed=0 failed=0 unsupported=0 idx=0 ran=0 lane_start="${EPOCHREALTIME/./}"
for entry in "${SCENARIOS[@]}"; do
    name="${entry%%:*}"; fn="${entry#*:}"
    idx=$(( idx + 1 ))
    if [ "${#want[@]}" -gt 0 ] && [[ " ${want[*]} " != *" $name "* ]]; then continue; fi
    ran=$(( ran + 1 ))
    SIDX="$(printf '%02d' "$idx")"
    start="${EPOCHREALTIME/./}"
    (
        NODE="$name" NODE_LOG="$LOG_DIR/$name.log" NODE_NETD="$KL_TMP/netd/$name"
        POD_NS_PREFIX="kl-$SIDX-"
        : >"$NODE_LOG"; mkdir -p "$NODE_NETD"
        trap 'scen_cleanup' EXIT
        "$fn"
    ) </dev/null
    rc=$?
    extra=""
    if [ "$name" = exclusive ]; then
        extra="$(exclusive_restore)" || rc=1
    fi
    ms=$(( (${EPOCHREALTIME/./} - start) / 1000 ))
    reason="$(cat "$E2E_TMP/reason.$name" 2>/dev/null)"
    [ -z "$extra" ] || reason="${reason:+$reason; }$extra"
    case "$rc" in
        0) echo "PASS $name (${ms} ms)"; passed=$(( passed + 1 )) ;;
        3) echo "NOT-SUPPORTED $name: $reason (${ms} ms)"; unsupported=$(( unsupported + 1 )) ;;
        *) echo "FAIL $name: ${reason:-exit status $rc (see $LOG_DIR/$name.log)} (${ms} ms)"
           failed=$(( failed + 1 ))
           if [ "${E2E_VERBOSE:-0}" = 1 ]; then sed 's/^/    | /' "$LOG_DIR/$name.log"; fi ;;
    esac
    echo "[$name: ${ms} ms, rc $rc]" >>"$LOG_DIR/$name.log"
    if [ "$(cat "$MODE_FILE")" != Y ]; then
        echo "FAIL lane: the RDMA netns mode is $(cat "$MODE_FILE") after $name; the other scenarios need shared mode: stopping"
        failed=$(( failed + 1 ))
        break
    fi
done
if [ "$ran" = 0 ]; then
    echo "kernel-lane: no scenario named ${want[*]} (have: ${SCENARIOS[*]%%:*})" >&2
    exit 2
fi
echo "kernel-lane: $passed passed, $failed failed, $unsupported not supported by this binary ($(( (${EPOCHREALTIME/./} - lane_start) / 1000 )) ms)"
[ "$failed" = 0 ]
