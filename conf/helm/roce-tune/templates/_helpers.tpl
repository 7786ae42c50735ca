{{/*
Names are fixed, as the kustomize overlays name the objects (conf/deploy): roce-tune writes
host files (the CNI bin dir, /etc/cni/roce-tune, the state dir) that two releases would fight
over, so a second release fails on the names instead of installing twice.
*/}}

{{/* The labels every object carries: the overlays' own, and Helm's. */}}
{{- define "roce-tune.labels" -}}
app.kubernetes.io/name: roce-tune
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The image: by digest when image.digest is set (a tag beside a digest is ignored by the
runtime, so none is rendered), else by tag, the chart's appVersion by default. */}}
{{- define "roce-tune.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* podLabels and podAnnotations may not set the chart's own keys: a selector label changed
would orphan the pods, an annotation of the chart's would be rendered twice. */}}
{{- define "roce-tune.podMetadataChecked" -}}
{{- range $k := list "app.kubernetes.io/name" "app.kubernetes.io/component" "roce-tune.io/node-pool" -}}
{{- if hasKey $.Values.podLabels $k -}}
{{- fail (printf "roce-tune chart: podLabels may not set %s: the chart sets it (the DaemonSets' selectors use it)" $k) -}}
{{- end -}}
{{- end -}}
{{- range $k := list "kubectl.kubernetes.io/default-container" "checksum/node-config" "openshift.io/required-scc" -}}
{{- if hasKey $.Values.podAnnotations $k -}}
{{- fail (printf "roce-tune chart: podAnnotations may not set %s: the chart sets it" $k) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The platform's entry of .Values.platforms (the schema allows only the three). */}}
{{- define "roce-tune.platform" -}}
{{- toJson (index .Values.platforms .Values.platform) -}}
{{- end }}

{{/* node.json's stateDir, of a pool's nodeConfig: the DaemonSet mounts the same host path
(src/node/mod.rs default). */}}
{{- define "roce-tune.stateDir" -}}
{{ .stateDir | default "/run/cni/roce-tune" }}
{{- end }}

{{/*
Whether the metrics objects are rendered: not during an uninstall, where no agent runs.
Every pool's agent address must be loopback: kube-rbac-proxy is the only way in (src/node/mod.rs
DEFAULT_METRICS_ADDRESS; check-conf refuses any other address).
*/}}
{{- define "roce-tune.metrics" -}}
{{- if and .Values.metrics.enabled (not .Values.uninstall.enabled) -}}
{{- range $pool := include "roce-tune.pools" . | fromJsonArray -}}
{{- $addr := $pool.nodeConfig.metricsAddress | default "127.0.0.1:9662" -}}
{{- if not (regexMatch "^(127\\.[0-9.]+|\\[(0{0,4}:){2,7}0{0,3}1\\]):[0-9]+$" $addr) -}}
{{- fail (printf "roce-tune chart: metrics.enabled needs a loopback nodeConfig.metricsAddress, not %s: the agent would be reachable without kube-rbac-proxy" $addr) -}}
{{- end -}}
{{- end -}}
true
{{- end -}}
{{- end }}

{{/*
The node pools (values.yaml, nodePools), each resolved to what its DaemonSet and ConfigMap
render, as a JSON list: name; the names of its objects ("roce-tune" and
"roce-tune-node-config" for the pool named default, the names a chart without pools gave,
"roce-tune-<name>" and "roce-tune-<name>-node-config" for any other); the labels its pods
add to the overlays' own (none for default, whose selector a DaemonSet cannot change on
upgrade); its nodeSelector (the platform's, the global one, the pool's); its tolerations (the
pool's if it has the key, else the global ones); its nodeConfig (the global one, each key of
the pool's replacing it, null removing it).
*/}}
{{- define "roce-tune.pools" -}}
{{- $root := . -}}
{{- $platform := include "roce-tune.platform" . | fromJson -}}
{{- $pools := list -}}
{{- $names := list -}}
{{- range $pool := .Values.nodePools -}}
{{- if has $pool.name $names -}}
{{- fail (printf "roce-tune chart: nodePools names %s twice: each pool is a DaemonSet and a ConfigMap of its own" $pool.name) -}}
{{- end -}}
{{- $names = append $names $pool.name -}}
{{- $default := eq $pool.name "default" -}}
{{- $conf := deepCopy $root.Values.nodeConfig -}}
{{- range $k, $v := ($pool.nodeConfig | default dict) -}}
{{- if kindIs "invalid" $v -}}
{{- $_ := unset $conf $k -}}
{{- else -}}
{{- $_ := set $conf $k $v -}}
{{- end -}}
{{- end -}}
{{- /* The pool's labels first, then the platform's, then the global ones (merge keeps the first). */ -}}
{{- $selector := merge (deepCopy ($pool.nodeSelector | default dict)) (deepCopy $platform.nodeSelector) (deepCopy $root.Values.nodeSelector) -}}
{{- $tolerations := $root.Values.tolerations -}}
{{- if hasKey $pool "tolerations" -}}
{{- $tolerations = $pool.tolerations -}}
{{- end -}}
{{- $podLabels := dict -}}
{{- if not $default -}}
{{- $podLabels = dict "roce-tune.io/node-pool" $pool.name -}}
{{- end -}}
{{- $ds := ternary "roce-tune" (printf "roce-tune-%s" $pool.name) $default -}}
{{- $pools = append $pools (dict "name" $pool.name "daemonSet" $ds "configMap" (printf "%s-node-config" $ds) "podLabels" $podLabels "nodeSelector" $selector "tolerations" $tolerations "nodeConfig" $conf) -}}
{{- end -}}
{{- if and (has "default" $names) (gt (len $names) 1) -}}
{{- fail "roce-tune chart: the node pool named default cannot have sibling pools: its DaemonSet's selector (app.kubernetes.io/name: roce-tune, the one releases before node pools had, which Kubernetes cannot change in place) selects every other pool's pods too. Name every pool (helm upgrade replaces the DaemonSet roce-tune with one per pool)" -}}
{{- end -}}
{{- toJson $pools -}}
{{- end }}

{{/* The ConfigMap of one pool's node config (templates/node-config.yaml renders one per pool;
the pool's DaemonSet carries its checksum). Takes (dict "root" $ "pool" <a pool of
roce-tune.pools>). */}}
{{- define "roce-tune.nodeConfigMap" -}}
{{- $conf := .pool.nodeConfig -}}
{{- if and $conf.sysfsRoot (ne $conf.sysfsRoot "/sys") }}
{{- fail (printf "roce-tune chart: nodeConfig.sysfsRoot %s is a test tree (README, \"Node config\"); a node's sysfs is /sys" $conf.sysfsRoot) }}
{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .pool.configMap }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "roce-tune.labels" .root | nindent 4 }}
    {{- with .pool.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
data:
  node.json: |
    {{- toPrettyJson $conf | nindent 4 }}
{{- end }}

{{/*
Where the kubelet's liveness probe finds the agent's /healthz, from a pool's nodeConfig: the
host and port of its metricsAddress (src/agent/http.rs parse_address: an IP literal, [v6] in
brackets), an unspecified address (0.0.0.0, [::]) reached on loopback. The kubelet runs an
httpGet probe from the host's network namespace, and the pod is hostNetwork: the host's
loopback is the agent's. As JSON: {"host": ..., "port": ...}.
*/}}
{{- define "roce-tune.probeTarget" -}}
{{- $addr := .metricsAddress | default "127.0.0.1:9662" -}}
{{- $host := regexReplaceAll "^\\[?(.*?)\\]?:[0-9]+$" $addr "${1}" -}}
{{- $port := regexReplaceAll "^.*:([0-9]+)$" $addr "${1}" | atoi -}}
{{- if eq $host "0.0.0.0" -}}
{{- $host = "127.0.0.1" -}}
{{- else if regexMatch "^[0:]+$" $host -}}
{{- $host = "::1" -}}
{{- end -}}
{{- if eq $port 0 -}}
{{- fail (printf "roce-tune chart: nodeConfig.metricsAddress %s has port 0 (any free port): the liveness probe could not find /healthz; give a port, or set agent.livenessProbe.enabled=false" $addr) -}}
{{- end -}}
{{- toJson (dict "host" $host "port" $port) -}}
{{- end }}
