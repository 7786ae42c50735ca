#!/usr/bin/env bash
# integration/kernel/guest.sh: the first thing run.sh runs INSIDE the guest, then the script.
#
#   guest.sh <script> [args...]
#
# Prints the marker run.sh waits for (the guest booted and runs our code), loads what the
# lane needs and execs the script. The kernel modules: veth (Debian builds it as a module and
# nothing loads it on demand here), rdma_rxe (soft-RoCE), rdma_cm (its configfs tree
# rdma_cm/<dev>/ports/<n>/default_roce_tos), configfs, mounted at /sys/kernel/config when
# the guest did not mount it (virtme-ng-init tries before configfs.ko is loaded), and e1000e
# (the driver of run.sh's two PCI NICs; it prints their netdev names).
# Exit 125 with "kernel-lane: GUEST SETUP FAILED" when any of that fails: run.sh counts that as
# "the kernel cannot be had", not as a failed scenario.
set -uo pipefail

echo "kernel-lane: guest up: kernel $(uname -r), uptime $(cut -d' ' -f1 /proc/uptime) s, $(nproc) vCPU"
setup_failed() { echo "kernel-lane: GUEST SETUP FAILED: $*"; exit 125; }

for m in veth rdma_rxe rdma_cm configfs e1000e; do
    out="$(modprobe "$m" 2>&1)" || setup_failed "modprobe $m: $out"
done
# The e1000e NICs run.sh gives the guest (scenario pci-lookup): udev's coldplug has usually
# bound them already; the probe of a freshly loaded e1000e is asynchronous, so wait (at most
# 10 s) for each PCI function's netdev. A missing one is the scenario's failure, not setup's.
for pci in 0000:00:10.0 0000:00:11.0; do
    [ -e "/sys/bus/pci/devices/$pci" ] || continue
    for _ in $(seq 100); do
        [ -n "$(ls "/sys/bus/pci/devices/$pci/net" 2>/dev/null)" ] && break
        sleep 0.1
    done
    echo "kernel-lane: PCI $pci ($(cat "/sys/bus/pci/devices/$pci/vendor"):$(cat "/sys/bus/pci/devices/$pci/device"), driver $(basename "$(readlink "/sys/bus/pci/devices/$pci/driver" 2>/dev/null)")): netdev $(ls "/sys/bus/pci/devices/$pci/net" 2>/dev/null | tr '\n' ' ')"
done
if ! mountpoint -q /sys/kernel/config; then
    out="$(mount -t configfs configfs /sys/kernel/config 2>&1)" || setup_failed "mount configfs: $out"
fi
[ -d /sys/kernel/config/rdma_cm ] || setup_failed "no /sys/kernel/config/rdma_cm after modprobe rdma_cm"
[ "$#" -gt 0 ] || setup_failed "no script to run"
exec "$@"
