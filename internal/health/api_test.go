package health

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

type sourceFunc func(ctx context.Context) (*snapshot.Snapshot, error)

func (f sourceFunc) Snapshot(ctx context.Context) (*snapshot.Snapshot, error) { return f(ctx) }

func TestHandler(t *testing.T) {
	h := newHost(2)
	h.xid(1, 79)
	j := NewJudge(DefaultPolicy())
	src := sourceFunc(func(context.Context) (*snapshot.Snapshot, error) {
		s := h.snap(0)
		j.Enrich(context.Background(), s)
		return s, nil
	})
	rec := httptest.NewRecorder()
	Handler(src, time.Second).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/health", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var r Report
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "fail" || len(r.GPUs) != 2 || r.GPUs[1].Status != "fail" || !strings.Contains(r.Reason, "XID 79") || len(r.Node) != 1 {
		t.Fatalf("report = %+v", r)
	}
	for _, c := range r.GPUs[1].Checks {
		if c.Name == CheckXID && (c.Since == nil || !c.Since.Equal(t0)) {
			t.Errorf("xid since = %v", c.Since)
		}
		if c.Status == "ok" && c.Since != nil {
			t.Errorf("passing check %s has a since", c.Name)
		}
	}
	// A collection that does not finish in time: 503 within the bound.
	hung := sourceFunc(func(ctx context.Context) (*snapshot.Snapshot, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	rec = httptest.NewRecorder()
	Handler(hung, 10*time.Millisecond).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/health", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no GPU collection: context deadline exceeded") {
		t.Errorf("hung source: %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	Handler(src, time.Second).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/health", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
	// No health stage: unknown, not ok.
	if r := NewReport(&snapshot.Snapshot{}); r.Status != "unknown" {
		t.Errorf("report without verdicts = %+v", r)
	}
}
