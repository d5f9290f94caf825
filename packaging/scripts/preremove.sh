#!/bin/sh
# Stops and disables the service when the package is removed, not when it
# is upgraded (.deb: "remove"; .rpm: 0 packages left).
set -e

case "$1" in
  remove|0)
    if [ -d /run/systemd/system ]; then
      systemctl --no-reload disable --now gpuwatch.service >/dev/null 2>&1 || true
    fi
    ;;
esac
