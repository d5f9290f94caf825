#!/bin/bash
# CPU cost of an open live page: gpuwatch's own CPU time (utime+stime from
# /proc/PID/stat) over SECONDS with no page open, then with the page open in
# headless Chromium. Usage: bench/ui-cpu.sh [INTERVAL [SECONDS]] after make build.
set -euo pipefail
interval=${1:-15s}
seconds=${2:-120}
bin=${GPUWATCH_BIN:-$PWD/bin/gpuwatch}
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" --backend=sim --sim.profile=dgx-h100 --web.listen-address="127.0.0.1:$port" --ui.interval="$interval" >"$tmp/gpuwatch.log" 2>&1 &
gw=$!
browser=
cleanup() {
	[ -n "$browser" ] && kill "$browser" 2>/dev/null
	kill "$gw" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$gw/stat"; }
measure() {
	local a b
	a=$(ticks)
	sleep "$seconds"
	b=$(ticks)
	awk -v d=$((b - a)) -v hz="$hz" -v s="$seconds" 'BEGIN { printf "%.2f", d * 100 / hz / s }'
}
sleep 5
idle=$(measure)
chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" "http://127.0.0.1:$port/" >/dev/null 2>&1 &
browser=$!
sleep 5
open=$(measure)
echo "--ui.interval=$interval, ${seconds}s each: gpuwatch ${idle}% of a core without a page, ${open}% with the page open"
