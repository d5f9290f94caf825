#!/usr/bin/env bash
# The release version: the newest v* tag as git describes it (v1.2.0 ->
# 1.2.0, or 1.2.0-3-gabc1234 three commits later), else the VERSION file
# (no tags yet, or a source tarball without .git).
set -euo pipefail
cd "$(dirname "$0")/../.."
if tag=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
  echo "${tag#v}"
else
  tr -d '[:space:]' <VERSION
  echo
fi
