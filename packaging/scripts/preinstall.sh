#!/bin/sh
# Creates the gpuwatch system user the unit runs as, before the files land.
# Shared by the .deb (preinst) and the .rpm (%pre); useradd comes with both
# (Debian's passwd, RHEL's shadow-utils), adduser does not. The user is kept
# on removal, as Debian policy and Fedora's guidelines ask: files it owned
# would otherwise pass to the next user given its uid.
set -e

if ! getent group gpuwatch >/dev/null; then
  groupadd --system gpuwatch
fi
if ! getent passwd gpuwatch >/dev/null; then
  useradd --system --gid gpuwatch --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin --comment "gpuwatch GPU exporter" gpuwatch
fi
