#!/usr/bin/env bash
# Prints the path of the pinned modernize analyzer (golang.org/x/tools), built once
# (scripts/gotool.sh).
exec "$(dirname "$0")/gotool.sh" modernize golang.org/x/tools/go/analysis/passes/modernize/cmd/modernize v0.52.0
