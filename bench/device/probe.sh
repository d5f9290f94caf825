#!/usr/bin/env bash
# Runs on the lent GPU machine (the device tool): records the real driver's
# answers beside gpuwatch's, for bench/RESULTS.md. Needs bin/gpuwatch built
# on the development machine (x86-64, cgo). Writes everything under $OUT.
#   run: bash bench/device/probe.sh
set -u
OUT=${OUT:-/tmp/probe-out}
mkdir -p "$OUT"
BIN=${BIN:-bin/gpuwatch}
exec > >(tee "$OUT/probe.log") 2>&1

echo "== host"; uname -a; cat /etc/os-release | head -3; ldd --version | head -1
echo "== nvidia-smi"; nvidia-smi || true
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1 || true
lib=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
echo "== libnvidia-ml: $lib -> $(readlink -f "$lib")"
for t in nm readelf objdump; do command -v $t; done
if command -v nm >/dev/null; then nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u > "$OUT/libnvml-symbols.txt"
elif command -v readelf >/dev/null; then readelf -W --dyn-syms "$lib" | awk '$7!="UND" && $8 ~ /^nvml/ {print $8}' | sed 's/@.*//' | sort -u > "$OUT/libnvml-symbols.txt"
fi
wc -l "$OUT/libnvml-symbols.txt" 2>/dev/null

fields=$(nvidia-smi --help-query-gpu | grep -o '^"[a-z_.]*"' | tr -d '"' | tr '\n' ',' | sed 's/,$//')
echo "$fields" > "$OUT/query-fields.txt"

"$BIN" --version
"$BIN" --backend=nvml --web.listen-address=127.0.0.1:9410 --log.level=debug > "$OUT/serve.log" 2>&1 &
pid=$!
get() { # path -> stdout, without curl or python
  if command -v curl >/dev/null; then curl -s "http://127.0.0.1:9410$1"; return; fi
  exec 3<>/dev/tcp/127.0.0.1/9410; printf 'GET %s HTTP/1.0\r\nHost: x\r\n\r\n' "$1" >&3; sed '1,/^\r$/d' <&3; exec 3>&-
}
for i in $(seq 1 50); do get /readyz >/dev/null 2>&1 && break; sleep 0.2; done
sleep 2
for n in 1 2 3; do
  nvidia-smi --query-gpu="$fields" --format=csv > "$OUT/query-gpu-$n.csv" 2>&1
  get /metrics > "$OUT/metrics-$n.txt"
  sleep 5
done
get /readyz > "$OUT/readyz.txt"
kill -TERM $pid; wait $pid; echo "serve exit: $?"
# dcgm-exporter's names from the same driver.
"$BIN" --backend=nvml --compat=dcgm,native --web.listen-address=127.0.0.1:9410 > "$OUT/serve-compat.log" 2>&1 &
pid=$!
for i in $(seq 1 50); do get /readyz >/dev/null 2>&1 && break; sleep 0.2; done
sleep 2; get /metrics > "$OUT/metrics-compat.txt"
kill -TERM $pid; wait $pid
# gpuwatch's own check of this host, and its readings beside nvidia-smi's.
"$BIN" doctor --backend=nvml > "$OUT/doctor.txt" 2>&1; echo "doctor exit: $?"
"$BIN" doctor --backend=nvml -o json > "$OUT/doctor.json" 2>&1
"$BIN" metrics > "$OUT/metrics-catalog.txt" 2>&1
"$BIN" ps --backend=nvml -o json > "$OUT/ps.json" 2>&1; echo "ps exit: $?"
"$BIN" textfile --backend=nvml --output="$OUT/textfile.prom" > "$OUT/textfile.log" 2>&1; echo "textfile exit: $?"
ls -la "$OUT"
