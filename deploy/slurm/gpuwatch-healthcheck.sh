#!/bin/sh
# Slurm HealthCheckProgram for gpuwatch (docs/health.md, "Slurm"): judges
# this node's GPUs with `gpuwatch health`, drains the node when a GPU (or
# the GPU count) failed, and resumes it once every GPU is fit again, if
# gpuwatch drained it. A node drained for another reason (an admin, NHC),
# or DOWN, is left as it is; when health cannot be told, nothing changes.
#
# slurm.conf:
#   HealthCheckProgram=/usr/share/gpuwatch/slurm/gpuwatch-healthcheck.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY,CYCLE
#
# Settings, all optional, in /etc/default/gpuwatch-healthcheck (or the file
# GPUWATCH_HEALTHCHECK_CONF names), a shell file of assignments:
#   GPUWATCH_BIN          the gpuwatch binary (/usr/bin/gpuwatch)
#   GPUWATCH_HEALTH_OPTS  more flags of `gpuwatch health`, split at blanks
#                         (no quotes, no globbing), such as
#                         "--health.policy=/etc/gpuwatch/health.yml --slurm.scontrol-path=/opt/slurm/bin/scontrol"
# Every variable the file sets (SLURM_CONF, say) is exported to gpuwatch and
# scontrol. The node's Slurm name is slurmd's (SLURMD_NODENAME, which slurmd
# sets for this program) unless the flags name one (--slurm.node-name).
#
# It runs as root (slurmd's user), with slurmd's bare environment: it sets
# its own PATH, and it reads the settings file and runs the binary only when
# they, and every directory above them, belong to root (or to the user
# running it) and no one else may write them, so no other user can choose
# what runs here as root.
#
# Exit status, `gpuwatch health`'s: 0 healthy, 1 a GPU or the node failed
# (the node is drained), 2 health unknown or Slurm could not be asked
# (nothing changed). slurmd logs a non-zero status and acts on none.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
set -f # the flags are split at blanks, never expanded as file patterns

CONF=${GPUWATCH_HEALTHCHECK_CONF:-/etc/default/gpuwatch-healthcheck}
ME=$(id -u)

# trusted PATH: PATH is not a link, belongs to root or to this user, and no
# one else may write it; nor any directory above it (a sticky one, such as
# /tmp, may be writable by all: no one can rename what another owns there).
trusted() {
	[ -e "$1" ] && [ ! -L "$1" ] || return 1
	case "$1" in
	/*) ;;
	*) return 1 ;;
	esac
	p=$1
	own=1
	while :; do
		# shellcheck disable=SC2046
		set -- $(stat -L -c '%u %a' "$p" 2>/dev/null) || return 1
		[ "${1:-x}" = 0 ] || [ "${1:-x}" = "$ME" ] || return 1
		mode=$((0$2))
		if [ "$own" = 1 ] || [ $((mode & 01000)) = 0 ]; then
			[ $((mode & 022)) = 0 ] || return 1
		fi
		[ "$p" = / ] && return 0
		p=${p%/*}
		[ -n "$p" ] || p=/
		own=0
	done
}

GPUWATCH_BIN=/usr/bin/gpuwatch
GPUWATCH_HEALTH_OPTS=
if [ -e "$CONF" ]; then
	if ! trusted "$CONF"; then
		echo "gpuwatch-healthcheck: $CONF must belong to root and be writable by root alone, as every directory above it; not read, nothing changed" >&2
		exit 2
	fi
	set -a
	# shellcheck source=/dev/null
	. "$CONF"
	set +a
fi
if ! trusted "$GPUWATCH_BIN"; then
	echo "gpuwatch-healthcheck: $GPUWATCH_BIN must exist, belong to root and be writable by root alone, as every directory above it; not run, nothing changed" >&2
	exit 2
fi

# shellcheck disable=SC2086 # the flags are meant to be split
set -- health --slurm.drain --slurm.resume --output=line $GPUWATCH_HEALTH_OPTS
case " $GPUWATCH_HEALTH_OPTS" in
*" --slurm.node-name"*) ;;
*) [ -n "${SLURMD_NODENAME:-}" ] && set -- "$@" "--slurm.node-name=$SLURMD_NODENAME" ;;
esac
exec "$GPUWATCH_BIN" "$@"
