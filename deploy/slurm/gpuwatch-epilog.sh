#!/bin/sh
# Slurm node Epilog for gpuwatch (docs/jobs.md, "Slurm"): tells this node's
# gpuwatch that job $SLURM_JOB_ID ended, so it writes the job's record at its
# next accounting tick instead of waiting for Slurm to stop listing the job,
# and waits (a bounded time) for the record, so that the EpilogSlurmctld finds it.
#
# slurm.conf:  Epilog=/usr/share/gpuwatch/slurm/gpuwatch-epilog.sh
# (or call it from the site's existing epilog). Settings, all optional, in
# /etc/default/gpuwatch-slurm (sourced when readable) or the environment:
#   GPUWATCH_ACCOUNTING_DIR  gpuwatch's --accounting.dir (/var/lib/gpuwatch)
#   GPUWATCH_EPILOG_WAIT     seconds to wait for the record (10)
#
# It never fails: a failing epilog drains the node, and a missing GPU record
# is no reason for that. It runs as SlurmdUser (root) and needs no network.

# shellcheck source=/dev/null
[ -r /etc/default/gpuwatch-slurm ] && . /etc/default/gpuwatch-slurm
DIR=${GPUWATCH_ACCOUNTING_DIR:-/var/lib/gpuwatch}
WAIT=${GPUWATCH_EPILOG_WAIT:-10}

# Only a job ID (digits, or JOB_TASK for an array task) names a file.
case "${SLURM_JOB_ID:-}" in
'' | *[!0-9_]*) exit 0 ;;
esac
# No gpuwatch keeping records on this node: nothing to do.
[ -d "$DIR/ended" ] || exit 0

: >"$DIR/ended/$SLURM_JOB_ID" 2>/dev/null || exit 0

# The mark is removed once the record is written (or the job was never on
# this node's GPUs; then gpuwatch drops the mark after an hour).
i=0
while [ "$i" -lt "$WAIT" ] && [ -e "$DIR/ended/$SLURM_JOB_ID" ]; do
	sleep 1
	i=$((i + 1))
done
exit 0
