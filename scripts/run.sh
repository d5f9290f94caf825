#!/usr/bin/env bash
# Builds gpuwatch and runs it with the given flags (default: serve on :9410
# from the NVIDIA driver).
#
# On a machine without NVIDIA's driver library (gpuwatch exits with status 69,
# "no NVIDIA driver on this host") it starts the demo instead: simulated
# dgx-h100 GPUs with owners, said so on the console and on the page. Any other
# driver error is reported as it is, never hidden behind the demo; the gpuwatch
# binary itself never falls back to the simulator. Naming --backend yourself
# turns the fallback off.
#
#   GPUWATCH_BIN=path   run that binary instead of building one (the tests do)
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${GPUWATCH_BIN:-}"
if [ -z "$bin" ]; then
  make --no-print-directory build >&2
  bin=./bin/gpuwatch
fi

# The fallback applies only when the user left the backend to us.
for arg in "$@"; do
  case "$arg" in
    --backend|--backend=*) exec "$bin" "$@" ;;
  esac
done

# One read of the GPUs tells a host without a driver library (69) from every
# other outcome; those go on to the real command, which reports its own error.
status=0
"$bin" ps --no-attribution >/dev/null 2>&1 || status=$?
if [ "$status" -ne 69 ]; then
  exec "$bin" "$@"
fi

# The demo keeps its job records in a temporary accounting directory (unless
# the user named one), removed when it stops, so that `gpuwatch job` works.
acct_flag=()
acct=""
for arg in "$@"; do
  case "$arg" in
    --accounting.dir|--accounting.dir=*|--no-accounting) acct=given ;;
  esac
done
if [ -z "$acct" ]; then
  acct=$(mktemp -d "${TMPDIR:-/tmp}/gpuwatch-demo.XXXXXX")
  chmod 0700 "$acct"
  acct_flag=(--accounting.dir="$acct")
fi

# The page to open: the last --web.listen-address given (gpuwatch's default
# port otherwise), on this host when the address names none.
listen=":9410"
prev=""
for arg in "$@"; do
  case "$arg" in
    --web.listen-address=*) listen="${arg#*=}" ;;
  esac
  if [ "$prev" = "--web.listen-address" ]; then listen="$arg"; fi
  prev="$arg"
done
host="${listen%:*}"
case "$host" in
  ""|0.0.0.0|"[::]") host=localhost ;;
esac
page="http://$host:${listen##*:}/"

cat >&2 <<BANNER
================================================================================
 gpuwatch DEMO: no NVIDIA driver on this machine (libnvidia-ml.so.1 not found),
 so these are SIMULATED GPUs (a dgx-h100: 8 H100s) with simulated owners.
 Open the live page: $page
 On a GPU node the same command serves the real GPUs; see README, Install.
BANNER
if [ ${#acct_flag[@]} -gt 0 ]; then
  cat >&2 <<BANNER
 Job records: $acct (removed when the demo stops); the demo's Slurm job:
   $bin job 4211 --accounting.dir=$acct
BANNER
fi
echo "================================================================================" >&2
if [ ${#acct_flag[@]} -eq 0 ]; then
  exec "$bin" --backend=sim --sim.profile=dgx-h100 "$@"
fi
"$bin" --backend=sim --sim.profile=dgx-h100 "${acct_flag[@]}" "$@" &
pid=$!
signalled=""
trap 'signalled=1; kill -INT "$pid" 2>/dev/null || true' INT TERM
status=0
wait "$pid" || status=$?
# A trapped signal ends wait early (128 + the signal) while gpuwatch shuts
# down, or after it already ended of the same signal sent to the whole
# group: wait again for gpuwatch's own status (127: it was already reaped).
while [ -n "$signalled" ]; do
  signalled=""
  status=0
  wait "$pid" 2>/dev/null || { s=$?; [ "$s" -eq 127 ] || status=$s; }
done
rm -rf -- "$acct"
exit "$status"
