#!/bin/sh
# stop.sh DIR — stop the daemons that start.sh DIR started, by their pid
# files only (never by name: other Slurms may run on the same machine).
set -u
DIR=${1:?usage: stop.sh DIR}

stop_pidfile() {
	pidfile=$1
	[ -f "$pidfile" ] || return 0
	pid=$(cat "$pidfile" 2>/dev/null || true)
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || return 0
	i=0
	while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -9 "$pid" 2>/dev/null || true
}

# Cancel what is still queued so that slurmd leaves no job processes behind.
if [ -f "$DIR/slurm.conf" ] && command -v scancel >/dev/null 2>&1; then
	SLURM_CONF="$DIR/slurm.conf" timeout 5 scancel --full --quiet --user=root 2>/dev/null || true
	sleep 0.5
fi
stop_pidfile "$DIR/slurmd.pid"
stop_pidfile "$DIR/slurmctld.pid"
stop_pidfile "$DIR/munged.pid"
exit 0
