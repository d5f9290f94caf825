#!/bin/bash
# CPU cost of the accounting at the process level: four `gpuwatch serve
# --backend=sim` side by side (the 2048-process fleet of
# internal/accounting's benchmarks and the dgx-h100 profile, each with
# --no-accounting and with the default --accounting), all scraped every
# SCRAPE seconds, their CPU time taken over WINDOWS windows of WINDOW
# seconds: the run time of every thread in /proc/PID/task/*/schedstat, in
# nanoseconds (utime+stime in /proc/PID/stat count 10 ms clock ticks, too
# coarse for a tick that costs a fraction of a millisecond). Prints each window and the
# medians, per fleet, and accounting's share on top of the scrapes; for
# the processes with accounting, also the ticks' own CPU as they count it
# (gpuwatch_accounting_cpu_seconds_total, from the scrapes: the thread
# that ticks, without the rest of the process's noise), with the median
# of each window's ticks against the same window's --no-accounting process
# (the machine's load moves both from minute to minute).
# With BASE_BIN set, the same four run from that binary too, alongside
# (a before/after under the same load), their names prefixed "base-".
# EXTRA_ARGS (split on spaces) are added to every process's flags, e.g.
# EXTRA_ARGS=--attribution.revalidate-interval=1h.
# RECORDS=1 keeps job records in the processes with accounting (a
# directory each), as `serve` does by default on a real driver: the
# records' work runs in the ticks and counts in their CPU.
# WARMUP (default 90) is the seconds before the first window.
# REPLICAS (default 1) runs that many of each process, and takes each
# window's mean over them: two processes of the same flags differ by up
# to 15 ms of CPU a minute, steadily, which one pair takes for the
# accounting's cost.
# FAST_INTERVAL (e.g. 1s) adds a process of each fleet with accounting
# at that interval ("-fast"): five times the ticks of the default make a
# difference to --no-accounting that the processes' noise does not hide,
# and the summary divides it by the ticks to give the whole process's CPU
# per tick, and that per tick times the default interval's ticks, against
# --no-accounting (a tick more often finds its caches warmer: the
# ticks' own CPU per tick is printed at both intervals to show by how much).
# Usage: bench/accounting-cpu.sh [WINDOWS [WINDOW [SCRAPE]]] after make build.
set -euo pipefail
windows=${1:-5}
window=${2:-60}
scrape=${3:-15}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

# The fleet: 256 busy processes on each GPU.
accounting_fleet 256 >"$tmp/fleet.yaml"

# An interval in seconds, from a duration in s or ms (1s, 0.5s, 500ms).
seconds() {
	awk -v d="$1" 'BEGIN {
		if (d ~ /^[0-9.]+ms$/) print substr(d, 1, length(d) - 2) / 1000
		else if (d ~ /^[0-9.]+s$/) print substr(d, 1, length(d) - 1) + 0
		else exit 1 }'
}
if [ -n "${FAST_INTERVAL:-}" ]; then
	# Checked before the processes start, not at the summary.
	fast_s=$(seconds "$FAST_INTERVAL") || { echo "FAST_INTERVAL=$FAST_INTERVAL: give it in s or ms, e.g. 1s" >&2; exit 2; }
	default=$("$bin" serve --help 2>&1 | grep -o -- '--accounting.interval=[0-9.a-z]*' | head -1 | cut -d= -f2)
	default_s=$(seconds "$default") || { echo "serve --help gives --accounting.interval=$default, not in s or ms" >&2; exit 2; }
fi
fleets=(fleet dgx)
if [ -n "${BASE_BIN:-}" ]; then
	fleets+=(base-fleet base-dgx)
fi
variants=()
for f in "${fleets[@]}"; do
	variants+=("$f-off" "$f-on")
	if [ -n "${FAST_INTERVAL:-}" ]; then variants+=("$f-fast"); fi
done
replicas=${REPLICAS:-1}
names=()
for r in $(seq "$replicas"); do
	for v in "${variants[@]}"; do names+=("$v#$r"); done
done
declare -A port pid
for n in "${names[@]}"; do
	exe=$bin
	v=${n%#*}
	case $v in base-*) exe=$BASE_BIN ;; esac
	args=(--backend=sim)
	case $v in *fleet-*) args+=(--sim.config="$tmp/fleet.yaml") ;; *) args+=(--sim.profile=dgx-h100) ;; esac
	case $v in *-off) args+=(--no-accounting) ;; *-fast) args+=(--accounting.interval="$FAST_INTERVAL") ;; esac
	# Job records: on by default only with a real driver (--backend=nvml).
	case $v in *-on | *-fast) if [ -n "${RECORDS:-}" ]; then
		mkdir -p "$tmp/records-$n"
		args+=(--accounting.dir="$tmp/records-$n")
	fi ;; esac
	read -r -a extra <<<"${EXTRA_ARGS:-}"
	args+=("${extra[@]}")
	port[$n]=$(free_port)
	"$exe" serve "${args[@]}" --web.listen-address="127.0.0.1:${port[$n]}" >"$tmp/$n.log" 2>&1 &
	pid[$n]=$!
	pids+=($!)
done
for n in "${names[@]}"; do
	for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:${port[$n]}/metrics" && break; sleep 0.2; done
done
(
	while :; do
		for n in "${names[@]}"; do
			# Kept whole, for ticks_s: a scrape cut short leaves the last.
			curl -fs -o "$tmp/$n.metrics.part" --compressed "http://127.0.0.1:${port[$n]}/metrics" &&
				mv "$tmp/$n.metrics.part" "$tmp/$n.metrics" || true
		done
		sleep "$scrape"
	done
) &
pids+=($!)
# The first minute or so is not the steady state: the first process lists
# and their owner lookups, the first of the 64 s lists, the heap growing.
sleep "${WARMUP:-90}"

cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{t += $1} END {printf "%.0f", t}'; }
# The ticks' own CPU, in seconds, as of process $1's last scrape (0 with
# accounting off).
ticks_s() { awk '$1 == "gpuwatch_accounting_cpu_seconds_total" {v = $2} END {print v + 0}' "$tmp/$1.metrics" 2>/dev/null || echo 0; }
declare -A got gotTicks gotShare
for w in $(seq "$windows"); do
	declare -A a at
	for n in "${names[@]}"; do a[$n]=$(cpu_ns "${pid[$n]}") at[$n]=$(ticks_s "$n"); done
	sleep "$window"
	line="window $w:"
	declare -A sum sumTicks
	for n in "${names[@]}"; do
		ms=$(awk -v b="$(cpu_ns "${pid[$n]}")" -v a="${a[$n]}" 'BEGIN {printf "%.1f", (b - a) / 1e6}')
		sum[${n%#*}]=$(awk -v s="${sum[${n%#*}]:-0}" -v m="$ms" 'BEGIN {print s + m}')
		tms=$(awk -v b="$(ticks_s "$n")" -v a="${at[$n]}" 'BEGIN {printf "%.2f", (b - a) * 1e3}')
		sumTicks[${n%#*}]=$(awk -v s="${sumTicks[${n%#*}]:-0}" -v m="$tms" 'BEGIN {print s + m}')
	done
	for v in "${variants[@]}"; do
		ms=$(awk -v s="${sum[$v]}" -v r="$replicas" 'BEGIN {printf "%.1f", s / r}')
		got[$v]="${got[$v]:-} $ms"
		line="$line $v ${ms} ms"
		case $v in *-on | *-fast)
			tms=$(awk -v s="${sumTicks[$v]}" -v r="$replicas" 'BEGIN {printf "%.2f", s / r}')
			gotTicks[$v]="${gotTicks[$v]:-} $tms"
			line="$line (ticks ${tms} ms)"
			;;
		esac
	done
	# Each window's ticks against the same window's --no-accounting
	# process: both move with the machine's load from minute to minute.
	for v in "${variants[@]}"; do
		case $v in *-on)
			off=${v%-on}-off
			share=$(awk -v t="${sumTicks[$v]}" -v o="${sum[$off]}" 'BEGIN {printf "%.2f", (o > 0 ? 100 * t / o : 0)}')
			gotShare[$v]="${gotShare[$v]:-} $share"
			;;
		esac
	done
	unset sum sumTicks
	echo "$line (CPU per ${window}s$([ "$replicas" -gt 1 ] && echo ", mean of $replicas processes each"))"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# The accounting's cost is each window's on minus off (both measured over
# the same minute, so a busy minute weighs on both), its median over the
# windows; the difference of the two medians is printed beside it.
for f in "${fleets[@]}"; do
	off=$(echo "${got[$f-off]}" | median)
	on=$(echo "${got[$f-on]}" | median)
	paired=$(paste <(echo "${got[$f-on]}" | tr ' ' '\n' | grep .) <(echo "${got[$f-off]}" | tr ' ' '\n' | grep .) |
		awk '{printf "%s ", $1 - $2}' | median)
	ticks=$(echo "${gotTicks[$f-on]}" | median)
	share=$(echo "${gotShare[$f-on]}" | median)
	awk -v f="$f" -v off="$off" -v on="$on" -v d="$paired" -v t="$ticks" -v sh="$share" -v w="$window" -v s="$scrape" 'BEGIN {
		printf "%s: median CPU per %ds window, scraped every %ds: --no-accounting %.1f ms, --accounting %.1f ms: accounting %+.1f ms (%+.1f %% on top); median of the windows'"'"' differences %+.1f ms (%+.1f %%); the ticks'"'"' own CPU (gpuwatch_accounting_cpu_seconds_total) %.2f ms (%.1f %% of --no-accounting; median of the windows'"'"' shares %.1f %%)\n",
			f, w, s, off, on, on - off, (off > 0 ? 100 * (on - off) / off : 0), d, (off > 0 ? 100 * d / off : 0), t, (off > 0 ? 100 * t / off : 0), sh }'
done
if [ -n "${FAST_INTERVAL:-}" ]; then
	for f in "${fleets[@]}"; do
		paired=$(paste <(echo "${got[$f-fast]}" | tr ' ' '\n' | grep .) <(echo "${got[$f-off]}" | tr ' ' '\n' | grep .) |
			awk '{printf "%s ", $1 - $2}' | median)
		off=$(echo "${got[$f-off]}" | median)
		fastTicks=$(echo "${gotTicks[$f-fast]}" | median)
		ticks=$(echo "${gotTicks[$f-on]}" | median)
		awk -v f="$f" -v d="$paired" -v off="$off" -v w="$window" -v fs="$fast_s" -v ds="$default_s" -v ft="$fastTicks" -v t="$ticks" -v fi="$FAST_INTERVAL" 'BEGIN {
			perTick = d / (w / fs); atDefault = perTick * (w / ds)
			printf "%s: accounting every %s: median of the windows'"'"' differences to --no-accounting %+.1f ms per %ds, %.3f ms a tick (the ticks'"'"' own %.3f ms a tick; %.3f at every %gs); at every %gs that is %.1f ms per %ds, %.1f %% of --no-accounting\n",
				f, fi, d, w, perTick, ft / (w / fs), t / (w / ds), ds, ds, atDefault, w, (off > 0 ? 100 * atDefault / off : 0) }'
	done
fi
