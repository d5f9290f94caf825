//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// What the report tests share within one run of the package: the
// backfilled history (promtool runs once per start) and one Prometheus
// serving it to the tests that only query it. Both outlive the test that
// makes them; removeHistoryBlocks, from TestMain, ends them.

// packageCleanups are the shared fixtures' cleanups, run in reverse order
// by removeHistoryBlocks.
var packageCleanups struct {
	sync.Mutex
	fns []func()
}

func addPackageCleanup(f func()) {
	packageCleanups.Lock()
	defer packageCleanups.Unlock()
	packageCleanups.fns = append(packageCleanups.fns, f)
}

// removeHistoryBlocks ends what the report tests share: it stops the
// shared Prometheus servers and removes the history blocks and the
// fixtures' other files, the last made first (a server before the
// directory it serves). TestMain calls it after the tests.
func removeHistoryBlocks() {
	packageCleanups.Lock()
	fns := packageCleanups.fns
	packageCleanups.fns = nil
	packageCleanups.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
}

// fixtureTB stands for the test that starts a shared fixture, so that what
// the fixture starts (a process, its port, its files) lasts until the
// package's tests end: its cleanups and temporary directories are the
// package's. It never counts as failed, because its cleanups run after the
// test has ended, when it can no longer log; a test that uses the fixture
// logs the fixture's output when it fails instead.
type fixtureTB struct{ testing.TB }

func (fixtureTB) Cleanup(f func()) { addPackageCleanup(f) }

func (fixtureTB) Failed() bool { return false }

func (f fixtureTB) TempDir() string {
	f.Helper()
	dir, err := os.MkdirTemp("", "gpuwatch-e2e-fixture-")
	if err != nil {
		f.Fatal(err)
	}
	addPackageCleanup(func() { _ = os.RemoveAll(dir) })
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
	blocks := filepath.Join(fixtureTB{t}.TempDir(), "tsdb")
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
	ftb := fixtureTB{t}
	addr, p := startPrometheusProcess(ftb, copyHistory(t, start, ftb.TempDir()))
	logOnFailure(t, p)
	url := "http://" + addr
	waitForHistory(t, url, start)
	sharedHistory.servers[start] = sharedServer{url, p}
	return url
}

// logOnFailure logs the shared server p's output when t fails.
func logOnFailure(t *testing.T, p *testenv.Process) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of the shared %s:\n%s", filepath.Base(p.Cmd.Path), p.Output.String())
		}
	})
}
