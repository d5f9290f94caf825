#!/usr/bin/env bash
# The release version: the newest v* tag as git describes it, else the
# VERSION file (no tags yet, or a source tarball without .git).
# git describe's dashes become dots (v1.2.0-3-gabc1234-dirty ->
# 1.2.0.3.gabc1234.dirty, three commits after v1.2.0), because one string
# must be a valid .deb version, .rpm version (no "-") and image tag (no "+").
set -euo pipefail
cd "$(dirname "$0")/../.."
if tag=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
  tag="${tag#v}"
  echo "${tag//-/.}"
else
  tr -d '[:space:]' <VERSION
  echo
fi
