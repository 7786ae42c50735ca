#!/usr/bin/env bash
# integration/kernel/cleanup.sh (`make kernel-clean`): remove what the real-kernel lane left on
# the host; all of it is in the build dir.
#
# The guest itself leaves nothing on the host: it sees the host's root read-only, and what it
# writes lands in overlays and tmpfs that die with it. What the lane does leave:
#   $build/kernel-logs/            logs of the last runs (removed)
#   $build/kernel/run.*            run.sh's scratch, if a run was killed (removed)
#   $build/kernel/linux-image-*    the unpacked kernel, 400 MB (removed; setup.sh unpacks it
#                                  again from the .deb in 3 s)
# With --all, also the downloads: $build/kernel (the .deb, 70 MB) and $build/vng (virtme-ng).
# The Debian packages setup.sh installed stay: other work on this machine uses them too
# (apt-get remove qemu-system-x86 busybox-static udev ... if you want them gone).
# /lib/modules is never touched: the lane does not write there. A qemu of an interrupted run
# needs no hunting: run.sh stops it on exit, and timeout(1) bounds it (KERNEL_LANE_TIMEOUT).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${ROCE_TUNE_BUILD_DIR:-$(dirname "$here")/.build}"
all=0; [ "${1:-}" = --all ] && all=1

rm -rf "$build/kernel-logs" "$build"/kernel/run.* "$build"/kernel/linux-image-* "$build/kernel/current.env"
if [ "$all" = 1 ]; then
    rm -rf "$build/kernel" "$build/vng"
fi
echo "kernel cleanup: removed $([ "$all" = 1 ] && echo "the kernel, its download, virtme-ng and the logs" || echo "the unpacked kernel, run scratch and the logs (kept: the .deb and virtme-ng; --all removes them)")"
