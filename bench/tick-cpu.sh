#!/bin/bash
# What an accounting tick costs against how many processes it reads:
# `gpuwatch serve --backend=sim` on the fleet of bench/accounting-cpu.sh (a
# DGX H100, GPU 7 in MIG mode) with N busy processes on each GPU, for each
# N given, REPLICAS (default 2) processes of each side by side, all scraped
# every 15 s; the ticks' own CPU (gpuwatch_accounting_cpu_seconds_total
# over gpuwatch_accounting_ticks_total) over SECS seconds after WARMUP
# (default 60). The N = 1 processes give a tick's fixed cost; the slope to
# the larger N, its cost per process.
#   bench/tick-cpu.sh 240 1 32 256     # after make build
# GPUWATCH_BIN overrides bin/gpuwatch. (bench/RESULTS.md, "Midday
# 2026-11-29: what a tick's CPU is made of".)
set -euo pipefail
secs=${1:?usage: bench/tick-cpu.sh SECS N [N ...]}
shift
replicas=${REPLICAS:-2}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

names=(); ports=()
for n in "$@"; do
	accounting_fleet "$n" >"$tmp/fleet-$n.yaml"
	for r in $(seq "$replicas"); do
		port=$(free_port)
		"$bin" serve --backend=sim --sim.config="$tmp/fleet-$n.yaml" --attribution.revalidate-interval=1h \
			--web.listen-address=127.0.0.1:"$port" >/dev/null 2>&1 &
		pids+=("$!"); names+=("$n#$r"); ports+=("$port")
	done
done
(while :; do
	for p in "${ports[@]}"; do curl -fs --compressed -o /dev/null "http://127.0.0.1:$p/metrics" || true; done
	sleep 15
done) &
pids+=("$!")
sleep "${WARMUP:-60}"

ticks() { # port -> "cpu_seconds ticks"
	curl -fs --compressed "http://127.0.0.1:$1/metrics" |
		awk '$1 == "gpuwatch_accounting_cpu_seconds_total" {c = $2} $1 == "gpuwatch_accounting_ticks_total" {t = $2} END {print c, t}'
}
before=()
for p in "${ports[@]}"; do before+=("$(ticks "$p")"); done
sleep "$secs"
echo "processes per GPU #process: the ticks' CPU over ${secs} s"
for i in "${!ports[@]}"; do
	read -r c0 t0 <<<"${before[$i]}"
	read -r c1 t1 <<<"$(ticks "${ports[$i]}")"
	awk -v n="${names[$i]}" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v s="$secs" \
		'BEGIN {printf "%-8s %6.2f ms a minute, %4.0f us a tick (%d ticks)\n", n, (c1 - c0) * 1e3 * 60 / s, (c1 - c0) * 1e6 / (t1 - t0), t1 - t0}'
done
