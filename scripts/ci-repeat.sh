#!/usr/bin/env bash
# Runs CI (.ci/run, CI=true) N times in a row, each in a fresh clone of the
# current commit, as issue 10's "a fresh clone's ./scripts/test.sh passes
# ten times in a row" asks. Stops at the first failure. One line per run
# goes to stdout and to $CI_REPEAT_LOG (default build/ci-repeat/results.txt);
# each run's whole output to build/ci-repeat/runN.log.
#   ./scripts/ci-repeat.sh        ten runs
#   ./scripts/ci-repeat.sh 3      three
#   CI_REPEAT_COMMIT=abc1234 ./scripts/ci-repeat.sh 4
#                                 four of that commit instead of HEAD (to go
#                                 on with a streak begun earlier)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
repo=$PWD
sha=$(git rev-parse --verify "${CI_REPEAT_COMMIT:-HEAD}^{commit}") || exit 2
logs=$repo/build/ci-repeat
mkdir -p "$logs"
results=${CI_REPEAT_LOG:-$logs/results.txt}
for n in $(seq 1 "$runs"); do
  dir=$(mktemp -d /tmp/gpuwatch-ci-repeat.XXXXXX)
  git clone -q "$repo" "$dir/repo" && git -C "$dir/repo" checkout -q "$sha"
  start=$SECONDS
  (cd "$dir/repo" && CI=true ./.ci/run) > "$logs/run$n.log" 2>&1
  rc=$?
  line="run $n of $runs, commit ${sha:0:7}: exit $rc in $((SECONDS - start))s, ended $(date -u +%FT%TZ)"
  echo "$line" | tee -a "$results"
  chmod -R u+w "$dir" 2>/dev/null; rm -rf "$dir"
  if [ $rc -ne 0 ]; then
    echo "run $n failed; its output: $logs/run$n.log" >&2
    exit 1
  fi
done
echo "$runs runs in a row passed at ${sha:0:7}" | tee -a "$results"
