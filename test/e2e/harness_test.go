//go:build linux

// Package e2e drives the built gpuwatch binary against real Prometheus,
// promtool and friends. The simulator stands in for GPUs; everything else
// is the real thing.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var gpuwatchBin string

// e2eParallel is how many of this package's parallel tests run at once
// unless -test.parallel is given: they spend most of their time waiting
// (a hang to pass, Prometheus to scrape, a page to poll), not on the CPU,
// so more than GOMAXPROCS of them at once share the CPUs without slowing
// each other (docs/testing.md, Test time).
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(e2eParallel)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	code := testenv.RunWithGpuwatch(m, "e2e", &gpuwatchBin)
	removeHistoryBlocks()
	os.Exit(code)
}

// startGpuwatch runs `gpuwatch serve` (the binary under test) on a free
// port with the given flags and waits until it answers /healthz. It
// returns the base URL.
func startGpuwatch(t *testing.T, args ...string) (string, *testenv.Process) {
	t.Helper()
	return testenv.StartGpuwatch(t, nil, gpuwatchBin, args...)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}

// httpGetNoFail is httpGet for polling: errors are returned, not fatal.
func httpGetNoFail(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}
