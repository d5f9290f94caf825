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
}

// Handler builds the exporter's HTTP handler.
func Handler(opts Options) (http.Handler, error) {
	if opts.TelemetryPath == "" || opts.TelemetryPath[0] != '/' {
		return nil, fmt.Errorf("telemetry path %q must start with /", opts.TelemetryPath)
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
	if opts.TelemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "gpuwatch",
			Description: "NVIDIA GPU exporter: device health and who is using each GPU",
			Version:     opts.Version,
			Links: []web.LandingLinks{
				{Address: opts.TelemetryPath, Text: "Metrics"},
				{Address: "/healthz", Text: "Health", Description: "liveness probe"},
				{Address: "/readyz", Text: "Readiness", Description: "ready once a GPU collection has succeeded"},
			},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

// Run serves handler on the addresses in flags until ctx ends, then shuts
// down gracefully.
func Run(ctx context.Context, handler http.Handler, flags *web.FlagConfig, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(srv, flags, logger) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			return err
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
