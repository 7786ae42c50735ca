#!/usr/bin/env bash
# integration/kernel/guest.sh: the first thing run.sh runs INSIDE the guest, then the script.
#
#   guest.sh <script> [args...]
#
# Prints the marker run.sh waits for (the guest booted and runs our code), loads what the
# lane needs and execs the script. The kernel modules: veth (Debian builds it as a module and
# nothing loads it on demand here), rdma_rxe (soft-RoCE), rdma_cm (its configfs tree
# rdma_cm/<dev>/ports/<n>/default_roce_tos) and configfs, mounted at /sys/kernel/config when
# the guest did not mount it (virtme-ng-init tries before configfs.ko is loaded).
# Exit 125 with "kernel-lane: GUEST SETUP FAILED" when any of that fails: run.sh counts that as
# "the kernel cannot be had", not as a failed scenario.
set -uo pipefail

echo "kernel-lane: guest up: kernel $(uname -r), uptime $(cut -d' ' -f1 /proc/uptime) s, $(nproc) vCPU"
setup_failed() { echo "kernel-lane: GUEST SETUP FAILED: $*"; exit 125; }

for m in veth rdma_rxe rdma_cm configfs; do
    out="$(modprobe "$m" 2>&1)" || setup_failed "modprobe $m: $out"
done
if ! mountpoint -q /sys/kernel/config; then
    out="$(mount -t configfs configfs /sys/kernel/config 2>&1)" || setup_failed "mount configfs: $out"
fi
[ -d /sys/kernel/config/rdma_cm ] || setup_failed "no /sys/kernel/config/rdma_cm after modprobe rdma_cm"
[ "$#" -gt 0 ] || setup_failed "no script to run"
exec "$@"
