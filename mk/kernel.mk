# mk/kernel.mk: the real-kernel lane, included by the top Makefile (-include mk/*.mk).
#
#   make kernel-setup  integration/kernel/setup.sh: qemu, virtme-ng (a venv under
#                      integration/.build) and Debian 12's kernel, unpacked, not installed.
#                      `make setup` (the project's own setup, run by `make test`) runs it too,
#                      so CI on a bare Debian 12 machine gets everything.
#   make kernel-lane   setup, the release build, one boot of Debian 12's kernel under qemu
#                      (TCG) with soft-RoCE, every scenario of integration/kernel/scenarios.sh
#                      (6 to 8 minutes on 2 busy cores). KERNEL_SCENARIOS="lookup ipv6" runs only
#                      those; KERNEL_EXPECT_RDMA_CM_TOS=1 makes a binary without rdmaCmTos fail.
#                      Then integration/lane_rules.py over rxe-counters' readings (promtool).
#   make demo-kernel   the demo's chain on that real RDMA stack, explained step by step
#   make kernel-clean  remove what the lane left on the host (KERNEL_CLEAN=--all: downloads too)
#
# When the lane cannot boot (no qemu, no kernel, the guest never comes up) it prints a loud
# SKIPPED banner and these targets succeed; ROCE_TUNE_REQUIRE_KERNEL=1 (CI) makes that a failure.
# Needs `setup` and `e2e-build` from mk/e2e.mk (cnitool, the reference plugins, the release
# binaries at target/release/roce-tune and roce-tune-agent).

KERNEL_CLEAN ?=

.PHONY: kernel-setup kernel-probes kernel-lane demo-kernel kernel-clean

kernel-setup:
	integration/kernel/setup.sh

setup: kernel-setup

# run.sh exits 77 when the lane cannot boot and skipping is allowed: a skip, not a failure.
# The DCB codec's probe that scenario rxe-counters runs (a dev build: the library is built for
# the tests anyway, so this is a link, not a second LTO build).
kernel-probes:
	$(CARGO) build --locked --example dcb_probe

# After the lane, scenario rxe-counters' readings (when it ran) are held to the shipped loss
# alert: integration/lane_rules.py builds promtool series from them (RoceTuneRailLossRising fires
# for the lossy run, not the clean one). Its 77 (no rule file) is a loud skip like the lane's.
LANE_READINGS := integration/.build/kernel-logs/kernel-lane/rxe-counters.readings

kernel-lane: setup e2e-build kernel-probes
	@rm -f $(LANE_READINGS); rc=0; integration/kernel/run.sh --name kernel-lane integration/kernel/scenarios.sh || rc=$$?; \
	if [ $$rc = 77 ]; then echo "kernel-lane: SKIPPED (see the banner above)"; exit 0; fi; \
	if [ -s $(LANE_READINGS) ]; then r=0; python3 integration/lane_rules.py $(LANE_READINGS) || r=$$?; \
	  if [ $$r = 77 ]; then echo "kernel-lane: the loss alert's check SKIPPED (see above)"; \
	  elif [ $$r != 0 ]; then rc=1; fi; fi; exit $$rc

demo-kernel: setup e2e-build
	@rc=0; integration/kernel/run.sh --name demo-kernel integration/kernel/demo.sh || rc=$$?; \
	if [ $$rc = 77 ]; then echo "demo-kernel: SKIPPED (see the banner above)"; exit 0; fi; exit $$rc

kernel-clean:
	integration/kernel/cleanup.sh $(KERNEL_CLEAN)
