#!/bin/sh
# Slurm EpilogSlurmctld for gpuwatch (docs/jobs.md, "Slurm"): once a job
# ended, asks the gpuwatch of each of its nodes for the job's records (the
# node epilogs run at the same time: it waits for them within a bound) and
# stores a one-word summary in the job's AdminComment, after what other
# tools (jobstats' JS1:...) wrote there. It needs slurmdbd: the job has ended,
# and Slurm's controller refuses to update an ended job; `sacct -j JOBID -X -o
# AdminComment%300` keeps it after Prometheus forgot.
#
# slurm.conf:  EpilogSlurmctld=/usr/share/gpuwatch/slurm/gpuwatch-epilog-slurmctld.sh
# Settings, in /etc/default/gpuwatch-slurm (sourced when readable) or the environment:
#   GPUWATCH                 the gpuwatch binary (/usr/bin/gpuwatch)
#   GPUWATCH_NODE_URL        each node's gpuwatch, {node} the node name (http://{node}:9410)
#   GPUWATCH_HTTP_CONFIG     client settings (TLS, basic_auth) for it, as report's; optional
#   GPUWATCH_WAIT            how long at most to wait for the nodes' records (60s):
#                            gpuwatch asks again, after 1s, 2s, 4s ... 16s, only
#                            the nodes still running the job or timing out; a
#                            node with no gpuwatch (connection refused) is not
#                            asked again. The whole run ends within the wait
#                            plus one --job.timeout.
#   GPUWATCH_SCONTROL        scontrol (found on PATH, which slurmctld gives its
#                            epilogs almost empty: /usr/bin and /usr/local/bin are added)
#
# It exits 0 whatever happens (a failing EpilogSlurmctld only logs, but
# there is nothing to retry); what went wrong goes to slurmctld's log.

# shellcheck source=/dev/null
[ -r /etc/default/gpuwatch-slurm ] && . /etc/default/gpuwatch-slurm
GPUWATCH=${GPUWATCH:-/usr/bin/gpuwatch}
URL=${GPUWATCH_NODE_URL:-'http://{node}:9410'}
WAIT=${GPUWATCH_WAIT:-60s}
PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin
export PATH
SCONTROL=${GPUWATCH_SCONTROL:-scontrol}

case "${SLURM_JOB_ID:-}" in
'' | *[!0-9_]*) exit 0 ;;
esac
[ -n "${SLURM_JOB_NODELIST:-}" ] || exit 0

set -- job "$SLURM_JOB_ID" --job.node-url="$URL" --job.nodes="$SLURM_JOB_NODELIST" \
	--job.wait="$WAIT" --job.admin-comment --slurm.scontrol-path="$SCONTROL"
if [ -n "${GPUWATCH_HTTP_CONFIG:-}" ]; then
	set -- "$@" --job.http-config="$GPUWATCH_HTTP_CONFIG"
fi
"$GPUWATCH" "$@" >/dev/null || echo "gpuwatch EpilogSlurmctld: no GPU summary for job $SLURM_JOB_ID" >&2
exit 0
