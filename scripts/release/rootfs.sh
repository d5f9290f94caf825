#!/usr/bin/env bash
# Makes the Debian 11 (bullseye, glibc 2.31) roots the release is built and
# tested in, with debootstrap, and keeps them for the next run:
#   $ROOTFS_DIR/bullseye-build  gcc, libc6-dev and the aarch64 cross compiler:
#                               release binaries are linked against this glibc
#   $ROOTFS_DIR/bullseye        minbase only: the clean system the .deb is
#                               installed into and the binary is run in
# ROOTFS_DIR defaults to .cache/rootfs (git-ignored). A root counts as made
# once its .complete marker exists, so an interrupted debootstrap is redone.
# Needs root and Debian's debootstrap (scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."

dir="${ROOTFS_DIR:-$PWD/.cache/rootfs}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite=bullseye
mkdir -p "$dir/debs"

make_root() { # name, extra packages (comma-separated, may be empty)
  local root="$dir/$1" include=()
  [ -e "$root/.complete" ] && return 0
  [ -n "$2" ] && include=(--include="$2")
  rm -rf "$root"
  echo "rootfs: debootstrap $suite into $root${2:+ with $2}"
  # The package cache is shared, so the second root downloads nothing.
  debootstrap --variant=minbase --cache-dir="$dir/debs" "${include[@]}" \
    "$suite" "$root" "$mirror" >"$dir/$1.log" 2>&1 \
    || { tail -20 "$dir/$1.log" >&2; exit 1; }
  rm -f "$root"/var/cache/apt/archives/*.deb
  touch "$root/.complete"
}

make_root bullseye-build gcc,libc6-dev,gcc-aarch64-linux-gnu,libc6-dev-arm64-cross
make_root bullseye ""
echo "$dir"
