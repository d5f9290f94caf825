//go:build linux

// Package faults is the fault matrix: the built gpuwatch binary against
// hung, lost and erroring GPUs (the simulator's faults), stuck and hostile
// /proc trees, hung and garbage container-runtime and Slurm answers,
// hostile clients, bad configuration and signals.
//
// Every case asserts three things: gpuwatch does not crash (it is alive
// at the end and exits 0 on SIGTERM; a refused start exits non-zero with
// one line naming the culprit, never a panic), every scrape returns within
// --collection.timeout plus a margin, and nothing leaks (goroutines and
// file descriptors are back to their baseline once the fault ends, or
// stop growing while it lasts forever). At the end the run prints a table
// of case → outcome; FAULTS_TABLE=FILE also writes it to FILE (the
// README's reliability section keeps a copy).
package faults

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var gpuwatchBin string

func TestMain(m *testing.M) {
	flag.Parse()
	// The cases mostly wait (for hangs, timeouts and deadlines), so more
	// of them run at once than there are cores, unless -parallel is given.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	code := testenv.RunWithGpuwatch(m, "faults", &gpuwatchBin)
	printTable(code)
	os.Exit(code)
}

// outcome is one row of the matrix table.
type outcome struct {
	area, name, result, detail string
}

var (
	resultsMu sync.Mutex
	results   []outcome
)

// record adds the case's row when the test ends, with its result.
func record(t *testing.T, area, detail string) {
	t.Cleanup(func() {
		res := "ok"
		switch {
		case t.Failed():
			res = "FAIL"
		case t.Skipped():
			res = "skipped"
		}
		resultsMu.Lock()
		results = append(results, outcome{area, strings.TrimPrefix(t.Name(), "Test"), res, detail})
		resultsMu.Unlock()
	})
}

func printTable(code int) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].area != results[j].area {
			return results[i].area < results[j].area
		}
		return results[i].name < results[j].name
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "| Area | Case | Fault and what is checked | Outcome |\n|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.area, r.name, r.detail, r.result)
	}
	fmt.Fprintf(&b, "\n%d cases, %s, go test exit %d.\n", len(results), time.Now().UTC().Format("2006-01-02"), code)
	fmt.Print("\nFault matrix\n\n" + b.String())
	if path := os.Getenv("FAULTS_TABLE"); path != "" {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "FAULTS_TABLE:", err)
		}
	}
}

// instance is a running `gpuwatch serve`.
type instance struct {
	*testenv.Process
	t      *testing.T
	base   string
	budget time.Duration // collection timeout plus margin: no scrape may take longer

	baseGoroutines, baseFDs int
	startFailed             bool
}

// margin is what a scrape may take beyond --collection.timeout: rendering
// and the HTTP round trip, on a busy 2-core machine running other cases.
const margin = 3 * time.Second

// start runs gpuwatch serve with args on a free port (the case gives
// --collection.timeout; 2s when it does not), waits for /healthz, and
// stops it at the end of the test, asserting a clean exit (status 0).
func start(t *testing.T, args ...string) *instance {
	t.Helper()
	timeout := 2 * time.Second
	has := false
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--collection.timeout="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			timeout, has = d, true
		}
	}
	if !has {
		args = append(args, "--collection.timeout="+timeout.String())
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	args = append([]string{"--web.listen-address=" + addr, "--log.level=debug"}, args...)
	h := &instance{t: t, base: "http://" + addr, budget: timeout + margin}
	h.Process = testenv.StartProcess(t, nil, gpuwatchBin, args...)
	// Registered after StartProcess's cleanup, so it runs first and sees
	// how gpuwatch exits on SIGTERM.
	t.Cleanup(func() { h.stop(timeout) })
	h.startFailed = true // until /healthz answers: the start's failure is the one to report
	testenv.WaitHealthy(t, h.Process, h.base)
	h.startFailed = false
	return h
}

// stop sends SIGTERM and asserts the exit: status 0 within the drain.
func (h *instance) stop(collectionTimeout time.Duration) {
	t := h.t
	if h.startFailed {
		return
	}
	if h.Exited() {
		t.Errorf("gpuwatch crashed: %v\n%s", h.Cmd.ProcessState, h.tail())
		return
	}
	_ = h.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.Done:
		if code := h.Cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("gpuwatch exited %d on SIGTERM, want 0\n%s", code, h.tail())
		}
	case <-time.After(collectionTimeout + 2*margin):
		_ = h.Cmd.Process.Kill()
		<-h.Done
		t.Errorf("gpuwatch did not exit within %s of SIGTERM\n%s", collectionTimeout+2*margin, h.tail())
	}
	if out := h.Output.String(); strings.Contains(out, "panic:") || stackTrace.MatchString(out) {
		t.Errorf("gpuwatch printed a panic or a stack\n%s", h.tail())
	}
}

// stackTrace matches the goroutine header of a Go stack dump.
var stackTrace = regexp.MustCompile(`(?m)^goroutine \d+ \[`)

func (h *instance) tail() string {
	s := h.Output.String()
	if len(s) > 6000 {
		s = "..." + s[len(s)-6000:]
	}
	return s
}

// scrape GETs /metrics and fails the test when it takes longer than the
// budget or does not answer 200. It returns the page.
func (h *instance) scrape() string {
	h.t.Helper()
	body, took, err := h.get("/metrics", h.budget+5*time.Second)
	if err != nil {
		h.t.Fatalf("scrape: %v\n%s", err, h.tail())
	}
	if took > h.budget {
		h.t.Errorf("scrape took %v, over the collection timeout plus margin (%v)", took.Round(time.Millisecond), h.budget)
	}
	return body
}

// metrics scrapes (checking the time, as scrape does) and parses the page.
func (h *instance) metrics() testenv.Metrics {
	h.t.Helper()
	return testenv.ParseMetrics(h.t, h.scrape())
}

func (h *instance) get(path string, limit time.Duration) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+path, nil)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", time.Since(start), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("GET %s: %s: %s", path, resp.Status, firstLine(string(b)))
	}
	return string(b), took, err
}

// baseline records goroutines and fds after a few scrapes have warmed
// caches up.
func (h *instance) baseline() {
	h.t.Helper()
	for range 3 {
		h.scrape()
	}
	h.baseGoroutines, h.baseFDs = h.goroutines(), h.fds()
}

// slack is how far goroutines and fds may sit above the baseline: the
// HTTP server's connection to the test itself, a runtime's keep-alive
// connection and the like come and go.
const slack = 6

// noLeak waits up to 15s for goroutines and fds to be back within slack
// of the baseline.
func (h *instance) noLeak() {
	h.t.Helper()
	var g, f int
	deadline := time.Now().Add(15 * time.Second)
	for {
		http.DefaultClient.CloseIdleConnections()
		g, f = h.goroutines(), h.fds()
		if g <= h.baseGoroutines+slack && f <= h.baseFDs+slack {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Errorf("leak after the fault: goroutines %d (baseline %d), fds %d (baseline %d)", g, h.baseGoroutines, f, h.baseFDs)
}

// goroutines reads go_goroutines from a scrape (which checks its time).
func (h *instance) goroutines() int {
	h.t.Helper()
	v, ok := testenv.Sample(h.metrics(), "go_goroutines", nil)
	if !ok {
		h.t.Fatal("no go_goroutines in the scrape")
	}
	return int(v)
}

// fds counts gpuwatch's open file descriptors.
func (h *instance) fds() int {
	h.t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.Cmd.Process.Pid))
	if err != nil {
		h.t.Fatalf("reading gpuwatch's fds: %v", err)
	}
	return len(entries)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// writeFile writes a fixture file, failing the test on error.
func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// simConfig writes a simulator config into the test's temp dir.
func simConfig(t *testing.T, yaml string) string {
	t.Helper()
	return writeFile(t, filepath.Join(t.TempDir(), "sim.yaml"), yaml)
}
