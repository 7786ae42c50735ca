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

{{- define "roce-tune.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The platform's entry of .Values.platforms (the schema allows only the three). */}}
{{- define "roce-tune.platform" -}}
{{- toJson (index .Values.platforms .Values.platform) -}}
{{- end }}

{{/* node.json's stateDir: the DaemonSet mounts the same host path (src/node.rs default). */}}
{{- define "roce-tune.stateDir" -}}
{{ .Values.nodeConfig.stateDir | default "/run/cni/roce-tune" }}
{{- end }}

{{/*
Whether the metrics objects are rendered: not during an uninstall, where no agent runs.
The agent's address must be loopback: kube-rbac-proxy is the only way in (src/node.rs
DEFAULT_METRICS_ADDRESS; check-conf refuses any other address).
*/}}
{{- define "roce-tune.metrics" -}}
{{- if and .Values.metrics.enabled (not .Values.uninstall.enabled) -}}
{{- $addr := .Values.nodeConfig.metricsAddress | default "127.0.0.1:9662" -}}
{{- if not (regexMatch "^(127\\.[0-9.]+|\\[(0{0,4}:){2,7}0{0,3}1\\]):[0-9]+$" $addr) -}}
{{- fail (printf "roce-tune chart: metrics.enabled needs a loopback nodeConfig.metricsAddress, not %s: the agent would be reachable without kube-rbac-proxy" $addr) -}}
{{- end -}}
true
{{- end -}}
{{- end }}
