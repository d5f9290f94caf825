#!/usr/bin/env bash
# podman on the project's own image store (.cache/podman, git-ignored), so
# building the release image touches no system-wide store. make image and
# test/release both go through here. overlay storage: copy-on-write layers
# (vfs would copy the whole builder root per step).
set -euo pipefail
store="$(cd "$(dirname "$0")/../.." && pwd)/.cache/podman"
exec podman --root "$store/root" --runroot "$store/run" --storage-driver overlay \
  --cgroup-manager cgroupfs --events-backend file "$@"
