#!/usr/bin/env bash
# Installs what gpuwatch's tests run against for real: Prometheus and
# promtool, node_exporter and VictoriaMetrics (the deploy stack's end-to-end
# test and gpuwatch report), Chromium (the HTML report and the live page),
# Slurm with munge (and iproute2, util-linux: the multi-node Slurm of
# internal/testenv puts each node in its own namespaces; slurmdbd and
# mariadb-server: its accounting, a private database per test cluster), Podman, busybox (to build a container image without a
# registry), gcc (cgo, and the stripped-down libnvidia-ml.so.1 the end-to-end
# tests build); for `make release` and test/release: debootstrap (the Debian 11
# build and install roots), rpm (rpm -qp on the .rpm), systemd
# (systemd-analyze verify and the targets units are checked against), zip (the
# Windows release archive), qemu-user
# (runs the arm64 release binary); shellcheck (actionlint checks the release
# workflow's steps with it); wine64 and gcc-mingw-w64-x86-64 (test/wine runs
# the Windows build of the nvidia-smi backend's tests under Wine, with a
# stand-in DLL built by mingw).
# Debian packages, so it needs root (CI runs as root).
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(prometheus prometheus-node-exporter victoria-metrics chromium slurm-wlm munge slurmdbd mariadb-server iproute2 util-linux podman busybox-static debootstrap rpm zip systemd gcc qemu-user shellcheck wine64 gcc-mingw-w64-x86-64)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to apt-get install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  # Debian's packages start services where systemd runs; the tests start
  # their own instances on temporary ports and paths instead.
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
fi

go mod download

# helm, for test/deploy (helm lint and helm template of deploy/helm/gpuwatch): built from
# the module proxy once (a few minutes), then cached in .tools/ (scripts/helm.sh).
./scripts/helm.sh >/dev/null
