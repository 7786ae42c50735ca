#!/usr/bin/env bash
# `make fuzz`: every cargo-fuzz target for FUZZ_SECONDS (default 60) each,
# from the seeds in fuzz/seeds (copied from shared/fixtures, so this dir
# stands alone) plus what earlier runs kept in fuzz/corpus. Prints the
# executions per target; exits non-zero if any target found a crash, whose
# input is then in fuzz/artifacts/<target>/ (make it a row of the bad-input
# table, tests/it/bad_inputs.rs).
#
# rust-toolchain.toml pins stable 1.95.0, here too (rustup finds it in the
# parent directory): RUSTC_BOOTSTRAP=1 lets stable rustc take the -Z flags
# cargo-fuzz passes (AddressSanitizer, coverage); on nightly it changes nothing.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-"config_prev traffic_class gid cni_args nldev rtnetlink
    http_head nri_mux nri_ttrpc nri_messages"}
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: installing it from crates.io"
    cargo install cargo-fuzz --locked
fi
cargo fuzz build -O

declare -A RUNS RESULT
status=0
for t in $TARGETS; do
    mkdir -p "corpus/$t"
    log=$(mktemp)
    echo "== $t: ${SECONDS_EACH}s"
    # -max_len: a config with a full prevResult is about 1 KiB; 8 KiB leaves
    # room for nesting and long strings without slowing the search.
    if cargo fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$SECONDS_EACH" -max_len=8192 -timeout=10 \
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
for t in $TARGETS; do
    n=${RUNS[$t]:-0}
    total=$((total + n))
    echo "| $t | $SECONDS_EACH | $n | $(ls "corpus/$t" | wc -l) | ${RESULT[$t]} |"
done
echo "total executions: $total"
exit $status
