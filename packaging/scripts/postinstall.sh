#!/bin/sh
# Makes systemd see the new or changed unit. The service is not enabled or
# started here: `systemctl enable --now gpuwatch` once the flags in
# /etc/default/gpuwatch (or /etc/sysconfig/gpuwatch) suit the node.
# In a chroot or a container without systemd there is nothing to reload.
set -e

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
