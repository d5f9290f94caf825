#!/usr/bin/env bash
# Copies the shipped Grafana dashboards, Prometheus rule files and node-problem-detector
# monitor into the Helm chart, which can template only files inside its own directory.
# Run after changing any
# (make chart-files); test/deploy fails while the copies differ from the originals.
set -euo pipefail
cd "$(dirname "$0")/.."

chart=deploy/helm/gpuwatch
sync() { # sync SRC_DIR GLOB DST_DIR: DST_DIR ends up holding exactly SRC_DIR/GLOB
  local src=$1 glob=$2 dst=$3
  rm -rf "$dst"
  mkdir -p "$dst"
  shopt -s nullglob
  for f in "$src"/$glob; do
    case "$(basename "$f")" in *test*) continue ;; esac # promtool unit tests stay out
    cp "$f" "$dst/"
  done
}
sync deploy/grafana/dashboards '*.json' "$chart/files/grafana"
sync deploy/prometheus '*.yml' "$chart/files/prometheus"
sync deploy/kubernetes/node-problem-detector '*.json' "$chart/files/node-problem-detector"
