#!/usr/bin/env bash
# bench/bench.sh: whole-process timings of roce-tune against Debian's `tuning` plugin
# Run through `make bench` (which builds the static release binary first).
# Not part of CI pass/fail: it measures and reports, it exits non-zero only when a
# plugin run FAILS (a benchmark of a broken binary is worthless), not on a missed target.
#
# What it prepares once (and removes in a trap, even on failure or ^C):
#   - one pod netns with 16 veth ends moved in and renamed net1..net16, up, each with
#     10.10.<i>.2/24 (net1 is the rail of cases 1-4; all 16 are the 16-rail pod);
#   - a work dir on tmpfs (/dev/shm) holding the RDMA sysfs test tree (docs/design.md, "Test trees": 16
#     devices, GIDs at 2/3, tc/1/traffic_class), the state dir (on tmpfs like a node's
#     /run) and the configs;
#   - a second state dir on the root filesystem for the fsync-cost rows (3b/4b);
#   - fresh copies of roce-tune, the baseline and `tuning`, on the root filesystem too.
# Then bench/harness.py runs everything interleaved and writes bench/results/, and
# bench/nri.py times the NRI plugin's CreateContainer under nri-sim (../shared/nri), and
# bench/nri_dra.py its RunPodSandbox of a 64-rail pod under one deadline, and bench/agent_pass.py
# an agent pass over 128 live rails and their RDMA counters.
#
# Environment knobs (defaults in brackets):
#   BENCH_RUNS [1000]       timed runs of each single-process case (interleaved rounds)
#   BENCH_WARMUP [50]       untimed warm-up rounds
#   BENCH_RAIL_ROUNDS [100] rounds of the 16-rail pod (and of its `tuning` reference)
#   BENCH_LATE [30]         late-GID trials
#   BENCH_RSS_ROUNDS [20]   peak-RSS rounds (GNU time)
#   BENCH_CROWD [128]       other live attachments in the state dir of cases 3c/4c
#   BENCH_HYPERFINE [1]    hyperfine cross-check (0 = skip)
#   BENCH_HF_BATCHES [4] BENCH_HF_RUNS [40]   alternating hyperfine batches x runs
#   ROCE_TUNE_BIN [target/release/roce-tune]  TUNING_BIN [/usr/lib/cni/tuning]
#   ROCE_TUNE_AGENT_BIN [beside ROCE_TUNE_BIN: roce-tune-agent]  the NRI plugin's binary
#   BENCH_RESULTS [bench/results]  where latest.md and raw/ go (experiments elsewhere)
#   BENCH_DRA_ROUNDS [10]   RunPodSandbox rounds of the 64-rail DRA pod, each case
#                           (bench/nri_dra.py; BENCH_DRA_RAILS [64] its rails)
#   BENCH_AGENT_PASSES [20] agent passes timed, each case (bench/agent_pass.py;
#                           BENCH_AGENT_RAILS [128] its live rails)
#   BENCH_PLACEMENT [1]     rows 6 and 7: the 16-rail pod with placementCheck warn and off
#                           against the fake kubelet, and an ADD against a kubelet that never
#                           stops sending (the fake's python: integration/.build/venv-grpc,
#                           made by `make setup`; 0 = skip them)
#   BENCH_PHASES [all]      only the phases whose names hold one of these (comma-separated,
#                           e.g. "placement,hostile"): their figures, no report written
#   BENCH_BASELINE [none]   another roce-tune binary: its runs of cases 2, 3, 4, 3c, 4c,
#                           the floor and the 16-rail pod are interleaved with the binary
#                           under test and an A/B table is added. To check a fix:
#                             cp target/release/roce-tune /tmp/roce-tune.before
#                             (apply the fix)  BENCH_BASELINE=/tmp/roce-tune.before make bench
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
die() { echo "bench: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it creates a netns and veths and writes pod sysctls)"

bin="${ROCE_TUNE_BIN:-$repo/target/release/roce-tune}"
tuning="${TUNING_BIN:-/usr/lib/cni/tuning}"
[ -x "$bin" ] || die "$bin missing: run \`make release\` (or \`make bench\`, which does)"
agent_bin="${ROCE_TUNE_AGENT_BIN:-$(dirname "$bin")/roce-tune-agent}"
[ -x "$agent_bin" ] || die "$agent_bin missing: run \`make release\` (it builds both binaries)"
# A plain `cargo build --release` leaves a dynamic binary here: the loader adds
# ~0.3 ms to every run, and the report would call it static.
file -L "$bin" | grep -Eq 'static(-pie|ally)? linked' ||
    die "$bin is dynamically linked: run \`make release\` (the static build the nodes get)"
baseline="${BENCH_BASELINE:-}"
fakepy=""
if [ "${BENCH_PLACEMENT:-1}" = 1 ]; then
    fakepy="${ROCE_TUNE_BUILD_DIR:-$repo/integration/.build}/venv-grpc/bin/python"
    "$fakepy" -c 'import grpc' 2>/dev/null ||
        die "$fakepy has no grpcio: run \`make setup\` (or BENCH_PLACEMENT=0)"
fi
[ -z "$baseline" ] || [ -x "$baseline" ] || die "BENCH_BASELINE=$baseline is not an executable"
[ -x "$tuning" ] || die "$tuning missing: run \`make setup\` (Debian containernetworking-plugins)"
command -v python3 >/dev/null || die "python3 missing"
command -v ip >/dev/null || die "ip (iproute2) missing"
command -v nsenter >/dev/null || die "nsenter (util-linux) missing"
if [ "${BENCH_HYPERFINE:-1}" = 1 ] && ! command -v hyperfine >/dev/null; then
    die "hyperfine missing: run \`make setup\` (or BENCH_HYPERFINE=0)"
fi
# Peak RSS comes from GNU time (harness.py rss_run says why not wait4 from Python).
if [ ! -x /usr/bin/time ]; then
    echo "bench: installing GNU time (Debian package time) for peak RSS"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends time >/dev/null \
        || die "could not install the Debian package time (/usr/bin/time)"
fi

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
tag="rtb$$"
ns="$tag"
rails=16
work=""
statebase=""
diskstate=""
bins=""

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # Reap a plugin the harness may have left running (it kills its own on error).
    ip netns del "$ns" 2>/dev/null || true
    ip netns del "${ns}o" 2>/dev/null || true
    ip netns del "${ns}d" 2>/dev/null || true
    ip netns del "${ns}a" 2>/dev/null || true
    for i in $(seq 1 "$rails"); do
        ip link del "${tag}h$i" 2>/dev/null || true
    done
    [ -n "$work" ] && rm -rf "$work"
    if [ -n "$statebase" ]; then
        umount "$statebase" 2>/dev/null || true
        rm -rf "$statebase"
    fi
    [ -n "$diskstate" ] && rm -rf "$diskstate"
    [ -n "$bins" ] && rm -rf "$bins"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

work="$(mktemp -d -p /dev/shm roce-bench.XXXXXX)"
# State dirs must have parents only root can write (roce-tune refuses /dev/shm and /var/tmp,
# which anyone can). A node's /run is a tmpfs; on a build machine it may be a disk (it is ext4
# on these), so the bench mounts a private tmpfs for it; ext4 under /var/lib gives the fsync cost.
statebase="$(mktemp -d -p /run roce-bench-state.XXXXXX)"
# 192m: bench/nri.py's busy-node row keeps 10,000 orphan entries, a 4 KiB page each on tmpfs.
mount -t tmpfs -o mode=0700,size=192m roce-bench "$statebase"
diskstate="$(mktemp -d -p /var/lib roce-bench-state.XXXXXX)"
# Every binary runs as a fresh copy, made now, on one disk filesystem, as a node's installer
# copies roce-tune into /opt/cni/bin: how a file's page cache was filled changes the page faults
# of every exec (a fresh ext4 copy maps in large folios: 42 faults for roce-tune VERSION, 48 for
# the same bytes written an hour earlier), about 0.06 ms, more than most changes an A/B
# measures (docs/performance.md, "A fair A/B").
bins="$(mktemp -d -p /var/lib roce-bench-bin.XXXXXX)"
cp "$bin" "$bins/roce-tune" && bin="$bins/roce-tune"
cp "$tuning" "$bins/tuning" && tuning="$bins/tuning"
if [ -n "$baseline" ]; then cp "$baseline" "$bins/baseline" && baseline="$bins/baseline"; fi

ip netns add "$ns"
for i in $(seq 1 "$rails"); do
    h="${tag}h$i" p="${tag}p$i"
    ip link add "$h" type veth peer name "$p"
    ip link set "$p" netns "$ns"
    ip -n "$ns" link set "$p" name "net$i"
    ip -n "$ns" link set "net$i" up
    ip -n "$ns" addr add "10.10.$i.2/24" dev "net$i"
done

mkdir -p "$here/results/raw"
python3 "$here/harness.py" \
    --bin "$bin" --tuning "$tuning" \
    --netns "/run/netns/$ns" --work "$work" --state-base "$statebase" --disk-state "$diskstate/state" \
    --rails "$rails" \
    --runs "${BENCH_RUNS:-1000}" --warmup "${BENCH_WARMUP:-50}" \
    --rail-rounds "${BENCH_RAIL_ROUNDS:-100}" --late "${BENCH_LATE:-30}" \
    --rss-rounds "${BENCH_RSS_ROUNDS:-20}" --crowd "${BENCH_CROWD:-128}" \
    --hyperfine "${BENCH_HYPERFINE:-1}" \
    --hf-batches "${BENCH_HF_BATCHES:-4}" --hf-runs "${BENCH_HF_RUNS:-40}" \
    --load-start "$load_start" --command "${BENCH_COMMAND:-make bench}" \
    --baseline "$baseline" --fake-kubelet "$fakepy" \
    --results "${BENCH_RESULTS:-$here/results}" --repo "$repo"

# The NRI plugin's CreateContainer on the runtime's own clock (bench/nri.py): the pod above and
# another live pod, whose netns the other entries record.
ip netns add "${ns}o"
python3 "$here/nri.py" "$agent_bin" "/run/netns/$ns" "/run/netns/${ns}o" "$statebase" "${BENCH_RESULTS:-$here/results}"

# RunPodSandbox of a 64-rail DRA pod under one deadline (bench/nri_dra.py): a netns of its own,
# whose veths it makes (the trap's netns deletion takes them).
ip netns add "${ns}d"
python3 "$here/nri_dra.py" "$agent_bin" "${ns}d" "$statebase" "${BENCH_RESULTS:-$here/results}"

# One agent pass over 128 live rails and their RDMA counters (bench/agent_pass.py): a netns of
# its own, whose veths it makes (the trap's netns deletion takes them).
ip netns add "${ns}a"
python3 "$here/agent_pass.py" "$bin" "$agent_bin" "${ns}a" "$statebase" "${BENCH_RESULTS:-$here/results}"
