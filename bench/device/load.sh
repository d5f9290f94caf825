#!/usr/bin/env bash
# Runs on the lent GPU machine (the device tool): gpuwatch beside
# nvidia-smi while GPU 0 is busy, for bench/RESULTS.md. Needs, built on the
# development machine: bin/gpuwatch (make build) and build/device/cudaload
# (gcc -O2 -o build/device/cudaload bench/device/cudaload.c -ldl).
# Writes everything under $OUT.
#   run: bash bench/device/load.sh     carry: bin/gpuwatch build/device/cudaload
set -u
OUT=${OUT:-/tmp/load-out}
mkdir -p "$OUT"
BIN=${BIN:-bin/gpuwatch}
LOAD=${LOAD:-build/device/cudaload}
SECONDS_OF_LOAD=${SECONDS_OF_LOAD:-90}
MEMORY_MIB=${MEMORY_MIB:-6144}
exec > >(tee "$OUT/load.log") 2>&1

get() { # path -> stdout, with curl or bash's /dev/tcp
  if command -v curl >/dev/null; then curl -s "http://127.0.0.1:9410$1"; return; fi
  exec 3<>/dev/tcp/127.0.0.1/9410; printf 'GET %s HTTP/1.0\r\nHost: x\r\n\r\n' "$1" >&3; sed '1,/^\r$/d' <&3; exec 3>&-
}

echo "== idle"; nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw --format=csv
# The load runs as an unprivileged user when the machine can switch to one,
# so that gpuwatch's user attribution is seen on a real process.
as_user=()
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
"${as_user[@]}" "$LOAD" "$SECONDS_OF_LOAD" "$MEMORY_MIB" > "$OUT/cudaload.log" 2>&1 &
load=$!
for i in $(seq 1 100); do
  nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q . && break
  sleep 0.2
done
sleep 3
echo "== load pid $load (uid $(stat -c %u /proc/$load 2>/dev/null))"; cat "$OUT/cudaload.log"

"$BIN" --backend=nvml --collector.processes.pid-labels --web.listen-address=127.0.0.1:9410 --log.level=debug > "$OUT/serve.log" 2>&1 &
serve=$!
for i in $(seq 1 50); do get /readyz >/dev/null 2>&1 && break; sleep 0.2; done
sleep 3 # a GPM window
for n in 1 2 3; do
  nvidia-smi --query-gpu=index,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm,clocks.mem,pcie.link.gen.current,pstate,clocks_event_reasons.active --format=csv > "$OUT/query-gpu-$n.csv" 2>&1
  nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv > "$OUT/query-apps-$n.csv" 2>&1
  get /metrics > "$OUT/metrics-$n.txt"
  nvidia-smi pmon -c 1 -s um > "$OUT/pmon-$n.txt" 2>&1
  sleep 5
done
"$BIN" ps --backend=nvml -o json > "$OUT/ps.json" 2>&1; echo "ps exit: $?"
"$BIN" ps --backend=nvml > "$OUT/ps.txt" 2>&1
kill -TERM $serve; wait $serve; echo "serve exit: $?"
wait $load; echo "cudaload exit: $?"; cat "$OUT/cudaload.log"
ls -la "$OUT"
