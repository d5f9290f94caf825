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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// Options configures the HTTP handler.
type Options struct {
	TelemetryPath string // e.g. "/metrics"
	Gatherer      prometheus.Gatherer
	// Ready reports whether the exporter can serve useful data; nil error
	// means ready. It backs /readyz.
	Ready   func() error
	Version string
	Logger  *slog.Logger
	// MaxRequestsInFlight caps concurrent scrapes; 0 means no cap.
	MaxRequestsInFlight int
	// ScrapeTimeout bounds one scrape's handler; 0 means no bound.
	ScrapeTimeout time.Duration
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
	mux.Handle(opts.TelemetryPath, promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
		// One failing collector must not cost the whole page.
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            slog.NewLogLogger(opts.Logger.Handler(), slog.LevelError),
		MaxRequestsInFlight: opts.MaxRequestsInFlight,
		Timeout:             opts.ScrapeTimeout,
	}))
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
