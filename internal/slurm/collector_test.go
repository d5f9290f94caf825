package slurm

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

var update = flag.Bool("update", false, "rewrite the golden .prom files in testdata")

// fileRunner answers Slurm commands from files of a testdata directory and
// counts the calls.
type fileRunner struct {
	dir   string
	mu    sync.Mutex
	calls map[string]int
}

func (f *fileRunner) Run(_ context.Context, path string, args ...string) ([]byte, error) {
	key := filepath.Base(path) + " " + strings.Join(args, " ")
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[key]++
	f.mu.Unlock()
	files := map[string]string{
		"squeue --json": "squeue.json",
		"sinfo --json":  "sinfo.json",
		"sdiag ":        "sdiag.txt",
		"squeue " + strings.Join(SqueueFormattedArgs, " "): "squeue_formatted.txt",
		"sinfo " + strings.Join(SinfoFormattedArgs, " "):   "sinfo_formatted.txt",
	}
	name, ok := files[key]
	if !ok {
		return nil, fmt.Errorf("fileRunner: unexpected command %q", key)
	}
	return os.ReadFile(filepath.Join(f.dir, name))
}

func (f *fileRunner) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

// scrape gathers the collector and renders the text exposition, leaving out
// the series whose values depend on wall time.
func scrape(t testing.TB, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		switch mf.GetName() {
		case mCollectorDuration, mCollectorLastSuccess:
			continue
		}
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/slurm -run Golden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("metrics differ from %s (-want +got):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff lists lines only in want (-) or only in got (+).
func lineDiff(want, got string) string {
	w := map[string]bool{}
	for l := range strings.SplitSeq(want, "\n") {
		w[l] = true
	}
	g := map[string]bool{}
	var b strings.Builder
	for l := range strings.SplitSeq(got, "\n") {
		g[l] = true
		if !w[l] {
			fmt.Fprintf(&b, "+%s\n", l)
		}
	}
	for l := range strings.SplitSeq(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "-%s\n", l)
		}
	}
	return b.String()
}

func TestCollectorGolden(t *testing.T) {
	for _, tc := range []struct{ dir, format, golden string }{
		{"22.05", "json", "metrics.prom"},
		{"22.05", "text", "metrics_text.prom"},
		{"23.11", "json", "metrics.prom"},
	} {
		t.Run(tc.dir+"/"+tc.format, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.dir)
			c, err := NewCollector(Options{Runner: &fileRunner{dir: dir}, Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join(dir, tc.golden), scrape(t, c))
		})
	}
}

// Many scrapes within the poll interval, some concurrent, cost one call of
// each command; after the interval, one more.
func TestCollectorCachesPerPollInterval(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	fr := &fileRunner{dir: filepath.Join("testdata", "22.05")}
	c, err := NewCollector(Options{Runner: fr, PollInterval: 30 * time.Second, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, k := range []string{"squeue --json", "sinfo --json", "sdiag "} {
		if n := fr.count(k); n != 1 {
			t.Errorf("%s ran %d times for 16 concurrent scrapes, want 1", k, n)
		}
	}
	clock.Lock()
	now = now.Add(31 * time.Second)
	clock.Unlock()
	scrape(t, c)
	if n := fr.count("squeue --json"); n != 2 {
		t.Errorf("after the interval squeue ran %d times in all, want 2", n)
	}
}

func TestNewCollectorRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{Format: "xml"}, {Timeout: -time.Second}, {PollInterval: -1}, {MaxOutput: -1}} {
		if _, err := NewCollector(o); err == nil {
			t.Errorf("NewCollector(%+v): no error", o)
		}
	}
}

func TestMetricSpecsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Metrics {
		if seen[s.Name] {
			t.Errorf("%s listed twice", s.Name)
		}
		seen[s.Name] = true
		if !strings.HasPrefix(s.Name, "slurm_") || s.Help == "" || s.Source == "" {
			t.Errorf("%+v: want slurm_ prefix, help and source", s)
		}
		if (s.Type == "counter") != strings.HasSuffix(s.Name, "_total") {
			t.Errorf("%s: type %s and name disagree on _total", s.Name, s.Type)
		}
	}
}

func newTestRegistry(t testing.TB, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}

// gatherText renders every family of reg in the text format.
func gatherText(t testing.TB, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}
