#!/usr/bin/env bash
# Prints the path of the pinned actionlint, building it first if it is not cached.
# Built from the Go module proxy into .tools/actionlint-VERSION/ (git-ignored), as
# scripts/helm.sh does for helm: pinned so that a new release's checks never turn CI
# red on a commit that did not change.
set -euo pipefail
cd "$(dirname "$0")/.."

ACTIONLINT_VERSION=v1.7.12
dir="$PWD/.tools/actionlint-$ACTIONLINT_VERSION"
if [ ! -x "$dir/actionlint" ]; then
  echo "actionlint.sh: building actionlint $ACTIONLINT_VERSION into $dir (once)" >&2
  mkdir -p "$dir"
  # Built in a scratch directory and moved in whole, so an interrupted build never
  # leaves a binary that looks cached.
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" >&2
  mv "$tmp/actionlint" "$dir/actionlint"
fi
echo "$dir/actionlint"
