#!/bin/sh
# start.sh DIR — start a private single-node Slurm (munged + slurmctld + slurmd)
# whose every file lives under DIR, so that tests never touch /etc/slurm or a
# Slurm that another test or the host runs.
#
# Environment (all optional):
#   SLURMCTLD_PORT  controller port (default 16817)
#   SLURMD_PORT     slurmd port      (default 16818)
#   FAKE_GPUS       number of fake GPUs of type h100 (default 2)
#   SLURM_EXTRA_CONF  lines appended to slurm.conf (e.g. Epilog=...)
#
# On success it prints `SLURM_CONF=DIR/slurm.conf`; every client command
# (sbatch, squeue, sinfo, scontrol, sdiag) must run with that variable.
# The node is IDLE when this script returns. Stop it with stop.sh DIR.
set -eu

DIR=${1:?usage: start.sh DIR}
CTLD_PORT=${SLURMCTLD_PORT:-16817}
SLURMD_PORT=${SLURMD_PORT:-16818}
GPUS=${FAKE_GPUS:-2}

for bin in munged slurmctld slurmd sinfo; do
	command -v "$bin" >/dev/null 2>&1 || {
		echo "start.sh: $bin not found (apt-get install -y slurm-wlm munge)" >&2
		exit 2
	}
done

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
# munged refuses a socket directory that others can write to.
chmod 755 "$DIR"
mkdir -p "$DIR/spool/ctld" "$DIR/spool/d" "$DIR/gpus" "$DIR/log"
NODE=$(hostname)

# A private munged on its own socket and key, so that the host's munge (if
# any) is neither needed nor disturbed.
if [ ! -f "$DIR/munge.key" ]; then
	if [ -r /etc/munge/munge.key ]; then
		cp /etc/munge/munge.key "$DIR/munge.key"
	else
		dd if=/dev/urandom of="$DIR/munge.key" bs=1 count=128 2>/dev/null
	fi
fi
chmod 600 "$DIR/munge.key"
# Daemons get no terminal and no pipe of ours: a caller reading this script's
# output would otherwise wait for them to exit.
munged -f -S "$DIR/munge.sock" --key-file="$DIR/munge.key" \
	--log-file="$DIR/log/munged.log" --pid-file="$DIR/munged.pid" \
	--seed-file="$DIR/munged.seed" </dev/null >>"$DIR/log/daemons.out" 2>&1

# One empty file per fake GPU: slurmd only needs the File= paths to exist.
GRES_LINES=""
i=0
while [ "$i" -lt "$GPUS" ]; do
	: >"$DIR/gpus/nvidia$i"
	GRES_LINES="${GRES_LINES}NodeName=$NODE Name=gpu Type=h100 File=$DIR/gpus/nvidia$i
"
	i=$((i + 1))
done
printf '%s' "$GRES_LINES" >"$DIR/gres.conf"

cat >"$DIR/slurm.conf" <<EOF
ClusterName=gpuwatch-test
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$DIR/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
# Without slurmdbd, GPUs cannot be TRES (AccountingStorageTRES=gres/gpu is
# fatal), so tres_alloc_str carries no gres/gpu: jobs' GPUs come from
# gres_detail, as on many sites.
AccountingStorageType=accounting_storage/none
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
GresTypes=gpu
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Keep finished jobs visible to squeue long enough for the test to see them.
MinJobAge=300
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 Gres=gpu:h100:$GPUS State=UNKNOWN
PartitionName=gpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=debug Nodes=$NODE MaxTime=60 State=UP
EOF
if [ -n "${SLURM_EXTRA_CONF:-}" ]; then
	printf '%s\n' "$SLURM_EXTRA_CONF" >>"$DIR/slurm.conf"
fi

export SLURM_CONF="$DIR/slurm.conf"
# -i: ignore state left in StateSaveLocation by an earlier run of the same DIR.
slurmctld -i -f "$SLURM_CONF" </dev/null >>"$DIR/log/daemons.out" 2>&1
slurmd -f "$SLURM_CONF" -N "$NODE" </dev/null >>"$DIR/log/daemons.out" 2>&1

# Wait (about 40 s at most) for the node to come up idle.
i=0
while [ "$i" -lt 80 ]; do
	state=$(timeout 5 sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n 1 || true)
	if ! kill -0 "$(cat "$DIR/slurmctld.pid" 2>/dev/null || echo 0)" 2>/dev/null; then
		echo "start.sh: slurmctld exited; logs in $DIR/log" >&2
		tail -n 5 "$DIR/log/slurmctld.log" >&2 || true
		exit 1
	fi
	case "$state" in
	idle)
		echo "SLURM_CONF=$SLURM_CONF"
		exit 0
		;;
	esac
	sleep 0.5
	i=$((i + 1))
done
echo "start.sh: node $NODE did not become idle (last state: '${state:-none}'); logs in $DIR/log" >&2
tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
exit 1
