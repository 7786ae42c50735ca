#!/usr/bin/env bash
# integration/image-tags.sh [VERSION]: the tags `make image` gives the image of the current git
# checkout (mk/image.mk), one per line:
#   <version>-<12 hex of HEAD>[-dirty]   always (-dirty: tracked files have uncommitted changes);
#   <version>                            too when HEAD is the release: tagged v<version>, clean.
# VERSION defaults to Cargo.toml's (in the current directory). The chart's appVersion and the
# kustomize base's newTag are <version> (integration/check-conf.py holds them to Cargo.toml), so
# at the release's tag the manifests name the image this builds.
# Fails, naming why, outside a git checkout (the tag needs a revision) and when HEAD carries a
# v<X.Y.Z> tag that is not v<version> (Cargo.toml was not bumped with the tag, or the tag is
# wrong: either way the image would be published under a version it is not).
set -euo pipefail
version="${1:-$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)}"
[ -n "$version" ] || { echo "image-tags: no version (Cargo.toml's [package] version)" >&2; exit 1; }
rev="$(git rev-parse HEAD 2>/dev/null)" || { echo "image-tags: not a git checkout: the tag needs a revision" >&2; exit 1; }
dirty=""
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then dirty=-dirty; fi
echo "$version-${rev:0:12}$dirty"
release=""
while read -r tag; do
    case "$tag" in
        "v$version") release=yes ;;
        v[0-9]*.[0-9]*.[0-9]*)
            echo "image-tags: HEAD is tagged $tag but Cargo.toml's version is $version: bump one or the other" >&2
            exit 1 ;;
    esac
done < <(git tag --points-at HEAD)
if [ -n "$release" ]; then
    if [ -n "$dirty" ]; then
        echo "image-tags: HEAD is v$version but the tree has uncommitted changes: not tagged $version" >&2
    else
        echo "$version"
    fi
fi
