{{/* Chart name, truncated to the 63 characters a label value may hold. */}}
{{- define "gpuwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object name: the release name, plus the chart's unless it already contains it. */}}
{{- define "gpuwatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpuwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpuwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpuwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: exporter
{{- end }}

{{- define "gpuwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpuwatch.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gpuwatch.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* True when gpuwatch reads a web configuration file. */}}
{{- define "gpuwatch.webConfigEnabled" -}}
{{- if or .Values.webConfig.existingSecret .Values.webConfig.tls.enabled .Values.webConfig.basicAuth.enabled }}true{{ end }}
{{- end }}

{{- define "gpuwatch.webConfigSecretName" -}}
{{- default (printf "%s-web-config" (include "gpuwatch.fullname" .)) .Values.webConfig.existingSecret }}
{{- end }}

{{/*
True when the kubelet's HTTP probes can reach /healthz and /readyz: kubelet probes carry no
password (basic auth answers 401), and with webConfig.existingSecret the chart cannot know
whether the Secret turns TLS or basic auth on. Otherwise the probes check the TCP port.
*/}}
{{- define "gpuwatch.httpProbes" -}}
{{- if not (or .Values.webConfig.basicAuth.enabled .Values.webConfig.existingSecret) }}true{{ end }}
{{- end }}

{{/* http or https, for the probes and the monitors. */}}
{{- define "gpuwatch.scheme" -}}
{{- if .Values.webConfig.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/*
Relabelings shared by the ServiceMonitor and the PodMonitor. prometheus-operator sets
namespace, pod, container, service and endpoint target labels; gpuwatch's GPU-owner series
carry pod, namespace and container labels of their own (the workload's), which would
otherwise be renamed exported_pod and so on, or, with honorLabels, be replaced by gpuwatch's
own pod wherever the owner label is empty. Dropping the target's copies keeps the owner's.
The node name becomes instance (stable across pod restarts) and node.
*/}}
{{- define "gpuwatch.relabelings" -}}
- action: replace
  sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: instance
- action: replace
  sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: node
{{- if ne (include "gpuwatch.targetLabels" .) "dcgm-exporter" }}
- action: labeldrop
  regex: (pod|namespace|container|service|endpoint)
{{- end }}
{{- end }}

{{/*
targetLabels resolves .Values.monitorTargetLabels: what the target's own
pod, namespace, container, service and endpoint labels do. "drop": they are
dropped, so gpuwatch's pod/namespace/container labels (the GPU's owner) reach
Prometheus intact. "dcgm-exporter": on the DCGM_FI_* series only, the
outcome of dcgm-exporter's chart (honorLabels: false): the series' own pod,
namespace and container become exported_pod, exported_namespace and
exported_container, and the target's take their place; every other series
ends as with "drop". "auto": dcgm-exporter when compat includes dcgm.
*/}}
{{- define "gpuwatch.targetLabels" -}}
{{- $v := .Values.monitorTargetLabels | default "auto" }}
{{- if eq $v "auto" }}
{{- if has "dcgm" (splitList "," .Values.compat) }}dcgm-exporter{{ else }}drop{{ end }}
{{- else }}{{ $v }}{{ end }}
{{- end }}

{{/*
metricRelabelings of a ServiceMonitor or PodMonitor endpoint. With
monitorTargetLabels dcgm-exporter the target keeps its labels, so Prometheus
(honorLabels: false) renames every series' pod, namespace and container to
exported_*, as for dcgm-exporter; these rules undo that on every series but
the DCGM_FI_* ones: pod, namespace and container back from exported_* (or
removed, where the series had none), service, endpoint and exported_*
removed. They run before the monitor's own metricRelabelings.
*/}}
{{- define "gpuwatch.metricRelabelings" -}}
{{- if eq (include "gpuwatch.targetLabels" .) "dcgm-exporter" }}
- action: replace
  sourceLabels: [__name__]
  regex: DCGM_FI_.+
  targetLabel: gpuwatch_dcgm
  replacement: "1"
{{- range list "pod" "namespace" "container" }}
- action: replace
  sourceLabels: [gpuwatch_dcgm, exported_{{ . }}]
  regex: ;(.*)
  targetLabel: {{ . }}
- action: replace
  sourceLabels: [gpuwatch_dcgm]
  regex: ^$
  targetLabel: exported_{{ . }}
  replacement: ""
{{- end }}
{{- range list "service" "endpoint" }}
- action: replace
  sourceLabels: [gpuwatch_dcgm]
  regex: ^$
  targetLabel: {{ . }}
  replacement: ""
{{- end }}
- action: labeldrop
  regex: gpuwatch_dcgm
{{- end }}
{{- end }}

{{/*
TLS and basic auth of a ServiceMonitor or PodMonitor endpoint, when gpuwatch serves them.
*/}}
{{- define "gpuwatch.monitorAuth" -}}
{{- $v := .Values }}
{{- if $v.webConfig.tls.enabled }}
tlsConfig:
  {{- toYaml $v.scrapeClient.tlsConfig | nindent 2 }}
{{- end }}
{{- if $v.webConfig.basicAuth.enabled }}
{{- $s := $v.scrapeClient.basicAuthSecret }}
basicAuth:
  username:
    name: {{ required "scrapeClient.basicAuthSecret.name: name the Secret holding the scrape user and password" $s.name }}
    key: {{ $s.usernameKey }}
  password:
    name: {{ $s.name }}
    key: {{ $s.passwordKey }}
{{- end }}
{{- end }}
