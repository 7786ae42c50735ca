# integration/lib.sh: a simulated GPU node for roce-tune's end-to-end tests and demo.
# Sourced by integration/e2e.sh and integration/demo.sh (bash 5, root).
#
# What is simulated and what is real:
#   * REAL: network namespaces (the "pods"), veth pairs (one end is the stand-in VF, left in the
#     host netns for host-device to move into the pod; the peer sits in a "switch" netns),
#     the reference plugins from Debian's containernetworking-plugins (host-device + static
#     IPAM stand in for sriov + IPAM; sbr is the real sbr), cnitool (libcni 1.1.2), sysctls,
#     ip rules and routes, and the roce-tune binary.
#   * SIMULATED: the RDMA sysfs (docs/design.md, "Test trees"), a test tree per node, passed
#     to roce-tune as sysfsRoot, and the kernel's GID management: a background loop ("the
#     kernel") that writes the v4-mapped GID of a rail's address into gids/2 (IB/RoCE v1) and
#     gids/3 (RoCE v2) once the address is on the interface in the pod, and zeroes them when
#     it goes away.
#
# Naming: everything carries the run id E2E_RUN (4 hex digits) so it can be found and removed:
#   netns      rt<run>-<node>-<pod>, rt<run>-<node>-sw
#   host links rt<run><node>v<n>      (VFs; their peers live in the switch netns)
#   networks   rt<run>-<node>-<rail>  (conflist names; libcni caches results under
#                                       /var/lib/cni/results/<network>-*, removed on cleanup)
#   files      $E2E_TMP (mktemp -d)
# Functions return non-zero on failure (no reliance on set -e). Assertion helpers record the
# reason in $E2E_TMP/reason.<node> (see fail()). Callers use pipefail: never end a pipeline
# with grep -q (it exits early, the writer gets SIGPIPE, the pipeline fails).

E2E_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_REPO="$(dirname "$E2E_LIB_DIR")"
E2E_BIN="${ROCE_TUNE_BIN:-$E2E_REPO/target/release/roce-tune}"
# The long-running binary (agent, nri; docs/design.md, "Two binaries"), beside it by default.
E2E_AGENT_BIN="${ROCE_TUNE_AGENT_BIN:-$(dirname "$E2E_BIN")/roce-tune-agent}"
CNITOOL="${CNITOOL:-$E2E_LIB_DIR/.build/bin/cnitool}"
CNI_PLUGIN_DIR="${CNI_PLUGIN_DIR:-/usr/lib/cni}"
LIBCNI_CACHE=/var/lib/cni/results
ZERO_GID=0000:0000:0000:0000:0000:0000:0000:0000

# ------------------------------------------------------------------ run setup / teardown

# lib_require_root: loud exit if not root.
lib_require_root() {
    if [ "$(id -u)" != 0 ]; then
        {
            echo "########################################################################"
            echo "## $(basename "$0"): NOT RUN: must run as ROOT (uid $(id -u) now)."
            echo "## It creates network namespaces and veths and runs CNI plugins."
            echo "## Try: sudo make ${1:-e2e}"
            echo "########################################################################"
        } >&2
        exit 2
    fi
}

# lib_die <who> <where the whole log is, or ""> <message>: how a demo stops: what failed,
# then the last lines of the node's log, exit 1.
lib_die() {
    local who="$1" where="$2"
    shift 2
    printf '%s\n' "$who: FAILED: $*"
    if [ -n "${NODE_LOG:-}" ] && [ -s "$NODE_LOG" ]; then
        printf '%s\n' "--- last 25 log lines${where:+ ($where)} ---"
        tail -n 25 "$NODE_LOG"
    fi
    exit 1
}

# lib_check_tools [tool...]: everything the harness runs must be there: the tools named (by
# default every one the e2e lane uses; the demo names fewer: it runs no python3), the reference
# plugins, cnitool and both binaries.
lib_check_tools() {
    local missing=()
    local t tools=("$@")
    [ "${#tools[@]}" -gt 0 ] || tools=(ip jq sysctl sha512sum timeout python3 nsenter)
    for t in "${tools[@]}"; do
        command -v "$t" >/dev/null 2>&1 || missing+=("$t")
    done
    for t in host-device static sbr; do
        [ -x "$CNI_PLUGIN_DIR/$t" ] || missing+=("$CNI_PLUGIN_DIR/$t")
    done
    [ -x "$CNITOOL" ] || missing+=("$CNITOOL (run integration/setup.sh)")
    [ -x "$E2E_BIN" ] || missing+=("$E2E_BIN (cargo build --release)")
    [ -x "$E2E_AGENT_BIN" ] || missing+=("$E2E_AGENT_BIN (cargo build --release)")
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "missing: ${missing[*]}" >&2
        return 1
    fi
}

# lib_init: temp dir, CNI_PATH dir holding roce-tune, the kernel loop. Call once per run.
lib_init() {
    E2E_RUN="$(printf '%04x' $(( ($$ + RANDOM) % 65536 )))"
    E2E_TMP="$(mktemp -d /tmp/roce-tune-e2e.XXXXXX)"
    # State dirs: under /run, whose parents only root can write (see node_init).
    E2E_RUN_DIR="/run/roce-tune-e2e/$E2E_RUN"
    (umask 077 && mkdir -p "$E2E_RUN_DIR")
    mkdir -p "$E2E_TMP/bin" "$E2E_TMP/kernel.d" "$E2E_TMP/logs"
    # CNI_PATH: the Debian plugins first, then a dir with roce-tune (a copy: a rebuild during
    # the run must not change the binary under test).
    cp "$E2E_BIN" "$E2E_TMP/bin/roce-tune"
    cp "$E2E_AGENT_BIN" "$E2E_TMP/bin/roce-tune-agent"
    cp "$E2E_LIB_DIR/tree-rdma" "$E2E_TMP/bin/tree-rdma"
    # shims/ first: host-device as it runs where pciBusID is a real VF (see the shim).
    E2E_CNI_PATH="$E2E_LIB_DIR/shims:$CNI_PLUGIN_DIR:$E2E_TMP/bin"
    export E2E_RUN E2E_TMP E2E_RUN_DIR E2E_CNI_PATH
    kernel_start
}

# lib_cleanup: remove everything of this run (idempotent; used by traps).
lib_cleanup() {
    [ -n "${E2E_RUN:-}" ] || return 0
    kernel_stop
    remove_named "rt${E2E_RUN}-" "rt${E2E_RUN}"
    rm -rf "${E2E_RUN_DIR:?}"
    rmdir /run/roce-tune-e2e 2>/dev/null || true
    if [ -n "${E2E_TMP:-}" ] && [ -d "$E2E_TMP" ]; then
        if [ -n "${E2E_LOG_DIR:-}" ]; then
            rm -rf "$E2E_LOG_DIR"; mkdir -p "$E2E_LOG_DIR"
            cp -r "$E2E_TMP/logs/." "$E2E_LOG_DIR/" 2>/dev/null || true
        fi
        rm -rf "$E2E_TMP"
    fi
}

# ------------------------------------------------------------------ the kernel (GID manager)

# Registration file per rail: $E2E_TMP/kernel.d/<node>.<rail> holding one line
#   <netns> <ifname> <port dir in the test tree> <mode>
# mode: now | never | delay:<ms> (the GID appears <ms> after the address) |
#       torn:<ms> (the type file reads "RoCE v2" at once, the GID <ms> later: what a reader
#       that reads gids/<i> and then types/<i> sees when the kernel adds the entry in between)
kernel_loop() {
    declare -A written seen
    local f ns ifname port mode key addr a b c d gid now due
    while [ ! -e "$E2E_TMP/kernel.stop" ]; do
        declare -A addrs=()
        for f in "$E2E_TMP"/kernel.d/*; do
            [ -e "$f" ] || continue
            read -r ns ifname port mode <"$f" 2>/dev/null || continue
            port="$(port_now "$port")"
            key="${f##*/}"
            if [ -z "${addrs[$ns]+x}" ]; then
                addrs[$ns]="$(ip -n "$ns" -4 -o addr show 2>/dev/null | awk '{print $2" "$4}')"
            fi
            addr="$(awk -v i="$ifname" '$1 == i {sub(/\/.*/, "", $2); print $2; exit}' <<<"${addrs[$ns]}")"
            if [ -z "$addr" ]; then
                # The address is gone (DEL moved the VF out, or not there yet): no IP GIDs.
                unset "seen[$key]"
                if [ -n "${written[$key]:-}" ]; then
                    kernel_write_gid "$port" 2 "$ZERO_GID" ""
                    kernel_write_gid "$port" 3 "$ZERO_GID" ""
                    unset "written[$key]"
                fi
                continue
            fi
            [ "${written[$key]:-}" = "$addr" ] && continue
            case "$mode" in
                never) continue ;;
                delay:*|torn:*)
                    now="${EPOCHREALTIME/./}"; now=$(( now / 1000 ))
                    if [ -z "${seen[$key]:-}" ]; then
                        seen[$key]="$now"
                        if [ "${mode%%:*}" = torn ]; then
                            kernel_write_gid "$port" 2 "$ZERO_GID" "IB/RoCE v1"
                            kernel_write_gid "$port" 3 "$ZERO_GID" "RoCE v2"
                        fi
                    fi
                    due=$(( ${seen[$key]} + ${mode#*:} ))
                    [ "$now" -ge "$due" ] || continue ;;
            esac
            IFS=. read -r a b c d <<<"$addr"
            gid="$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")"
            # Written only once both land: the rdma plugin's stand-in may move the device into
            # the pod's view between port_now and the write, which then fails (its directory
            # is gone) and is made again in the next turn, where port_now finds it.
            kernel_write_gid "$port" 2 "$gid" "IB/RoCE v1" &&
                kernel_write_gid "$port" 3 "$gid" "RoCE v2" &&
                written[$key]="$addr"
        done
        unset addrs
        sleep 0.05
    done
}

# port_now <port dir in the tree's root>: where that port is now. In exclusive mode the rdma
# plugin (tree-rdma) moved the device into a pod's view, <root>/netns/<inode>/.
port_now() {
    local root="${1%%/class/infiniband/*}" rel="class/infiniband/${1#*/class/infiniband/}" d
    if [ -d "$1" ]; then echo "$1"; return; fi
    for d in "$root"/netns/*/"$rel"; do
        [ -d "$d" ] && { echo "$d"; return; }
    done
    echo "$1"
}

# kernel_write_gid <port dir> <index> <gid> <type>: type first, then the GID, each replaced
# atomically (rename), so a reader never sees a half-written entry.
kernel_write_gid() {
    local port="$1" i="$2" gid="$3" type="$4" tmp
    tmp="${port%%/class/infiniband/*}"; tmp="${tmp%%/netns/*}/.tmp"  # <sysfsRoot>/.tmp: same filesystem
    mkdir -p "$tmp"
    printf '%s' "$type" >"$tmp/type.$i.$BASHPID" && mv -f "$tmp/type.$i.$BASHPID" "$port/gid_attrs/types/$i" &&
        printf '%s\n' "$gid" >"$tmp/gid.$i.$BASHPID" && mv -f "$tmp/gid.$i.$BASHPID" "$port/gids/$i"
}

kernel_start() {
    rm -f "$E2E_TMP/kernel.stop"
    kernel_loop >"$E2E_TMP/logs/kernel.log" 2>&1 &
    E2E_KERNEL_PID=$!
    echo "$E2E_KERNEL_PID" >"$E2E_TMP/kernel.pid"
}

kernel_stop() {
    [ -n "${E2E_TMP:-}" ] && [ -d "$E2E_TMP" ] || return 0
    touch "$E2E_TMP/kernel.stop"
    local pid
    pid="$(cat "$E2E_TMP/kernel.pid" 2>/dev/null || true)"
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -f "$E2E_TMP/kernel.pid"
}

# kernel_settle <rail>: after a DEL moved the VF out of the pod, wait (<= 3 s) until the
# kernel has dropped the IP GIDs (2 and 3), as the real one does right away; without this a
# quick re-ADD could pass its GID check on the previous attachment's entries.
kernel_settle() {
    local port="$NODE_SYS/class/infiniband/${R_DEV[$1]}/ports/1" k
    for k in $(seq 60); do
        [ "$(cat "$port/gids/2")" = "$ZERO_GID" ] && [ "$(cat "$port/gids/3")" = "$ZERO_GID" ] && return 0
        sleep 0.05
    done
    log "kernel_settle $1: IP GIDs still there after 3 s"
    return 1
}

# kernel_mode <rail> <mode>: change how the kernel treats a registered rail.
kernel_mode() {
    local f="$E2E_TMP/kernel.d/$NODE.$1" ns ifname port mode
    read -r ns ifname port mode <"$f"
    echo "$ns $ifname $port $2" >"$f.tmp" && mv -f "$f.tmp" "$f"
}

# ------------------------------------------------------------------ a node

# node_init <name> <index 0..9>: a node = a sysfs test tree, a state dir, a switch netns, and
# the node config naming them ($NODE_CONF, passed as ROCE_TUNE_NODE_CONFIG to every run).
# The state dir lives under /run: roce-tune refuses one with a parent others can write (/tmp).
# Sets NODE, NODE_IDX, NODE_DIR, NODE_SYS, NODE_STATE, NODE_DEVINFO, NODE_CONF, NODE_NETD, NODE_LOG.
node_init() {
    NODE="$1"
    NODE_IDX="$2"
    NODE_DIR="$E2E_TMP/$NODE"
    NODE_SYS="$NODE_DIR/sys"
    NODE_STATE="$E2E_RUN_DIR/$NODE/state"
    NODE_CONF="$NODE_DIR/node.json"
    NODE_NETD="$NODE_DIR/net.d"
    NODE_LOG="$E2E_TMP/logs/$NODE.log"
    NODE_SW="rt${E2E_RUN}-${NODE}-sw"
    mkdir -p "$NODE_SYS/module/ib_core/parameters" "$NODE_SYS/bus/pci/devices" \
             "$NODE_SYS/class/infiniband" "$NODE_SYS/.tmp" "$NODE_NETD"
    (umask 077 && mkdir -p "$NODE_STATE")
    echo Y >"$NODE_SYS/module/ib_core/parameters/netns_mode"
    NODE_DEVINFO="$E2E_RUN_DIR/$NODE/devinfo"     # made by roce-tune when a rail asks for it
    jq -n --arg sys "$NODE_SYS" --arg state "$NODE_STATE" --arg di "$NODE_DEVINFO" \
        '{sysfsRoot: $sys, stateDir: $state, deviceInfoDir: $di}' >"$NODE_CONF"
    chmod 644 "$NODE_CONF"
    : >"$NODE_LOG"
    ip netns add "$NODE_SW" || return 1
    ip -n "$NODE_SW" link set lo up
    declare -gA R_POD=() R_IF=() R_VF=() R_PCI=() R_DEV=() R_CIDR=() R_GW=() R_TC=() R_NET=()
}

# node_cleanup: remove this node's namespaces, VFs, kernel registrations and libcni cache.
node_cleanup() {
    [ -n "${NODE:-}" ] || return 0
    bg_stop_all
    rm -f "$E2E_TMP/kernel.d/$NODE".*
    remove_named "rt${E2E_RUN}-${NODE}-" "rt${E2E_RUN}${NODE_IDX}v"
}

# remove_named <netns and libcni cache prefix> <link prefix>: every netns, host link and cached
# libcni result whose name starts so (everything a run or a node made is named that way).
remove_named() {
    local ns l
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$1" || true); do
        ip netns del "$ns" 2>/dev/null || true
    done
    for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$2" || true); do
        ip link del "$l" 2>/dev/null || true
    done
    rm -f "$LIBCNI_CACHE/$1"* 2>/dev/null || true
}

log() { echo "[$(date +%T.%3N)] $*" >>"$NODE_LOG"; }

# pod_create <pod>: a pod netns. Its defaults are set to the values a hardened host would give
# (rp_filter strict), so the VF moved in starts with values roce-tune must change.
pod_create() {
    local ns; ns="$(pod_ns "$1")"
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -q -w net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.default.rp_filter=1 \
        net.ipv4.conf.default.arp_ignore=0 net.ipv4.conf.default.arp_announce=0 \
        net.ipv4.conf.default.arp_filter=0 net.ipv4.conf.default.accept_local=0 >/dev/null
}
pod_ns() { echo "${POD_NS_PREFIX-rt${E2E_RUN}-${NODE}-}$1"; }
pod_path() { echo "/var/run/netns/$(pod_ns "$1")"; }
# The container ID cnitool uses: "cnitool-" + hex of the first 10 bytes of sha512(netns path).
cnitool_cid() { printf 'cnitool-%s' "$(printf '%s' "$(pod_path "$1")" | sha512sum | cut -c1-20)"; }

# gid_from_mac <mac>: the fe80 link-local GID (EUI-64) in the kernel's uncompressed form.
gid_from_mac() {
    local m1 m2 m3 m4 m5 m6
    IFS=: read -r m1 m2 m3 m4 m5 m6 <<<"$1"
    printf 'fe80:0000:0000:0000:%02x%02x:%02xff:fe%02x:%02x%02x' \
        $(( 0x$m1 ^ 2 )) "0x$m2" "0x$m3" "0x$m4" "0x$m5" "0x$m6"
}

# rail_create <rail> <pod> <ifname> <pci> <rdma dev> <cidr> <gateway> <tc original> <trafficClass> [kernel mode]
# A VF (veth end in the host netns), its RDMA device in the test tree with the given
# traffic_class content, and its registration with the kernel loop. <rail> is a short id
# (alphanumeric, <= 3 chars; it is part of the VF name unless RAIL_VF_NAME gives one).
rail_create() {
    local rail="$1" pod="$2" ifname="$3" pci="$4" dev="$5" cidr="$6" gw="$7" orig="$8" tc="$9" mode="${10:-now}"
    local vf="${RAIL_VF_NAME:-rt${E2E_RUN}${NODE_IDX}v${rail}}"
    [ "${#vf}" -le 15 ] || { echo "VF name $vf too long" >&2; return 1; }
    ip link add "$vf" type veth peer name "p$rail" netns "$NODE_SW" || return 1
    ip -n "$NODE_SW" link set "p$rail" up
    local mac ll i root="$NODE_SYS/class/infiniband/$dev" port
    mac="$(cat "/sys/class/net/$vf/address")"
    ll="$(gid_from_mac "$mac")"
    port="$root/ports/1"
    mkdir -p "$NODE_SYS/bus/pci/devices/$pci/infiniband/$dev" "$root/tc/1" "$port/gids" \
             "$port/gid_attrs/types" "$port/gid_attrs/ndevs"
    printf '%b' "$orig" >"$root/tc/1/traffic_class"
    for i in 0 1 2 3 4 5 6 7; do
        echo "$ZERO_GID" >"$port/gids/$i"
        : >"$port/gid_attrs/types/$i"
    done
    echo "$ll" >"$port/gids/0"; printf 'IB/RoCE v1' >"$port/gid_attrs/types/0"
    echo "$ll" >"$port/gids/1"; printf 'RoCE v2' >"$port/gid_attrs/types/1"
    # The device's identity, as sysfs gives it: the link to its PCI function, the node GUID.
    ln -sfn "../../../bus/pci/devices/$pci" "$root/device"
    printf '%s\n' "$(guid_of "$pci")" >"$root/node_guid"
    # The kernel's answer from inside the pod (docs/design.md, "Test trees"): the pod's
    # <ifname> is the netdev of the PCI function <pci>.
    # RAIL_BIND=0: the tree gives the pod's netdev no PCI function (a plain veth).
    [ "${RAIL_BIND:-1}" = 0 ] || tree_bind "$pod" "$ifname" "$pci" || return 1
    R_POD[$rail]="$pod"; R_IF[$rail]="$ifname"; R_VF[$rail]="$vf"; R_PCI[$rail]="$pci"
    R_DEV[$rail]="$dev"; R_CIDR[$rail]="$cidr"; R_GW[$rail]="$gw"; R_TC[$rail]="$tc"
    R_NET[$rail]="rt${E2E_RUN}-${NODE}-$rail"
    echo "$(pod_ns "$pod") $ifname $port $mode" >"$E2E_TMP/kernel.d/$NODE.$rail"
    log "rail $rail: $vf -> $(pod_ns "$pod")/$ifname pci $pci dev $dev $cidr tc $tc original '$orig'"
}

# tree_bind <pod> <ifname> <pci>: <root>/netns/<inode of the pod's nsfs file>/class/net/<ifname>/device,
# a link whose last component is the PCI address, as the kernel's class/net/<if>/device is.
tree_bind() {
    local ino d
    ino="$(stat -L -c %i "$(pod_path "$1")")" || return 1
    d="$NODE_SYS/netns/$ino/class/net/$2"
    mkdir -p "$d" && ln -sfn "../../../../../bus/pci/devices/$3" "$d/device"
}

# guid_of <pci>: a node GUID made of the PCI address, so each device's differs.
guid_of() {
    local h; h="$(printf '%016x' "0x$(tr -dc '0-9a-f' <<<"$1")")"
    echo "${h:0:4}:${h:4:4}:${h:8:4}:${h:12:4}"
}

# rail_conf <rail> <cniVersion> <chain: sbr|nosbr> [extra roce-tune JSON] -> conflist on stdout.
# The chain as the operator renders it, host-device + static IPAM standing in for sriov + IPAM,
# with what Multus 4.2 injects: deviceID and pciBusID into EVERY plugin (multus-cni
# pkg/types/conf.go, addDeviceIDInConfList; host-device reads /sys/bus/pci/devices/<pciBusID>,
# which integration/shims/host-device gives it). RAIL_RDMA=1 puts the rdma plugin (tree-rdma, its
# stand-in on a test tree) before roce-tune, as exclusive mode needs.
rail_conf() {
    local rail="$1" ver="$2" chain="$3" extra="${4:-}"
    [ -n "$extra" ] || extra='{}'
    local name="${R_NET[$rail]}"
    [ "$chain" = sbr ] || name="$name-$chain"
    jq -n --arg ver "$ver" --arg name "$name" --arg vf "${R_VF[$rail]}" --arg pci "${R_PCI[$rail]}" \
        --arg cidr "${R_CIDR[$rail]}" --arg gw "${R_GW[$rail]}" --argjson tc "${R_TC[$rail]}" \
        --arg chain "$chain" --argjson extra "$extra" --arg dev "${R_DEV[$rail]}" \
        --arg rdma "${RAIL_RDMA:-0}" '
      {cniVersion: $ver, name: $name, plugins: ([
        {type: "host-device", device: $vf,
         ipam: {type: "static", addresses: [{address: $cidr, gateway: $gw}]}}]
        + (if $rdma == "1" then [{type: "tree-rdma", rdmaDevice: $dev}] else [] end)
        + [({type: "roce-tune", trafficClass: $tc, gidTimeoutMs: 3000} + $extra)]
        + (if $chain == "sbr" then [{type: "sbr"}] else [] end)
        | map(. + {deviceID: $pci, pciBusID: $pci}))}'
}

# rail_write_conf <rail> <cniVersion> <chain> [extra]: writes $NODE_NETD/<network>.conflist,
# prints the network name.
rail_write_conf() {
    local name
    name="$(rail_conf "$@" | jq -r .name)" || return 1
    rail_conf "$@" >"$NODE_NETD/$name.conflist" || return 1
    echo "$name"
}

# ------------------------------------------------------------------ drivers

# multus_cni_args <pod>: CNI_ARGS as Multus 4.2 in thin mode hands them to every plugin: its own
# five pairs (IgnoreUnknown, K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_INFRA_CONTAINER_ID,
# K8S_POD_UID), then the runtime's pairs again (multus-cni pkg/types/conf.go, createRuntimeConf
# and newCNIRuntimeConf: a runtime pair is added unless it fills an empty one).
multus_cni_args() {
    local ns="e2e-$NODE" name="$1" sandbox uid own kubelet
    sandbox="$(cnitool_cid "$1")"
    uid="$(printf '%s' "$(pod_ns "$1")" | sha256sum | sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/\1-\2-\3-\4-\5/')"
    own="IgnoreUnknown=true;K8S_POD_NAMESPACE=$ns;K8S_POD_NAME=$name;K8S_POD_INFRA_CONTAINER_ID=$sandbox;K8S_POD_UID=$uid"
    kubelet="IgnoreUnknown=1;K8S_POD_NAMESPACE=$ns;K8S_POD_NAME=$name;K8S_POD_INFRA_CONTAINER_ID=$sandbox;K8S_POD_UID=$uid"
    echo "$own;$kubelet"
}

# cnitool_run <add|check|del> <network> <pod> <ifname>: stdout -> $CNI_OUT, stderr -> $CNI_ERR,
# exit code -> $CNI_RC (also returned).
cnitool_run() {
    local cmd="$1" net="$2" pod="$3" ifname="$4" o e
    o="$E2E_TMP/out.$BASHPID"; e="$E2E_TMP/err.$BASHPID"
    NETCONFPATH="$NODE_NETD" CNI_PATH="$E2E_CNI_PATH" CNI_IFNAME="$ifname" \
        CNI_ARGS="$(multus_cni_args "$pod")" CAP_ARGS="${CNI_CAP_ARGS:-}" \
        ROCE_TUNE_NODE_CONFIG="$NODE_CONF" \
        timeout 60 "$CNITOOL" "$cmd" "$net" "$(pod_path "$pod")" >"$o" 2>"$e"
    CNI_RC=$?
    CNI_OUT="$(cat "$o")"; CNI_ERR="$(cat "$e")"
    rm -f "$o" "$e"
    {
        echo "[$(date +%T.%3N)] cnitool $cmd $net $(pod_path "$pod") ($ifname): rc=$CNI_RC"
        [ -z "$CNI_OUT" ] || sed 's/^/    out| /' <<<"$CNI_OUT"
        [ -z "$CNI_ERR" ] || sed 's/^/    err| /' <<<"$CNI_ERR"
    } >>"$NODE_LOG"
    return "$CNI_RC"
}

# plugin_exec <command> <plugin config JSON> <netns path|""> <ifname> <containerID> [type]
# Runs one plugin binary (its "type", or [type] for stdin without one, e.g. VERSION) the way libcni does (all six CNI_* variables set, empty ones
# included). stdout -> $PL_OUT, exit code -> $PL_RC (also returned). stderr goes to the log.
plugin_exec() {
    local cmd="$1" conf="$2" netns="$3" ifname="$4" cid="$5" type="${6:-}" bin o
    [ -n "$type" ] || type="$(jq -r .type <<<"$conf")"
    bin="$(IFS=:; for d in $E2E_CNI_PATH; do [ -x "$d/$type" ] && { echo "$d/$type"; break; }; done)"
    [ -n "$bin" ] || { PL_OUT="plugin $type not found in $E2E_CNI_PATH"; PL_RC=127; return 127; }
    o="$E2E_TMP/plout.$BASHPID"
    printf '%s' "$conf" | env CNI_COMMAND="$cmd" CNI_CONTAINERID="$cid" CNI_NETNS="$netns" \
        CNI_IFNAME="$ifname" CNI_ARGS="${PL_CNI_ARGS:-}" CNI_PATH="$E2E_CNI_PATH" \
        ROCE_TUNE_NODE_CONFIG="$NODE_CONF" \
        timeout 60 "$bin" >"$o" 2>>"$NODE_LOG"
    PL_RC=$?
    PL_OUT="$(cat "$o")"; rm -f "$o"
    {
        echo "[$(date +%T.%3N)] exec $type $cmd cid=$cid netns=$netns if=$ifname: rc=$PL_RC"
        sed 's/^/    in | /' <<<"$conf"
        [ -z "$PL_OUT" ] || sed 's/^/    out| /' <<<"$PL_OUT"
    } >>"$NODE_LOG"
    return "$PL_RC"
}

# cni_runtime: the chain driven the way a spec-1.1.0 runtime drives it (libcni 1.3, as in
# CRI-O and containerd), by integration/cni_runtime.py (its doc: which rule of the spec each
# step follows, and how it bridges Debian's 1.0.0-only reference plugins):
#   cni_runtime <ADD|CHECK|DEL> <conflist file> <netns path> <ifname> <containerID>
#   cni_runtime GC <conflist file> <cni.dev/valid-attachments JSON>
#   cni_runtime STATUS <conflist file>
# Sets RT_FAILED (the type of the plugin that failed, space-separated for GC; empty if none),
# PL_OUT (its stdout: the error object with the code), PL_RC (its exit status, 0 if none
# failed; also returned), RT_RESULT (the final result of ADD), RT_OUTS[<type>] (each plugin's
# stdout) and RT_SKIPPED (plugins that were not asked: GC and STATUS to a 1.0.0-only plugin).
cni_runtime() {
    local cmd="$1" file="$2" report args=()
    case "$cmd" in
        ADD|CHECK|DEL) args=(--netns "$3" --ifname "$4" --cid "$5") ;;
        GC) args=(--valid-attachments "$3") ;;
    esac
    report="$(CNI_PATH="$E2E_CNI_PATH" ROCE_TUNE_NODE_CONFIG="$NODE_CONF" \
        python3 "$E2E_LIB_DIR/cni_runtime.py" "$cmd" "$file" "${args[@]}" \
        --cni-args "${RT_CNI_ARGS:-}" --capability-args "${CNI_CAP_ARGS:-}" \
        --cache "$E2E_TMP/rtcache" --log "$NODE_LOG" 2>>"$NODE_LOG")"
    PL_RC=$?
    declare -gA RT_OUTS=()
    if ! jq -e . >/dev/null 2>&1 <<<"$report"; then
        RT_FAILED="cni_runtime.py"; PL_OUT="no report (rc $PL_RC; see $NODE_LOG)"; RT_RESULT=""; RT_SKIPPED=""
        [ "$PL_RC" != 0 ] || PL_RC=2
        return "$PL_RC"
    fi
    RT_FAILED="$(jq -r '.failed | join(" ")' <<<"$report")"
    PL_OUT="$(jq -r '.error' <<<"$report")"
    RT_RESULT="$(jq -c '.result // empty' <<<"$report")"
    RT_SKIPPED="$(jq -r '.skipped | join(" ")' <<<"$report")"
    local type
    while IFS= read -r type; do
        [ -n "$type" ] || continue
        RT_OUTS[$type]="$(jq -r --arg t "$type" '.outputs[$t]' <<<"$report")"
    done < <(jq -r '.outputs | keys[]' <<<"$report")
    return "$PL_RC"
}

# ------------------------------------------------------------------ observing the node

tc_file() { echo "$(port_now "$NODE_SYS/class/infiniband/${R_DEV[$1]}/ports/1")/../../tc/1/traffic_class"; }
# tc_raw <rail>: the file's content, trailing newlines stripped.
tc_raw() { local v; v="$(cat "$(tc_file "$1")")"; printf '%s' "$v"; }
# tc_class [content]: "unset" or the global class N of a traffic_class file's content (stdin,
# or the argument with its \n escapes as rail_create takes an original), read as
# docs/design.md ("The traffic class file") says. tc_value <rail>: the class the rail's file
# holds now.
tc_class() {
    local first
    if [ "$#" -gt 0 ]; then first="$(printf '%b' "$1" | head -n1)"; else first="$(head -n1)"; fi
    first="$(tr -d '[:space:]' <<<"$first")"
    case "$first" in
        ""|-1|tclass=-1) echo unset ;;
        Globaltclass=*) echo "${first#Globaltclass=}" ;;
        tclass=*) echo "${first#tclass=}" ;;
        *) echo "$first" ;;
    esac
}
tc_value() { tc_class <"$(tc_file "$1")"; }

# state_count: *.json records in the node's state dir.
state_count() { find "$NODE_STATE" -maxdepth 1 -name '*.state' | wc -l; }
state_list() { find "$NODE_STATE" -maxdepth 1 -name '*.state' -printf '%f\n' | sort; }

pod_sysctl() { ip netns exec "$(pod_ns "$1")" sysctl -n "$2" 2>&1; }

# The rail sysctls roce-tune sets by default and their values, as `name=value` words:
# RAIL_SYSCTLS_ALL under net.ipv4.conf.all, RAIL_SYSCTLS under net.ipv4.conf.<ifname> (the
# kernel uses the max of the two for rp_filter). Read from tests/data/rail-sysctls.txt, which
# states them once for the scripts and the Rust tests alike (and says why apart from the
# plugin's own defaults). A file that cannot be read stops the run: empty lists would check
# nothing.
RAIL_SYSCTLS_ALL="" RAIL_SYSCTLS=""
while read -r k v; do
    case "$k" in
        ""|"#"*) continue ;;
        net.ipv4.conf.all.*) RAIL_SYSCTLS_ALL+="${RAIL_SYSCTLS_ALL:+ }${k#net.ipv4.conf.all.}=$v" ;;
        net.ipv4.conf.IFNAME.*) RAIL_SYSCTLS+="${RAIL_SYSCTLS:+ }${k#net.ipv4.conf.IFNAME.}=$v" ;;
        *) echo "lib.sh: tests/data/rail-sysctls.txt: $k is neither under all nor IFNAME" >&2; exit 1 ;;
    esac
    [ -n "$v" ] || { echo "lib.sh: tests/data/rail-sysctls.txt: $k has no value" >&2; exit 1; }
done <"$E2E_REPO/tests/data/rail-sysctls.txt"
if [ -z "$RAIL_SYSCTLS_ALL" ] || [ -z "$RAIL_SYSCTLS" ]; then
    echo "lib.sh: no rail sysctls read from $E2E_REPO/tests/data/rail-sysctls.txt" >&2; exit 1
fi

# sysctls_bad <pod> <ifname>: prints the mismatches ("key=got(want)"), empty when all match.
sysctls_bad() {
    local pod="$1" ifname="$2" kv k want got bad="" scope
    for scope in all "$ifname"; do
        local list="$RAIL_SYSCTLS"
        [ "$scope" = all ] && list="$RAIL_SYSCTLS_ALL"
        for kv in $list; do
            k="${kv%=*}"; want="${kv#*=}"
            got="$(pod_sysctl "$pod" "net.ipv4.conf.$scope.$k")"
            [ "$got" = "$want" ] || bad+="$scope.$k=$got(want $want) "
        done
    done
    printf '%s' "$bad"
}

sbr_rule_present() { ip -n "$(pod_ns "$1")" rule show | grep "from ${2%/*} lookup" >/dev/null; }
sbr_rule_table() { ip -n "$(pod_ns "$1")" rule show | sed -n "s/.*from ${2%/*} lookup \([0-9a-z]*\).*/\1/p" | head -n1; }

gid_read() { cat "$NODE_SYS/class/infiniband/${R_DEV[$1]}/ports/1/gids/$2"; }
gid_type() { cat "$NODE_SYS/class/infiniband/${R_DEV[$1]}/ports/1/gid_attrs/types/$2"; }
vf_in_host() { ip link show "${R_VF[$1]}" >/dev/null 2>&1; }

# ------------------------------------------------------------------ the agent and a Prometheus

# Daemons a scenario starts (the agent, Prometheus) are recorded by pid in $E2E_TMP/pids.<node>
# and stopped by node_cleanup, also when the scenario fails half-way.
bg_track() { echo "$1" >>"$E2E_TMP/pids.$NODE"; }
# bg_stop <pid>: SIGTERM, then SIGKILL after 5 s.
bg_stop() {
    local i
    kill -TERM "$1" 2>/dev/null || return 0
    for i in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
bg_stop_all() {
    local pid
    for pid in $(cat "$E2E_TMP/pids.$NODE" 2>/dev/null); do bg_stop "$pid"; done
    rm -f "$E2E_TMP/pids.$NODE"
}

# http_get <url> [timeout s]: the body on stdout; non-zero unless the answer is a 200.
http_get() {
    python3 -c 'import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])) as r:
        sys.stdout.write(r.read().decode())
except Exception as e:
    sys.exit("%s: %s" % (sys.argv[1], e))' "$1" "${2:-5}"
}

# free_port: a loopback TCP port nobody listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# agent_start <every> [driftPolicy]: `roce-tune-agent agent` on this node, on a port the kernel picks
# (metricsAddress 127.0.0.1:0 in the node config; the plugin ignores the key). Sets AGENT_PID
# and AGENT_ADDR (from the agent's own "metrics on http://<addr>/metrics" line); its log is
# $AGENT_LOG, by default $E2E_TMP/logs/<node>.agent.log.
agent_start() {
    local i
    jq --arg p "${2:-repair}" '. + {metricsAddress: "127.0.0.1:0", driftPolicy: $p}' "$NODE_CONF" >"$NODE_CONF.new" \
        && chmod 644 "$NODE_CONF.new" && mv "$NODE_CONF.new" "$NODE_CONF" || return 1
    AGENT_LOG="${AGENT_LOG:-$E2E_TMP/logs/$NODE.agent.log}"
    "$E2E_TMP/bin/roce-tune-agent" agent --every "$1" --node-config "$NODE_CONF" </dev/null >/dev/null 2>"$AGENT_LOG" &
    AGENT_PID=$!
    bg_track "$AGENT_PID"
    for i in $(seq 50); do
        AGENT_ADDR="$(sed -n 's|.*metrics on http://\([0-9.:]*\)/metrics.*|\1|p' "$AGENT_LOG" | head -n1)"
        [ -n "$AGENT_ADDR" ] && { log "agent $AGENT_PID every $1 s on $AGENT_ADDR"; return 0; }
        kill -0 "$AGENT_PID" 2>/dev/null || break
        sleep 0.1
    done
    fail "the agent did not serve metrics within 5 s: $(tail -n3 "$AGENT_LOG" | tr '\n' ' ')"
}

# agent_metric <sample, as the exposition spells it up to the value>: its value on the agent's
# /metrics ("" when there is no such sample).
agent_metric() {
    http_get "http://$AGENT_ADDR/metrics" | awk -v s="$1" 'substr($0, 1, length(s) + 1) == s " " { print $NF }'
}

# prom_start <target host:port>: a real Prometheus (setup.sh unpacks Debian's into
# .build/bin) on a free loopback port, with its own config (scrape every second) and data dir
# under the node's dir. Sets PROM_ADDR once /-/ready answers.
prom_start() {
    local bin="${PROMETHEUS:-$E2E_LIB_DIR/.build/bin/prometheus}" dir="$NODE_DIR/prometheus" pid i
    [ -x "$bin" ] || { fail "no $bin (run integration/setup.sh)"; return 1; }
    mkdir -p "$dir/data"
    printf '%s\n' "global:" "  scrape_interval: 1s" "  scrape_timeout: 1s" "scrape_configs:" \
        "  - job_name: roce-tune" "    static_configs:" "      - targets: [\"$1\"]" >"$dir/prometheus.yml"
    PROM_ADDR="127.0.0.1:$(free_port)"
    "$bin" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
        --web.listen-address="$PROM_ADDR" </dev/null >"$E2E_TMP/logs/$NODE.prometheus.log" 2>&1 &
    pid=$!
    bg_track "$pid"
    for i in $(seq 100); do
        http_get "http://$PROM_ADDR/-/ready" 1 >/dev/null 2>&1 && { log "prometheus $pid on $PROM_ADDR scrapes $1"; return 0; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    fail "Prometheus not ready within 10 s: $(tail -n3 "$E2E_TMP/logs/$NODE.prometheus.log" | tr '\n' ' ')"
}

# prom_value <PromQL>: the value of the query's one sample through Prometheus's HTTP API
# (/api/v1/query), "none" when it has none, "N samples" when it has more than one.
prom_value() {
    local q; q="$(jq -rn --arg q "$1" '$q | @uri')"
    http_get "http://$PROM_ADDR/api/v1/query?query=$q" \
        | jq -r '.data.result | if length == 1 then .[0].value[1] elif length == 0 then "none" else "\(length) samples" end'
}

# await <seconds> <command...>: run the command every 50 ms until it succeeds, at most that
# long; WAITED_MS is how long it took, until the command that succeeded ended (or the bound).
await() {
    local bound=$(( $1 * 1000 )) t0 ok; shift
    t0="${EPOCHREALTIME/./}"
    while :; do
        "$@"; ok=$?
        WAITED_MS=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
        [ "$ok" = 0 ] && return 0
        [ "$WAITED_MS" -lt "$bound" ] || return 1
        sleep 0.05
    done
}

# ------------------------------------------------------------------ assertions

# fail <reason>: record the first failure reason of the current scenario, return 1.
fail() {
    [ -s "$E2E_TMP/reason.$NODE" ] || printf '%s' "$*" >"$E2E_TMP/reason.$NODE"
    log "ASSERTION FAILED: $*"
    return 1
}
expect_eq() { # <what> <got> <want>
    [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}
expect_rc0() { # <what>  (uses $CNI_RC/$CNI_ERR of the last cnitool_run)
    [ "$CNI_RC" = 0 ] || fail "$1 failed (rc $CNI_RC): $(tail -n1 <<<"$CNI_ERR")"
}
expect_contains() { # <what> <text> <extended regex>
    grep -Eqi -- "$3" <<<"$2" || fail "$1: '$(tr '\n' ' ' <<<"$2" | cut -c1-300)' does not match /$3/"
}
