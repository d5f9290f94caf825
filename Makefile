# go-nvml dlopens libnvidia-ml.so.1 at run time; lazy binding keeps the
# dynamic linker from resolving NVML symbols at start (go-nvml's advice).
LDFLAGS := -extldflags=-Wl,-z,lazy -X github.com/prometheus/common/version.Version=$(shell git describe --tags --always --dirty 2>/dev/null || echo dev) -X github.com/prometheus/common/version.Revision=$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

.PHONY: build test test-short bench run golden

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
