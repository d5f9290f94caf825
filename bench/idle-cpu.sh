#!/bin/bash
# What an idle gpuwatch costs: `gpuwatch serve --backend=sim` processes
# side by side, never scraped, each a VARIANT of environment and flags;
# their CPU time over SECS seconds (after 10 s of start-up) from every
# thread's /proc/PID/task/*/schedstat, in ms a minute. Each VARIANT is
# NAME:ENV:FLAGS, ENV and FLAGS space-separated (either may be empty):
#   bench/idle-cpu.sh 120 'on::' 'off::--no-accounting' 'p64:GOMAXPROCS=64:' \
#     'p64-off:GOMAXPROCS=64:--no-accounting'
#   bench/idle-cpu.sh 120 'off::--no-accounting' 'off-noxid::--no-accounting --no-collector.xid'
# PROFILE (default dgx-h100) is the simulator's profile. Processes of the
# same flags differ by a few ms a minute, steadily: run each variant twice
# (two NAMEs) to see how much. After make build; GPUWATCH_BIN overrides
# bin/gpuwatch. (bench/RESULTS.md, "GOMAXPROCS: what an idle gpuwatch pays
# per CPU of the host".)
set -euo pipefail
secs=${1:?usage: bench/idle-cpu.sh SECS NAME:ENV:FLAGS ...}
shift
profile=${PROFILE:-dgx-h100}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

names=()
for variant in "$@"; do
	IFS=: read -r name env flags <<<"$variant"
	read -ra envs <<<"$env"
	read -ra args <<<"$flags"
	env "${envs[@]}" "$bin" serve --backend=sim --sim.profile="$profile" --attribution.revalidate-interval=1h \
		--web.listen-address=127.0.0.1:"$(free_port)" "${args[@]}" >/dev/null 2>&1 &
	pids+=("$!")
	names+=("$name")
done
sleep 10

# run_ns PID: nanoseconds every thread of PID has run.
run_ns() {
	local total=0 t
	for t in /proc/"$1"/task/*/schedstat; do total=$((total + $(cut -d' ' -f1 "$t"))); done
	echo "$total"
}
before=()
for p in "${pids[@]}"; do before+=("$(run_ns "$p")"); done
sleep "$secs"
for i in "${!pids[@]}"; do
	after=$(run_ns "${pids[$i]}")
	awk -v n="${names[$i]}" -v d=$((after - before[i])) -v s="$secs" 'BEGIN {printf "%-14s %6.1f ms a minute\n", n, d / 1e6 * 60 / s}'
done
