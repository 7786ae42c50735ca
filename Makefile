# roce-tune: the two commands of the README are `make demo` and `make test`.
# Fragments in mk/*.mk add the end-to-end, benchmark and reliability targets.

CARGO        ?= cargo
TARGET       := x86_64-unknown-linux-gnu
# A static binary: it is copied onto GPU nodes whose libc nobody knows.
# With --target, RUSTFLAGS do not reach proc-macros and build scripts.
STATIC_FLAGS := -C target-feature=+crt-static
# Two binaries (docs/design.md, "Two binaries"): the one-shot CNI plugin and
# operator's tool, and the long-running agent the DaemonSet runs.
BINS         := roce-tune roce-tune-agent
BIN          := target/release/roce-tune
AGENT_BIN    := target/release/roce-tune-agent
# The git revision the release binaries print (`--version`, roce_tune_build_info; src/build_info.rs
# says why an environment variable and not a build script): exactly 12 hex digits (not
# --short=12, which grows when a prefix is ambiguous), -dirty when tracked files have
# uncommitted changes, `unknown` outside a git checkout. Computed when a recipe uses it.
REVISION      = $(or $(shell git rev-parse HEAD 2>/dev/null | cut -c1-12),unknown)$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),-dirty)

.PHONY: all release build test unit unit-unprivileged integration chart-schema clean fmt lint

all: release

# `make release`: both static, stripped binaries; also copied to
# target/release where the e2e harness, the image and the benchmarks look
# for them.
release build:
	ROCE_TUNE_REVISION=$(REVISION) RUSTFLAGS="$(STATIC_FLAGS)" $(CARGO) build --release --locked --target $(TARGET)
	mkdir -p target/release
	@for b in $(BINS); do \
		rm -f target/release/$$b && cp target/$(TARGET)/release/$$b target/release/$$b || exit 1; \
		file target/release/$$b | grep -Eq 'static(-pie)? linked' || { echo "target/release/$$b is not static" >&2; exit 1; }; \
		echo "static: target/release/$$b ($$(stat -c %s target/release/$$b) bytes, $$(target/release/$$b --version | head -n1))"; \
	done

# Every test: unit tests, the process-level integration tests against real
# netns (root required; ROCE_TUNE_REQUIRE_ROOT=1 turns a skip into a failure),
# the manifests (mk/e2e.mk check-conf), the alerting rules under promtool
# (mk/alerts.mk rules-test), the end-to-end chain with real peers
# (mk/e2e.mk), the deployment image (mk/image.mk) and the real-kernel lane
# (mk/kernel.mk; ROCE_TUNE_REQUIRE_KERNEL=1 turns a lane that cannot boot into
# a failure, as CI sets it), the release's cheap artifacts checked as
# `make dist` checks them (mk/dist.mk dist-test), and every fuzz target briefly
# (mk/reliability.mk fuzz-smoke). `lint` is clippy with the toolchain that
# rust-toolchain.toml pins, so a newer clippy's new lints cannot turn CI red.
test: setup fmt lint unit unit-unprivileged integration check-conf rules-test e2e image-test dist-test kernel-lane fuzz-smoke

# As root, every unit test runs (ROCE_TUNE_REQUIRE_ROOT=1: one that would
# skip for want of root fails); as nobody, every test but the trust rules'
# own passes, and those say they need root (integration/unit-unprivileged.sh).
unit:
	ROCE_TUNE_REQUIRE_ROOT=1 $(CARGO) test --locked --lib --bins

unit-unprivileged:
	CARGO=$(CARGO) integration/unit-unprivileged.sh

# One test binary, tests/it (its main.rs says why). The fault build comes
# first (mk/reliability.mk): built by a test, it would compete for the two
# cores with the tests that time a wait. So does `release`: tests/it/release.rs
# holds the stripped CNI binary free of the agent's code.
# Then the proof that a setting is declared once (docs/contributing.md, "Adding a
# setting"): built with the test-only setting `testKnob`, the lib's declaration tests and the
# shared test of every setting cover it, and a stored patch that adds one more touches only
# the files contributing.md lists (tests/it/adding_a_setting.rs).
integration: fault-bin release
	ROCE_TUNE_REQUIRE_ROOT=1 $(CARGO) test --locked --test it -- --test-threads=2
	$(CARGO) test --locked --lib --features test-setting -- cni:: settings::
	ROCE_TUNE_REQUIRE_ROOT=1 $(CARGO) test --locked --features test-setting --test it -- --test-threads=1 agent::every_setting adding_a_setting

# The chart schema's rail-profile part, from the owned settings src/cni/keys.rs declares
# (integration/chart-schema.py; check-conf fails until it is run after a new setting).
chart-schema:
	python3 integration/chart-schema.py

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --all-targets -- -D warnings

clean:
	$(CARGO) clean

-include mk/*.mk
