"""The configuration snippets of README.md and docs/*.md, for integration/check-conf.py.

A reader copies these into a cluster, so each must at least parse, and the ones for platforms
no test here runs (a runtime's NRI switch on OpenShift, k3s or RKE2) must say what roce-tune's
DaemonSet expects and say that they were not run:

* every fenced block marked ```json, ```yaml or ```toml parses as that language (Python's
  json, PyPI's PyYAML, Python 3.11's tomllib). A block whose first line starts with `$ ` is a
  command and its output, closed by an `[exit N]` line (docs/inspect.md's transcripts): the
  output is what parses. In TOML, a line that is only Go template
  actions (`{{ template "base" . }}`, k3s's containerd config templates) is left out first;
* containerd's NRI table, `[plugins."io.containerd.nri.v1.nri"]` (config version 2) or
  `[plugins.'io.containerd.nri.v1.nri']` (version 3), keeps NRI on (`disable = false`), lets
  an external plugin connect (`disable_connections` not true), and its `socket_path`, when
  given, is roce-tune's default `nriSocket` (src/node/mod.rs `DEFAULT_NRI_SOCKET`), whose
  directory the DaemonSet mounts; CRI-O's `[crio.nri]` the same with `enable_nri = true`,
  `nri_disable_connections` and `nri_listen`;
* an OpenShift MachineConfig's file under /etc/crio/crio.conf.d/ is a `data:` URL whose
  content parses as TOML, follows the rule above, and is one of the TOML blocks of the same
  document (the reader sees the TOML, the node gets the base64);
* the section (a `##` heading) that holds a runtime's TOML or a MachineConfig says
  `**Not run here**`: nothing in this repository runs those platforms.

Kinds with a CRD schema in tests/data/crds (a NetworkAttachmentDefinition, a SriovNetwork) are
handed back to check-conf, which checks them as it checks conf/.
"""
import base64
import json
import os
import re
import tomllib
import urllib.parse

import yaml

LANGS = {"json": "json", "yaml": "yaml", "yml": "yaml", "toml": "toml"}
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
EXIT_LINE = re.compile(r"^\[exit \d+\]$")
TEMPLATE_ACTIONS = re.compile(r"^\s*(\{\{.*?\}\}\s*)+$")
CONTAINERD_NRI = "io.containerd.nri.v1.nri"
CRIO_DROP_INS = "/etc/crio/crio.conf.d/"
NOT_RUN = "**Not run here**"


def doc_files(repo):
    """README.md and docs/*.md of `repo`, those that exist, sorted."""
    out = [os.path.join(repo, "README.md")]
    docs = os.path.join(repo, "docs")
    if os.path.isdir(docs):
        out += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [p for p in out if os.path.isfile(p)]


def blocks(text):
    """[(line, lang, body, section)] of the fenced blocks of a Markdown text: the 1-based line
    of the opening fence, its language, the body with the fence's indentation removed, and the
    `##` section it sits in (its heading line, or '' before the first)."""
    out = []
    lines = text.split("\n")
    section = ""
    i = 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i]
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:j])
        out.append((i + 1, lang, body, section))
        i = j + 1
    return out


def section_text(text, heading):
    """The text of the `##` section whose heading line is `heading`."""
    if not heading:
        return ""
    start = text.index(heading + "\n")
    nxt = text.find("\n## ", start + len(heading))
    return text[start:] if nxt < 0 else text[start:nxt]


def parse(lang, body):
    """(value, error): the block parsed as its language."""
    if body.startswith("$ "):
        lines = body.split("\n")[1:]
        if lines and EXIT_LINE.match(lines[-1]):
            lines.pop()
        body = "\n".join(lines)
    try:
        if lang == "json":
            return json.loads(body), None
        if lang == "toml":
            kept = "\n".join("" if TEMPLATE_ACTIONS.match(line) else line for line in body.split("\n"))
            return tomllib.loads(kept), None
        return [d for d in yaml.safe_load_all(body) if d is not None], None
    except (ValueError, yaml.YAMLError, tomllib.TOMLDecodeError) as e:
        return None, str(e).split("\n")[0]


def nri_errors(conf, nri_socket):
    """The rule for a runtime's NRI table in a parsed TOML document: ([errors], runtime or None)."""
    errs = []
    plugins = conf.get("plugins") if isinstance(conf.get("plugins"), dict) else {}
    crio = conf.get("crio") if isinstance(conf.get("crio"), dict) else {}
    if CONTAINERD_NRI in plugins:
        t = plugins[CONTAINERD_NRI]
        if t.get("disable") is not False:
            errs.append("[plugins.%s]: disable must be false (NRI on), got %r" % (CONTAINERD_NRI, t.get("disable")))
        if t.get("disable_connections") is True:
            errs.append("[plugins.%s]: disable_connections = true keeps the agent, an external "
                        "plugin, from connecting" % CONTAINERD_NRI)
        if "socket_path" in t and t["socket_path"] != nri_socket:
            errs.append("[plugins.%s]: socket_path %r is not roce-tune's nriSocket %r, whose directory "
                        "the DaemonSet mounts" % (CONTAINERD_NRI, t["socket_path"], nri_socket))
        return errs, "containerd"
    if "nri" in crio:
        t = crio["nri"]
        if t.get("enable_nri") is not True:
            errs.append("[crio.nri]: enable_nri must be true, got %r" % t.get("enable_nri"))
        if t.get("nri_disable_connections") is True:
            errs.append("[crio.nri]: nri_disable_connections = true keeps the agent, an external "
                        "plugin, from connecting")
        if "nri_listen" in t and t["nri_listen"] != nri_socket:
            errs.append("[crio.nri]: nri_listen %r is not roce-tune's nriSocket %r, whose directory "
                        "the DaemonSet mounts" % (t["nri_listen"], nri_socket))
        return errs, "CRI-O"
    return errs, None


def data_url(source):
    """The bytes of an Ignition `data:` URL, or raise ValueError."""
    if not isinstance(source, str) or not source.startswith("data:") or "," not in source:
        raise ValueError("contents.source is not a data: URL")
    head, payload = source[len("data:"):].split(",", 1)
    if head.endswith(";base64"):
        return base64.b64decode(payload, validate=True)
    return urllib.parse.unquote_to_bytes(payload)


def machine_config_errors(doc, tomls, nri_socket):
    """An OpenShift MachineConfig's CRI-O drop-ins: ([errors], number of drop-ins)."""
    errs = []
    labels = (doc.get("metadata") or {}).get("labels") or {}
    if "machineconfiguration.openshift.io/role" not in labels:
        errs.append("metadata.labels: no machineconfiguration.openshift.io/role (the pool it is for)")
    config = (doc.get("spec") or {}).get("config") or {}
    version = str((config.get("ignition") or {}).get("version", ""))
    if not version.startswith("3."):
        errs.append("spec.config.ignition.version %r: OpenShift 4.7 and later take Ignition 3.x" % version)
    files = (config.get("storage") or {}).get("files") or []
    drop_ins = 0
    for f in files:
        path = f.get("path", "")
        if not path.startswith(CRIO_DROP_INS):
            continue
        drop_ins += 1
        where = "storage.files %s" % path
        try:
            text = data_url((f.get("contents") or {}).get("source")).decode()
            conf = tomllib.loads(text)
        except (ValueError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            errs.append("%s: its contents are not a TOML file: %s" % (where, e))
            continue
        rule, runtime = nri_errors(conf, nri_socket)
        errs += ["%s: %s" % (where, e) for e in rule]
        if runtime != "CRI-O":
            errs.append("%s: no [crio.nri] table" % where)
        if conf not in tomls:
            errs.append("%s: its contents (%s) are none of the TOML blocks of this document: the "
                        "reader would not apply what the page shows" % (where, json.dumps(conf)))
        if f.get("mode") not in (None, 0o644):
            errs.append("%s: mode %r, not 420 (0644)" % (where, f.get("mode")))
    if not drop_ins:
        errs.append("no file under %s" % CRIO_DROP_INS)
    return errs, drop_ins


def check(path, nri_socket, crd_check):
    """([errors], summary) of the snippets of one Markdown file. crd_check(doc) is check-conf's
    check of a YAML document of a kind with a CRD schema, or None for another kind."""
    with open(path) as f:
        text = f.read()
    errs = []
    counts = {"json": 0, "yaml": 0, "toml": 0}
    found = blocks(text)
    tomls = []
    for line, lang, body, _ in found:
        if LANGS.get(lang) == "toml":
            value, _ = parse("toml", body)
            if value is not None:
                tomls.append(value)
    needs_marker = set()
    for line, lang, body, section in found:
        kind = LANGS.get(lang)
        if kind is None:
            continue
        counts[kind] += 1
        value, err = parse(kind, body)
        where = "line %d (```%s)" % (line, lang)
        if err is not None:
            errs.append("%s does not parse: %s" % (where, err))
            continue
        if kind == "toml":
            rule, runtime = nri_errors(value, nri_socket)
            errs += ["%s: %s" % (where, e) for e in rule]
            if runtime:
                needs_marker.add(section)
        if kind != "yaml":
            continue
        for i, doc in enumerate(value):
            if not isinstance(doc, dict):
                continue
            what = "%s document %d (%s)" % (where, i, doc.get("kind"))
            if doc.get("kind") == "MachineConfig":
                rule, _ = machine_config_errors(doc, tomls, nri_socket)
                errs += ["%s: %s" % (what, e) for e in rule]
                needs_marker.add(section)
                continue
            checked = crd_check(doc)
            if checked:
                errs += ["%s: %s" % (what, e) for e in checked]
    for section in sorted(needs_marker):
        if NOT_RUN not in section_text(text, section):
            errs.append("section %r holds a runtime's configuration that nothing here runs, and "
                        "does not say %s" % (section or "(before the first ##)", NOT_RUN))
    summary = ", ".join("%d %s" % (n, k.upper()) for k, n in counts.items())
    return errs, summary


def default_nri_socket(node_rs):
    """roce-tune's default nriSocket, from src/node/mod.rs (`pub const DEFAULT_NRI_SOCKET`)."""
    with open(node_rs) as f:
        m = re.search(r'pub const DEFAULT_NRI_SOCKET: &str = "([^"]+)";', f.read())
    if not m:
        raise ValueError("%s: no `pub const DEFAULT_NRI_SOCKET: &str = \"...\";`" % node_rs)
    return m.group(1)
