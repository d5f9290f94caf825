package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/server"
	"github.com/gpuwatch/gpuwatch/internal/webui"
)

// defaultListenAddress is gpuwatch's port. dcgm-exporter uses 9400 and
// nvidia_gpu_exporter 9835; 9410 is free of both so they can run side by
// side during a migration.
const defaultListenAddress = ":9410"

type serveCommand struct {
	common         *commonFlags
	web            *web.FlagConfig
	telemetryPath  string
	maxRequests    int
	maxAPIRequests int
	maxConns       int
	idleTimeout    time.Duration
	pprof          bool
	ui             bool
	uiInterval     time.Duration
	uiHistory      time.Duration
}

func newServeCommand(app *kingpin.Application, common *commonFlags) *serveCommand {
	c := &serveCommand{common: common}
	app.Command("serve", "Serve Prometheus metrics over HTTP (the default command).").Default()
	// The web flags sit on the application, not the command, so that
	// `gpuwatch --help` shows them and `gpuwatch --web.listen-address=...`
	// reads naturally: serve is the default command.
	c.web = kingpinflag.AddFlags(app, defaultListenAddress)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&c.telemetryPath)
	app.Flag("web.max-requests", "Maximum number of concurrent scrapes; 0 means no limit. Concurrent scrapes share one GPU collection anyway.").
		Default("40").IntVar(&c.maxRequests)
	app.Flag("web.max-api-requests", "Maximum number of job-record API requests (/api/v1/jobs) answered at once; others wait their turn up to 10s, then get 503. Bounds the memory the API can take (each answer holds at most 4 MiB of records).").
		Default(strconv.Itoa(jobs.DefaultMaxAPIRequests)).IntVar(&c.maxAPIRequests)
	app.Flag("web.max-connections", "Maximum number of open HTTP connections; past it a new connection replaces the one idle the longest (0: no limit). Keeps idle or stalled clients from using up file descriptors.").
		Default("256").IntVar(&c.maxConns)
	app.Flag("web.idle-timeout", "Close a keep-alive connection idle this long. Longer than Prometheus's scrape interval lets it reuse its connection.").
		Default("3m").DurationVar(&c.idleTimeout)
	app.Flag("web.enable-pprof", "Serve Go's profiler under /debug/pprof/ (for diagnosing gpuwatch itself; exposes internals). Heap profiling is sampled only with this on.").
		Default("false").BoolVar(&c.pprof)
	app.Flag("web.ui", "Serve the live page at / and its JSON API under /api/v1/, with a history in memory. --no-web.ui serves the plain landing page and keeps no history.").
		Default("true").BoolVar(&c.ui)
	app.Flag("ui.interval", "How often the live page's history collects (sharing the collection with scrapes in flight); also how often the page refreshes.").
		Default("15s").DurationVar(&c.uiInterval)
	app.Flag("ui.history", "How much history the live page keeps per GPU and per owner, in memory: this divided by --ui.interval samples (at most 86400), kept and served as at most 600 points per series (a point spans a whole number of intervals).").
		Default("1h").DurationVar(&c.uiHistory)
	return c
}

func (c *serveCommand) name() string { return "serve" }

// goMemProfileRate is the Go runtime's default runtime.MemProfileRate,
// which main sets to 0.
const goMemProfileRate = 512 * 1024

func (c *serveCommand) run() error { return c.serve(context.Background()) }

// serve serves until parent is cancelled (the Windows service's Stop) or
// SIGINT or SIGTERM arrives: either way scrapes in progress get
// shutdownDrain to finish.
func (c *serveCommand) serve(parent context.Context) error {
	if err := c.checkFlags(); err != nil {
		return err
	}
	logger := promslog.New(c.common.log)
	// From the start: a SIGHUP while the stack is being built would
	// otherwise still kill the process.
	defer ignoreHangup(logger, "the web config file is re-read on every connection; other changes need a restart")()
	if c.pprof {
		runtime.MemProfileRate = goMemProfileRate
	}
	if *c.web.WebConfigFile != "" {
		// Fail at start, not at the first TLS handshake.
		if err := checkWebConfig(*c.web.WebConfigFile); err != nil {
			return err
		}
	}
	st, err := c.common.buildStack(logger)
	if err != nil {
		return err
	}
	defer st.Close()

	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()

	var ui http.Handler
	if c.ui {
		rec, err := webui.NewRecorder(st.pipeline, c.uiInterval, c.uiHistory)
		if err != nil {
			return err
		}
		// Its first collection also warms caches and tells the start log
		// what was found.
		go rec.Run(ctx)
		ui = webui.Handler(rec, webui.Options{
			TelemetryPath: c.telemetryPath, Pprof: c.pprof, Simulated: st.simulated(), Version: version.Info(),
		})
	} else {
		// A first collection warms caches, makes /readyz meaningful early
		// and tells the start log what was found.
		go func() { _, _ = st.pipeline.Snapshot(context.Background()) }()
	}
	var jobsAPI http.Handler
	if st.jobs != nil {
		jobsAPI = jobs.Handler(st.jobs, jobs.APIOptions{MaxInFlight: c.maxAPIRequests})
	}
	handler, err := server.Handler(server.Options{
		TelemetryPath:       c.telemetryPath,
		Metrics:             st.metricsHandler(),
		Ready:               st.ready(c.common),
		Health:              health.Handler(st.pipeline, c.common.collectionBudget()),
		Version:             version.Info(),
		Logger:              logger,
		MaxRequestsInFlight: c.maxRequests,
		Pprof:               c.pprof,
		UI:                  ui,
		Jobs:                jobsAPI,
	})
	if err != nil {
		return err
	}
	if st.simulated() {
		// The demo's first question is where to look.
		if page, err := listenURL(c.web); err == nil {
			logger.Info("simulated GPUs: open the live page", "url", page+"/")
		}
	}
	limits := server.DefaultLimits(c.common.timeout)
	limits.MaxConnections, limits.IdleTimeout = c.maxConns, c.idleTimeout
	return server.Run(ctx, handler, c.web, limits, shutdownDrain(c.common.timeout), logger)
}

// checkFlags refuses serve's nonsensical values.
func (c *serveCommand) checkFlags() error {
	switch {
	case c.maxRequests < 0:
		return fmt.Errorf("--web.max-requests=%d: must be 0 (no limit) or more", c.maxRequests)
	case c.maxAPIRequests < 1:
		return fmt.Errorf("--web.max-api-requests=%d: must be 1 or more", c.maxAPIRequests)
	case c.maxConns < 0:
		return fmt.Errorf("--web.max-connections=%d: must be 0 (no limit) or more", c.maxConns)
	case c.maxConns > 0 && c.maxConns < 4:
		return fmt.Errorf("--web.max-connections=%d: too few to serve a scrape beside a health probe; use 4 or more, or 0 for no limit", c.maxConns)
	case c.idleTimeout <= 0:
		return fmt.Errorf("--web.idle-timeout=%s: must be positive", c.idleTimeout)
	}
	if c.ui {
		if err := webui.CheckFlags(c.uiInterval, c.uiHistory); err != nil {
			return err
		}
	}
	// Before anything starts, so the refusal is the only line printed.
	return server.CheckTelemetryPath(c.telemetryPath, c.pprof)
}

// checkWebConfig validates --web.config.file at start. exporter-toolkit
// reads it again on every connection, so it must be a small regular file:
// a FIFO would hang the start, and later every handshake.
func checkWebConfig(path string) error {
	if err := configfile.Check(path, configfile.MaxSize); err != nil {
		return fmt.Errorf("--web.config.file: %w", err)
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("--web.config.file %s: %w", path, err)
	}
	return nil
}

// shutdownDrain is how long a requested shutdown waits for scrapes in
// progress: one collection's time, then they are cut off and gpuwatch
// exits 0.
func shutdownDrain(collectionTimeout time.Duration) time.Duration {
	return collectionTimeout + time.Second
}
