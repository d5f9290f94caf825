#!/bin/sh
# Slurm node Epilog for gpuwatch (docs/jobs.md, "Slurm"): tells this node's
# gpuwatch that job $SLURM_JOB_ID ended, so it writes the job's record at its
# next accounting tick instead of waiting for Slurm to stop listing the job,
# and waits (a bounded time) for gpuwatch's answer, so that the
# EpilogSlurmctld finds the record.
#
# slurm.conf:  Epilog=/usr/share/gpuwatch/slurm/gpuwatch-epilog.sh
# (or call it from the site's existing epilog). Settings, all optional, in
# /etc/default/gpuwatch-slurm (sourced when readable) or the environment:
#   GPUWATCH_ACCOUNTING_DIR  gpuwatch's --accounting.dir (/var/lib/gpuwatch)
#   GPUWATCH_EPILOG_DIR      gpuwatch's --accounting.epilog-dir (/run/gpuwatch-epilog)
#   GPUWATCH_EPILOG_WAIT     seconds to wait for the answer (10)
#
# It runs as SlurmdUser (root), so it never writes where gpuwatch's user (or
# anyone but root) could plant a link, a FIFO or another directory: the mark
# goes in GPUWATCH_EPILOG_DIR, a directory root alone can change (checked, up
# to /; created 0755 if missing), and of the accounting directory, which
# gpuwatch's user owns, it only tests whether the answer exists. gpuwatch
# answers at once for a job that had no GPU here.
#
# It never fails: a failing epilog drains the node, and a missing GPU record
# is no reason for that. It needs no network.

# shellcheck source=/dev/null
[ -r /etc/default/gpuwatch-slurm ] && . /etc/default/gpuwatch-slurm
DIR=${GPUWATCH_ACCOUNTING_DIR:-/var/lib/gpuwatch}
MARKS=${GPUWATCH_EPILOG_DIR:-/run/gpuwatch-epilog}
WAIT=${GPUWATCH_EPILOG_WAIT:-10}

# Only a job ID (digits, or JOB_TASK for an array task) names a file.
case "${SLURM_JOB_ID:-}" in
'' | *[!0-9_]*) exit 0 ;;
esac
case "$WAIT" in
'' | *[!0-9]*) WAIT=10 ;;
esac
# No gpuwatch keeping records on this node: nothing to do.
[ -d "$DIR/done" ] || exit 0

# root_only DIR: DIR is a directory (not a link) that root owns and no one
# else may write, and so is every directory above it (a sticky one, such as
# /tmp, may be writable by all: no one can rename what root holds there).
root_only() {
	[ -d "$1" ] && [ ! -L "$1" ] || return 1
	d=$1
	own=1
	while :; do
		# shellcheck disable=SC2046
		set -- $(stat -L -c '%u %a' "$d" 2>/dev/null) || return 1
		[ "${1:-x}" = 0 ] || return 1
		mode=$((0$2))
		if [ "$own" = 1 ] || [ $((mode & 01000)) = 0 ]; then
			[ $((mode & 022)) = 0 ] || return 1
		fi
		[ "$d" = / ] && return 0
		case "$d" in
		*/*) d=${d%/*} ;;
		*) return 1 ;;
		esac
		[ -n "$d" ] || d=/
		own=0
	done
}

case "$MARKS" in
/*) ;;
*) exit 0 ;;
esac
# Made only in a directory root alone controls.
if [ ! -d "$MARKS" ] && root_only "$(dirname -- "$MARKS")"; then
	mkdir -m 0755 "$MARKS" 2>/dev/null
fi
if ! root_only "$MARKS"; then
	echo "gpuwatch epilog: $MARKS must be a directory that root owns and alone may write, under such directories; no end mark for job $SLURM_JOB_ID" >&2
	exit 0
fi
MARK=$MARKS/$SLURM_JOB_ID
: >"$MARK" 2>/dev/null || exit 0
# Marks left by epilogs killed before they removed theirs.
find "$MARKS" -maxdepth 1 -type f -mmin +60 -delete 2>/dev/null

i=0
while [ "$i" -lt "$WAIT" ] && [ ! -e "$DIR/done/$SLURM_JOB_ID" ]; do
	sleep 1
	i=$((i + 1))
done
rm -f -- "$MARK"
exit 0
