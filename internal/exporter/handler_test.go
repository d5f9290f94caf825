package exporter

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// swappableSource hands out whichever snapshot is current.
type swappableSource struct {
	snap atomic.Pointer[snapshot.Snapshot]
}

func (s *swappableSource) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	return s.snap.Load(), nil
}

func scrapeWith(t testing.TB, h interface {
	ServeHTTP(http.ResponseWriter, *http.Request)
}, gz bool) string {
	t.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body io.Reader = rec.Body
	if gz {
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Error(err)
			return ""
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}

// Scrapes that get the same snapshot get the same rendered page: changing
// the snapshot behind the exporter's back does not show until a new
// snapshot arrives. (Snapshots are read-only; this only proves the sharing.)
func TestScrapesOfOneSnapshotShareItsPage(t *testing.T) {
	src := &swappableSource{}
	first := fullSnapshot(2, 0)
	src.snap.Store(first)
	e, err := New(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := e.TextHandler(nil)
	const before = `gpu_power_usage_watts{gpu="0",uuid="`
	for _, gz := range []bool{false, true} {
		if body := scrapeWith(t, h, gz); !strings.Contains(body, before) {
			t.Fatalf("no power series:\n%s", body)
		}
	}
	first.Devices[0].Power.Usage = snapshot.Opt[float64]{} // would drop the series if re-rendered
	for _, gz := range []bool{false, true} {
		if body := scrapeWith(t, h, gz); !strings.Contains(body, before) {
			t.Errorf("gzip=%v: page was rendered again for the same snapshot", gz)
		}
	}
	second := fullSnapshot(2, 0)
	second.Devices[0].Power.Usage = snapshot.Opt[float64]{}
	src.snap.Store(second)
	for _, gz := range []bool{false, true} {
		if body := scrapeWith(t, h, gz); strings.Contains(body, before) {
			t.Errorf("gzip=%v: a new snapshot still served the old page", gz)
		}
	}
}

// Many scrapers while snapshots change underneath: every answer is a whole,
// valid page of one of the snapshots, plain or gzipped (run with -race).
func TestConcurrentScrapesAcrossSnapshots(t *testing.T) {
	src := &swappableSource{}
	src.snap.Store(fullSnapshot(8, 2))
	e, err := New(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := e.TextHandler(nil)
	want := scrapeWith(t, h, false)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				if w == 0 && i%5 == 0 {
					src.snap.Store(fullSnapshot(8, 2)) // same content, new snapshot
				}
				if got := scrapeWith(t, h, i%2 == 0); got != want {
					t.Errorf("scraper %d, scrape %d: page differs (%d bytes, want %d)", w, i, len(got), len(want))
					return
				}
			}
		})
	}
	wg.Wait()
}

// A gzipped answer is one gzip member holding the page and the extra
// families: a reader that stops after the first member (curl 7.88's) gets
// all of it, equal to the plain answer, with nothing after it; scrapes
// that share the page's compression each get a whole member.
func TestGzippedAnswerIsOneMember(t *testing.T) {
	src := &swappableSource{}
	src.snap.Store(fullSnapshot(2, 0))
	e, err := New(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	extra := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "extra_family_total", Help: "A family of the extra gatherer."})
	c.Add(3)
	extra.MustRegister(c)
	h := e.TextHandler(extra)
	plain := scrapeWith(t, h, false)
	if !strings.Contains(plain, "extra_family_total 3") || !strings.Contains(plain, "gpu_up{") {
		t.Fatalf("plain answer lacks the GPUs or the extra family:\n%s", plain)
	}
	for i := range 3 { // the first compresses the page, the others share it
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		zr.Multistream(false)
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		if string(got) != plain {
			t.Errorf("scrape %d: the first gzip member holds %d bytes, the plain answer %d; want the same text", i, len(got), len(plain))
		}
		if rest := rec.Body.Len(); rest != 0 {
			t.Errorf("scrape %d: %d bytes after the first gzip member", i, rest)
		}
	}
}
