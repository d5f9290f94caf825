#!/bin/bash
# CPU cost of an open live page: gpuwatch's own CPU time (utime+stime from
# /proc/PID/stat) over SECONDS with no page open, then with the page open in
# headless Chromium, and Chromium's own (all its processes) while open.
# Usage: bench/ui-cpu.sh [INTERVAL [SECONDS [HISTORY]]] after make build.
set -euo pipefail
interval=${1:-15s}
seconds=${2:-120}
history=${3:-1h}
bin=${GPUWATCH_BIN:-$PWD/bin/gpuwatch}
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" --backend=sim --sim.profile=dgx-h100 --web.listen-address="127.0.0.1:$port" --ui.interval="$interval" --ui.history="$history" >"$tmp/gpuwatch.log" 2>&1 &
gw=$!
browser=
cleanup() {
	[ -n "$browser" ] && kill -- "-$browser" 2>/dev/null
	kill "$gw" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$gw/stat"; }
# browser_ticks sums the CPU of Chromium's process group, reaped children
# included (fields 14-17 after the command, which may hold spaces).
browser_ticks() {
	cat /proc/[0-9]*/stat 2>/dev/null | sed 's/^.*) //' |
		awk -v g="$browser" '$3 == g { t += $12 + $13 + $14 + $15 } END { print t + 0 }'
}
percent() { awk -v d="$1" -v hz="$hz" -v s="$seconds" 'BEGIN { printf "%.2f", d * 100 / hz / s }'; }
measure() {
	local a b
	a=$(ticks)
	sleep "$seconds"
	b=$(ticks)
	percent $((b - a))
}
sleep 5
idle=$(measure)
setsid chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" "http://127.0.0.1:$port/" >/dev/null 2>&1 &
browser=$!
sleep 5
b0=$(browser_ticks)
open=$(measure)
b1=$(browser_ticks)
echo "--ui.interval=$interval --ui.history=$history, ${seconds}s each: gpuwatch ${idle}% of a core without a page, ${open}% with the page open; Chromium $(percent $((b1 - b0)))% of a core"
