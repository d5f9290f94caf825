# gpuwatch container image: the binary built from this source tree in a Go
# image, copied onto a small glibc base (go-nvml dlopens the driver's
# libnvidia-ml.so.1, which needs glibc: no musl, no scratch).
#
#   docker build -t gpuwatch .        # or: podman build -t gpuwatch .
#   docker run -d --gpus all --pid=host -p 9410:9410 \
#     -v /etc/passwd:/host/etc/passwd:ro gpuwatch --path.rootfs=/host
#
# BUILDER_IMAGE and BASE_IMAGE name the usual public images; `make image`
# replaces both with images imported from Debian roots made by debootstrap,
# for machines that reach no registry (see scripts/release/image.sh).
ARG BUILDER_IMAGE=docker.io/library/golang:1.26-bookworm
ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
ENV PATH=/usr/local/go/bin:$PATH CGO_ENABLED=1 GOTOOLCHAIN=local GOTELEMETRY=off GOFLAGS=-mod=readonly
# Empty: Go's default proxy. `make image` sets off (modules come mounted).
ARG GOPROXY
# Empty: Go's default. `make image` passes make release's: with the same
# compiler (the same Debian 11 root) and the build cache mounted, the build
# then reuses what make release compiled for linux/amd64, cgo included.
ARG CGO_CFLAGS
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILD_DATE=unknown
# -z lazy: go-nvml resolves NVML's symbols when called, not at start.
RUN go build -trimpath -buildvcs=false -o /out/gpuwatch \
      -ldflags "-extldflags=-Wl,-z,lazy \
        -X github.com/prometheus/common/version.Version=${VERSION} \
        -X github.com/prometheus/common/version.Revision=${REVISION} \
        -X github.com/prometheus/common/version.Branch=none \
        -X github.com/prometheus/common/version.BuildDate=${BUILD_DATE}" \
      ./cmd/gpuwatch

FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
COPY --from=build /out/gpuwatch /usr/bin/gpuwatch
COPY LICENSE /usr/share/doc/gpuwatch/LICENSE
# The NVIDIA container toolkit mounts libnvidia-ml.so.1 and /dev/nvidia*
# when asked: utility is the capability NVML needs (nvidia-smi's), no CUDA.
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=utility
# Non-root (distroless's "nonroot" id): /dev/nvidia* are 0666 by default.
# Kubernetes deployments that read root-owned kubelet or runtime sockets
# set runAsUser: 0 in their pod spec instead.
USER 65532:65532
EXPOSE 9410
ENTRYPOINT ["/usr/bin/gpuwatch"]
CMD ["serve"]
LABEL org.opencontainers.image.title="gpuwatch" \
      org.opencontainers.image.description="Prometheus exporter for NVIDIA GPUs, with per-process attribution to users, containers, pods and Slurm jobs" \
      org.opencontainers.image.source="https://github.com/gpuwatch/gpuwatch" \
      org.opencontainers.image.url="https://github.com/gpuwatch/gpuwatch" \
      org.opencontainers.image.documentation="https://github.com/gpuwatch/gpuwatch#readme" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="gpuwatch" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
