#!/usr/bin/env bash
# `make fuzz`: every cargo-fuzz target for FUZZ_SECONDS (default 60) each;
# `make fuzz-smoke` (`fuzz/run.sh --smoke`, part of `make test`): every
# target for a share of FUZZ_SMOKE_TOTAL (default 100) seconds, at least 3
# each, so all of them together stay within two minutes of fuzzing. Each
# starts from the seeds in fuzz/seeds (real bytes: the kernel lane's netlink
# answers, the fake kubelet's answers, fixtures; so this dir stands alone)
# plus what earlier runs kept in fuzz/corpus. Prints the executions per
# target; exits non-zero if any target found a crash, whose input is then in
# fuzz/artifacts/<target>/ (make it a unit test beside the decoder, or a row
# of the bad-input table, tests/it/bad_inputs.rs).
#
# rust-toolchain.toml pins stable 1.95.0, here too (rustup finds it in the
# parent directory): RUSTC_BOOTSTRAP=1 lets stable rustc take the -Z flags
# cargo-fuzz passes (AddressSanitizer, coverage); on nightly it changes nothing.
set -euo pipefail
cd "$(dirname "$0")"

# The targets, one a line: a new one is a line here and its [[bin]] in
# fuzz/Cargo.toml (with its seeds in fuzz/seeds/<target>/).
ALL_TARGETS=(
    config_prev
    traffic_class
    gid
    cni_args
    netlink
    nldev
    rtnetlink
    dcb
    http1
    exposition
    hpack
    h2_frames
    h2_connection
    grpc
    protobuf
    podresources
    checkpoint
    nvidia_information
    nri_mux
    ttrpc
    nri_messages
    nri_session
)

smoke=0
[ "${1:-}" = --smoke ] && smoke=1
read -r -a TARGETS <<<"${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"
if [ "$smoke" = 1 ]; then
    total=${FUZZ_SMOKE_TOTAL:-100}
    SECONDS_EACH=$((total / ${#TARGETS[@]}))
    [ "$SECONDS_EACH" -ge 3 ] || SECONDS_EACH=3
else
    SECONDS_EACH=${FUZZ_SECONDS:-60}
fi
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: installing it from crates.io"
    cargo install cargo-fuzz --locked
fi
cargo fuzz build -O

declare -A RUNS RESULT
status=0
for t in "${TARGETS[@]}"; do
    [ -d "seeds/$t" ] || { echo "fuzz/seeds/$t is missing: every target starts from real bytes" >&2; exit 1; }
    mkdir -p "corpus/$t"
    log=$(mktemp)
    echo "== $t: ${SECONDS_EACH}s"
    # -max_len: a config with a full prevResult is about 1 KiB, the fake
    # kubelet's whole answer 700 bytes; 8 KiB leaves room for nesting and
    # long strings without slowing the search. -rss_limit_mb: a decoder's
    # bounds keep it far below.
    if cargo fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$SECONDS_EACH" -max_len=8192 -timeout=10 -rss_limit_mb=1024 \
        -print_final_stats=1 >"$log" 2>&1; then
        RESULT[$t]=ok
    else
        RESULT[$t]="CRASH (see fuzz/artifacts/$t)"
        status=1
        grep -E "panicked|ERROR|SUMMARY|Test unit written" "$log" || tail -20 "$log"
    fi
    RUNS[$t]=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    rm -f "$log"
done

echo
echo "| target | seconds | executions | corpus | result |"
echo "|---|---|---|---|---|"
total=0
for t in "${TARGETS[@]}"; do
    n=${RUNS[$t]:-0}
    total=$((total + n))
    echo "| $t | $SECONDS_EACH | $n | $(ls "corpus/$t" | wc -l) | ${RESULT[$t]} |"
done
echo "total executions: $total"
exit $status
