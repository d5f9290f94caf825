package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func newTestHandler(t *testing.T, ready func() error) http.Handler {
	t.Helper()
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpu_test_value", Help: "A test gauge."})
	g.Set(42)
	reg.MustRegister(g)
	h, err := Handler(Options{TelemetryPath: "/metrics", Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Ready: ready, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestEndpoints(t *testing.T) {
	var readyErr error = errors.New("no collection has completed yet")
	h := newTestHandler(t, func() error { return readyErr })

	if code, body := get(t, h, "/metrics"); code != 200 || !strings.Contains(body, "gpu_test_value 42") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	if code, _ := get(t, h, "/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get(t, h, "/readyz"); code != 503 || !strings.Contains(body, "no collection") {
		t.Fatalf("/readyz before ready = %d %q", code, body)
	}
	readyErr = nil
	if code, _ := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz when ready = %d", code)
	}
	if code, body := get(t, h, "/"); code != 200 || !strings.Contains(body, "gpuwatch") || !strings.Contains(body, "metrics") {
		t.Fatalf("landing page = %d %q", code, body)
	}
	if code, _ := get(t, h, "/nope"); code != 404 {
		t.Fatalf("/nope = %d, want 404", code)
	}
}

func TestTelemetryPathMustBeAbsolute(t *testing.T) {
	if _, err := Handler(Options{TelemetryPath: "metrics", Metrics: http.NotFoundHandler()}); err == nil {
		t.Fatal("want an error for a relative telemetry path")
	}
}

func TestInFlightLimitRejectsInsteadOfQueueing(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
	})
	h := limitInFlight(slow, 1)
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))
		close(done)
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("second concurrent scrape got %d, want 503", rec.Code)
	}
	close(release)
	<-done
}

func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		h, err := Handler(Options{TelemetryPath: "/metrics", Metrics: http.NotFoundHandler(), Pprof: on})
		if err != nil {
			t.Fatal(err)
		}
		code, _ := get(t, h, "/debug/pprof/")
		if want := map[bool]int{false: 404, true: 200}[on]; code != want {
			t.Errorf("pprof=%v: /debug/pprof/ = %d, want %d", on, code, want)
		}
	}
}

// TestTelemetryPathCannotTakeAnotherEndpoint: these used to panic at start
// (a duplicate ServeMux pattern) or serve metrics on every path.
func TestTelemetryPathCannotTakeAnotherEndpoint(t *testing.T) {
	metrics := promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
	for _, tc := range []struct {
		path  string
		pprof bool
		want  string
	}{
		{"/healthz", false, "own /healthz endpoint"},
		{"/readyz", false, "own /readyz endpoint"},
		{"/debug/pprof/", true, "own /debug/pprof endpoint"},
		{"/debug/pprof/cmdline", true, "own /debug/pprof endpoint"},
		{"/", false, "every path"},
		{"/metrics/{x}", false, "plain path"},
		{"/a b", false, "plain path"},
		{"/a/../metrics", false, "not a clean path"},
	} {
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("panic: %v", v)
				}
			}()
			_, err = Handler(Options{TelemetryPath: tc.path, Metrics: metrics, Pprof: tc.pprof})
		}()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--web.telemetry-path") || strings.Contains(err.Error(), "\n") {
			t.Errorf("telemetry path %q: err = %v, want a one-line error saying %q", tc.path, err, tc.want)
		}
	}
	for _, ok := range []string{"/metrics", "/gpu/metrics", "/debug/pprof/x"} {
		if _, err := Handler(Options{TelemetryPath: ok, Metrics: metrics}); err != nil {
			t.Errorf("telemetry path %q refused: %v", ok, err)
		}
	}
}

// TestUITakesTheRootOnly: the live page's handler gets / and the paths
// nothing else serves; metrics and the probes keep their own handlers.
func TestUITakesTheRootOnly(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ui " + r.URL.Path)) })
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })
	h, err := Handler(Options{TelemetryPath: "/metrics", Metrics: metrics, UI: ui})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/": "ui /", "/api/v1/snapshot": "ui /api/v1/snapshot", "/metrics": "metrics", "/healthz": "ok\n", "/readyz": "ready\n",
	} {
		if code, body := get(t, h, path); code != http.StatusOK || body != want {
			t.Errorf("GET %s: %d %q, want %q", path, code, body, want)
		}
	}
}
