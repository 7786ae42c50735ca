#!/usr/bin/env python3
"""The Helm schema's network-config part, generated from the plugin's declarations.

A rail profile (the node config's `draRails`, conf/helm/roce-tune/values.schema.json) takes a
network config's keys. Those of the per-rail settings roce-tune owns are declared once, with
their bounds and whether a profile may carry them, in src/cni/keys.rs
(integration/declared_keys.py reads it): this writes their properties in the schema, in the
declaration's order, so a setting added there reaches the chart without a hand edit. The other
profile keys (sysctl, the GID's, podTrafficClasses) have rules a schema spells by hand and are
kept as they are.

    integration/chart-schema.py           rewrite the schema (make chart-schema)
    integration/chart-schema.py --check   fail, naming the fix, when it is not what it would write
"""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import declared_keys  # noqa: E402

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conf", "helm",
                      "roce-tune", "values.schema.json")


def owned_property(owned):
    return {"type": ["integer", "null"], "minimum": owned["min"], "maximum": owned["max"]}


def generate(schema, keys):
    profile = schema["properties"]["nodeConfig"]["properties"]["draRails"]
    old = profile["properties"]
    new = {}
    for name, d in keys.items():
        owned = d["owned"]
        if owned is not None:
            if owned["profile"]:
                new[name] = owned_property(owned)
        elif name in old:
            new[name] = old[name]
    stray = [k for k in old if k not in new]
    if stray:
        raise SystemExit("%s: draRails names %s, which src/cni/keys.rs does not declare"
                         % (SCHEMA, ", ".join(stray)))
    profile["properties"] = new
    return schema


def render(schema):
    # The file's own form: two-space indent, a final newline.
    return json.dumps(schema, indent=2) + "\n"


def main(argv):
    with open(SCHEMA) as f:
        text = f.read()
    want = render(generate(json.loads(text), declared_keys.declared()))
    if argv[1:] == ["--check"]:
        if want != text:
            sys.exit("%s: the rail profile's owned settings are not src/cni/keys.rs's: "
                     "run `make chart-schema` and commit the result" % os.path.relpath(SCHEMA))
        return
    if argv[1:]:
        sys.exit(__doc__)
    if want != text:
        with open(SCHEMA, "w") as f:
            f.write(want)
        print("wrote %s" % os.path.relpath(SCHEMA))


if __name__ == "__main__":
    main(sys.argv)
