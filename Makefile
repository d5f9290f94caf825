# go-nvml's cgo preamble calls NVML functions that NVIDIA's header marks
# deprecated (it binds every version of the API), so each build of it
# printed about 150 -Wdeprecated-declarations warnings about code that is
# not ours; they are silenced here, for every target and for the scripts
# that build through make (scripts/run.sh). A CGO_CFLAGS from the
# environment wins.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

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

.PHONY: build test test-short bench bench-report run golden chart-files manifests fakenvml release image device-tools

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

golden: fakenvml
	GPUWATCH_BIN=$(PWD)/bin/gpuwatch GPUWATCH_FAKENVML=$(PWD)/build/fakenvml go test ./test/e2e -run TestGolden -update

# The simulator as libnvidia-ml.so.1, one library per driver branch, in
# build/fakenvml/VARIANT/ (VARIANTS='*' builds every variant; see README).
fakenvml:
	go run ./internal/fakedriver/fakenvml/build -o build/fakenvml $(if $(VARIANTS),-variants='$(VARIANTS)')

# The latency runs, the side-by-side comparison with nvidia_gpu_exporter (built from
# PEER_GIT at PEER_REF in a temporary directory; a local clone or mirror serves offline),
# then the soak (100 000 scrapes of dgx-h100, 4 scrapers).
PEER_GIT ?= https://github.com/utkuozdemir/nvidia_gpu_exporter.git
PEER_REF ?= e656cd8
# What the device checks carry to a lent GPU machine, which has no Go
# toolchain (bench/device/*.sh say which each one needs).
device-tools: build
	mkdir -p build/device
	gcc -O2 -o build/device/cudaload bench/device/cudaload.c -ldl
	CGO_ENABLED=1 go build -ldflags '-extldflags=-Wl,-z,lazy' -o build/device/samplesprobe ./bench/device/samplesprobe

bench: build
	go run ./bench -bin bin/gpuwatch
	go run ./bench -bin bin/gpuwatch -scrapes 300 -peer '$(PEER_GIT)' -peer-ref '$(PEER_REF)'
	go run ./bench -bin bin/gpuwatch -soak 100000

# gpuwatch report on a month of 1000 GPUs in VictoriaMetrics (bench/RESULTS.md).
bench-report: build
	go run ./bench/report -bin bin/gpuwatch

# The chart carries copies of the shipped dashboards and rules (helm reads only files inside
# the chart); test/deploy fails when they differ from deploy/grafana and deploy/prometheus.
CHART := deploy/helm/gpuwatch
chart-files:
	./scripts/chart-files.sh

# Plain manifests for kubectl apply, rendered from the chart (test/deploy fails when stale).
manifests: chart-files
	./scripts/render-manifests.sh deploy/kubernetes
