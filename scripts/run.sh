#!/usr/bin/env bash
# Builds gpuwatch and runs it with the given flags (default: serve on :9410
# from the NVIDIA driver). Without a GPU, run the simulator:
#   ./scripts/run.sh --backend=sim --sim.profile=dgx-h100
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory build >&2
exec ./bin/gpuwatch "$@"
