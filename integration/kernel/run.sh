#!/usr/bin/env bash
# integration/kernel/run.sh: boot Debian 12's kernel once under qemu and run one script in it.
#
#   integration/kernel/run.sh [--name NAME] <script> [args...]
#
# The guest is virtme-ng (integration/kernel/setup.sh installs it and the kernel): the host's
# root filesystem, read-only over 9p, with copy-on-write overlays on /etc /lib /home /opt /srv
# /usr /var /tmp and tmpfs on /run, so nothing the guest writes reaches the host, except
# $ROCE_TUNE_BUILD_DIR/kernel-logs/NAME/, shared read-write (--rwdir) for the script's logs.
# Emulation is TCG (--disable-kvm): on this machine's nested /dev/kvm, qemu 7.2 aborts at once
# ("kvm_buf_set_msrs: Assertion failed"); KERNEL_LANE_KVM=1 tries KVM anyway.
# The guest has two e1000e NICs (PCI 0000:00:10.0 and 0000:00:11.0, see KERNEL_NICS below).
# The script runs as root through integration/kernel/guest.sh (modules, configfs), with the
# variables ROCE_TUNE_BIN, ROCE_TUNE_AGENT_BIN, ROCE_TUNE_NODE_CONFIG, ROCE_TUNE_NRI_DIR (nri-sim,
# scenario nri-dra), KERNEL_* and E2E_VERBOSE passed in.
#
# Output: the guest's stdout and stderr, merged, on stdout (qemu reopens its stdio by path, so
# two streams into one file would overwrite each other: they go through one pipe), and in
# $ROCE_TUNE_BUILD_DIR/kernel-logs/NAME.log.
#
# Exit status:
#   the script's own      the guest ran the script (0 = it passed)
#   124                   the script did not finish within KERNEL_LANE_TIMEOUT (default 1200 s)
#   77                    SKIPPED: the lane cannot boot (no qemu, no virtme-ng, no kernel, the
#                         guest never reached the script within KERNEL_BOOT_TIMEOUT, default
#                         240 s, or its setup failed); a loud banner says why
#   1                     the same, with ROCE_TUNE_REQUIRE_KERNEL=1 (CI): it is a failure
#   2                     usage, or not root
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$(dirname "$here")")"
build="${ROCE_TUNE_BUILD_DIR:-$repo/integration/.build}"
name=kernel-lane
if [ "${1:-}" = --name ]; then name="$2"; shift 2; fi
[ "$#" -ge 1 ] || { echo "usage: $0 [--name NAME] <script> [args...]" >&2; exit 2; }
[[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "run.sh: bad --name '$name'" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
    {
        echo "########################################################################"
        echo "## $name: NOT RUN: must run as ROOT (uid $(id -u) now): the guest runs as"
        echo "## the calling user and the scenarios create netns, veths, RDMA devices."
        echo "########################################################################"
    } >&2
    exit 2
fi

BOOT_TIMEOUT="${KERNEL_BOOT_TIMEOUT:-240}"
TOTAL_TIMEOUT="${KERNEL_LANE_TIMEOUT:-1200}"
MARKER="kernel-lane: guest up:"

# cannot_boot <why...>: the loud banner; a failure under ROCE_TUNE_REQUIRE_KERNEL=1.
cannot_boot() {
    local status=77 verdict="SKIPPED" hint="set ROCE_TUNE_REQUIRE_KERNEL=1 to make this a failure (CI does)"
    if [ "${ROCE_TUNE_REQUIRE_KERNEL:-0}" = 1 ]; then
        status=1 verdict="FAILED" hint="ROCE_TUNE_REQUIRE_KERNEL=1 forbids skipping"
    fi
    {
        echo "########################################################################"
        echo "## $name: $verdict: the real-kernel lane cannot boot."
        local l; for l in "$@"; do echo "## $l"; done
        echo "## Fix: integration/kernel/setup.sh (as root) installs qemu, virtme-ng"
        echo "## and Debian 12's kernel. $hint."
        echo "########################################################################"
    } >&2
    exit "$status"
}

# ---------------------------------------------------------------- what boots
env_file="$build/kernel/current.env"
vng="$build/vng/bin/vng"
command -v qemu-system-x86_64 >/dev/null || cannot_boot "qemu-system-x86_64 is not installed (Debian package qemu-system-x86)."
[ -x "$vng" ] || cannot_boot "virtme-ng is not installed: no $vng."
[ -r "$env_file" ] || cannot_boot "no kernel: $env_file is missing."
KERNEL_IMAGE="" KERNEL_RELEASE="" KERNEL_TREE=""
# shellcheck source=/dev/null
. "$env_file"
[ -r "$KERNEL_IMAGE" ] || cannot_boot "no kernel image at '$KERNEL_IMAGE' (from $env_file)."
[ -f "$KERNEL_TREE/lib/modules/$KERNEL_RELEASE/modules.dep" ] \
    || cannot_boot "no modules.dep in $KERNEL_TREE/lib/modules/$KERNEL_RELEASE."
script="$(realpath -e "$1" 2>/dev/null)" || { echo "run.sh: no script $1" >&2; exit 2; }
shift

# ---------------------------------------------------------------- the command for the guest
logdir="$build/kernel-logs"
rundir="$logdir/$name"           # shared read-write with the guest
rm -rf "$rundir"; mkdir -p "$rundir"
log="$logdir/$name.log"
pass=(KERNEL_LOG_DIR="$rundir")
for v in $(compgen -e | grep -E '^(KERNEL_[A-Z0-9_]+|ROCE_TUNE_BIN|ROCE_TUNE_AGENT_BIN|ROCE_TUNE_NODE_CONFIG|ROCE_TUNE_NRI_DIR|E2E_VERBOSE)$' \
           | grep -Ev '^KERNEL_(LOG_DIR|LANE_TIMEOUT|BOOT_TIMEOUT|LANE_KVM)$'); do
    pass+=("$v=${!v}")
done
cmd="$(printf '%q ' env "${pass[@]}" "$here/guest.sh" "$script" "$@")"
# vng puts the command on the kernel command line (base64): keep it well under its 2048 bytes.
[ "${#cmd}" -le 900 ] || { echo "run.sh: guest command too long (${#cmd} bytes): $cmd" >&2; exit 2; }

# Two PCI NICs whose netdevs have a PCI function as their parent, as a VF's has (scenario
# pci-lookup): e1000e, not virtio-net-pci, whose netdev's parent is a virtio device
# (virtio0), not the PCI function. Both on one qemu hub (hub 0, nothing else on it), so each
# sees the other's frames and nothing outside. Fixed slots give fixed PCI addresses
# (0000:00:10.0, 0000:00:11.0 on q35's root bus); fixed MACs give fixed link-local GIDs and
# rxe node GUIDs. romfile= : no option ROM (the guest boots with -kernel; no PXE, and no need
# for ipxe-qemu's efi-e1000e.rom). vng hands --qemu-opts to qemu as the last arguments.
# KERNEL_LANE_NICS=0 boots without them (the pci-lookup scenario then fails, loudly).
KERNEL_NICS=(0000:00:10.0=52:54:00:4b:00:10 0000:00:11.0=52:54:00:4b:00:11)
qemu_nics=""
if [ "${KERNEL_LANE_NICS:-1}" != 0 ]; then
    for n in "${KERNEL_NICS[@]}"; do
        slot="${n%%=*}"; slot="${slot#0000:00:}"; slot="${slot%.0}"
        qemu_nics+="-netdev hubport,id=kl$slot,hubid=0 -device e1000e,netdev=kl$slot,mac=${n#*=},addr=0x$slot,romfile= "
    done
fi
vng_args=(--run "$KERNEL_IMAGE" --memory "${KERNEL_LANE_MEMORY:-1G}" --cpus "${KERNEL_LANE_CPUS:-2}"
          --rwdir "$rundir" --exec "$cmd")
# "--qemu-opts=...": argparse takes a separate value that starts with "-" for an option.
[ -z "$qemu_nics" ] || vng_args+=("--qemu-opts=${qemu_nics% }")
[ "${KERNEL_LANE_KVM:-0}" = 1 ] || vng_args=(--disable-kvm "${vng_args[@]}")

tmp="$(mktemp -d "$build/kernel/run.XXXXXX")"
vpid=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    if [ -n "$vpid" ] && kill -0 "$vpid" 2>/dev/null; then
        kill -TERM "$vpid" 2>/dev/null          # timeout(1) passes it to its process group
        sleep 2; kill -KILL "$vpid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM HUP

echo "$name: booting $KERNEL_IMAGE ($KERNEL_RELEASE) under qemu ($( [ "${KERNEL_LANE_KVM:-0}" = 1 ] && echo KVM || echo TCG), ${KERNEL_LANE_MEMORY:-1G}), script $script"
echo "$name: qemu NICs: ${qemu_nics:-none (KERNEL_LANE_NICS=0)}"
start="${EPOCHREALTIME/./}"
# timeout(1) leads its own process group (vng, virtme-run, qemu), and passes a signal it gets
# to that group: its pid is all it takes to stop the guest. sh records that pid first.
{
    PATH="$build/vng/bin:$PATH" sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$tmp/pid" \
        timeout -k 15 "$TOTAL_TIMEOUT" "$vng" "${vng_args[@]}" </dev/null 2>&1
    echo $? >"$tmp/rc"
} | tee "$log" &
pipe=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$tmp/pid" ] && break; sleep 0.1; done
vpid="$(cat "$tmp/pid" 2>/dev/null)"

booted=0
while kill -0 "$pipe" 2>/dev/null; do
    if grep -qF "$MARKER" "$log"; then booted=1; break; fi
    if [ $(( (${EPOCHREALTIME/./} - start) / 1000000 )) -ge "$BOOT_TIMEOUT" ]; then
        echo "$name: the guest did not reach the script within ${BOOT_TIMEOUT} s: stopping qemu"
        kill -TERM "$vpid" 2>/dev/null
        break
    fi
    sleep 0.5
done
[ "$booted" = 1 ] && echo "[$name: boot to script $(( (${EPOCHREALTIME/./} - start) / 1000 )) ms]" >"$tmp/boot"
wait "$pipe"
secs=$(( (${EPOCHREALTIME/./} - start) / 1000000 ))
rc="$(cat "$tmp/rc" 2>/dev/null || echo 255)"
vpid=""
grep -qF "$MARKER" "$log" && booted=1
[ -s "$tmp/boot" ] && tee -a "$log" <"$tmp/boot"

if [ "$booted" != 1 ]; then
    cannot_boot "The guest never reached the script (vng exit $rc, after ${secs} s; log: $log)." \
        "Last lines: $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-300)"
fi
if [ "$rc" = 125 ] && grep -qF "kernel-lane: GUEST SETUP FAILED" "$log"; then
    cannot_boot "$(grep -F "kernel-lane: GUEST SETUP FAILED" "$log" | head -n1)"
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "$name: FAILED: $script did not finish within ${TOTAL_TIMEOUT} s (KERNEL_LANE_TIMEOUT); log: $log" | tee -a "$log"
    exit 124
fi
echo "[$name: exit $rc after ${secs} s; log: $log]" | tee -a "$log"
exit "$rc"
