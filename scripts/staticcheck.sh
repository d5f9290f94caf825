#!/usr/bin/env bash
# Prints the path of the pinned staticcheck, building it first if it is not cached.
# Built from the Go module proxy into .tools/staticcheck-VERSION/ (git-ignored), as
# scripts/helm.sh does for helm: pinned so that a new release's checks never turn CI
# red on a commit that did not change.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2
dir="$PWD/.tools/staticcheck-$STATICCHECK_VERSION"
if [ ! -x "$dir/staticcheck" ]; then
  echo "staticcheck.sh: building staticcheck $STATICCHECK_VERSION into $dir (once)" >&2
  mkdir -p "$dir"
  # Built in a scratch directory and moved in whole, so an interrupted build never
  # leaves a binary that looks cached.
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" >&2
  mv "$tmp/staticcheck" "$dir/staticcheck"
fi
echo "$dir/staticcheck"
