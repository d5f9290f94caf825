# go-nvml dlopens libnvidia-ml.so.1 at run time; lazy binding keeps the
# dynamic linker from resolving NVML symbols at start (go-nvml's advice).
VERSION_PKG := github.com/prometheus/common/version
# The newest v* tag as git describes it, else the VERSION file.
VERSION := $(shell ./scripts/release/version.sh)
# The build date is the commit's, so that two builds of one commit are the same bytes.
LDFLAGS := -extldflags=-Wl,-z,lazy \
	-X $(VERSION_PKG).Version=$(VERSION) \
	-X $(VERSION_PKG).Revision=$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown) \
	-X $(VERSION_PKG).Branch=$(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown) \
	-X $(VERSION_PKG).BuildDate=$(shell git log -1 --format=%cd --date=format:%Y%m%d-%H:%M:%S 2>/dev/null || echo unknown)

.PHONY: build test test-short bench run golden release image

# -trimpath, as make release builds: no build paths in the binary, and the
# release's chroot build reuses the pure-Go packages compiled here.
build:
	CGO_ENABLED=1 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/gpuwatch ./cmd/gpuwatch

# Release binaries for linux/amd64 and linux/arm64 that run on glibc >= 2.17,
# tarballs, .deb and .rpm, SHA256SUMS, in dist/. Needs root and debootstrap
# (see README, Install).
release:
	LDFLAGS='$(LDFLAGS)' VERSION='$(VERSION)' ./scripts/release/build.sh

# The container image from the Dockerfile, with podman (see README, Install).
image:
	VERSION='$(VERSION)' ./scripts/release/image.sh

test:
	./scripts/test.sh

test-short:
	./scripts/test.sh -short

run: build
	./bin/gpuwatch $(ARGS)

golden:
	GPUWATCH_BIN=$(PWD)/bin/gpuwatch go test ./test/e2e -run TestGolden -update

bench: build
	go run ./bench -bin bin/gpuwatch
