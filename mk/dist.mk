# mk/dist.mk: the release's artifacts, included by the top Makefile (-include mk/*.mk).
#
#   make dist         under dist/ (emptied first):
#                       roce-tune, roce-tune-agent       the static release binaries (`make release`,
#                                                        with the git revision they name)
#                       roce-tune-<v>.cdx.json           a CycloneDX 1.5 SBOM of the crates they are
#                                                        built from (cargo-cyclonedx, target
#                                                        x86_64-unknown-linux-gnu, no build-only crates)
#                       roce-tune-<v>.tgz                `helm package` of conf/helm/roce-tune
#                       roce-tune-image-<v>.oci.tar      the image (`make image`) as an OCI archive,
#                                                        where podman can build it (DIST_IMAGE=0: not)
#                       SHA256SUMS                       of every file above (`sha256sum -c SHA256SUMS`)
#                     then integration/dist-check.py verifies all of it as a user would
#                     (docs/deploy.md, "Verify a release").
#   make dist-setup   cargo-cyclonedx, pinned and --locked, into integration/.build/tools: a
#                     compile of its own (6 min of CPU: 41 min on this workplace's two shared,
#                     loaded cores), which is why `make setup` and `make test` never run it.
#   make dist-test    part of `make test`: what is cheap to build, into target/dist-test: the
#                     binaries `make release` built anyway, the chart package, SHA256SUMS, and the
#                     SBOM where cargo-cyclonedx is installed (ROCE_TUNE_REQUIRE_SBOM=1 makes its
#                     absence a failure; without it, a SKIPPED line says so); checked by the same
#                     integration/dist-check.py. Not the image archive: `make image-test` builds and
#                     checks the image itself, and `make dist` its archive.
# Both then run integration/dist-check-negative.py: a changed binary, a file without its sum, an
# SBOM missing a crate or naming another version must each fail dist-check.

CYCLONEDX_VERSION := 0.5.9
TOOLS_DIR         := integration/.build/tools
CYCLONEDX         := $(TOOLS_DIR)/bin/cargo-cyclonedx
DIST_DIR          ?= dist
DIST_IMAGE        ?= 1
DIST_TEST_DIR     := target/dist-test
DIST_HELM          = $(or $(HELM),$(wildcard integration/.build/helm/helm),helm)
DIST_PY            = $(or $(wildcard integration/.build/venv/bin/python),python3)
dist_version       = $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)

.PHONY: dist dist-setup dist-test dist-files

dist-setup:
	@if [ -x $(CYCLONEDX) ] && $(CYCLONEDX) cyclonedx --version 2>/dev/null | grep -q ' $(CYCLONEDX_VERSION)$$'; then \
		echo "dist-setup: $(CYCLONEDX) $(CYCLONEDX_VERSION) is installed"; \
	else \
		$(CARGO) install --locked --root $(TOOLS_DIR) cargo-cyclonedx@$(CYCLONEDX_VERSION); \
	fi

# dist-files DIR SBOM(0|1) IMAGE(0|1): the artifacts into DIR, each built from this checkout.
# The SBOM is written beside Cargo.toml by cargo-cyclonedx and moved; SOURCE_DATE_EPOCH (the
# commit's time) makes its timestamp the commit's, not the build's.
define dist_files
	rm -rf $(1) && mkdir -p $(1)
	install -m 0755 $(BIN) $(AGENT_BIN) $(1)/
	$(DIST_HELM) package conf/helm/roce-tune --destination $(1)
	@if [ "$(2)" = 1 ]; then \
		SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) \
		$(CYCLONEDX) cyclonedx --format json --spec-version 1.5 --target $(TARGET) --no-build-deps \
		    --override-filename roce-tune-$(dist_version).cdx -q && \
		mv roce-tune-$(dist_version).cdx.json $(1)/; \
	fi
	@if [ "$(3)" = 1 ]; then \
		podman save --format oci-archive -o $(1)/roce-tune-image-$(dist_version).oci.tar $$(cat $(IMAGE_DIR)/ref) && \
		echo "dist: $$(cat $(IMAGE_DIR)/ref) as $(1)/roce-tune-image-$(dist_version).oci.tar"; \
	fi
	cd $(1) && sha256sum $$(ls | grep -vx SHA256SUMS) > SHA256SUMS
endef

dist: release dist-setup $(if $(filter 1,$(DIST_IMAGE)),image)
	$(call dist_files,$(DIST_DIR),1,$(DIST_IMAGE))
	DIST_REVISION=$(REVISION) ROCE_TUNE_REQUIRE_SBOM=1 DIST_REQUIRE_IMAGE=$(DIST_IMAGE) \
	    $(DIST_PY) integration/dist-check.py $(DIST_DIR)
	DIST_REVISION=$(REVISION) $(DIST_PY) integration/dist-check-negative.py $(DIST_DIR)
	@ls -l $(DIST_DIR)

dist-test: release
	$(call dist_files,$(DIST_TEST_DIR),$(if $(wildcard $(CYCLONEDX)),1,0),0)
	DIST_REVISION=$(REVISION) DIST_REQUIRE_IMAGE=0 $(DIST_PY) integration/dist-check.py $(DIST_TEST_DIR)
	DIST_REVISION=$(REVISION) $(DIST_PY) integration/dist-check-negative.py $(DIST_TEST_DIR)
