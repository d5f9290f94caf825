#!/bin/sh
# node-init.sh ROLE NAME DIR GPUS — PID 1 of one node of a multi-node test
# Slurm (internal/testenv/slurmcluster.go starts it inside new UTS, mount,
# PID and cgroup namespaces, in the node's network namespace).
#
# ROLE is ctl (munged + slurmctld; with DIR/slurmdbd.conf, mariadbd and
# slurmdbd before it) or node (munged + slurmd). DIR is the
# cluster's directory: DIR/slurm.conf, DIR/munge.key and DIR/hosts are
# shared; DIR/nodes/NAME is this node's own and is mounted over DIR/node, the
# path slurm.conf names for per-node files (munge socket, spool, pid, logs).
# GPUS character devices /dev/nvidia0.. back the node's gres File= lines.
#
# Everything mounted here lives in this node's mount namespace only, and
# every process it starts in its PID namespace: when this PID 1 dies, the
# kernel ends them all.
set -eu
ROLE=$1 NAME=$2 DIR=$3 GPUS=$4

hostname "$NAME"
mount --bind "$DIR/hosts" /etc/hosts
mount --bind "$DIR/nodes/$NAME" "$DIR/node"
# The node's own /etc/default when the test gave it one (DIR/nodes/NAME/etc-default):
# the settings of a program slurmd runs, read from their installed path.
if [ -d "$DIR/node/etc-default" ]; then
	mount --bind "$DIR/node/etc-default" /etc/default
fi

# A private /dev: the few devices daemons and jobs use, and the GPUs'.
mount -t tmpfs -o mode=755 nodedev /dev
mknod -m 666 /dev/null c 1 3
mknod -m 666 /dev/zero c 1 5
mknod -m 666 /dev/full c 1 7
mknod -m 666 /dev/random c 1 8
mknod -m 666 /dev/urandom c 1 9
mknod -m 666 /dev/tty c 5 0
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
mkdir /dev/shm /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
i=0
while [ "$i" -lt "$GPUS" ]; do
	mknod -m 666 "/dev/nvidia$i" c 195 "$i"
	i=$((i + 1))
done

# cgroup v1 freezer for proctrack/cgroup, mounted inside this cgroup
# namespace so that its root is this node's own subtree.
mount -t tmpfs -o mode=755 nodecgroup /sys/fs/cgroup
mkdir /sys/fs/cgroup/freezer
mount -t cgroup -o freezer freezer /sys/fs/cgroup/freezer

# Daemons get no terminal and no pipe of the harness's.
munged -f -S "$DIR/node/munge/munge.sock" --key-file="$DIR/munge.key" \
	--log-file="$DIR/node/munged.log" --pid-file="$DIR/node/munged.pid" \
	--seed-file="$DIR/node/munged.seed" </dev/null >>"$DIR/node/daemons.out" 2>&1
# With accounting (DIR/slurmdbd.conf, written by internal/testenv/slurmdbd.go):
# MariaDB on this node's loopback, slurmdbd, and the cluster registered,
# before slurmctld, which needs the database at its first start.
# retry TRIES DELAY MESSAGE COMMAND...: runs COMMAND until it succeeds, at
# most TRIES times DELAY seconds apart; then fails with MESSAGE.
retry() {
	tries=$1 delay=$2 message=$3
	shift 3
	i=0
	until "$@" >>"$DIR/node/daemons.out" 2>&1; do
		i=$((i + 1))
		if [ "$i" -gt "$tries" ]; then
			echo "node-init.sh: $message" >&2
			exit 1
		fi
		sleep "$delay"
	done
}
if [ "$ROLE" = ctl ] && [ -f "$DIR/slurmdbd.conf" ]; then
	export SLURM_CONF="$DIR/slurm.conf"
	mariadbd --no-defaults --user=root --datadir="$DIR/node/db" --socket="$DIR/node/mariadb.sock" \
		--bind-address=127.0.0.1 --port=3306 --pid-file="$DIR/node/mariadbd.pid" \
		--log-error="$DIR/node/mariadbd.log" --innodb-buffer-pool-size=8M --innodb-log-file-size=4M \
		--innodb-lock-wait-timeout=900 </dev/null >>"$DIR/node/daemons.out" 2>&1 &
	retry 300 0.1 "mariadbd did not start (see $DIR/node/mariadbd.log)" test -S "$DIR/node/mariadb.sock"
	slurmdbd </dev/null >>"$DIR/node/daemons.out" 2>&1
	retry 100 0.2 "slurmdbd does not answer (see $DIR/node/slurmdbd.log)" sacctmgr -n list cluster
	# The cluster, and the test's accounts (DIR/accounts: a comma-separated
	# list) with root as their user.
	cluster=$(sed -n 's/^ClusterName=//p' "$DIR/slurm.conf")
	sacctmgr -i add cluster "$cluster" >>"$DIR/node/daemons.out"
	if [ -s "$DIR/accounts" ]; then
		accounts=$(cat "$DIR/accounts")
		sacctmgr -i add account "$accounts" cluster="$cluster" >>"$DIR/node/daemons.out"
		sacctmgr -i add user root account="$accounts" cluster="$cluster" >>"$DIR/node/daemons.out"
	fi
fi

case "$ROLE" in
ctl) slurmctld -i -f "$DIR/slurm.conf" </dev/null >>"$DIR/node/daemons.out" 2>&1 ;;
node) slurmd -f "$DIR/slurm.conf" -N "$NAME" </dev/null >>"$DIR/node/daemons.out" 2>&1 ;;
*)
	echo "node-init.sh: unknown role $ROLE" >&2
	exit 2
	;;
esac
: >"$DIR/node/started"

# Stay PID 1, reaping what is orphaned to us (wait returns on any child).
while :; do
	sleep 3600 &
	wait $! || true
done
