#!/usr/bin/env bash
# `make release`: gpuwatch for linux/amd64 and linux/arm64, linked against
# Debian 11's glibc so that it runs on glibc 2.17 and later, as tarballs,
# .deb and .rpm packages; gpuwatch.exe for windows/amd64 as a zip; and
# SHA256SUMS, all in dist/.
#
# The binaries are built inside the bullseye root of scripts/release/rootfs.sh,
# with this machine's Go toolchain, module cache and build cache bind-mounted
# at the same paths (so nothing is downloaded there and unchanged packages
# are not recompiled); arm64 with Debian's aarch64-linux-gnu-gcc cross
# compiler from that root. LDFLAGS, VERSION and CGO_CFLAGS come from the Makefile.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"

: "${VERSION:?set by make release}" "${LDFLAGS:?set by make release}" "${CGO_CFLAGS:?set by make release}"
if [ "$(id -u)" -ne 0 ]; then
  echo "release: needs root (debootstrap, chroot and mounts); run make release as root" >&2
  exit 1
fi
nfpm_version=v2.45.0 # see packaging/nfpm.yaml; newer ones need modules the proxy here refuses
dist="$repo/dist"

root="$(scripts/release/rootfs.sh | tail -1)/bullseye-build"
goroot=$(go env GOROOT) modcache=$(go env GOMODCACHE) gocache=$(go env GOCACHE)
go mod download

nfpm="$repo/.cache/tools/nfpm-$nfpm_version/nfpm"
if [ ! -x "$nfpm" ]; then
  echo "release: go install nfpm@$nfpm_version"
  GOBIN="$(dirname "$nfpm")" go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$nfpm_version"
fi

rm -rf "$dist"
mkdir -p "$dist"
# Timestamps inside the archives are the commit's, so a rebuild of one
# commit gives the same bytes.
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)

for arch in amd64 arm64; do
  case "$arch" in
    amd64) cc=gcc ;;
    arm64) cc=aarch64-linux-gnu-gcc ;;
  esac
  name="gpuwatch-$VERSION.linux-$arch"
  mkdir -p "$dist/$name"
  echo "release: build $name in $root"
  scripts/release/chroot-run.sh \
    --bind "$goroot" --bind "$modcache" --bind "$gocache" --bind "$repo" \
    --workdir "$repo" "$root" -- \
    env -i PATH="$goroot/bin:/usr/bin:/bin" HOME=/root \
      GOROOT="$goroot" GOMODCACHE="$modcache" GOCACHE="$gocache" \
      GOPROXY=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local GOTELEMETRY=off \
      CGO_ENABLED=1 GOOS=linux GOARCH="$arch" CC="$cc" CGO_CFLAGS="$CGO_CFLAGS" \
      go build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$dist/$name/gpuwatch" ./cmd/gpuwatch
  cp LICENSE README.md "$dist/$name/"
  tar -C "$dist" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"

  for packager in deb rpm; do
    VERSION="$VERSION" ARCH="$arch" BINARY="$dist/$name/gpuwatch" SOURCE_DATE_EPOCH="$epoch" \
      "$nfpm" package --config packaging/nfpm.yaml --packager "$packager" --target "$dist/" >/dev/null
  done
done

# Windows: pure Go (no cgo; the nvidia-smi backend), so it needs no Debian
# root; a zip, which Windows unpacks by itself. Entries in a fixed order
# with the commit's time (zip stores local time: UTC here), no uid/gid
# fields (-X): one commit, the same bytes.
name="gpuwatch-$VERSION.windows-amd64"
mkdir -p "$dist/$name"
echo "release: build $name"
GOOS=windows GOARCH=amd64 CGO_ENABLED=0 GOFLAGS=-mod=readonly \
  go build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$dist/$name/gpuwatch.exe" ./cmd/gpuwatch
cp LICENSE README.md packaging/windows/README-windows.txt "$dist/$name/"
touch -d "@$epoch" "$dist/$name" "$dist/$name"/*
(cd "$dist" && TZ=UTC zip -X -9 -q "$name.zip" "$name/" "$name/LICENSE" "$name/README-windows.txt" "$name/README.md" "$name/gpuwatch.exe")

(cd "$dist" && sha256sum -- *.tar.gz *.zip *.deb *.rpm >SHA256SUMS)
echo "release: $VERSION in dist/:"
(cd "$dist" && ls -1 -- *.tar.gz *.zip *.deb *.rpm SHA256SUMS)
