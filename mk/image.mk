# mk/image.mk: the deployment image, included by the top Makefile (-include mk/*.mk).
#
#   make image        build the OCI image OFFLINE with podman from conf/image/Containerfile
#                     (FROM scratch): the static release binaries, Debian's busybox-static
#                     and conf/image/install.sh. Tagged <Cargo.toml version>-<12-hex git
#                     revision>[-dirty] always, and <version> too when HEAD is the release's
#                     git tag v<version> with a clean tree (integration/image-tags.sh). Prints
#                     the references it built.
#   make image-tag    print the first tag: <version>-<12-hex revision>[-dirty]
#   make image-test   build it, then integration/image-test.sh checks it from its own
#                     filesystem and config and runs its install script (root)
#
# The chart's appVersion (its default image tag) and the kustomize base's newTag are Cargo.toml's
# version (integration/check-conf.py holds the three together): at the release's tag they name
# the image `make image` builds, with nothing to pin. To deploy another build, set its
# <version>-<revision> tag in your values (image.tag) or overlay (images:).
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

# Recursively expanded on purpose: computed when a recipe runs, after `release` built.
image_version  = $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
image_dirty    = $(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo -dirty)
image_rev      = $(shell git rev-parse HEAD 2>/dev/null | cut -c1-12)
image_revision = $(shell git rev-parse HEAD 2>/dev/null)$(image_dirty)
# Every tag of this checkout's image, the revision's first (integration/image-tags.sh).
image_tags     = $(shell integration/image-tags.sh $(image_version))
image_tag      = $(firstword $(image_tags))
IMAGE_SOURCE  ?= $(or $(shell sed -n 's/^repository *= *"\(.*\)"/\1/p' Cargo.toml | head -n1),$(shell git config --get remote.origin.url 2>/dev/null),unknown)

.PHONY: image image-tag image-test image-context

image-tag:
	@integration/image-tags.sh $(image_version) | head -n1

# The context holds only what the image carries (no repository, no target/ dir).
image-context: release
	@command -v podman >/dev/null || { echo "image: podman is missing (make setup installs it)" >&2; exit 1; }
	@test -x $(BUSYBOX) || { echo "image: $(BUSYBOX) is missing (make setup installs busybox-static)" >&2; exit 1; }
	@file -L $(BUSYBOX) | grep -Eq 'statically linked|static-pie linked' || { echo "image: $(BUSYBOX) is not static" >&2; exit 1; }
	@integration/image-tags.sh $(image_version) >/dev/null
	@# The labels name the tree's revision now: the binaries must have been built from it (a
	@# commit between `make release` and here would label them with a revision they are not).
	@for b in $(BIN) $(AGENT_BIN); do \
		$$b --version | grep -Eq '\(revision $(REVISION)[;)]' || { \
			echo "image: $$b says $$($$b --version | head -n1), but the tree is $(REVISION): run make release again" >&2; exit 1; }; \
	done
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
# The references are written to target/image/ref (the revision's) and target/image/refs (all)
# for the tests.
image: image-context
	podman build --no-cache --network=none --pull=never \
	    --timestamp $$(git log -1 --format=%ct) \
	    --build-arg VERSION=$(image_version) \
	    --build-arg REVISION=$(image_revision) \
	    --build-arg SOURCE="$(IMAGE_SOURCE)" \
	    $(foreach t,$(image_tags),-t $(IMAGE_NAME):$(t)) -f $(IMAGE_CTX)/Containerfile $(IMAGE_CTX)
	@echo $(IMAGE_NAME):$(image_tag) > $(IMAGE_DIR)/ref
	@printf '$(IMAGE_NAME):%s\n' $(image_tags) > $(IMAGE_DIR)/refs
	@echo "image: $(foreach t,$(image_tags),$(IMAGE_NAME):$(t)) ($$(podman image inspect --format '{{.Size}}' $(IMAGE_NAME):$(image_tag)) bytes)"

image-test: image
	IMAGE_REF=$(IMAGE_NAME):$(image_tag) IMAGE_REFS="$(foreach t,$(image_tags),$(IMAGE_NAME):$(t))" \
	IMAGE_VERSION=$(image_version) IMAGE_REVISION=$(image_revision) \
	IMAGE_SOURCE="$(IMAGE_SOURCE)" BUSYBOX=$(BUSYBOX) \
	    integration/image-test.sh
