#!/usr/bin/env bash
# podman on the project's own image store (.cache/podman, git-ignored), so
# building the release image touches no system-wide store. make image and
# test/release both go through here. overlay storage: copy-on-write layers
# (vfs would copy the whole builder root per step).
#
# The runroot (sockets and lock files, nothing that must survive a reboot)
# lives in a short path under /tmp: podman refuses a runroot longer than 50
# characters, which a checkout in any ordinary home directory would give.
# Its name is tied to the store, so two checkouts never share one. A store
# made before this keeps its old runroot ($store/run): podman refuses to
# open a store with a runroot other than the one it was made with.
set -euo pipefail
store="$(cd "$(dirname "$0")/../.." && pwd)/.cache/podman"
runroot="$store/run"
if [ ! -d "$runroot" ] || [ "${#runroot}" -gt 50 ]; then
  store_id=$(printf '%s' "$store" | sha256sum | cut -c1-12)
  runroot="/tmp/gpuwatch-podman-$(id -u)-$store_id"
fi
exec podman --root "$store/root" --runroot "$runroot" --storage-driver overlay \
  --cgroup-manager cgroupfs --events-backend file "$@"
