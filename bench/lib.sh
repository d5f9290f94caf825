# shellcheck shell=bash
# Shared by the bench scripts that run gpuwatch processes side by side
# (accounting-cpu.sh, tick-cpu.sh, idle-cpu.sh): source it, after set -e.
# It sets bin (GPUWATCH_BIN, else bin/gpuwatch) and tmp (removed at exit),
# and kills every PID added to pids at exit.

# shellcheck disable=SC2034 # used by the scripts that source this
bin=${GPUWATCH_BIN:-$PWD/bin/gpuwatch}
tmp=$(mktemp -d)
pids=()
bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap bench_cleanup EXIT

# free_port prints a TCP port free on the loopback now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# accounting_fleet N prints the simulator's config of the accounting's
# fleet: a DGX H100 (GPU 7 in MIG mode) with N busy processes on each GPU
# (256: benchConfig in internal/accounting/bench_test.go).
accounting_fleet() {
	echo "profile: dgx-h100"
	echo "processes:"
	local gpu i
	for gpu in 0 1 2 3 4 5 6 7; do
		for i in $(seq 0 $(($1 - 1))); do
			echo "  - {gpu: $gpu, pid: $((200000 + gpu * 256 + i)), used_memory_bytes: 268435456, sm_utilization: 0.003$(
				[ "$gpu" = 7 ] && echo ", gpu_instance: $(echo 1 1 1 1 5 5 13 14 | cut -d' ' -f$((i % 8 + 1))), compute_instance: 0")}"
		done
	done
}
