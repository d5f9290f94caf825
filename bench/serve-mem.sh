#!/bin/bash
# A whole serve's private memory and CPU: `gpuwatch serve --backend=sim`
# processes side by side at their defaults (the demo's owners, accounting,
# XID waiters), each scraped with gzip every 15 s as by one Prometheus; after
# WARM seconds (default 40), over SECS seconds: CPU seconds (utime + stime of
# /proc/PID/stat), context switches of every thread, and RssAnon at the end.
# Each VARIANT is NAME:BIN:FLAGS, BIN a gpuwatch binary (empty: GPUWATCH_BIN,
# else bin/gpuwatch) and FLAGS space-separated extra flags:
#   bench/serve-mem.sh 90 before:/tmp/before: after:bin/gpuwatch: \
#     'after-nok8s:bin/gpuwatch:--cri.socket= --kubelet.pod-resources-socket='
# PROFILE (default dgx-h100) is the simulator's profile. Run it a few times:
# memory moves little between rounds, CPU with the machine's load.
# (bench/RESULTS.md, "Machinery kept or removed".)
set -euo pipefail
secs=${1:?usage: bench/serve-mem.sh SECS NAME:BIN:FLAGS ...}
shift
warm=${WARM:-40}
profile=${PROFILE:-dgx-h100}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

names=() ports=()
for variant in "$@"; do
	IFS=: read -r name vbin flags <<<"$variant"
	read -ra args <<<"$flags"
	port=$(free_port)
	"${vbin:-$bin}" serve --backend=sim --sim.profile="$profile" --web.listen-address=127.0.0.1:"$port" \
		"${args[@]}" >"$tmp/$name.log" 2>&1 &
	pids+=("$!")
	names+=("$name")
	ports+=("$port")
done
for port in "${ports[@]}"; do
	(
		while true; do
			curl -s -H 'Accept-Encoding: gzip' -o /dev/null "http://127.0.0.1:$port/metrics" || true
			sleep 15
		done
	) &
	pids+=("$!")
done

# cpu_ticks PID: user and system clock ticks of PID so far.
cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
# switches PID: voluntary and involuntary context switches of every thread.
switches() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {n += $2} END {print n}'; }

sleep "$warm"
cpu0=() sw0=()
for i in "${!names[@]}"; do
	cpu0+=("$(cpu_ticks "${pids[$i]}")")
	sw0+=("$(switches "${pids[$i]}")")
done
sleep "$secs"
hz=$(getconf CLK_TCK)
printf '%-14s %10s %10s %12s\n' variant cpu_s switches rssanon_mib
for i in "${!names[@]}"; do
	p=${pids[$i]}
	rss=$(awk '/^RssAnon:/ {print $2}' /proc/"$p"/status)
	awk -v n="${names[$i]}" -v c=$(($(cpu_ticks "$p") - cpu0[i])) -v hz="$hz" -v s=$(($(switches "$p") - sw0[i])) -v r="$rss" \
		'BEGIN {printf "%-14s %10.2f %10d %12.1f\n", n, c / hz, s, r / 1024}'
done
