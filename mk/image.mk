# mk/image.mk: the deployment image, included by the top Makefile (-include mk/*.mk).
#
#   make image        build the OCI image OFFLINE with podman from conf/image/Containerfile
#                     (FROM scratch): the static release binary, Debian's busybox-static
#                     and conf/image/install.sh. Prints the reference it built.
#   make image-tag    print the tag the current tree gets: <Cargo.toml version>-<git short
#                     revision>[-dirty]
#   make image-test   build it, then integration/image-test.sh checks it from its own
#                     filesystem and config and runs its install script (root)
#   make image-pin    write the current tag into conf/deploy/base/kustomization.yaml and the
#                     chart's appVersion, its default image tag (conf/helm/roce-tune/Chart.yaml):
#                     a release step: after pushing the image, commit the pin
#
# Knobs: IMAGE_NAME (default registry.example.com/roce-tune: the name the manifests use;
# push to your registry under the name your overlay sets), IMAGE_SOURCE (the
# org.opencontainers.image.source label; default Cargo.toml's `repository`, else the git
# remote origin, else "unknown"), BUSYBOX (default /bin/busybox from busybox-static).
#
# Only this offline path exists and is tested; there is no registry (multi-stage) build: it
# could not be built or tested here (no container registry reachable), and the offline
# path needs nothing but Debian packages and cargo.

IMAGE_NAME   ?= registry.example.com/roce-tune
BUSYBOX      ?= /bin/busybox
IMAGE_DIR    := target/image
IMAGE_CTX    := $(IMAGE_DIR)/context
# The chart's appVersion is its default image tag: image-pin sets it with the kustomize base's.
CHART_YAML   := conf/helm/roce-tune/Chart.yaml

# Recursively expanded on purpose: computed when a recipe runs, after `release` built.
image_version  = $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
image_dirty    = $(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo -dirty)
image_rev      = $(shell git rev-parse --short=12 HEAD 2>/dev/null)
image_revision = $(shell git rev-parse HEAD 2>/dev/null)$(image_dirty)
image_tag      = $(image_version)-$(image_rev)$(image_dirty)
IMAGE_SOURCE  ?= $(or $(shell sed -n 's/^repository *= *"\(.*\)"/\1/p' Cargo.toml | head -n1),$(shell git config --get remote.origin.url 2>/dev/null),unknown)

.PHONY: image image-tag image-test image-pin image-context

image-tag:
	@test -n "$(image_rev)" || { echo "image-tag: not a git checkout: the tag needs a revision" >&2; exit 1; }
	@echo $(image_tag)

# The context holds only what the image carries (no repository, no target/ dir).
image-context: release
	@command -v podman >/dev/null || { echo "image: podman is missing (make setup installs it)" >&2; exit 1; }
	@test -x $(BUSYBOX) || { echo "image: $(BUSYBOX) is missing (make setup installs busybox-static)" >&2; exit 1; }
	@file -L $(BUSYBOX) | grep -Eq 'statically linked|static-pie linked' || { echo "image: $(BUSYBOX) is not static" >&2; exit 1; }
	@test -n "$(image_rev)" || { echo "image: not a git checkout: the tag needs a revision" >&2; exit 1; }
	rm -rf $(IMAGE_CTX)
	mkdir -p $(IMAGE_CTX)/rootfs/bin
	install -m 0755 $(BIN) $(IMAGE_CTX)/rootfs/roce-tune
	install -m 0755 $(AGENT_BIN) $(IMAGE_CTX)/rootfs/roce-tune-agent
	install -m 0755 $(BUSYBOX) $(IMAGE_CTX)/rootfs/bin/busybox
	ln -s busybox $(IMAGE_CTX)/rootfs/bin/sh
	install -m 0755 conf/image/install.sh $(IMAGE_CTX)/rootfs/install.sh
	cp conf/image/Containerfile $(IMAGE_CTX)/Containerfile

# --network=none: proof that nothing is fetched. --timestamp: the commit time, so the same
# tree gives the same image ID. --no-cache: podman 4.3 (buildah 1.28) reused a cached LABEL
# step whose --build-arg REVISION had changed, labelling a new build with an old revision
# (integration/image-test.sh caught it); the build takes a second anyway.
# The reference is written to target/image/ref for the test.
image: image-context
	podman build --no-cache --network=none --pull=never \
	    --timestamp $$(git log -1 --format=%ct) \
	    --build-arg VERSION=$(image_version) \
	    --build-arg REVISION=$(image_revision) \
	    --build-arg SOURCE="$(IMAGE_SOURCE)" \
	    -t $(IMAGE_NAME):$(image_tag) -f $(IMAGE_CTX)/Containerfile $(IMAGE_CTX)
	@echo $(IMAGE_NAME):$(image_tag) > $(IMAGE_DIR)/ref
	@echo "image: $(IMAGE_NAME):$(image_tag) ($$(podman image inspect --format '{{.Size}}' $(IMAGE_NAME):$(image_tag)) bytes)"

image-test: image
	IMAGE_REF=$(IMAGE_NAME):$(image_tag) \
	IMAGE_VERSION=$(image_version) IMAGE_REVISION=$(image_revision) \
	IMAGE_SOURCE="$(IMAGE_SOURCE)" BUSYBOX=$(BUSYBOX) \
	    integration/image-test.sh

image-pin:
	@test -z "$(image_dirty)" || { echo "image-pin: the tree is dirty: pin a tag built from a commit" >&2; exit 1; }
	sed -i 's/^\(    newTag: \).*/\1"$(image_tag)"/' conf/deploy/base/kustomization.yaml
	@grep -q 'newTag: "$(image_tag)"' conf/deploy/base/kustomization.yaml || { echo "image-pin: no newTag line in conf/deploy/base/kustomization.yaml" >&2; exit 1; }
	sed -i 's/^appVersion: .*/appVersion: "$(image_tag)"/' $(CHART_YAML)
	@grep -q '^appVersion: "$(image_tag)"' $(CHART_YAML) || { echo "image-pin: no appVersion line in $(CHART_YAML)" >&2; exit 1; }
	@echo "image-pin: conf/deploy/base/kustomization.yaml and $(CHART_YAML) now deploy $(IMAGE_NAME):$(image_tag)"
