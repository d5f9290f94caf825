// Package server serves gpuwatch over HTTP: the landing page, the metrics
// endpoint and the health probes. TLS and basic auth come from
// exporter-toolkit's web configuration file, the same file format every
// Prometheus exporter uses.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"path"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

// Options configures the HTTP handler.
type Options struct {
	TelemetryPath string // e.g. "/metrics"
	// Metrics serves the telemetry path. gpuwatch passes the exporter's
	// direct text handler; any http.Handler (promhttp's included) works.
	Metrics http.Handler
	// Ready reports whether the exporter can serve useful data; nil error
	// means ready. It backs /readyz.
	Ready   func() error
	Version string
	Logger  *slog.Logger
	// MaxRequestsInFlight caps concurrent scrapes; beyond it a scrape gets
	// 503 at once instead of queueing. 0 means no cap.
	MaxRequestsInFlight int
	// Pprof serves Go's profiler under /debug/pprof/. It exposes internals
	// and costs CPU while profiling, so it is off unless asked for.
	Pprof bool
	// UI, when set, serves / and everything the ServeMux does not route
	// elsewhere (the live page, its assets and /api/v1/) in place of the
	// generic landing page.
	UI http.Handler
	// Jobs, when set, serves /api/v1/jobs and /api/v1/jobs/ID (the job
	// records, internal/jobs), with or without the UI.
	Jobs http.Handler
	// Health, when set, serves /api/v1/health (the GPUs' health verdicts,
	// internal/health), with or without the UI.
	Health http.Handler
}

// Handler builds the exporter's HTTP handler.
func Handler(opts Options) (http.Handler, error) {
	if err := CheckTelemetryPath(opts.TelemetryPath, opts.Pprof); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	if opts.Metrics == nil {
		return nil, errors.New("no metrics handler")
	}
	mux.Handle(opts.TelemetryPath, limitInFlight(opts.Metrics, opts.MaxRequestsInFlight))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if opts.Ready != nil {
			if err := opts.Ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	if opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if opts.Jobs != nil {
		mux.Handle("/api/v1/jobs", opts.Jobs)
		mux.Handle("/api/v1/jobs/", opts.Jobs)
	}
	if opts.Health != nil {
		mux.Handle("/api/v1/health", opts.Health)
	}
	if opts.UI != nil {
		mux.Handle("/", opts.UI)
	} else {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "gpuwatch",
			Description: "NVIDIA GPU exporter: device health and who is using each GPU",
			Version:     opts.Version,
			Links: []web.LandingLinks{
				{Address: opts.TelemetryPath, Text: "Metrics"},
				{Address: "/healthz", Text: "Health", Description: "liveness probe"},
				{Address: "/readyz", Text: "Readiness", Description: "ready while every GPU's readings are fresh"},
				{Address: "/api/v1/health", Text: "GPU health", Description: "each GPU's health verdict (JSON)"},
			},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

// Limits bound what one client can hold of the server.
type Limits struct {
	// IdleTimeout closes a keep-alive connection idle this long. It should
	// exceed the scrape interval, so that Prometheus reuses its connection.
	IdleTimeout time.Duration
	// WriteTimeout bounds one request from the end of its headers to the
	// end of its answer, so a client that never reads its answer cannot
	// hold a goroutine and a connection; it must exceed a scrape's time.
	WriteTimeout time.Duration
	// MaxConnections caps open connections (see connLimiter); 0: no cap.
	MaxConnections int
}

// DefaultLimits fit Prometheus scraping every 15s to 2m.
func DefaultLimits(collectionTimeout time.Duration) Limits {
	return Limits{
		IdleTimeout:    3 * time.Minute,
		WriteTimeout:   collectionTimeout + writeMargin,
		MaxConnections: 256,
	}
}

// writeMargin is the time an answer may take to render and send beyond
// its collection.
const writeMargin = 30 * time.Second

// readHeaderTimeout bounds a client sending its request (slowloris).
const readHeaderTimeout = 10 * time.Second

// newHTTPServer is the http.Server Run serves with.
func newHTTPServer(handler http.Handler, limits Limits) *http.Server {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readHeaderTimeout,
		IdleTimeout:       limits.IdleTimeout,
		WriteTimeout:      limits.WriteTimeout,
	}
	if limits.MaxConnections > 0 {
		srv.ConnState = newConnLimiter(limits.MaxConnections).track
	}
	return srv
}

// CheckTelemetryPath refuses a telemetry path that would take another
// endpoint's place or that http.ServeMux would read as a pattern rather
// than a path (it would panic at start or serve metrics on every path).
func CheckTelemetryPath(p string, pprof bool) error {
	const flag = "--web.telemetry-path"
	switch {
	case p == "" || p[0] != '/':
		return fmt.Errorf("%s %q must start with /", flag, p)
	case p == "/":
		return fmt.Errorf("%s %q would serve metrics on every path; use a path of its own such as /metrics", flag, p)
	case strings.ContainsAny(p, "{} \t\n\r?#%"):
		return fmt.Errorf("%s %q: only a plain path is allowed (no spaces, braces, ?, # or %%)", flag, p)
	case path.Clean(p) != strings.TrimSuffix(p, "/") && path.Clean(p) != p:
		return fmt.Errorf("%s %q is not a clean path (it would be redirected); use %q", flag, p, path.Clean(p))
	}
	reserved := []string{"/healthz", "/readyz"}
	if pprof {
		reserved = append(reserved, "/debug/pprof")
	}
	for _, r := range reserved {
		if p == r || p == r+"/" || (r == "/debug/pprof" && strings.HasPrefix(p, r+"/")) {
			return fmt.Errorf("%s %q is gpuwatch's own %s endpoint; choose another path such as /metrics", flag, p, r)
		}
	}
	return nil
}

// Run serves handler on the addresses in flags until ctx ends, then shuts
// down gracefully: scrapes in progress get up to drain to finish.
func Run(ctx context.Context, handler http.Handler, flags *web.FlagConfig, limits Limits, drain time.Duration, logger *slog.Logger) error {
	srv := newHTTPServer(handler, limits)
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(srv, flags, logger) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			// The drain ran out: what is still running is cut off. A
			// requested shutdown is not a failure of gpuwatch.
			logger.Warn("scrapes still running at shutdown were cut off", "drain", drain, "err", err)
			_ = srv.Close()
		}
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// limitInFlight rejects requests beyond max concurrent ones with 503, so a
// stampede of scrapers cannot pile up goroutines and memory.
func limitInFlight(h http.Handler, max int) http.Handler {
	if max <= 0 {
		return h
	}
	slots := make(chan struct{}, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		default:
			http.Error(w, fmt.Sprintf("too many concurrent scrapes (limit %d, --web.max-requests)", max), http.StatusServiceUnavailable)
		}
	})
}
