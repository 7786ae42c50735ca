#!/usr/bin/env bash
# integration/e2e.sh: end-to-end tests of roce-tune on a simulated GPU node (see lib.sh).
#
#   sudo integration/e2e.sh [scenario...]      (default: all; `make e2e` builds first)
#
# Scenarios (each on its own node: own sysfs test tree, state dir, namespaces):
#   add            cnitool ADD of host-device -> roce-tune -> sbr: sysctls, traffic class, GID
#                  check, sbr's rule and table, the final result
#   devinfo-default  the shipped default deviceInfoDir (/var/run/k8s.cni.cncf.io/devinfo/cni),
#                  through this machine's /var/run link: the device-info file gets pci.rdma-device
#   check          cnitool CHECK (chain without sbr): passes; fails naming a drifted sysctl,
#                  the traffic class, the GID
#   del            cnitool DEL: class back to unset / to 106 (from a multi-line original),
#                  a value someone else wrote is left alone, no state, sbr's rule gone,
#                  a repeated DEL (direct, no prevResult, and with the netns gone) succeeds
#   rails-16x2     two pods side by side with 16 rails each (32 VFs, 32 RDMA devices), ADDs
#                  and DELs of the two pods run concurrently: every device gets its own class,
#                  every DEL restores its own original
#   gid-timeout    the GID never appears (gidTimeoutMs 500): ADD fails in ~0.5 s with the
#                  GID in the message, code 101 on roce-tune's own stdout, sbr never ran,
#                  the class is restored and no state is left, DEL succeeds; gidCheck warn
#                  lets the same ADD through, gidCheck off does not wait (a 20 s timeout,
#                  ADD done in under 10 s)
#   gid-late       the GID appears 800 ms after the address (and, on a second rail, its type
#                  reads "RoCE v2" while the GID still reads zeros): ADD waits and succeeds
#   exclusive-tree netns_mode N in the test tree: the rdma plugin's stand-in (tree-rdma) moves the
#                  device into the pod's view; roce-tune reaches it there, restores it on DEL; without
#                  the rdma plugin ADD is 100 naming it
#   not-the-pods   a tenant's NAD names another pod's VF for a veth: 100 "not a VF"; for its own VF:
#                  100 naming both; the other pod's class untouched
#   del-refused-input  an ifname the kernel takes but roce-tune refuses (né1): ADD fails, and DEL still
#                  reaches host-device, so the VF goes back to the host
#   version-0.4.0  cnitool with a 0.4.0 conflist: ADD/CHECK/DEL, 0.4.0 result
#   version-1.1.0  cnitool (libcni 1.1.2) stops at 1.0.0, so a small runtime
#                  (integration/cni_runtime.py) drives the chain like a spec-1.1.0 runtime:
#                  ADD, CHECK, STATUS, DEL, GC (valid attachments kept, others restored),
#                  1.1.0 fields kept
#   agent-prometheus  a real Prometheus scrapes `roce-tune-agent agent`: the rails' class, class wanted,
#                  ToS, GID index, labels and the CNI request counts in its HTTP API match the
#                  test tree and the ADDs; a class the rdma CNI fork set to 0 is back within
#                  two periods and roce_tune_drift_total rose; the series go with the DELs
#   agent-netns-gone  the pod netns goes before its DEL: the chain's DEL stops at sbr (so
#                  roce-tune's DEL never runs), and the agent alone gives the class back within
#                  two of its periods; the PASS line says how long it took
#
# Output: one "PASS <name>" or "FAIL <name>: <reason>" per scenario, then "N passed, M failed".
# Exit status: 0 when M is 0. Logs of the last run: integration/.build/e2e-logs/<scenario>.log
# (E2E_VERBOSE=1 also prints a failed scenario's log).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=integration/lib.sh
. "$here/lib.sh"

lib_require_root e2e
lib_check_tools || { echo "e2e: prerequisites missing (run integration/setup.sh, cargo build --release)" >&2; exit 2; }

E2E_LOG_DIR="$here/.build/e2e-logs"
SCEN_PID=""
on_signal() {
    echo "e2e: interrupted, cleaning up" >&2
    if [ -n "$SCEN_PID" ]; then
        pkill -TERM -P "$SCEN_PID" 2>/dev/null    # the running scenario's children
        kill -TERM "$SCEN_PID" 2>/dev/null
        wait "$SCEN_PID" 2>/dev/null
    fi
    exit 130
}
trap 'lib_cleanup' EXIT
trap on_signal INT TERM HUP
lib_init

V4_GID() { local a b c d; IFS=. read -r a b c d <<<"${1%/*}"; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"; }

# ============================================================== 1. add
s_add() {
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "" 41 || return 1
    # roce-tune declares the CNIDeviceInfoFile capability; Multus (resourceName set) passes the
    # file it names <NAD namespace>-<NAD name>-<container id>_<ifname> (delegateRuntimeConfig).
    local net; net="$(rail_write_conf 1 1.0.0 sbr '{"capabilities": {"CNIDeviceInfoFile": true}}')" || return 1
    local info; info="$NODE_DEVINFO/e2e-$NODE-${R_NET[1]}-$(cnitool_cid pod)_net1"
    expect_eq "precondition: pod all.rp_filter" "$(pod_sysctl pod net.ipv4.conf.all.rp_filter)" 1 || return 1
    expect_eq "precondition: traffic class" "$(tc_value 1)" unset || return 1

    CNI_CAP_ARGS="$(jq -cn --arg f "$info" '{CNIDeviceInfoFile: $f, deviceID: "0000:0c:00.2"}')" \
        cnitool_run add "$net" pod net1; expect_rc0 "cnitool add" || return 1
    expect_eq "device info pci.rdma-device" "$(jq -r '.pci["rdma-device"]' "$info" 2>&1)" mlx5_2 || return 1
    expect_eq "device info pci.pci-address" "$(jq -r '.pci["pci-address"]' "$info" 2>&1)" 0000:0c:00.2 || return 1
    expect_eq "result cniVersion" "$(jq -r .cniVersion <<<"$CNI_OUT")" 1.0.0 || return 1
    expect_eq "result interface names" "$(jq -r '[.interfaces[].name] | join(",")' <<<"$CNI_OUT")" net1 || return 1
    expect_eq "result sandbox" "$(jq -r '.interfaces[0].sandbox' <<<"$CNI_OUT")" "$(pod_path pod)" || return 1
    expect_eq "result address" "$(jq -r '[.ips[].address] | join(",")' <<<"$CNI_OUT")" 192.168.0.34/16 || return 1
    expect_eq "result gateway" "$(jq -r '.ips[0].gateway' <<<"$CNI_OUT")" 192.168.0.1 || return 1

    local bad; bad="$(sysctls_bad pod net1)"
    [ -z "$bad" ] || { fail "sysctls in the pod: $bad"; return 1; }
    expect_eq "traffic_class file" "$(tc_raw 1)" "tclass=41" || return 1
    expect_eq "GID index 3" "$(gid_read 1 3)" "$(V4_GID 192.168.0.34)" || return 1
    expect_eq "GID index 3 type" "$(gid_type 1 3)" "RoCE v2" || return 1
    expect_eq "state records" "$(state_list)" "$(cnitool_cid pod):net1.state" || return 1

    local table; table="$(sbr_rule_table pod 192.168.0.34)"
    [ -n "$table" ] || { fail "sbr: no rule 'from 192.168.0.34 lookup N' in: $(ip -n "$(pod_ns pod)" rule show | tr '\n' ';')"; return 1; }
    ip -n "$(pod_ns pod)" route show table "$table" | grep "default via 192.168.0.1 dev net1" >/dev/null \
        || { fail "sbr: no default route via 192.168.0.1 in table $table"; return 1; }

    CNI_CAP_ARGS="$(jq -cn --arg f "$info" '{CNIDeviceInfoFile: $f}')" \
        cnitool_run del "$net" pod net1; expect_rc0 "cnitool del (cleanup)" || return 1
    [ ! -e "$info" ] || { fail "the device-info file roce-tune made outlived its attachment"; return 1; }
}

# ============================================================== 1b. devinfo-default
# The shipped default deviceInfoDir, /var/run/k8s.cni.cncf.io/devinfo/cni, through this
# machine's real /var/run link (root's, in root's /var, as on every Debian, Ubuntu and RHEL
# node): Multus names the file by that path (network-attachment-definition-client
# GetCNIDeviceInfoPath), and the device-info file gets pci.rdma-device.
s_devinfo_default() {
    local dir=/var/run/k8s.cni.cncf.io/devinfo/cni
    [ -L /var/run ] || { fail "precondition: /var/run is not a symbolic link on this machine"; return 1; }
    # The directories roce-tune makes here are removed again, the ones that were there stay.
    # (Global: the EXIT trap runs after this function's locals are gone.)
    DEVINFO_MADE=()
    local d
    for d in /run/k8s.cni.cncf.io /run/k8s.cni.cncf.io/devinfo /run/k8s.cni.cncf.io/devinfo/cni; do
        [ -e "$d" ] || DEVINFO_MADE=("$d" "${DEVINFO_MADE[@]}")
    done
    devinfo_cleanup() { local m; for m in "${DEVINFO_MADE[@]}"; do rmdir "$m" 2>/dev/null; done; }
    trap 'devinfo_cleanup; node_cleanup' EXIT
    jq 'del(.deviceInfoDir)' "$NODE_CONF" >"$NODE_CONF.new" && mv "$NODE_CONF.new" "$NODE_CONF" && chmod 644 "$NODE_CONF"
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "" 41 || return 1
    local net; net="$(rail_write_conf 1 1.0.0 sbr '{"capabilities": {"CNIDeviceInfoFile": true}}')" || return 1
    local name; name="e2e-$NODE-${R_NET[1]}-$(cnitool_cid pod)_net1"
    CNI_CAP_ARGS="$(jq -cn --arg f "$dir/$name" '{CNIDeviceInfoFile: $f, deviceID: "0000:0c:00.2"}')" \
        cnitool_run add "$net" pod net1; expect_rc0 "cnitool add" || return 1
    expect_eq "device info pci.rdma-device" "$(jq -r '.pci["rdma-device"]' "$dir/$name" 2>&1)" mlx5_2 || return 1
    expect_eq "device info pci.pci-address" "$(jq -r '.pci["pci-address"]' "$dir/$name" 2>&1)" 0000:0c:00.2 || return 1
    expect_eq "where the file is" "$(stat -c '%U %a' "/run/k8s.cni.cncf.io/devinfo/cni/$name" 2>&1)" "root 444" || return 1
    CNI_CAP_ARGS="$(jq -cn --arg f "$dir/$name" '{CNIDeviceInfoFile: $f}')" \
        cnitool_run del "$net" pod net1; expect_rc0 "cnitool del" || return 1
    [ ! -e "$dir/$name" ] || { fail "the device-info file roce-tune made outlived its attachment"; return 1; }
}

# ============================================================== 2. check
s_check() {
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "" 41 || return 1
    # CHECK through cnitool on a chain WITHOUT sbr: once sbr has moved the routes to its table,
    # host-device's CHECK (pkg/ip ValidateExpectedInterfaceIPs) fails with "Failed to find
    # Gateway ... for interface", whatever roce-tune does.
    local net; net="$(rail_write_conf 1 1.0.0 nosbr)" || return 1
    local ns; ns="$(pod_ns pod)"
    cnitool_run add "$net" pod net1; expect_rc0 "cnitool add" || return 1
    cnitool_run check "$net" pod net1; expect_rc0 "cnitool check (clean)" || return 1
    expect_eq "CHECK output" "$CNI_OUT" "" || return 1

    # A drifted per-interface sysctl.
    ip netns exec "$ns" sysctl -q -w net.ipv4.conf.net1.arp_ignore=0
    cnitool_run check "$net" pod net1
    [ "$CNI_RC" != 0 ] || { fail "CHECK passed with net1.arp_ignore=0"; return 1; }
    expect_contains "CHECK message for arp_ignore" "$CNI_ERR" "arp_ignore" || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv4.conf.net1.arp_ignore=1

    # The "all" rp_filter (the kernel uses the max of all and the interface).
    ip netns exec "$ns" sysctl -q -w net.ipv4.conf.all.rp_filter=1
    cnitool_run check "$net" pod net1
    [ "$CNI_RC" != 0 ] || { fail "CHECK passed with all.rp_filter=1"; return 1; }
    expect_contains "CHECK message for all.rp_filter" "$CNI_ERR" "all[./]rp_filter" || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv4.conf.all.rp_filter=0
    cnitool_run check "$net" pod net1; expect_rc0 "cnitool check (sysctls restored)" || return 1

    # A drifted traffic class (what the RDMA CNI's DEL would leave).
    echo "tclass=0" >"$(tc_file 1)"
    cnitool_run check "$net" pod net1
    [ "$CNI_RC" != 0 ] || { fail "CHECK passed with traffic class 0"; return 1; }
    expect_contains "CHECK message for the traffic class" "$CNI_ERR" "traffic[ _-]?class|tclass" || return 1
    echo "tclass=41" >"$(tc_file 1)"
    cnitool_run check "$net" pod net1; expect_rc0 "cnitool check (class restored)" || return 1

    # A GID that went away (index 3 zeroed).
    local gid3; gid3="$(gid_read 1 3)"
    echo "$ZERO_GID" >"$NODE_SYS/class/infiniband/mlx5_2/ports/1/gids/3"
    cnitool_run check "$net" pod net1
    [ "$CNI_RC" != 0 ] || { fail "CHECK passed with GID index 3 zeroed"; return 1; }
    expect_contains "CHECK message for the GID" "$CNI_ERR" "gid" || return 1
    echo "$gid3" >"$NODE_SYS/class/infiniband/mlx5_2/ports/1/gids/3"
    cnitool_run check "$net" pod net1; expect_rc0 "cnitool check (GID back)" || return 1

    cnitool_run del "$net" pod net1; expect_rc0 "cnitool del" || return 1
    expect_eq "traffic class after DEL" "$(tc_value 1)" unset || return 1
    expect_eq "state records after DEL" "$(state_count)" 0 || return 1
}

# ============================================================== 3. del
s_del() {
    pod_create pod || return 1
    # a: never set (empty file); b: the driver's multi-line form with a global 106;
    # c: forced to 0 by an earlier RDMA CNI, and changed by someone else while the pod runs.
    rail_create a pod net1 0000:0c:00.2 mlx5_2 10.1.0.34/16 10.1.0.1 "" 41 || return 1
    rail_create b pod net2 0000:0c:00.3 mlx5_3 10.2.0.34/16 10.2.0.1 \
        "Global tclass=106\ndst_ip=10.0.0.0/8,tclass=96\nsrc_ip=192.168.1.7,dst_ip=192.168.2.0/24,tclass=104\n" 41 || return 1
    rail_create c pod net3 0000:0c:00.4 mlx5_4 10.3.0.34/16 10.3.0.1 "Global tclass=0\n" 41 || return 1
    local r net
    for r in a b c; do
        net="$(rail_write_conf $r 1.0.0 sbr)" || return 1
        cnitool_run add "$net" pod "${R_IF[$r]}"; expect_rc0 "cnitool add rail $r" || return 1
        expect_eq "traffic_class file of rail $r after ADD" "$(tc_raw $r)" "tclass=41" || return 1
        sbr_rule_present pod "${R_CIDR[$r]}" || { fail "no sbr rule for ${R_CIDR[$r]} after ADD"; return 1; }
    done
    expect_eq "state records after 3 ADDs" "$(state_count)" 3 || return 1

    echo "tclass=96" >"$(tc_file c)"      # someone else owns the class now
    for r in c b a; do
        cnitool_run del "${R_NET[$r]}" pod "${R_IF[$r]}"; expect_rc0 "cnitool del rail $r" || return 1
    done
    local raw; raw="$(tc_raw a)"
    case "$raw" in ""|-1|tclass=-1) ;; *) fail "rail a (original unset) after DEL: file holds '$raw', want unset (empty, -1 or tclass=-1)"; return 1 ;; esac
    expect_eq "rail b (original 'Global tclass=106' + rules) after DEL" "$(tc_value b)" 106 || return 1
    expect_eq "rail c (changed by someone else to 96) after DEL" "$(tc_value c)" 96 || return 1
    expect_eq "state records after DEL" "$(state_list)" "" || return 1
    for r in a b c; do
        sbr_rule_present pod "${R_CIDR[$r]}" && { fail "sbr rule for ${R_CIDR[$r]} still there after DEL"; return 1; }
        vf_in_host $r || { fail "VF ${R_VF[$r]} not back in the host after DEL"; return 1; }
    done

    # DEL again, straight to roce-tune: no prevResult, no state, interface gone from the pod.
    local conf cid; cid="$(cnitool_cid pod)"
    conf="$(rail_conf a 1.0.0 sbr | jq -c '.plugins[1] + {name: .name, cniVersion: .cniVersion}')"
    plugin_exec DEL "$conf" "$(pod_path pod)" net1 "$cid"
    expect_eq "repeated DEL exit code" "$PL_RC" 0 || return 1
    plugin_exec DEL "$conf" "" net1 "$cid"
    expect_eq "DEL without a netns exit code" "$PL_RC" 0 || return 1
    raw="$(tc_raw a)"
    case "$raw" in ""|-1|tclass=-1) ;; *) fail "repeated DEL changed rail a's class to '$raw'"; return 1 ;; esac
    expect_eq "rail b after repeated DELs" "$(tc_value b)" 106 || return 1
    expect_eq "state records after repeated DEL" "$(state_count)" 0 || return 1
}

# ============================================================== 4. rails-16x2
R16_ORIG() { # <n 1..32>: a varied original per device
    case $(( $1 % 4 )) in
        0) echo "" ;;
        1) echo "Global tclass=0\n" ;;
        2) echo "Global tclass=$(( 100 + $1 ))\n" ;;
        3) echo "Global tclass=$(( 100 + $1 ))\ndst_ip=10.0.0.0/8,tclass=96\n" ;;
    esac
}
# both_pods_concurrently <add|del> <rail numbers in order>: pod1's and pod2's rails through
# cnitool at the same time, each pod's in the given order.
both_pods_concurrently() {
    local cmd="$1" order="$2" rc=0 pid pids=() p i r
    for p in 1 2; do
        (
            for i in $order; do
                r="$p$(printf %02d "$i")"
                cnitool_run "$cmd" "${R_NET[$r]}" "pod$p" "net$i" \
                    || { fail "cnitool $cmd rail $r (pod$p net$i): $(tail -n1 <<<"$CNI_ERR")"; exit 1; }
            done
        ) &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    [ "$rc" = 0 ]
}

s_rails() {
    local p i r n
    for p in 1 2; do
        pod_create "pod$p" || return 1
        for i in $(seq 1 16); do
            r="$p$(printf %02d "$i")"; n=$(( (p - 1) * 16 + i ))
            # rail i = PF on bus 0x10+i; the pod's VF is function 1+p on it.
            rail_create "$r" "pod$p" "net$i" "$(printf '0000:%02x:00.%d' $(( 0x10 + i )) $(( 1 + p )))" \
                "mlx5_$(( n + 1 ))" "192.168.$i.$(( 10 + p ))/24" "192.168.$i.1" "$(R16_ORIG $n)" $(( 40 + n )) || return 1
            rail_write_conf "$r" 1.0.0 sbr >/dev/null || return 1
        done
    done
    # ADD: the two pods concurrently, each pod's 16 rails in order (as Multus does).
    both_pods_concurrently add "$(seq 1 16)" || return 1
    expect_eq "state records after 32 ADDs" "$(state_count)" 32 || return 1
    local bad dump
    for p in 1 2; do
        dump="$(ip netns exec "$(pod_ns "pod$p")" sysctl net.ipv4.conf 2>/dev/null)"
        for kv in $RAIL_SYSCTLS_ALL; do
            grep -qx "net.ipv4.conf.all.${kv%=*} = ${kv#*=}" <<<"$dump" \
                || { fail "pod$p: all.${kv%=*} is not ${kv#*=}"; return 1; }
        done
        for i in $(seq 1 16); do
            r="$p$(printf %02d "$i")"
            expect_eq "traffic_class of ${R_DEV[$r]} (pod$p net$i)" "$(tc_raw "$r")" "tclass=${R_TC[$r]}" || return 1
            for kv in $RAIL_SYSCTLS; do
                grep -qx "net.ipv4.conf.net$i.${kv%=*} = ${kv#*=}" <<<"$dump" \
                    || { fail "pod$p net$i: ${kv%=*} is not ${kv#*=}"; return 1; }
            done
            sbr_rule_present "pod$p" "${R_CIDR[$r]}" || { fail "pod$p net$i: no sbr rule for ${R_CIDR[$r]}"; return 1; }
            expect_eq "GID index 3 of ${R_DEV[$r]}" "$(gid_read "$r" 3)" "$(V4_GID "${R_CIDR[$r]}")" || return 1
        done
    done
    # DEL: both pods concurrently, each in reverse order.
    both_pods_concurrently del "$(seq 16 -1 1)" || return 1
    for p in 1 2; do
        for i in $(seq 1 16); do
            r="$p$(printf %02d "$i")"; n=$(( (p - 1) * 16 + i ))
            expect_eq "${R_DEV[$r]} (pod$p net$i) after DEL" "$(tc_value "$r")" "$(tc_class "$(R16_ORIG $n)")" || return 1
            sbr_rule_present "pod$p" "${R_CIDR[$r]}" && { fail "pod$p net$i: sbr rule left"; return 1; }
        done
    done
    expect_eq "state records after 32 DELs" "$(state_count)" 0 || return 1
}

# ============================================================== 5. gid-timeout
s_gid_timeout() {
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "Global tclass=106\n" 41 never || return 1
    local net; net="$(rail_write_conf 1 1.0.0 sbr '{"gidTimeoutMs": 500}')" || return 1
    local ns; ns="$(pod_ns pod)"
    local t0 t1 ms
    t0="${EPOCHREALTIME/./}"
    cnitool_run add "$net" pod net1
    t1="${EPOCHREALTIME/./}"; ms=$(( (t1 - t0) / 1000 ))
    [ "$CNI_RC" != 0 ] || { fail "cnitool add succeeded without the GID"; return 1; }
    expect_contains "ADD error names the check" "$CNI_ERR" "gid" || return 1
    expect_contains "ADD error names the expected GID" "$CNI_ERR" "ffff:c0a8:0022" || return 1
    if [ "$ms" -lt 400 ] || [ "$ms" -ge 2900 ]; then fail "ADD took ${ms} ms; gidTimeoutMs 500 expects about 500"; return 1; fi
    log "ADD failed after $ms ms"
    # sbr never ran.
    sbr_rule_present pod 192.168.0.34 && { fail "sbr rule present after a failed roce-tune ADD"; return 1; }
    ip -n "$ns" route show table all | grep "table 100" >/dev/null && { fail "sbr table 100 present after a failed ADD"; return 1; }
    # A failed ADD leaves the node as it found it.
    expect_eq "traffic class after failed ADD" "$(tc_value 1)" 106 || return 1
    expect_eq "state records after failed ADD" "$(state_count)" 0 || return 1

    cnitool_run del "$net" pod net1; expect_rc0 "cnitool del after failed add" || return 1
    expect_eq "traffic class after DEL" "$(tc_value 1)" 106 || return 1
    expect_eq "state records after DEL" "$(state_count)" 0 || return 1
    vf_in_host 1 || { fail "VF not back in the host after DEL"; return 1; }

    # The code: the same chain driven by the test runtime, so roce-tune's own stdout is seen
    # (libcni keeps only msg/details for cnitool's output).
    cni_runtime ADD "$NODE_NETD/$net.conflist" "$(pod_path pod)" net1 e2e-gid-timeout
    expect_eq "runtime ADD failed at" "$RT_FAILED" roce-tune || return 1
    expect_eq "roce-tune error code" "$(jq -r .code <<<"$PL_OUT" 2>/dev/null)" 101 || return 1
    local msg; msg="$(jq -r '.msg + " " + (.details // "")' <<<"$PL_OUT")"
    expect_contains "101 message names the device" "$msg" "mlx5_2" || return 1
    expect_contains "101 message names the index" "$msg" "3" || return 1
    expect_eq "traffic class after failed ADD (direct)" "$(tc_value 1)" 106 || return 1
    expect_eq "state records after failed ADD (direct)" "$(state_count)" 0 || return 1
    cni_runtime DEL "$NODE_NETD/$net.conflist" "$(pod_path pod)" net1 e2e-gid-timeout
    expect_eq "runtime DEL exit code (failed: ${RT_FAILED:-none})" "$PL_RC" 0 || return 1
    expect_eq "traffic class at the end" "$(tc_value 1)" 106 || return 1

    # gidCheck warn: the same missing GID only logs; gidCheck off: no wait at all. Off is
    # given a 20 s timeout and held to half of it: an ADD that waited would take all 20 s,
    # and the three plugins' ADD on a loaded 2-core machine took 688 ms (a 450 ms bound
    # below a 500 ms timeout failed there).
    local check timeout
    for check in warn off; do
        timeout=500; [ "$check" = off ] && timeout=20000
        net="$(rail_write_conf 1 1.0.0 sbr "{\"gidTimeoutMs\": $timeout, \"gidCheck\": \"$check\"}" | tail -n1)" || return 1
        t0="${EPOCHREALTIME/./}"
        cnitool_run add "$net" pod net1; expect_rc0 "cnitool add with gidCheck $check" || return 1
        ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
        expect_eq "traffic_class file (gidCheck $check)" "$(tc_raw 1)" "tclass=41" || return 1
        sbr_rule_present pod 192.168.0.34 || { fail "gidCheck $check: no sbr rule"; return 1; }
        if [ "$check" = off ] && [ "$ms" -ge 10000 ]; then fail "gidCheck off: ADD took $ms ms (waited for the GID?)"; return 1; fi
        cnitool_run del "$net" pod net1; expect_rc0 "cnitool del with gidCheck $check" || return 1
        expect_eq "traffic class after DEL (gidCheck $check)" "$(tc_value 1)" 106 || return 1
    done
}

# ============================================================== 5b. gid-late
s_gid_late() {
    pod_create pod || return 1
    # 1: the GID appears 800 ms after the address (the kernel's workqueue is slow).
    # 2: the same, but the type reads "RoCE v2" while the GID still reads zeros: the state a
    #    reader that reads gids/3 and then types/3 can see when the entry is added in between.
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "" 41 delay:800 || return 1
    rail_create 2 pod net2 0000:0c:00.3 mlx5_3 10.2.0.34/16 10.2.0.1 "" 41 torn:800 || return 1
    local r net t0 ms
    for r in 1 2; do
        net="$(rail_write_conf $r 1.0.0 sbr)" || return 1
        t0="${EPOCHREALTIME/./}"
        cnitool_run add "$net" pod "${R_IF[$r]}"; expect_rc0 "cnitool add rail $r (kernel mode $(cut -d' ' -f4 "$E2E_TMP/kernel.d/$NODE.$r"))" || return 1
        ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
        [ "$ms" -ge 700 ] || { fail "rail $r: ADD returned after $ms ms, before the GID existed"; return 1; }
        expect_eq "rail $r traffic_class file" "$(tc_raw $r)" "tclass=41" || return 1
    done
    for r in 2 1; do
        cnitool_run del "${R_NET[$r]}" pod "${R_IF[$r]}"; expect_rc0 "cnitool del rail $r" || return 1
        expect_eq "rail $r traffic class after DEL" "$(tc_value $r)" unset || return 1
    done
    expect_eq "state records after DEL" "$(state_count)" 0 || return 1
}

# ============================================================== 5c. exclusive-tree
# netns_mode N (exclusive RDMA mode) in a test tree: the rdma plugin (tree-rdma, its stand-in)
# moves the device into the pod's view, <root>/netns/<inode>/ (docs/design.md, "Test trees"),
# and roce-tune reaches it there, as it does through a sysfs made in the pod on a kernel.
s_exclusive_tree() {
    echo N >"$NODE_SYS/module/ib_core/parameters/netns_mode"
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "Global tclass=106\n" 41 || return 1
    local net; net="$(RAIL_RDMA=1 rail_write_conf 1 1.0.0 sbr)" || return 1
    cnitool_run add "$net" pod net1; expect_rc0 "cnitool add (netns_mode N)" || return 1
    local ino; ino="$(stat -L -c %i "$(pod_path pod)")"
    expect_eq "the device is in the pod's view" "$(tc_file 1)" \
        "$NODE_SYS/netns/$ino/class/infiniband/mlx5_2/ports/1/../../tc/1/traffic_class" || return 1
    expect_eq "traffic_class file" "$(tc_raw 1)" "tclass=41" || return 1
    expect_eq "the host shows no RDMA device on the VF" \
        "$(ls "$NODE_SYS/bus/pci/devices/0000:0c:00.2/infiniband" | wc -l)" 0 || return 1
    expect_eq "the entry's reach" "$(jq -r .reach "$NODE_STATE/$(cnitool_cid pod):net1.state")" pod || return 1
    cnitool_run del "$net" pod net1; expect_rc0 "cnitool del (netns_mode N)" || return 1
    expect_eq "traffic class after DEL (the device back on the host)" "$(tc_value 1)" 106 || return 1
    expect_eq "state records after DEL" "$(state_count)" 0 || return 1
    # Without the rdma plugin the device never reaches the pod: 100, naming it.
    net="$(rail_write_conf 1 1.0.0 sbr)" || return 1
    cnitool_run add "$net" pod net1
    [ "$CNI_RC" != 0 ] || { fail "ADD succeeded in exclusive mode without the rdma plugin"; return 1; }
    expect_contains "the message names the rdma plugin" "$CNI_ERR" "rdma plugin" || return 1
    expect_eq "traffic class untouched" "$(tc_value 1)" 106 || return 1
    cnitool_run del "$net" pod net1; expect_rc0 "cnitool del after the failed ADD" || return 1
}

# ============================================================== 5d. not-the-pods
# A tenant's NAD names another pod's VF as deviceID for a pod whose net1 is a plain veth (the
# tree gives it no PCI function): 100 "not a VF", and the other pod's class is untouched;
# the tenant's own VF named with another deviceID is 100 naming both.
s_not_the_pods() {
    pod_create victim || return 1
    pod_create tenant || return 1
    rail_create v victim net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "Global tclass=106\n" 41 || return 1
    RAIL_BIND=0 rail_create t tenant net1 0000:0c:00.3 mlx5_3 192.168.0.35/16 192.168.0.1 "" 41 || return 1
    local vnet; vnet="$(rail_write_conf v 1.0.0 sbr)" || return 1
    cnitool_run add "$vnet" victim net1; expect_rc0 "the victim's ADD" || return 1
    # The tenant's conflist: its own veth, the victim's PCI address, class 0, no GID check.
    local tnet; tnet="$(rail_write_conf t 1.0.0 nosbr '{"trafficClass": 0, "gidCheck": "off"}')" || return 1
    jq --arg pci 0000:0c:00.2 '.plugins[1] += {deviceID: $pci, pciBusID: $pci}' \
        "$NODE_NETD/$tnet.conflist" >"$E2E_TMP/t.json" && mv "$E2E_TMP/t.json" "$NODE_NETD/$tnet.conflist"
    cni_runtime ADD "$NODE_NETD/$tnet.conflist" "$(pod_path tenant)" net1 e2e-tenant
    expect_eq "the tenant's ADD failed at" "$RT_FAILED" roce-tune || return 1
    expect_eq "roce-tune's code" "$(jq -r .code <<<"$PL_OUT")" 100 || return 1
    expect_contains "the message" "$(jq -r .msg <<<"$PL_OUT")" "net1 is not a VF.*deviceID 0000:0c:00.2" || return 1
    expect_eq "the victim's class" "$(tc_raw v)" "tclass=41" || return 1
    cni_runtime DEL "$NODE_NETD/$tnet.conflist" "$(pod_path tenant)" net1 e2e-tenant
    expect_eq "the tenant's DEL failed at" "${RT_FAILED:-none}" none || return 1
    # Bound to its own VF, the tenant still may not name another.
    tree_bind tenant net1 0000:0c:00.3
    cni_runtime ADD "$NODE_NETD/$tnet.conflist" "$(pod_path tenant)" net1 e2e-tenant
    expect_eq "roce-tune's code (own VF, other deviceID)" "$(jq -r .code <<<"$PL_OUT")" 100 || return 1
    expect_contains "the message names both" "$(jq -r .msg <<<"$PL_OUT")" "0000:0c:00.2.*0000:0c:00.3" || return 1
    expect_eq "the victim's class" "$(tc_raw v)" "tclass=41" || return 1
    expect_eq "the tenant's class" "$(tc_value t)" unset || return 1
    cni_runtime DEL "$NODE_NETD/$tnet.conflist" "$(pod_path tenant)" net1 e2e-tenant
    cnitool_run del "$vnet" victim net1; expect_rc0 "the victim's DEL" || return 1
    expect_eq "the victim's class after its DEL" "$(tc_value v)" 106 || return 1
}

# ============================================================== 5e. del-refused-input
# An interface name the kernel accepts but roce-tune refuses (a pod annotation's "interface":
# "né1"): ADD fails at roce-tune with 4, and the runtime's DEL must still reach host-device,
# after roce-tune in DEL order (libcni's DelNetworkList stops at the first failure): the VF
# goes back to the host instead of staying in the sandbox.
s_del_refused_input() {
    pod_create pod || return 1
    rail_create 1 pod "né1" 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "" 41 || return 1
    local net; net="$(rail_write_conf 1 1.0.0 sbr)" || return 1
    cnitool_run add "$net" pod "né1"
    [ "$CNI_RC" != 0 ] || { fail "ADD accepted the interface name né1"; return 1; }
    vf_in_host 1 && { fail "precondition: host-device did not move the VF into the pod"; return 1; }
    cnitool_run del "$net" pod "né1"; expect_rc0 "cnitool del" || return 1
    vf_in_host 1 || { fail "the VF stayed in the sandbox after DEL"; return 1; }
    expect_eq "traffic class" "$(tc_value 1)" unset || return 1
    expect_eq "state records" "$(state_count)" 0 || return 1
}

# ============================================================== 6. versions
s_v040() {
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "" 41 || return 1
    local net; net="$(rail_write_conf 1 0.4.0 sbr)" || return 1
    cnitool_run add "$net" pod net1; expect_rc0 "cnitool add (0.4.0)" || return 1
    expect_eq "result cniVersion" "$(jq -r .cniVersion <<<"$CNI_OUT")" 0.4.0 || return 1
    expect_eq "result ips[0].version" "$(jq -r '.ips[0].version' <<<"$CNI_OUT")" 4 || return 1
    expect_eq "result address" "$(jq -r '.ips[0].address' <<<"$CNI_OUT")" 192.168.0.34/16 || return 1
    expect_eq "traffic_class file" "$(tc_raw 1)" "tclass=41" || return 1
    sbr_rule_present pod 192.168.0.34 || { fail "no sbr rule (sbr did not take roce-tune's 0.4.0 result)"; return 1; }
    local bad; bad="$(sysctls_bad pod net1)"; [ -z "$bad" ] || { fail "sysctls: $bad"; return 1; }
    cnitool_run del "$net" pod net1; expect_rc0 "cnitool del (0.4.0)" || return 1
    expect_eq "traffic class after DEL" "$(tc_value 1)" unset || return 1
    expect_eq "state records after DEL" "$(state_count)" 0 || return 1
    kernel_settle 1 || { fail "simulated kernel did not drop the GIDs after DEL"; return 1; }

    net="$(rail_write_conf 1 0.4.0 nosbr)" || return 1
    cnitool_run add "$net" pod net1; expect_rc0 "cnitool add (0.4.0, no sbr)" || return 1
    cnitool_run check "$net" pod net1; expect_rc0 "cnitool check (0.4.0)" || return 1
    cnitool_run del "$net" pod net1; expect_rc0 "cnitool del (0.4.0, no sbr)" || return 1
    expect_eq "traffic class after DEL" "$(tc_value 1)" unset || return 1
}

s_v110() {
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "Global tclass=106\n" 41 || return 1
    local net; net="$(rail_write_conf 1 1.1.0 sbr)" || return 1
    local file="$NODE_NETD/$net.conflist" path; path="$(pod_path pod)"
    local rt; rt="$(jq -c '.plugins[1] + {name: .name, cniVersion: .cniVersion}' "$file")"

    plugin_exec VERSION '{"cniVersion":"1.1.0"}' "" "" "" roce-tune
    expect_eq "VERSION supports 1.1.0" "$(jq -r '.supportedVersions | index("1.1.0") != null' <<<"$PL_OUT")" true || return 1

    cni_runtime ADD "$file" "$path" net1 e2e-v110-a
    [ -z "$RT_FAILED" ] || { fail "runtime ADD (1.1.0) stopped at $RT_FAILED: $PL_OUT"; return 1; }
    local out="${RT_OUTS[roce-tune]}"
    expect_eq "roce-tune result cniVersion" "$(jq -r .cniVersion <<<"$out")" 1.1.0 || return 1
    expect_eq "roce-tune result interface" "$(jq -r '.interfaces[0].name' <<<"$out")" net1 || return 1
    expect_eq "roce-tune result keeps the 1.1.0 field interfaces[0].mtu" "$(jq -r '.interfaces[0].mtu' <<<"$out")" 1500 || return 1
    expect_eq "roce-tune result address" "$(jq -r '.ips[0].address' <<<"$out")" 192.168.0.34/16 || return 1
    expect_eq "final result cniVersion" "$(jq -r .cniVersion <<<"$RT_RESULT")" 1.1.0 || return 1
    expect_eq "traffic_class file" "$(tc_raw 1)" "tclass=41" || return 1
    local bad; bad="$(sysctls_bad pod net1)"; [ -z "$bad" ] || { fail "sysctls: $bad"; return 1; }
    sbr_rule_present pod 192.168.0.34 || { fail "no sbr rule"; return 1; }

    # CHECK as the runtime sends it to roce-tune: the cached (final) result as prevResult.
    # (The whole chain's CHECK fails in host-device once sbr has moved the routes, see
    # docs/e2e.md; the runtime's CHECK of a chain is below, without sbr.)
    plugin_exec CHECK "$(jq -c --argjson p "$RT_RESULT" '. + {prevResult: $p}' <<<"$rt")" "$path" net1 e2e-v110-a
    expect_eq "CHECK (1.1.0) exit code, output '$PL_OUT'" "$PL_RC" 0 || return 1

    # STATUS to the chain: roce-tune answers ready; the 1.0.0-only peers do not know STATUS.
    cni_runtime STATUS "$file"
    expect_eq "runtime STATUS failed at (output '$PL_OUT')" "${RT_FAILED:-none}" none || return 1
    expect_eq "STATUS asked roce-tune" "${RT_OUTS[roce-tune]+asked}" asked || return 1
    expect_eq "STATUS not sent to" "$RT_SKIPPED" "host-device sbr" || return 1

    cni_runtime DEL "$file" "$path" net1 e2e-v110-a
    expect_eq "runtime DEL (1.1.0) failed at" "${RT_FAILED:-none}" none || return 1
    expect_eq "traffic class after DEL" "$(tc_value 1)" 106 || return 1
    expect_eq "state records after DEL" "$(state_count)" 0 || return 1
    sbr_rule_present pod 192.168.0.34 && { fail "sbr rule left after DEL"; return 1; }
    kernel_settle 1 || { fail "simulated kernel did not drop the GIDs after DEL"; return 1; }

    # GC: an attachment whose DEL never came (lost by the runtime).
    cni_runtime ADD "$file" "$path" net1 e2e-v110-b
    [ -z "$RT_FAILED" ] || { fail "the runtime's second ADD (1.1.0) stopped at $RT_FAILED: $PL_OUT"; return 1; }
    cni_runtime GC "$file" '[{"containerID":"e2e-v110-b","ifname":"net1"}]'
    expect_eq "GC (attachment valid) failed at (output '$PL_OUT')" "${RT_FAILED:-none}" none || return 1
    expect_eq "GC sent to roce-tune" "${RT_OUTS[roce-tune]+sent}" sent || return 1
    expect_eq "GC not sent to" "$RT_SKIPPED" "host-device sbr" || return 1
    expect_eq "state records after GC keeping the attachment" "$(state_count)" 1 || return 1
    expect_eq "traffic class after GC keeping the attachment" "$(tc_raw 1)" "tclass=41" || return 1
    cni_runtime GC "$file" '[]'
    expect_eq "GC (no valid attachment) failed at (output '$PL_OUT')" "${RT_FAILED:-none}" none || return 1
    expect_eq "state records after GC" "$(state_count)" 0 || return 1
    expect_eq "traffic class after GC" "$(tc_value 1)" 106 || return 1
    cni_runtime DEL "$file" "$path" net1 e2e-v110-b
    expect_eq "runtime DEL after GC failed at" "${RT_FAILED:-none}" none || return 1
    expect_eq "traffic class after DEL after GC" "$(tc_value 1)" 106 || return 1
    kernel_settle 1 || { fail "simulated kernel did not drop the GIDs after DEL"; return 1; }

    # The chain's CHECK through the runtime (without sbr): every plugin gets the cached 1.1.0
    # result, host-device bridged to 1.0.0; a drifted sysctl stops it at roce-tune, code 103.
    net="$(rail_write_conf 1 1.1.0 nosbr)" || return 1
    file="$NODE_NETD/$net.conflist"
    cni_runtime ADD "$file" "$path" net1 e2e-v110-c
    [ -z "$RT_FAILED" ] || { fail "runtime ADD (1.1.0, no sbr) stopped at $RT_FAILED: $PL_OUT"; return 1; }
    cni_runtime CHECK "$file" "$path" net1 e2e-v110-c
    expect_eq "runtime CHECK (1.1.0) failed at (output '$PL_OUT')" "${RT_FAILED:-none}" none || return 1
    expect_eq "runtime CHECK ran" "$(printf '%s\n' "${!RT_OUTS[@]}" | sort | tr '\n' ' ')" "host-device roce-tune " || return 1
    ip netns exec "$(pod_ns pod)" sysctl -q -w net.ipv4.conf.net1.arp_ignore=0
    cni_runtime CHECK "$file" "$path" net1 e2e-v110-c
    expect_eq "runtime CHECK with arp_ignore=0 failed at" "$RT_FAILED" roce-tune || return 1
    expect_eq "roce-tune's CHECK error code" "$(jq -r .code <<<"$PL_OUT" 2>/dev/null)" 103 || return 1
    expect_contains "103 names the sysctl" "$(jq -r .msg <<<"$PL_OUT")" "arp_ignore" || return 1
    ip netns exec "$(pod_ns pod)" sysctl -q -w net.ipv4.conf.net1.arp_ignore=1
    cni_runtime DEL "$file" "$path" net1 e2e-v110-c
    expect_eq "runtime DEL (1.1.0, no sbr) failed at" "${RT_FAILED:-none}" none || return 1
    expect_eq "traffic class at the end" "$(tc_value 1)" 106 || return 1
    expect_eq "state records at the end" "$(state_count)" 0 || return 1
}

# ============================================================== 7. agent-prometheus
# A real Prometheus (Debian's 2.42, its own config and data dir, scrape every second) scrapes
# `roce-tune-agent agent`; what its HTTP API answers is checked against the test tree, and a drift
# shows as roce_tune_drift_total rising while the class comes back.
s_agent_prometheus() {
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "Global tclass=106\n" 41 || return 1
    rail_create 2 pod net2 0000:0c:00.3 mlx5_3 10.2.0.34/16 10.2.0.1 "" 41 || return 1
    # configfs as the test tree plays it: rail 1's port file, which the kernel makes on mkdir.
    local tos="$NODE_SYS/kernel/config/rdma_cm/mlx5_2/ports/1/default_roce_tos"
    mkdir -p "${tos%/*}" && echo 0 >"$tos"
    local n1 n2
    n1="$(rail_write_conf 1 1.0.0 sbr '{"rdmaCmTos": 106}')" || return 1
    n2="$(rail_write_conf 2 1.0.0 sbr)" || return 1
    agent_start 1 || return 1
    prom_start "$AGENT_ADDR" || return 1
    cnitool_run add "$n1" pod net1; expect_rc0 "cnitool add net1" || return 1
    cnitool_run add "$n2" pod net2; expect_rc0 "cnitool add net2" || return 1

    two_rails() { [ "$(prom_value 'count(roce_tune_rail_info)')" = 2 ]; }
    await 10 two_rails || { fail "Prometheus has $(prom_value 'count(roce_tune_rail_info)') rails after 10 s, want 2"; return 1; }
    log "Prometheus had both rails $WAITED_MS ms after the ADDs"
    expect_eq "up" "$(prom_value 'up{job="roce-tune"}')" 1 || return 1
    local r sel
    for r in 1 2; do
        sel="namespace=\"e2e-$NODE\",pod=\"pod\",interface=\"${R_IF[$r]}\",rdma_device=\"${R_DEV[$r]}\",pci_address=\"${R_PCI[$r]}\",network=\"${R_NET[$r]}\""
        expect_eq "rail $r: roce_tune_rail_info{$sel}" "$(prom_value "roce_tune_rail_info{$sel}")" 1 || return 1
        expect_eq "rail $r: the class Prometheus has, against the tree" \
            "$(prom_value "roce_tune_rail_traffic_class{$sel}")" "$(tc_value $r)" || return 1
        expect_eq "rail $r: the class wanted" "$(prom_value "roce_tune_rail_traffic_class_wanted{$sel}")" 41 || return 1
        [ "$(gid_read $r 3)" = "$(V4_GID "${R_CIDR[$r]}")" ] || { fail "rail $r: the tree's GID 3 is $(gid_read $r 3)"; return 1; }
        expect_eq "rail $r: the GID index" "$(prom_value "roce_tune_rail_gid_index{$sel}")" 3 || return 1
    done
    expect_eq "net1's rdma_cm ToS, against the tree" "$(prom_value 'roce_tune_rail_rdma_cm_tos{interface="net1"}')" "$(cat "$tos")" || return 1
    expect_eq "net1's ToS wanted" "$(prom_value 'roce_tune_rail_rdma_cm_tos_wanted{interface="net1"}')" 106 || return 1
    expect_eq "net2 has no ToS" "$(prom_value 'roce_tune_rail_rdma_cm_tos{interface="net2"}')" none || return 1
    expect_eq "roce-tune's ADDs (host-device's and sbr's are not roce-tune's)" \
        "$(prom_value 'roce_tune_cni_requests_total{command="ADD",code="0"}')" 2 || return 1
    expect_eq "ADD durations observed" "$(prom_value 'roce_tune_cni_request_duration_seconds_count{command="ADD"}')" 2 || return 1
    expect_eq "drift before" "$(prom_value 'roce_tune_drift_total{setting="traffic_class"}')" 0 || return 1

    # NVIDIA's rdma CNI fork writes 0 into net1's class (what the file then reads), all at once
    # as the kernel changes it: a plain `>` truncates first, and an agent reading in between
    # would find the class unset, a drift of the test's own.
    local f; f="$(tc_file 1)"
    printf 'Global tclass=0\n' >"$f.new" && mv -f "$f.new" "$f"
    class_back() { [ "$(tc_raw 1)" = "tclass=41" ]; }
    await 2 class_back || { fail "net1's class not back within two periods: '$(tc_raw 1)'"; return 1; }
    log "drift repaired $WAITED_MS ms after the write"
    drift_seen() { [ "$(prom_value 'roce_tune_drift_total{setting="traffic_class"}')" = 1 ]; }
    await 5 drift_seen || { fail "roce_tune_drift_total in Prometheus: $(prom_value 'roce_tune_drift_total{setting="traffic_class"}'), want 1"; return 1; }
    expect_eq "increase(roce_tune_drift_total[1m])>0" \
        "$(prom_value 'increase(roce_tune_drift_total{setting="traffic_class"}[1m]) > bool 0')" 1 || return 1
    expect_eq "drift repairs" "$(prom_value 'roce_tune_drift_repairs_total{setting="traffic_class"}')" 1 || return 1
    sleep 2
    expect_eq "one drift, two periods on" "$(prom_value 'roce_tune_drift_total{setting="traffic_class"}')" 1 || return 1
    expect_eq "net1's class in Prometheus after the repair" "$(prom_value 'roce_tune_rail_traffic_class{interface="net1"}')" 41 || return 1

    cnitool_run del "$n2" pod net2; expect_rc0 "cnitool del net2" || return 1
    cnitool_run del "$n1" pod net1; expect_rc0 "cnitool del net1" || return 1
    expect_eq "net1's class after DEL (the original)" "$(tc_value 1)" 106 || return 1
    expect_eq "net2's class after DEL" "$(tc_value 2)" unset || return 1
    expect_eq "net1's ToS after DEL" "$(cat "$tos")" 0 || return 1
    no_rails() { [ "$(prom_value 'count(roce_tune_rail_info)')" = none ]; }
    await 5 no_rails || { fail "Prometheus still has $(prom_value 'count(roce_tune_rail_info)') rails after the DELs"; return 1; }
    expect_eq "roce-tune's DELs" "$(prom_value 'roce_tune_cni_requests_total{command="DEL",code="0"}')" 2 || return 1
}

# ============================================================== 8. agent-netns-gone
# What real Multus does when the pod netns is gone before its DEL: the reference sbr fails
# its DEL, libcni's DelNetworkList stops there, and roce-tune's DEL (after sbr's in DEL order)
# never runs. Only the agent gives the class back: within two of its periods of the netns
# going. The measured time is printed with the PASS line (docs/e2e.md records it).
AGENT_GONE_EVERY=2
s_agent_netns_gone() {
    pod_create pod || return 1
    rail_create 1 pod net1 0000:0c:00.2 mlx5_2 192.168.0.34/16 192.168.0.1 "Global tclass=106\n" 41 || return 1
    local net path; net="$(rail_write_conf 1 1.0.0 sbr)" || return 1; path="$(pod_path pod)"
    agent_start "$AGENT_GONE_EVERY" || return 1
    cnitool_run add "$net" pod net1; expect_rc0 "cnitool add" || return 1
    expect_eq "class after ADD" "$(tc_raw 1)" "tclass=41" || return 1

    # The pod goes at any point of the agent's period, not always just after its first pass.
    local phase=$(( RANDOM % (AGENT_GONE_EVERY * 10) ))
    sleep "$(( phase / 10 )).$(( phase % 10 ))"
    local t0; t0="${EPOCHREALTIME/./}"
    ip netns del "$(pod_ns pod)" || { fail "ip netns del"; return 1; }
    cnitool_run del "$net" pod net1
    [ "$CNI_RC" != 0 ] || { fail "cnitool del succeeded with the netns gone: sbr 1.1.1 cannot (docs/design.md)"; return 1; }
    expect_contains "the chain's DEL stopped at sbr" "$CNI_ERR" 'plugin type="sbr"' || return 1
    rm -f "$path"    # the empty file sbr's lock leaves where the netns was
    class_back() { [ "$(tc_value 1)" = 106 ] && [ "$(state_count)" = 0 ]; }
    local bound=$(( 2 * AGENT_GONE_EVERY ))
    await "$bound" class_back || { fail "class '$(tc_raw 1)', $(state_count) entries, $bound s after the netns went"; return 1; }
    local ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
    expect_eq "roce-tune's DEL never ran" "$(agent_metric 'roce_tune_cni_requests_total{command="DEL",code="0"}')" "" || return 1
    orphan_counted() { [ "$(agent_metric roce_tune_orphan_repairs_total)" = 1 ]; }
    await 3 orphan_counted || { fail "roce_tune_orphan_repairs_total $(agent_metric roce_tune_orphan_repairs_total), want 1"; return 1; }
    grep -q "orphan $(cnitool_cid pod)/net1" "$AGENT_LOG" || { fail "the agent's log does not name the orphan"; return 1; }
    log "class back $ms ms after the netns went (agent every $AGENT_GONE_EVERY s)"
    printf 'class back %s ms after the netns went; agent every %s s, bound %s ms' "$ms" "$AGENT_GONE_EVERY" "$(( bound * 1000 ))" >"$E2E_TMP/note.$NODE"
}

# ============================================================== runner
SCENARIOS=(add:s_add devinfo-default:s_devinfo_default check:s_check del:s_del rails-16x2:s_rails gid-timeout:s_gid_timeout
           gid-late:s_gid_late exclusive-tree:s_exclusive_tree not-the-pods:s_not_the_pods
           del-refused-input:s_del_refused_input version-0.4.0:s_v040 version-1.1.0:s_v110
           agent-prometheus:s_agent_prometheus agent-netns-gone:s_agent_netns_gone)
want=("$@")
passed=0 failed=0 idx=0
echo "e2e: roce-tune $E2E_BIN ($(stat -c %y "$E2E_BIN" | cut -d. -f1)), cnitool $CNITOOL, plugins $CNI_PLUGIN_DIR, run $E2E_RUN"
for entry in "${SCENARIOS[@]}"; do
    name="${entry%%:*}"; fn="${entry#*:}"
    if [ "${#want[@]}" -gt 0 ] && [[ " ${want[*]} " != *" $name "* ]]; then continue; fi
    idx=$(( idx + 1 ))
    start="${EPOCHREALTIME/./}"
    # In the background and waited for, so a signal reaches the trap at once (bash runs traps
    # only after a foreground command ends, but interrupts `wait`).
    (
        trap 'node_cleanup' EXIT
        node_init "$name" $(( idx % 10 )) || { fail "node setup failed"; exit 1; }
        "$fn"
    ) </dev/null &
    SCEN_PID=$!
    wait "$SCEN_PID"
    rc=$?
    SCEN_PID=""
    secs="$(( (${EPOCHREALTIME/./} - start) / 1000 ))"
    if [ "$rc" = 0 ]; then
        note="$(cat "$E2E_TMP/note.$name" 2>/dev/null)"
        echo "PASS $name${note:+ ($note)}"
        passed=$(( passed + 1 ))
    else
        reason="$(cat "$E2E_TMP/reason.$name" 2>/dev/null)"
        echo "FAIL $name: ${reason:-exit status $rc (see $E2E_LOG_DIR/$name.log)}"
        failed=$(( failed + 1 ))
        if [ "${E2E_VERBOSE:-0}" = 1 ]; then sed 's/^/    | /' "$E2E_TMP/logs/$name.log"; fi
    fi
    echo "[$name: ${secs} ms, rc $rc]" >>"$E2E_TMP/logs/$name.log"
done
if [ "${#want[@]}" -gt 0 ] && [ "$idx" = 0 ]; then
    echo "e2e: no scenario named ${want[*]} (have: ${SCENARIOS[*]%%:*})" >&2
    exit 2
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
