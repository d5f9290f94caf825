#!/usr/bin/env bash
# Runs one command inside a Debian root with chroot, in a private mount
# namespace: every mount made here (proc, binds, the overlay) disappears when
# the command ends, so nothing is left mounted on the host even if it is killed.
#
#   chroot-run.sh [--overlay UPPER] [--bind SRC[:DST]]... [--userspec U:G]
#                 [--workdir DIR] ROOT -- CMD [ARG...]
#
# --overlay UPPER  ROOT is the read-only lower layer; changes go to UPPER
#                  (created if missing), so ROOT stays clean and a later call
#                  with the same UPPER sees them again.
# --bind SRC:DST   bind-mount host SRC at DST inside the root (DST defaults to SRC).
# --userspec U:G   run CMD as this user and group (names or ids in the root).
# --workdir DIR    the working directory inside the root.
# Needs root (CI runs as root).
set -euo pipefail

if [ -z "${GPUWATCH_CHROOT_NS:-}" ]; then
  exec unshare --mount --propagation private env GPUWATCH_CHROOT_NS=1 "$0" "$@"
fi

upper="" userspec="" workdir="/"
binds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --overlay) upper="$2"; shift 2 ;;
    --bind) binds+=("$2"); shift 2 ;;
    --userspec) userspec="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --) shift; break ;;
    -*) echo "chroot-run: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] && [ "$2" = "--" ] || { echo "usage: chroot-run.sh [options] ROOT -- CMD [ARG...]" >&2; exit 2; }
root="$1"; shift 2
[ -d "$root" ] || { echo "chroot-run: root $root is not a directory" >&2; exit 2; }

if [ -n "$upper" ]; then
  mkdir -p "$upper/data" "$upper/work"
  merged=$(mktemp -d)
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$upper/data,workdir=$upper/work" "$merged"
  root="$merged"
fi

mount -t proc proc "$root/proc"
for b in "${binds[@]}"; do
  src="${b%%:*}" dst="${b#*:}"
  [ "$b" = "$src" ] && dst="$src"
  if [ -d "$src" ]; then mkdir -p "$root$dst"; else mkdir -p "$(dirname "$root$dst")"; touch "$root$dst"; fi
  mount --bind "$src" "$root$dst"
done

args=()
[ -n "$userspec" ] && args+=(--userspec="$userspec")
# chroot resets nothing but the root: start the command in workdir.
exec chroot "${args[@]}" "$root" /usr/bin/env --chdir="$workdir" "$@"
