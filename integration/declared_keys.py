#!/usr/bin/env python3
"""The network config's keys as src/cni/keys.rs declares them, read from its one list
(`network_config_keys!`), so that the Python tools judge a config by the plugin's own
declaration instead of a copy: check-conf's known keys and the owned settings' bounds, and the
Helm schema's rail-profile part (integration/chart-schema.py). A row compiled only under a cfg
(`@cfg(...)`, the test-only setting) is no key of a release build and is left out.

tests/it/conf_examples.rs holds what this reads to the plugin's `Key::ALL` and `Key::owned`,
so the parse cannot drift from the Rust.

Run alone, it prints the keys as JSON: {"<key>": {"whose": ..., "owned": {...} | null}}.
"""

import json
import os
import re
import sys

KEYS_RS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "cni", "keys.rs")

ROW = re.compile(
    r'(?P<cfg>@cfg\([^)]*\)\s*)?(?P<variant>[A-Z]\w*) = "(?P<name>[^"]+)", (?P<whose>\w+)'
    r'(?:, owned \{(?P<owned>[^}]*)\})?;',
    re.S,
)
FIELD = re.compile(r"(\w+): ([^,]+),")


def declared(path=KEYS_RS):
    """Every key of a release build, in the declaration's order (Python keeps insertion order)."""
    with open(path) as f:
        src = f.read()
    start = src.index("network_config_keys! {")
    body = src[start:src.index("\n}\n", start)]
    # Doc comments hold no row.
    body = "\n".join(l for l in body.splitlines() if not l.strip().startswith("//"))
    keys = {}
    for m in ROW.finditer(body):
        if m.group("cfg"):
            continue
        owned = None
        if m.group("owned") is not None:
            fields = dict(FIELD.findall(m.group("owned") + ","))
            owned = {
                "min": int(fields["min"]),
                "max": int(fields["max"]),
                "profile": fields["profile"].strip() == "true",
            }
        keys[m.group("name")] = {"whose": m.group("whose"), "owned": owned}
    if not keys:
        raise SystemExit("%s: no row of network_config_keys! found" % path)
    return keys


if __name__ == "__main__":
    json.dump(declared(*sys.argv[1:]), sys.stdout, indent=2)
    sys.stdout.write("\n")
