#!/usr/bin/env bash
# Prints the path of the pinned staticcheck, building it once (scripts/gotool.sh).
exec "$(dirname "$0")/gotool.sh" staticcheck honnef.co/go/tools/cmd/staticcheck v0.8.2
