# mk/e2e.mk: end-to-end targets, included by the top Makefile (-include mk/*.mk).
#
#   make setup        integration/setup.sh: Debian packages + cnitool (root, idempotent)
#   make check-conf   validate conf/: kustomize overlays, CRD schemas (tests/data/crds),
#                     SriovNetworks rendered as the operator does, then the negative cases
#   make e2e          setup, build, check-conf, the test runtime's own tests
#                     (integration/test_cni_runtime.py), then integration/e2e.sh (root)
#                     E2E="add del" runs only those scenarios; E2E_VERBOSE=1 prints the
#                     log of a failed scenario
#   make demo         one simulated rail through cnitool ADD/CHECK/DEL, the job's NCCL variables,
#                     a drift the agent repairs and a wrong GID index refused, explained (root);
#                     it installs only what it uses (integration/setup.sh --demo)
#
# `e2e-build` is `release` (top Makefile: both static binaries, copied to target/release/),
# under the name mk/kernel.mk also depends on.

E2E ?=

.PHONY: setup check-conf e2e demo e2e-build

setup:
	integration/setup.sh

e2e-build: release

check-conf:
	integration/check-conf.sh

e2e: setup e2e-build check-conf
	python3 integration/test_cni_runtime.py
	integration/e2e.sh $(E2E)

demo:
	integration/demo.sh
