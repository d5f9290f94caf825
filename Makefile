# go-nvml dlopens libnvidia-ml.so.1 at run time; lazy binding keeps the
# dynamic linker from resolving NVML symbols at start (go-nvml's advice).
VERSION_PKG := github.com/prometheus/common/version
# The build date is the commit's, so that two builds of one commit are the same bytes.
LDFLAGS := -extldflags=-Wl,-z,lazy \
	-X $(VERSION_PKG).Version=$(shell git describe --tags --always --dirty 2>/dev/null || echo dev) \
	-X $(VERSION_PKG).Revision=$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown) \
	-X $(VERSION_PKG).Branch=$(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown) \
	-X $(VERSION_PKG).BuildDate=$(shell git log -1 --format=%cd --date=format:%Y%m%d-%H:%M:%S 2>/dev/null || echo unknown)

.PHONY: build test test-short bench bench-report run golden chart-files manifests

build:
	CGO_ENABLED=1 go build -ldflags '$(LDFLAGS)' -o bin/gpuwatch ./cmd/gpuwatch

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
