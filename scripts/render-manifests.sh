#!/usr/bin/env bash
# Renders the plain Kubernetes manifests of deploy/kubernetes from the Helm chart:
#   gpuwatch.yaml             ServiceAccount, Service, DaemonSet, NetworkPolicy (kubectl apply, no operator)
#   prometheus-operator.yaml  ServiceMonitor and PrometheusRule (needs the operator's CRDs)
#   grafana-dashboards.yaml   the dashboards, one ConfigMap each, for Grafana's sidecar
# Usage: scripts/render-manifests.sh OUTDIR (make manifests writes deploy/kubernetes;
# test/deploy renders into a temporary directory and compares).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: render-manifests.sh OUTDIR}
helm=${HELM_BIN:-$(./scripts/helm.sh)}
chart=deploy/helm/gpuwatch
mkdir -p "$out"

render() { # render FILE TEMPLATE... -- HELM_ARGS...
  local file=$1; shift
  local shows=()
  while [ "$1" != "--" ]; do shows+=(--show-only "templates/$1"); shift; done
  shift
  {
    echo "# Rendered from deploy/helm/gpuwatch by scripts/render-manifests.sh (make manifests)."
    echo "# Do not edit: change the chart and render again."
    "$helm" template gpuwatch "$chart" --namespace gpuwatch "${shows[@]}" "$@"
  } > "$out/$file.tmp"
  mv "$out/$file.tmp" "$out/$file"
}

render gpuwatch.yaml serviceaccount.yaml service.yaml daemonset.yaml networkpolicy.yaml --
# The PrometheusRule renders only when the chart carries rule files (make chart-files).
operator_templates=(servicemonitor.yaml)
if compgen -G "$chart/files/prometheus/*.yml" >/dev/null; then operator_templates+=(prometheusrule.yaml); fi
render prometheus-operator.yaml "${operator_templates[@]}" -- \
  --set serviceMonitor.enabled=true --set prometheusRule.enabled=true
render grafana-dashboards.yaml dashboards-configmap.yaml --
