#!/usr/bin/env python3
"""Print every roce-tune plugin config embedded in conf/, one per line, as compact JSON.

Sources:
  * SriovNetwork manifests: spec.metaPlugins (a string of JSON objects separated by commas,
    which the operator pastes into the rendered "plugins" list);
  * NetworkAttachmentDefinition manifests: spec.config (a conflist's "plugins", or a single
    plugin config);
  * *.conflist / *.conf / *.json files: a conflist or a single plugin config (not node.json,
    roce-tune's node config, and nothing in a Helm chart's directory).

Usage:
  integration/extract-configs.py [--libcni] [--with-source] [CONF_DIR]

  CONF_DIR       default: conf/ next to this script's directory
  --libcni       add "name" and "cniVersion" the way libcni does before it runs the plugin
                 (from the enclosing list; for a SriovNetwork: metadata.name and "1.0.0",
                 what the operator renders)
  --with-source  prefix each line with "<file>#<document index>:<plugin index><TAB>"

Exit status: 0 when at least one config was found and every source parsed, 1 otherwise.
Needs python3-yaml.
"""
import json
import os
import sys

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.stderr.write("extract-configs: python3-yaml is missing (apt-get install python3-yaml)\n")
    sys.exit(1)

PLUGIN_TYPE = "roce-tune"


def meta_plugins(text):
    """Parse a metaPlugins string: JSON objects separated by commas (not an array)."""
    value = json.loads("[" + text + "]")
    if not all(isinstance(p, dict) for p in value):
        raise ValueError("metaPlugins must hold JSON objects only")
    return value


def plugins_of_netconf(conf):
    """(name, cniVersion, [plugin configs]) of a conflist or of a single plugin config."""
    if not isinstance(conf, dict):
        raise ValueError("network config is not a JSON object")
    if "plugins" in conf:
        plugins = conf["plugins"]
        if not isinstance(plugins, list):
            raise ValueError('"plugins" is not a list')
        return conf.get("name"), conf.get("cniVersion"), plugins
    return conf.get("name"), conf.get("cniVersion"), [conf]


def configs_in_yaml_doc(doc):
    """Yield (index, name, cniVersion, plugin) for every plugin config of one YAML document."""
    if not isinstance(doc, dict):
        return
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "SriovNetwork" and spec.get("metaPlugins"):
        name = (doc.get("metadata") or {}).get("name")
        # The operator renders the plugins list as [sriov, <metaPlugins>...]: index from 1.
        for i, p in enumerate(meta_plugins(spec["metaPlugins"]), start=1):
            yield i, name, "1.0.0", p
    elif kind == "NetworkAttachmentDefinition" and spec.get("config"):
        name, ver, plugins = plugins_of_netconf(json.loads(spec["config"]))
        for i, p in enumerate(plugins):
            yield i, name, ver, p


def extract(conf_dir):
    """([(source, name, cniVersion, plugin config)] of every roce-tune config, [errors])."""
    errors = []
    found = []
    for root, dirs, files in os.walk(conf_dir):
        dirs.sort()
        if "Chart.yaml" in files:
            # A Helm chart (conf/helm/roce-tune): its templates are YAML only once rendered, and
            # it embeds no network config.
            dirs[:] = []
            continue
        for fn in sorted(files):
            path = os.path.join(root, fn)
            rel = os.path.relpath(path, os.path.dirname(os.path.abspath(conf_dir)))
            try:
                if fn.endswith((".yaml", ".yml")):
                    with open(path) as f:
                        docs = list(yaml.safe_load_all(f))
                    for d, doc in enumerate(docs):
                        for i, name, ver, p in configs_in_yaml_doc(doc):
                            found.append(("%s#%d:%d" % (rel, d, i), name, ver, p))
                elif fn == "node.json":
                    continue  # a node config (conf/deploy/base), not a network config
                elif fn.endswith((".conflist", ".conf", ".json")):
                    with open(path) as f:
                        name, ver, plugins = plugins_of_netconf(json.load(f))
                    for i, p in enumerate(plugins):
                        found.append(("%s#0:%d" % (rel, i), name, ver, p))
            except (ValueError, yaml.YAMLError, OSError) as e:
                errors.append("%s: %s" % (rel, e))
    configs = [f for f in found if isinstance(f[3], dict) and f[3].get("type") == PLUGIN_TYPE]
    return configs, errors


def main(argv):
    if any(a.startswith("-") and a not in ("--libcni", "--with-source") for a in argv):
        sys.stderr.write(__doc__)
        return 2
    libcni = "--libcni" in argv
    with_source = "--with-source" in argv
    args = [a for a in argv if not a.startswith("-")]
    conf_dir = args[0] if args else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
    configs, errors = extract(conf_dir)
    for source, name, ver, p in configs:
        out = dict(p)
        if libcni:
            # libcni sets these two on every plugin of a list (and prevResult for chained ones).
            out = {"cniVersion": ver, "name": name}
            out.update((k, v) for k, v in p.items() if k not in out)
        line = json.dumps(out, separators=(",", ":"))
        print(("%s\t%s" % (source, line)) if with_source else line)
    for e in errors:
        sys.stderr.write("extract-configs: %s\n" % e)
    if not configs:
        sys.stderr.write("extract-configs: no %s config found under %s\n" % (PLUGIN_TYPE, conf_dir))
    return 1 if errors or not configs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
