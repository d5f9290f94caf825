#!/usr/bin/env bash
# gotool.sh NAME PACKAGE VERSION: prints the path of a pinned Go tool, building it
# first (go install from the module proxy) into .tools/NAME-VERSION/ (git-ignored)
# if it is not cached there. Pinned so that a new release can never turn CI red on
# a commit that did not change; a new VERSION gets its own directory.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: gotool.sh NAME PACKAGE VERSION} pkg=${2:?usage: gotool.sh NAME PACKAGE VERSION} version=${3:?usage: gotool.sh NAME PACKAGE VERSION}

dir="$PWD/.tools/$name-$version"
if [ ! -x "$dir/$name" ]; then
  echo "gotool.sh: building $name $version into $dir (once)" >&2
  mkdir -p "$dir"
  # Built in a scratch directory and moved in whole, so an interrupted build never
  # leaves a binary that looks cached.
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" go install "$pkg@$version" >&2
  mv "$tmp/$name" "$dir/$name"
fi
echo "$dir/$name"
