# mk/bench.mk: `make bench`, included by the top Makefile (-include mk/*.mk).
#
#   make bench    whole-process timings of roce-tune ADD/DEL against Debian's `tuning`
#                 plugin (and ADD with `qosCheck: off`, row 3q, against the default warn),
#                 a 16-rail pod, peak RSS, binary sizes and the late-GID reaction
#                 time (root; about 2-3 minutes). Prints a markdown table and writes
#                 bench/results/latest.md (raw JSON in bench/results/raw/, not committed).
#                 Not part of `make test`: it reports targets, it does not fail on them.
#
# Knobs (environment or make variables): BENCH_RUNS, BENCH_WARMUP, BENCH_RAIL_ROUNDS,
# BENCH_LATE, BENCH_HYPERFINE=0, BENCH_HF_BATCHES, BENCH_HF_RUNS (see bench/bench.sh).
#
# `release` (top Makefile) builds the static stripped binary and copies it to
# target/release/roce-tune; `setup` (mk/e2e.mk) installs containernetworking-plugins
# (/usr/lib/cni/tuning) and hyperfine from Debian.

.PHONY: bench

bench: setup release
	bench/bench.sh
