#!/usr/bin/env bash
# integration/kernel/setup.sh: what the real-kernel lane needs on a Debian 12 host (root,
# idempotent; a rerun with everything in place changes nothing and downloads nothing).
#
#   1. Debian packages: qemu-system-x86 (the emulator), busybox-static (virtme-ng builds its
#      initramfs from it), kmod (depmod, modprobe), udev (in the guest, virtme-ng-init starts
#      systemd-udevd so that /dev/virtio-ports/virtme.* exist; without them --exec has no
#      stdout, stderr or exit status: "cannot find script I/O ports", measured), file (vng reads
#      the kernel version with it), python3-venv, iproute2 (ip, rdma, tc), util-linux (nsenter), jq,
#      ibverbs-utils (ibv_rc_pingpong: real RDMA traffic between two rxe devices, scenario
#      rxe-counters) and ibverbs-providers (rxe's user-space provider; the guest runs the host's
#      root filesystem, so what the guest runs is installed here).
#      The first install of udev on a Debian 12 image that has systemd 252.38 upgrades systemd
#      and libsystemd0 to the current 252.x (udev needs the exact same version).
#   2. virtme-ng $VNG_VERSION from PyPI, in a venv at $build/vng (never the system Python).
#   3. Debian 12's kernel: the package linux-image-amd64 depends on (resolved with apt-cache,
#      e.g. linux-image-6.1.0-57-amd64), fetched with `apt-get download` into $build/kernel/debs
#      (apt checks it against the archive's hashes) and unpacked with `dpkg -x` into
#      $build/kernel/<package>_<version>/, never installed. `depmod -b` writes modules.dep
#      inside that tree. $build/kernel/current.env names the image, the version and the tree.
#
# Where the kernel lives, and why /lib/modules is left alone: vng finds the modules next to the
# image (<tree>/boot/vmlinuz-V and <tree>/lib/modules/V) and links the guest's
# /lib/modules/V to that tree (kernel argument virtme_link_mods); the guest's /lib/modules is a
# tmpfs, so a copy in the host's /lib/modules would not even be seen. The tree must be a path
# the guest can read through the host's root: not under /run, /var/cache, /var/tmp, /var/log
# or /var/lib/apt (the guest mounts empty tmpfs there).
#
# What this leaves on the host: the packages above (kept: other work uses them too), and
# $build/vng (about 10 MB), $build/kernel (the .deb, 70 MB, and its tree, 400 MB).
# integration/kernel/cleanup.sh removes the tree (and, with --all, the venv and the .deb).
#
# Environment: ROCE_TUNE_BUILD_DIR (default integration/.build), SETUP_QUIET=1.
set -euo pipefail

VNG_VERSION=1.42

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${ROCE_TUNE_BUILD_DIR:-$(dirname "$here")/.build}"
say() { [ "${SETUP_QUIET:-0}" = 1 ] || echo "kernel setup: $*"; }
die() { echo "kernel setup: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get; the lane boots a guest that creates netns)"
[ -r /etc/debian_version ] || die "not a Debian system (need apt and Debian's kernel package)"
[ "$(dpkg --print-architecture)" = amd64 ] || die "the lane boots Debian's amd64 kernel; this is $(dpkg --print-architecture)"
export DEBIAN_FRONTEND=noninteractive
aptq=(-q -o APT::Sandbox::User=root)

# ---------------------------------------------------------------- 1. packages
pkgs=(qemu-system-x86 busybox-static kmod udev file python3-venv iproute2 util-linux jq
      ibverbs-utils ibverbs-providers)
# shellcheck source=integration/packages.sh
. "$here/../packages.sh"
install_missing "${pkgs[@]}"
for t in qemu-system-x86_64 busybox depmod file rdma nsenter jq ibv_rc_pingpong; do
    command -v "$t" >/dev/null || die "$t missing after installing ${pkgs[*]}"
done
[ -x /lib/systemd/systemd-udevd ] || [ -x /usr/lib/systemd/systemd-udevd ] \
    || die "systemd-udevd missing (package udev): the guest would have no script I/O ports"

# ---------------------------------------------------------------- 2. virtme-ng
venv="$build/vng"
have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("virtme-ng"))' 2>/dev/null || true)"
if [ "$have" = "$VNG_VERSION" ] && [ -x "$venv/bin/vng" ]; then
    say "virtme-ng: $VNG_VERSION already in $venv"
else
    say "virtme-ng: installing $VNG_VERSION into $venv (was: ${have:-none})"
    rm -rf "$venv"
    # Debian's python3, not whatever python3 comes first in PATH: python3-venv is Debian's.
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "virtme-ng==$VNG_VERSION"
fi
"$venv/bin/vng" --version >/dev/null || die "$venv/bin/vng does not run"

# ---------------------------------------------------------------- 3. the kernel
kdir="$build/kernel"
mkdir -p "$kdir/debs"
resolve_kernel() {
    apt-cache depends linux-image-amd64 2>/dev/null \
        | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
pkg="$(resolve_kernel)"
if [ -z "$pkg" ]; then
    say "kernel: apt-cache knows no linux-image-amd64 dependency; running apt-get update"
    apt-get "${aptq[@]}" update
    pkg="$(resolve_kernel)"
fi
[ -n "$pkg" ] || die "cannot resolve the package linux-image-amd64 depends on (apt-cache depends linux-image-amd64)"
ver="$(apt-cache show --no-all-versions "$pkg" 2>/dev/null | awk '$1 == "Version:" { print $2; exit }')"
[ -n "$ver" ] || die "apt-cache show $pkg gives no version"
kver="${pkg#linux-image-}"                    # 6.1.0-57-amd64: the kernel's release string
deb="$kdir/debs/${pkg}_${ver}_amd64.deb"
tree="$kdir/${pkg}_${ver}"
vmlinuz="$tree/boot/vmlinuz-$kver"

if [ -s "$deb" ]; then
    say "kernel: $pkg $ver already downloaded"
else
    say "kernel: downloading $pkg $ver (the dependency of linux-image-amd64)"
    if ! (cd "$kdir/debs" && apt-get "${aptq[@]}" download "$pkg=$ver"); then
        # Stale lists name a version the mirror no longer has: refresh once.
        apt-get "${aptq[@]}" update
        pkg2="$(resolve_kernel)"
        [ "$pkg2" = "$pkg" ] || die "linux-image-amd64 now depends on $pkg2, not $pkg: rerun this script"
        ver="$(apt-cache show --no-all-versions "$pkg" | awk '$1 == "Version:" { print $2; exit }')"
        deb="$kdir/debs/${pkg}_${ver}_amd64.deb"; tree="$kdir/${pkg}_${ver}"
        (cd "$kdir/debs" && apt-get "${aptq[@]}" download "$pkg=$ver") || die "apt-get download $pkg=$ver failed"
    fi
    [ -s "$deb" ] || die "apt-get download left no $deb"
fi

if [ -f "$vmlinuz" ] && [ -f "$tree/lib/modules/$kver/modules.dep" ]; then
    say "kernel: $tree already unpacked"
else
    say "kernel: unpacking $deb into $tree (dpkg -x, not installed)"
    rm -rf "$tree.tmp"
    dpkg -x "$deb" "$tree.tmp"
    [ -f "$tree.tmp/boot/vmlinuz-$kver" ] || die "no boot/vmlinuz-$kver in $deb"
    for m in rdma_rxe ib_core rdma_cm veth configfs; do
        find "$tree.tmp/lib/modules/$kver" -name "$m.ko*" | grep -q . || die "$deb ships no $m module"
    done
    depmod -b "$tree.tmp" "$kver"
    rm -rf "$tree"
    mv "$tree.tmp" "$tree"
fi
# Only the current kernel is kept: older trees and packages are 470 MB each.
for old in "$kdir"/linux-image-*; do
    [ -e "$old" ] && [ "$old" != "$tree" ] && { say "kernel: removing old $old"; rm -rf "$old"; }
done
for old in "$kdir"/debs/*.deb; do
    [ -e "$old" ] && [ "$old" != "$deb" ] && { say "kernel: removing old $old"; rm -f "$old"; }
done

case "$tree/" in
    /run/*|/var/cache/*|/var/tmp/*|/var/log/*|/var/lib/apt/*|/dev/*)
        die "$tree is under a directory the guest sees as an empty tmpfs: set ROCE_TUNE_BUILD_DIR elsewhere" ;;
esac
{
    echo "# written by integration/kernel/setup.sh"
    printf 'KERNEL_PACKAGE=%q\nKERNEL_PACKAGE_VERSION=%q\nKERNEL_RELEASE=%q\nKERNEL_TREE=%q\nKERNEL_IMAGE=%q\n' \
        "$pkg" "$ver" "$kver" "$tree" "$vmlinuz"
} >"$kdir/current.env.tmp"
mv -f "$kdir/current.env.tmp" "$kdir/current.env"
say "kernel: ready: $vmlinuz ($pkg $ver), modules in $tree/lib/modules/$kver"
