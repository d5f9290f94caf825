#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs its own dependencies first.
#   ./scripts/test.sh            everything
#   ./scripts/test.sh -short     unit tests only (no Prometheus, Slurm, Podman)
set -euo pipefail
cd "$(dirname "$0")/.."
# The Makefile's cgo flags, so that go vet and go test reuse make build's
# compile of go-nvml instead of compiling it again with other flags, and
# print none of the deprecation warnings the Makefile explains.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

short=""
if [ "${1:-}" = "-short" ]; then short="-short"; else ./scripts/install-deps.sh; fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted" >&2; exit 1; fi

echo "== go vet"
go vet ./...

# The slow linters run in the background beside go test, after the -race
# pass (below): while test/e2e waits on its servers the CPUs have room for
# them. Each runs even when an earlier one found something; the status
# says whether any did.
slow_lints() {
  local rc=0 findings
  echo "== go vet (windows/amd64, no cgo)"
  # The Windows build and every package's tests for it: a Linux-only call
  # outside a platform file (_linux.go, _windows.go) or a build tag fails
  # here, not on a Windows machine. Tests of what only Linux or the cgo
  # build has (procfs, Slurm, the simulator) carry //go:build linux or cgo.
  GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go vet ./... || rc=1

  echo "== staticcheck"
  # Pinned, built once into .tools/ (scripts/staticcheck.sh); zero findings allowed.
  "$(./scripts/staticcheck.sh)" ./... || rc=1

  echo "== modernize"
  # golang.org/x/tools' modernize analyzer, pinned (scripts/modernize.sh): one idiom
  # per thing (slices, maps, range over int, min/max); zero findings allowed. The
  # findings it reports in cgo's generated files (under the build cache) are not ours.
  findings=$("$(./scripts/modernize.sh)" ./... 2>&1 | grep -F "$PWD/" || true)
  if [ -n "$findings" ]; then
    echo "$findings" >&2
    echo "modernize: run \"\$(./scripts/modernize.sh)\" -fix ./..." >&2
    rc=1
  fi
  return "$rc"
}

echo "== gocyclo"
# Cyclomatic complexity at most 20 per function (fzipp/gocyclo, pinned:
# scripts/gocyclo.sh): a longer one is split into named steps. Tests and
# generated files (*_gen.go) are not held to it.
"$(./scripts/gocyclo.sh)" -over 20 -ignore '_test\.go$|_gen\.go$' $(git ls-files '*.go' 2>/dev/null || find . -name '*.go') >&2 ||
  { echo "gocyclo: split the functions above into named steps (CONTRIBUTING.md, Linters)" >&2; exit 1; }

echo "== actionlint"
# The release workflow cannot run here (no network, no registry): lint it,
# with shellcheck on its run: steps.
"$(./scripts/actionlint.sh)"

echo "== build"
make --no-print-directory build

if [ -z "$short" ]; then
  echo "== fake libnvidia-ml.so.1 per driver branch"
  make --no-print-directory fakenvml
fi

echo "== go test, and beside it make release image, test/release, go test -race (concurrent packages) and the slow linters"
# The -race pass runs beside the plain one: test/e2e, the longest package,
# spends most of its time waiting on Prometheus, Slurm and simulated time,
# so the two CPUs have room for it (tests are held to passing beside two
# CPU hogs, docs/testing.md, Flakiness). It stays in the background: none
# of its packages needs SIGINT, which a background job starts with ignored
# (test/e2e's TestLocalStack does, so the plain pass is the foreground one).
# make release image and test/release come first in that job, the slow
# linters last; its output goes to a file, printed once it ends. The
# real-Slurm tests are left out of the -race pass: they run no goroutines
# of their own and the plain pass runs them; the code they reach is raced
# by the fakes' tests.
bg_log="$PWD/build/test-background.log"
mkdir -p build
{
  rc=0
  if [ -z "$short" ]; then
    echo "== release (make release image)"
    # Release binaries for glibc >= 2.17, packages and the container image,
    # checked by test/release, which runs here, after it, and not in the
    # plain pass.
    start=$SECONDS
    if make --no-print-directory release image; then
      echo "release and image took $((SECONDS - start))s"
    else
      rc=1
    fi
  fi
  echo "== go test ./test/release"
  go test $short -count=1 ./test/release || rc=1
  echo "== go test -race (concurrent packages)"
  go test $short -count=1 -race -skip '^(TestRealSlurm|TestAdminCommentNotFooledByTheJobNameOnRealSlurm)$' \
    ./internal/pipeline/... ./internal/backend/... ./internal/exporter/... ./internal/attribution/... ./internal/slurm/... \
    ./internal/server/... ./internal/webui/... ./internal/accounting/... ./internal/grpcunix/... ./internal/jobs/... || rc=1
  slow_lints || rc=1
  exit "$rc"
} >"$bg_log" 2>&1 &
bg_pid=$!
trap 'kill "$bg_pid" 2>/dev/null || true' EXIT

# The binary the end-to-end tests drive is the one just built. The live
# page's screenshot is kept in build/screenshots to be looked at.
# The timeout guards against a hang, not a speed target: test/e2e, the
# longest package, must not fail for being slow on a busy CI machine.
# go test starts packages in the order given, two at a time: the longest
# first, so that the short ones fill the other slot rather than test/e2e
# starting last and running alone (docs/testing.md, Where the suite's time goes).
# Every package but test/release, which the background job runs.
mapfile -t packages < <(go list ./... | grep -vx "$(go list -m)/test/release")
status=0
UI_SCREENSHOT_DIR="${UI_SCREENSHOT_DIR:-$PWD/build/screenshots}" \
GPUWATCH_BIN="$PWD/bin/gpuwatch" GPUWATCH_FAKENVML="$PWD/build/fakenvml" go test $short -count=1 -timeout 25m \
  ./test/e2e ./test/faults ./test/wine ./test/deploy "${packages[@]}" || status=$?

bg_status=0
wait "$bg_pid" || bg_status=$?
trap - EXIT
cat "$bg_log"
if [ "$status" -ne 0 ] || [ "$bg_status" -ne 0 ]; then
  echo "go test: exit $status; the background job (release, test/release, -race, slow linters): exit $bg_status" >&2
  exit 1
fi
