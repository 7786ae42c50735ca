# mk/reliability.mk: reliability targets, included by the top Makefile
# (-include mk/*.mk). docs/reliability.md says what each one proves.
#
#   make faults   build the fault-injection binary (target/fault, its own
#                 target dir), then crash it at every fault point (root)
#   make fuzz     every cargo-fuzz target for FUZZ_SECONDS (default 60) each;
#                 installs cargo-fuzz from crates.io if missing. Not in CI.
#   make fuzz-smoke  every target of fuzz/run.sh for its share of two minutes
#                 (FUZZ_SMOKE_TOTAL, default 100 s, at least 3 s each), failing
#                 on any crash; part of `make test`, so CI runs it.
#   make stress   64 workers over 16 devices for STRESS_SECONDS (default 60),
#                 release build (root). Not in CI.
#
# The fault and stress tests are modules of the one integration binary
# (tests/it): these targets pick them by name. tests/it/faults.rs builds the
# fault binary itself when `cargo test` runs it; `fault-bin` only does it up
# front (`make integration` does, so no test builds it while others run).

CARGO          ?= cargo
FUZZ_SECONDS   ?= 60
STRESS_SECONDS ?= 60

.PHONY: fault-bin faults fuzz fuzz-smoke stress

fault-bin:
	CARGO_TARGET_DIR=target/fault $(CARGO) build --locked --features fault-injection --bin roce-tune --bin roce-tune-agent

faults: fault-bin
	ROCE_TUNE_REQUIRE_ROOT=1 $(CARGO) test --locked --test it faults:: -- --nocapture

fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

fuzz-smoke:
	fuzz/run.sh --smoke

stress:
	STRESS_SECONDS=$(STRESS_SECONDS) ROCE_TUNE_REQUIRE_ROOT=1 $(CARGO) test --locked --release --test it stress:: -- --ignored --nocapture
