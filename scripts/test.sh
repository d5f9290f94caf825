#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs its own dependencies first.
#   ./scripts/test.sh            everything
#   ./scripts/test.sh -short     unit tests only (no Prometheus, Slurm, Podman)
set -euo pipefail
cd "$(dirname "$0")/.."

short=""
if [ "${1:-}" = "-short" ]; then short="-short"; else ./scripts/install-deps.sh; fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted" >&2; exit 1; fi

echo "== go vet"
go vet ./...

echo "== build"
make --no-print-directory build

echo "== go test"
# The binary the end-to-end tests drive is the one just built.
GPUWATCH_BIN="$PWD/bin/gpuwatch" go test $short -count=1 -timeout 15m ./...

echo "== go test -race (concurrent packages)"
go test $short -count=1 -race ./internal/pipeline/... ./internal/backend/... ./internal/exporter/... ./internal/attribution/... ./internal/slurm/... ./internal/server/...
