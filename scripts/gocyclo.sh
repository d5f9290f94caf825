#!/usr/bin/env bash
# Prints the path of the pinned gocyclo, building it once (scripts/gotool.sh).
exec "$(dirname "$0")/gotool.sh" gocyclo github.com/fzipp/gocyclo/cmd/gocyclo v0.6.0
