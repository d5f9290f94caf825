#!/usr/bin/env bash
# Prints the path of the pinned helm, building it first if it is not cached.
# helm is built from the Go module proxy (no release download here), which takes
# about 3 minutes on 2 cores; the binary is kept in .tools/helm-VERSION/ (git-ignored),
# so every later call is instant. A new HELM_VERSION gets its own directory.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.22.0
dir="$PWD/.tools/helm-$HELM_VERSION"
if [ ! -x "$dir/helm" ]; then
  echo "helm.sh: building helm $HELM_VERSION into $dir (a few minutes, once)" >&2
  mkdir -p "$dir"
  # Built in a scratch directory and moved in whole, so an interrupted build never
  # leaves a binary that looks cached.
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  mv "$tmp/helm" "$dir/helm"
fi
echo "$dir/helm"
