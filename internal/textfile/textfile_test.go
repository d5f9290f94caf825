package textfile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func testRegistry(v float64) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpu_test_value", Help: "A test gauge."})
	g.Set(v)
	reg.MustRegister(g)
	return reg
}

func TestWriteIsAtomicAndLeavesNoTemporaries(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "gpu.prom")
	if err := Write(testRegistry(1), out); err != nil {
		t.Fatal(err)
	}
	if err := Write(testRegistry(2), out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "gpu_test_value 2\n") {
		t.Fatalf("file holds %q", data)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only gpu.prom", len(entries))
	}
}

func TestWriteRejectsNamesNodeExporterIgnores(t *testing.T) {
	err := Write(testRegistry(1), filepath.Join(t.TempDir(), "gpu.txt"))
	if err == nil || !strings.Contains(err.Error(), ".prom") {
		t.Fatalf("err = %v", err)
	}
}

func TestWriteIntoMissingDirectoryFailsClearly(t *testing.T) {
	err := Write(testRegistry(1), "/nonexistent-dir-for-gpuwatch/gpu.prom")
	if err == nil || !strings.Contains(err.Error(), "nonexistent-dir-for-gpuwatch") {
		t.Fatalf("err = %v", err)
	}
}

type failingGatherer struct{}

func (failingGatherer) Gather() ([]*dto.MetricFamily, error) { return nil, errors.New("boom") }

func TestFailedGatherKeepsPreviousFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gpu.prom")
	if err := Write(testRegistry(5), out); err != nil {
		t.Fatal(err)
	}
	if err := Write(failingGatherer{}, out); err == nil {
		t.Fatal("want the gather error")
	}
	data, _ := os.ReadFile(out)
	if !strings.Contains(string(data), "gpu_test_value 5") {
		t.Fatalf("previous file was clobbered: %q", data)
	}
}

func TestLoopRewritesUntilCancelled(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gpu.prom")
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "gpu_test_writes_total", Help: "Writes."})
	reg.MustRegister(c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Loop(ctx, gatherAndCount{reg, c}, out, 5*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	testenv.Eventually(t, 5*time.Second, func() error {
		if data, _ := os.ReadFile(out); !strings.Contains(string(data), "gpu_test_writes_total 3") {
			return fmt.Errorf("loop did not rewrite the file: %q", data)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// gatherAndCount bumps a counter on every gather so the test can see rewrites.
type gatherAndCount struct {
	reg *prometheus.Registry
	c   prometheus.Counter
}

func (g gatherAndCount) Gather() ([]*dto.MetricFamily, error) {
	g.c.Inc()
	return g.reg.Gather()
}

func TestRemoveStaleTempsRemovesOnlyItsOwn(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "gpu.prom")
	for _, name := range []string{".gpu.prom.tmp-123", ".gpu.prom.tmp-456", "other.prom", ".other.prom.tmp-1", "gpu.prom"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := RemoveStaleTemps(out)
	if err != nil || n != 2 {
		t.Fatalf("RemoveStaleTemps = %d, %v; want 2 removed", n, err)
	}
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != ".other.prom.tmp-1 gpu.prom other.prom" {
		t.Errorf("left %q", got)
	}
}
