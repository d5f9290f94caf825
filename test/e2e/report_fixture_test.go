//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// What the report tests share within one run of the package: the
// backfilled history (promtool runs once per start), one Prometheus
// serving it to the tests that only query it, and the demo with a
// Prometheus scraping it. Each outlives the test that starts it;
// removeHistoryBlocks, from TestMain, ends those still running.

// fixture holds what one shared fixture started, as cleanups that stop
// and remove it.
type fixture struct {
	mu  sync.Mutex
	fns []func()
}

// fixtures are every fixture made, in order.
var fixtures struct {
	sync.Mutex
	all []*fixture
}

func newFixture() *fixture {
	f := &fixture{}
	fixtures.Lock()
	defer fixtures.Unlock()
	fixtures.all = append(fixtures.all, f)
	return f
}

func (f *fixture) add(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fns = append(f.fns, fn)
}

// stop runs the fixture's cleanups, the last added first (a server before
// its directory); a second stop does nothing.
func (f *fixture) stop() {
	f.mu.Lock()
	fns := f.fns
	f.fns = nil
	f.mu.Unlock()
	for _, fn := range slices.Backward(fns) {
		fn()
	}
}

// removeHistoryBlocks ends what the report tests share: it stops the
// shared servers and removes the history blocks and the fixtures' other
// files, the last fixture first. TestMain calls it after the tests.
func removeHistoryBlocks() {
	fixtures.Lock()
	all := fixtures.all
	fixtures.all = nil
	fixtures.Unlock()
	for _, f := range slices.Backward(all) {
		f.stop()
	}
}

// fixtureTB stands for the test that starts a shared fixture, so that what
// the fixture starts (a process, its port, its files) lasts until the
// fixture stops: its cleanups and temporary directories are the
// fixture's. It never counts as failed, because its cleanups run after the
// test has ended, when it can no longer log; a test that uses the fixture
// logs the fixture's output when it fails instead.
type fixtureTB struct {
	testing.TB
	f *fixture
}

func (tb fixtureTB) Cleanup(fn func()) { tb.f.add(fn) }

func (fixtureTB) Failed() bool { return false }

func (tb fixtureTB) TempDir() string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "gpuwatch-e2e-fixture-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.f.add(func() { _ = os.RemoveAll(dir) })
	return dir
}

// historyBlocks holds the backfilled fixture per start. Nobody serves these
// blocks: callers get copies.
var historyBlocks = struct {
	sync.Mutex
	dirs map[time.Time]string
}{dirs: map[time.Time]string{}}

// backfillHistory returns a new TSDB directory holding the fixture from
// start. promtool backfills it once per start for the whole package (the
// fixture depends on start alone); each caller gets its own copy of the
// blocks, since the Prometheus it starts writes into its directory.
func backfillHistory(t *testing.T, start time.Time) string {
	t.Helper()
	return copyHistory(t, start, t.TempDir())
}

// copyHistory copies the fixture from start (backfilled on the first call)
// into a new directory tsdb under dir and returns its path.
func copyHistory(t *testing.T, start time.Time, dir string) string {
	t.Helper()
	tsdb := filepath.Join(dir, "tsdb")
	if err := os.CopyFS(tsdb, os.DirFS(historyBlocksFrom(t, start))); err != nil {
		t.Fatal(err)
	}
	return tsdb
}

// historyBlocksFrom returns the directory of the fixture's blocks from
// start, backfilling them on the first call.
func historyBlocksFrom(t *testing.T, start time.Time) string {
	t.Helper()
	historyBlocks.Lock()
	defer historyBlocks.Unlock()
	if blocks, ok := historyBlocks.dirs[start]; ok {
		return blocks
	}
	built := backfill(t, start, writeReportHistory)
	// Moved out of the caller's TempDir, which goes when the caller ends.
	blocks := filepath.Join(fixtureTB{t, newFixture()}.TempDir(), "tsdb")
	if err := os.Rename(built, blocks); err != nil {
		t.Fatal(err)
	}
	historyBlocks.dirs[start] = blocks
	return blocks
}

// backfill writes the history that write makes into a new TSDB directory
// with promtool.
func backfill(t *testing.T, start time.Time, write func(*testing.T, string, time.Time)) string {
	t.Helper()
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	dir := t.TempDir()
	history := filepath.Join(dir, "history.om")
	write(t, history, start)
	tsdb := filepath.Join(dir, "tsdb")
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", history, tsdb).CombinedOutput(); err != nil {
		t.Fatalf("promtool backfill: %v\n%s", err, out)
	}
	return tsdb
}

// startPrometheusOn starts Prometheus on a TSDB directory; extra flags add,
// say, a web config. The lookback is shorter than the sample interval, so a
// series counts at exactly the steps that have a sample (the end of an
// allocation is exact). It returns the listen address.
func startPrometheusOn(t *testing.T, tsdb string, extra ...string) string {
	t.Helper()
	addr, _ := startPrometheusProcess(t, tsdb, extra...)
	return addr
}

func startPrometheusProcess(t testing.TB, tsdb string, extra ...string) (string, *testenv.Process) {
	t.Helper()
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	cfg := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global: {scrape_interval: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p := testenv.StartProcess(t, nil, promBin, append([]string{"--config.file=" + cfg, "--storage.tsdb.path=" + tsdb, "--storage.tsdb.retention.time=30d",
		"--query.lookback-delta=4m", "--web.listen-address=" + addr}, extra...)...)
	return addr, p
}

// waitForHistory waits until the Prometheus at url serves the fixture from
// start: its four GPUs an hour in.
func waitForHistory(t *testing.T, url string, start time.Time) {
	t.Helper()
	testenv.WaitFor(t, 60*time.Second, "Prometheus to load the history", func() bool {
		v, ok := promQuery(t, url, fmt.Sprintf(`count(gpu_up @ %d)`, start.Add(time.Hour).Unix()))
		return ok && v == 4
	})
}

// sharedServer is a server the package's tests share.
type sharedServer struct {
	url  string
	proc *testenv.Process
}

// sharedHistory holds the shared Prometheus per start of the fixture.
var sharedHistory = struct {
	sync.Mutex
	servers map[time.Time]sharedServer
}{servers: map[time.Time]sharedServer{}}

// sharedHistoryPrometheus returns the URL of a Prometheus serving the
// fixture from start over plain HTTP with startPrometheusOn's flags,
// started once per start for all the package's tests that only query it:
// a test that needs other flags, or a server it can break, starts its own.
// When the test fails, it logs the server's output.
func sharedHistoryPrometheus(t *testing.T, start time.Time) string {
	t.Helper()
	sharedHistory.Lock()
	defer sharedHistory.Unlock()
	s, ok := sharedHistory.servers[start]
	if ok {
		logOnFailure(t, s.proc)
		return s.url
	}
	ftb := fixtureTB{t, newFixture()}
	addr, p := startPrometheusProcess(ftb, copyHistory(t, start, ftb.TempDir()))
	logOnFailure(t, p)
	url := "http://" + addr
	waitForHistory(t, url, start)
	sharedHistory.servers[start] = sharedServer{url, p}
	return url
}

// logOnFailure logs the shared processes' output when t fails.
func logOnFailure(t *testing.T, procs ...*testenv.Process) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			t.Logf("output of the shared %s:\n%s", strings.Join(p.Cmd.Args, " "), p.Output.String())
		}
	})
}

// demoMaxAge is the oldest history sharedDemoPrometheus hands out, well
// inside the hour over which the gpu_hours rules count (checkRulesAgree
// compares them with a report from before the first scrape).
const demoMaxAge = 10 * time.Minute

// sharedDemo is the demo and its Prometheus (demoPrometheus) that the
// tests which only query its history share.
var sharedDemo struct {
	sync.Mutex
	f     *fixture
	url   string
	first time.Time
	procs []*testenv.Process
}

// sharedDemoPrometheus returns the URL of demoPrometheus's Prometheus and
// the time of its first scrape, starting them for the first test that asks
// and keeping them for the next until stopSharedDemo: history accumulates
// while the tests in between run, and the test that needs the most of it
// waits the less. When the test fails, it logs their output.
func sharedDemoPrometheus(t *testing.T) (string, time.Time) {
	t.Helper()
	sharedDemo.Lock()
	defer sharedDemo.Unlock()
	if sharedDemo.f != nil && time.Since(sharedDemo.first) > demoMaxAge {
		sharedDemo.f.stop()
		sharedDemo.f = nil
	}
	if sharedDemo.f == nil {
		f := newFixture()
		url, procs := demoPrometheus(fixtureTB{t, f})
		logOnFailure(t, procs...)
		first := firstScrape(t, url)
		sharedDemo.f, sharedDemo.url, sharedDemo.first, sharedDemo.procs = f, url, first, procs
		return url, first
	}
	logOnFailure(t, sharedDemo.procs...)
	return sharedDemo.url, sharedDemo.first
}

// stopSharedDemo stops the shared demo, so that it costs the tests after
// the last that needs it nothing; a later test that asks starts a new one.
func stopSharedDemo() {
	sharedDemo.Lock()
	defer sharedDemo.Unlock()
	if sharedDemo.f != nil {
		sharedDemo.f.stop()
		sharedDemo.f = nil
	}
}
