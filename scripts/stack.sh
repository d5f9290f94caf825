#!/usr/bin/env bash
# A local monitoring stack in one command, to try gpuwatch with history:
# gpuwatch (the simulator demo, or this host's GPUs with --gpu), a Prometheus
# with the shipped recording and alert rules scraping it every 5 s, and the
# URLs and report command to look at them. Ctrl-C stops it all.
#
#   ./scripts/stack.sh            Prometheus from PATH (Debian/Ubuntu: apt-get install prometheus)
#   ./scripts/stack.sh --gpu      the same, reading this host's GPUs instead of the demo
#   ./scripts/stack.sh --docker   the compose stack instead (Docker Compose v2), with Grafana:
#                                 see deploy/compose/README.md
#
# Environment: GPUWATCH_PORT (9410), PROMETHEUS_PORT (9090), both on 127.0.0.1 only;
# STACK_DIR (.cache/stack: Prometheus' data, kept between runs, and the logs);
# GPUWATCH_BIN (run that binary instead of building one).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=local backend=(--backend=sim --sim.profile=dgx-h100)
for arg in "$@"; do
  case "$arg" in
    --gpu) backend=() ;;
    --docker) mode=docker ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "stack.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$mode" = docker ]; then
  if ! docker compose version >/dev/null 2>&1; then
    echo "stack.sh: --docker needs Docker Compose v2 (the 'docker compose' plugin); docker-compose 1.x and podman-compose cannot read this compose file" >&2
    exit 1
  fi
  profile=sim
  [ ${#backend[@]} -eq 0 ] && profile=gpu
  cd deploy/compose
  COMPOSE_PROFILES=$profile docker compose up -d --build
  echo "Grafana:    http://127.0.0.1:3000/   Prometheus: http://127.0.0.1:9090/   gpuwatch: http://127.0.0.1:9410/"
  echo "Report:     gpuwatch report --prometheus.url=http://127.0.0.1:9090 --last=15m --by=user"
  echo "Stop:       (cd deploy/compose && docker compose down)"
  exit 0
fi

prometheus=$(command -v prometheus || true)
if [ -z "$prometheus" ]; then
  echo "stack.sh: no prometheus on PATH: install it (Debian/Ubuntu: sudo apt-get install prometheus)," >&2
  echo "          or run ./scripts/stack.sh --docker with Docker Compose v2" >&2
  exit 1
fi
bin="${GPUWATCH_BIN:-}"
if [ -z "$bin" ]; then
  make --no-print-directory build >&2
  bin=$root/bin/gpuwatch
fi
gport=${GPUWATCH_PORT:-9410} pport=${PROMETHEUS_PORT:-9090}
dir=${STACK_DIR:-$root/.cache/stack}
mkdir -p "$dir/prometheus-data"

pids=()
stop() {
  trap - INT TERM EXIT
  if [ ${#pids[@]} -gt 0 ]; then kill "${pids[@]}" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  if [ -n "${acct:-}" ]; then rm -rf -- "$acct"; fi
}
trap stop EXIT
trap 'exit 130' INT TERM

# waitfor URL NAME LOG: until URL answers 200, or the log's last lines and a non-zero exit.
waitfor() {
  for _ in $(seq 1 120); do
    if curl -fsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
    for p in "${pids[@]}"; do
      kill -0 "$p" 2>/dev/null || { echo "stack.sh: $2 exited; the end of $3:" >&2; tail -n 20 "$3" >&2; exit 1; }
    done
    sleep 0.5
  done
  echo "stack.sh: $2 did not answer $1 within 60 s; the end of $3:" >&2
  tail -n 20 "$3" >&2
  exit 1
}

# Job records go to a temporary accounting directory, removed with the stack.
acct=$(mktemp -d "${TMPDIR:-/tmp}/gpuwatch-stack.XXXXXX")
chmod 0700 "$acct"
"$bin" "${backend[@]}" --web.listen-address="127.0.0.1:$gport" --accounting.dir="$acct" >"$dir/gpuwatch.log" 2>&1 &
pids+=($!)
waitfor "http://127.0.0.1:$gport/healthz" gpuwatch "$dir/gpuwatch.log"

# Rules from deploy/prometheus, as every other deployment ships them; the
# scrape and evaluation are faster than production (5 s, 15 s) so that the
# page, the rules and the report have data within the first minute.
cat >"$dir/prometheus.yml" <<CONFIG
global:
  scrape_interval: 5s
  scrape_timeout: 4s
  evaluation_interval: 15s
rule_files:
  - $root/deploy/prometheus/recording.yml
  - $root/deploy/prometheus/alerts.yml
scrape_configs:
  - job_name: gpuwatch
    static_configs:
      - targets: ["127.0.0.1:$gport"]
CONFIG
"$prometheus" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus-data" \
  --web.listen-address="127.0.0.1:$pport" >"$dir/prometheus.log" 2>&1 &
pids+=($!)
waitfor "http://127.0.0.1:$pport/-/ready" Prometheus "$dir/prometheus.log"

what="the simulator demo (dgx-h100, simulated owners)" job=4211
[ ${#backend[@]} -eq 0 ] && what="this host's GPUs" job=JOBID
cat <<EOF_URLS
gpuwatch:    http://127.0.0.1:$gport/        live page: $what
Prometheus:  http://127.0.0.1:$pport/        rules: /rules, alerts: /alerts
Report:      $bin report --prometheus.url=http://127.0.0.1:$pport --last=15m --by=user
Job:         $bin job $job --accounting.dir=$acct
Logs and data in $dir, job records in $acct. Ctrl-C stops the stack.
EOF_URLS
wait
