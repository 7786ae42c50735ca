#!/bin/sh
# The unit tests (`cargo test --lib`) as an unprivileged user: uid and gid
# 65534 (nobody), no supplementary groups. The rules need no root to be
# tested; the only tests that do are the trust rules' own, which make
# root's files and sockets, and they say so ("SKIPPED <test>: needs root
# (...)", src/process.rs `test_runs_as_root`) and run as root in `make unit`
# (ROCE_TUNE_REQUIRE_ROOT=1 there turns such a skip into a failure). A test
# that needs root without saying so fails here.
set -eu
cargo=${CARGO:-cargo}
bin=$($cargo test --locked --lib --no-run --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["lib"] and m.get("executable"):
        print(m["executable"])
')
[ -n "$bin" ] || { echo "unit-unprivileged: cargo named no lib test binary" >&2; exit 1; }
dir=$(mktemp -d /tmp/rt-unit-nobody.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp "$bin" "$dir/lib-tests"
chown -R 65534:65534 "$dir"
cd "$dir"
status=0
setpriv --reuid=65534 --regid=65534 --clear-groups \
    env -i PATH="$PATH" HOME="$dir" TMPDIR="$dir" ./lib-tests > log 2>&1 || status=$?
grep '^SKIPPED ' log || true
grep '^test result' log || true
if [ "$status" -ne 0 ]; then
    grep -E '^test .* FAILED$|panicked at' log || true
    echo "unit-unprivileged: the unit tests failed as uid 65534 (the whole log: rerun this script)" >&2
    exit 1
fi
echo "unit-unprivileged: $(grep -c '^SKIPPED ' log || true) tests said they need root; every other unit test passed as uid 65534"
