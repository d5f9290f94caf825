#!/usr/bin/env bash
# Prints the path of the pinned actionlint, building it once (scripts/gotool.sh).
exec "$(dirname "$0")/gotool.sh" actionlint github.com/rhysd/actionlint/cmd/actionlint v1.7.12
