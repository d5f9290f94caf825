#!/usr/bin/env bash
# `make image`: builds the Dockerfile with podman as localhost/gpuwatch:VERSION.
# Without a registry, the builder and the base are imported from the
# debootstrap roots of scripts/release/rootfs.sh (Debian 11, like the
# release binaries), and Go's toolchain, module cache and build cache are
# mounted into the build. Set BUILDER_IMAGE and BASE_IMAGE to build from
# public images instead (the Dockerfile's defaults).
# RUN steps use chroot isolation: this sandbox lets podman build but not
# run containers (see /work/shared/notes/environment.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${VERSION:?set by make image}"
podman=scripts/release/podman.sh

build_args=()
if [ -z "${BUILDER_IMAGE:-}${BASE_IMAGE:-}" ]; then
  rootfs=$(scripts/release/rootfs.sh | tail -1)
  BUILDER_IMAGE=localhost/gpuwatch-builder:bullseye
  BASE_IMAGE=localhost/debian-minbase:bullseye
  import() { # image, root, tar options
    local image="$1" root="$2"; shift 2
    "$podman" image exists "$image" && return 0
    echo "image: import $root as $image"
    # /tmp holds make release's build directories while it runs.
    tar -C "$root" --exclude=./.complete --exclude='./tmp/*' --exclude='./proc/*' "$@" -cf - . \
      | "$podman" import -q - "$image" >/dev/null
  }
  # The builder needs gcc and libc6-dev, not the arm64 cross compiler. Its
  # Go is this machine's, mounted at the golang image's path, with the
  # module and build caches at the paths Go uses for root.
  import "$BUILDER_IMAGE" "$rootfs/bullseye-build" --exclude=./usr/lib/gcc-cross --exclude=./usr/aarch64-linux-gnu
  import "$BASE_IMAGE" "$rootfs/bullseye"
  goroot=$(go env GOROOT)
  go mod download
  build_args+=(--volume "$goroot:/usr/local/go:ro"
               --volume "$(go env GOMODCACHE):/root/go/pkg/mod"
               --volume "$(go env GOCACHE):/root/.cache/go-build"
               --build-arg GOPROXY=off --build-arg CGO_CFLAGS="${CGO_CFLAGS:-}")
fi

image="localhost/gpuwatch:$VERSION"
echo "image: build $image from $BUILDER_IMAGE and $BASE_IMAGE"
"$podman" build --isolation=chroot --layers=false --pull=never \
  --build-arg BUILDER_IMAGE="$BUILDER_IMAGE" --build-arg BASE_IMAGE="$BASE_IMAGE" \
  --build-arg VERSION="$VERSION" \
  --build-arg REVISION="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --build-arg BUILD_DATE="$(git log -1 --format=%cd --date=format:%Y%m%d-%H:%M:%S 2>/dev/null || echo unknown)" \
  "${build_args[@]}" -t "$image" . >.cache/podman-build.log 2>&1 \
  || { tail -30 .cache/podman-build.log >&2; exit 1; }
echo "$image"
