"""Render a SriovNetwork into the NetworkAttachmentDefinition the sriov-network-operator makes.

What the operator does (k8snetworkplumbingwg/sriov-network-operator at 249e2001, 2026-08-06):
  * api/v1/helper.go, (*SriovNetwork).RenderNetAttDef: fills the data of the template
    bindata/manifests/cni-config/sriov/sriov-cni-config.yaml; `ipam` is passed through
    strings.Join(strings.Fields(ipam), "") (EVERY whitespace character removed, also inside
    JSON strings), `metaPlugins` and `capabilities` verbatim; the resource annotation is
    $RESOURCE_PREFIX/<resourceName>.
  * pkg/render/render.go: Go text/template (no escaping of any kind), then
    k8s.io/apimachinery's YAML decoder on the result.
  * The template puts the whole CNI config in ONE single-quoted YAML scalar
    (`config: '{ ... }'`), so a `'` in metaPlugins, ipam or capabilities ends the scalar
    (broken YAML) or, doubled (`''`), silently becomes one `'` in the config. Line breaks in
    a multi-line single-quoted scalar fold into spaces.

This module does not copy the template: `render_text` produces the text that template
produces for the fields the template reads, with the template's whitespace trimming
(`{{-`/`-}}`) applied; integration/check-conf-negative.py pins it on known inputs. Parse the
result with `parse_rendered`.
"""
import json

import yaml

# The operator namespaces this project ships SriovNetworks for, and the RESOURCE_PREFIX the
# operator runs with there: the sriov-network-operator's default (config/manager and its
# helm chart: openshift.io), and NVIDIA's network operator's sub-chart value
# (Mellanox/network-operator deployment/network-operator/values.yaml: nvidia.com).
OPERATOR_NAMESPACES = {
    "sriov-network-operator": "openshift.io",
    "openshift-sriov-network-operator": "openshift.io",
    "nvidia-network-operator": "nvidia.com",
}

# SriovNetworkSpec enums as RenderNetAttDef tests them (anything else: not rendered).
_ON_OFF = ("on", "off")
_LINK_STATES = ("enable", "disable", "auto")


class RenderError(ValueError):
    pass


def apply_defaults(spec, schema):
    """spec with the CRD's `default:` values for absent top-level fields (what the API server
    stores before the operator ever sees the object: logLevel defaults to "info")."""
    out = dict(spec)
    props = (((schema or {}).get("properties") or {}).get("spec") or {}).get("properties") or {}
    for key, sub in props.items():
        if key not in out and isinstance(sub, dict) and "default" in sub:
            out[key] = sub["default"]
    return out


def _int(spec, key, default=None):
    v = spec.get(key, default)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise RenderError("spec.%s must be an integer, got %r" % (key, v))
    return v


def render_text(doc, resource_prefix, spec_schema=None):
    """The NAD text the operator's template yields for SriovNetwork `doc`."""
    meta = doc.get("metadata") or {}
    spec = apply_defaults(doc.get("spec") or {}, spec_schema)
    name = meta.get("name") or ""
    nad_namespace = spec.get("networkNamespace") or meta.get("namespace") or ""
    owner = "SriovNetwork.sriovnetwork.openshift.io/%s/%s" % (meta.get("namespace") or "", name)

    # The members of the sriov plugin object after "type", in the template's order.
    members = ['"vlan":%d' % (_int(spec, "vlan", 0))]
    if spec.get("spoofChk") in _ON_OFF:
        members.append('"spoofchk":"%s"' % spec["spoofChk"])
    if spec.get("trust") in _ON_OFF:
        members.append('"trust":"%s"' % spec["trust"])
    vlan_qos = _int(spec, "vlanQoS", 0)
    if 0 <= vlan_qos <= 7:
        members.append('"vlanQoS":%d' % vlan_qos)
    if spec.get("vlanProto"):
        members.append('"vlanProto":"%s"' % spec["vlanProto"])
    for key, field in (("minTxRate", "min_tx_rate"), ("maxTxRate", "max_tx_rate")):
        rate = _int(spec, key)
        if rate is not None and rate >= 0:
            members.append('"%s":%d' % (field, rate))
    if spec.get("capabilities"):
        members.append('"capabilities":%s' % spec["capabilities"])
    if spec.get("linkState") in _LINK_STATES:
        members.append('"link_state":"%s"' % spec["linkState"])
    if spec.get("logLevel"):
        members.append('"logLevel":"%s"' % spec["logLevel"])
    if spec.get("logFile"):
        members.append('"logFile":"%s"' % spec["logFile"])
    ipam = spec.get("ipam") or ""
    ipam_member = '"ipam":' + ("".join(ipam.split()) if ipam else "{}")
    sriov = '"type":"sriov",' + "".join(m + "," for m in members) + ipam_member

    meta_plugins = spec.get("metaPlugins") or ""
    head = ("apiVersion: \"k8s.cni.cncf.io/v1\"\n"
            "kind: NetworkAttachmentDefinition\n"
            "metadata:\n"
            "  name: %s\n"
            "  namespace: %s\n"
            "  annotations:\n"
            "    k8s.v1.cni.cncf.io/resourceName: %s/%s\n"
            "    sriovnetwork.openshift.io/owner-ref: %s\n"
            "spec:\n"
            "  config: '{\n"
            "  \"cniVersion\":\"1.0.0\",\n"
            "  \"name\":\"%s\","
            % (name, nad_namespace, resource_prefix, spec.get("resourceName", ""), owner, name))
    if meta_plugins:
        body = '"plugins": [\n    {' + sriov + "\n},\n  " + meta_plugins + "\n  ]\n}"
    else:
        body = sriov + "\n}"
    return head + body + "'\n"


def parse_rendered(text):
    """(NAD object, the CNI config as JSON) of rendered text; RenderError says what broke."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise RenderError("the rendered NetworkAttachmentDefinition is not valid YAML: %s"
                          % str(e).replace("\n", " "))
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise RenderError("the rendered text is %d YAML documents, not one object" % len(docs))
    nad = docs[0]
    config = ((nad.get("spec") or {}).get("config"))
    if not isinstance(config, str):
        raise RenderError("spec.config of the rendered NAD is not a string")
    try:
        conf = json.loads(config)
    except ValueError as e:
        raise RenderError("spec.config of the rendered NAD is not JSON (%s): %s" % (e, config))
    return nad, conf
