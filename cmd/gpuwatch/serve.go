package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/gpuwatch/gpuwatch/internal/server"
)

// defaultListenAddress is gpuwatch's port. dcgm-exporter uses 9400 and
// nvidia_gpu_exporter 9835; 9410 is free of both so they can run side by
// side during a migration.
const defaultListenAddress = ":9410"

type serveCommand struct {
	common        *commonFlags
	web           *web.FlagConfig
	telemetryPath string
	maxRequests   int
	pprof         bool
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
	app.Flag("web.enable-pprof", "Serve Go's profiler under /debug/pprof/ (for diagnosing gpuwatch itself; exposes internals). Heap profiling is sampled only with this on.").
		Default("false").BoolVar(&c.pprof)
	return c
}

func (c *serveCommand) name() string { return "serve" }

// goMemProfileRate is the Go runtime's default runtime.MemProfileRate,
// which main sets to 0.
const goMemProfileRate = 512 * 1024

func (c *serveCommand) run() error {
	logger := promslog.New(c.common.log)
	if c.pprof {
		runtime.MemProfileRate = goMemProfileRate
	}
	if *c.web.WebConfigFile != "" {
		// Fail at start, not at the first TLS handshake.
		if err := web.Validate(*c.web.WebConfigFile); err != nil {
			return err
		}
	}
	st, err := c.common.buildStack(logger)
	if err != nil {
		return err
	}
	defer st.Close()

	handler, err := server.Handler(server.Options{
		TelemetryPath:       c.telemetryPath,
		Metrics:             st.metricsHandler(),
		Ready:               st.pipeline.Ready,
		Version:             version.Info(),
		Logger:              logger,
		MaxRequestsInFlight: c.maxRequests,
		Pprof:               c.pprof,
	})
	if err != nil {
		return err
	}
	// A first collection warms caches, makes /readyz meaningful early and
	// tells the start log what was found.
	go func() { _, _ = st.pipeline.Snapshot(context.Background()) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, handler, c.web, logger)
}
