package server

import (
	"errors"
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
