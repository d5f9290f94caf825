package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"

	"github.com/gpuwatch/gpuwatch/internal/backend/none"
	nvmlbackend "github.com/gpuwatch/gpuwatch/internal/backend/nvml"
	"github.com/gpuwatch/gpuwatch/internal/backend/sim"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/healthlog"
	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/pipeline"
	"github.com/gpuwatch/gpuwatch/internal/selfstats"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// stack is the assembled data flow: backend → pipeline → Prometheus
// collectors. Every command builds one and closes it when done.
type stack struct {
	pipeline *pipeline.Pipeline
	exporter *exporter.Exporter
	reader   pipeline.Reader
	// closeReader releases the backend (NVML's Shutdown); nil when it holds nothing.
	closeReader func() error
	sim         *sim.Sim       // with --backend=sim
	lib         nvml.Interface // the library the reader reads; nil with --backend=none
	sources     sourceReport
	demo        bool // the simulated processes' owners come from internal/demo
	closers     []func()
	// extra are collectors beside the GPU exporter (the Slurm cluster
	// collector), exported by both /metrics and the textfile.
	extra []prometheus.Collector
	// jobs keeps the per-job records; nil when it does not run.
	jobs *jobs.Recorder
}

func (s *stack) Close() error {
	for _, c := range s.closers {
		c()
	}
	if s.closeReader == nil {
		return nil
	}
	return s.closeReader()
}

// textfileRegistry holds the GPU collectors and the build info for the
// textfile output. It leaves out the Go runtime and process collectors:
// node_exporter, which reads the file, exports its own.
func (s *stack) textfileRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.exporter, versioncollector.NewCollector("gpuwatch"))
	reg.MustRegister(s.extra...)
	return reg
}

// metricsHandler serves /metrics: the GPU series written straight from the
// snapshot (many times cheaper than a registry's Gather; see
// internal/exporter's BenchmarkHandler), then the exporter's own runtime
// families from an ordinary registry.
func (s *stack) metricsHandler() http.Handler {
	runtime := prometheus.NewRegistry()
	runtime.MustRegister(
		versioncollector.NewCollector("gpuwatch"),
		prometheus.NewGoCollector(),
		selfstats.NewProcessCollector(),
	)
	runtime.MustRegister(s.extra...)
	return s.exporter.TextHandler(runtime)
}

// longRunning: the command keeps collecting (serve, textfile), so the log
// is where an operator learns of a lost GPU or a failing source. A one-shot
// command (ps, doctor) shows that in its own output instead.
func (f *commonFlags) longRunning() bool {
	return f.command == "" || f.command == "serve" || f.command == "textfile"
}

// simHint says how to run the chosen command on the simulator.
func (f *commonFlags) simHint() string {
	cmd := "gpuwatch"
	if f.command != "" && f.command != "serve" {
		cmd += " " + f.command
	}
	return "to try " + cmd + " without a GPU, run: " + cmd + " --backend=sim --sim.profile=dgx-h100"
}

// buildStack opens the backend the flags name and wires the outputs to it.
func (f *commonFlags) buildStack(logger *slog.Logger) (*stack, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	filter, err := f.metricFilter()
	if err != nil {
		return nil, err
	}
	compat, err := exporter.ParseCompat(f.compat)
	if err != nil {
		return nil, fmt.Errorf("--compat: %w", err)
	}
	st := &stack{reader: none.Reader{}, sources: sourceReport{hints: map[string]string{}}}
	if f.backend != "none" {
		reader, simulated, lib, err := f.openReader(logger)
		if err != nil {
			return nil, err
		}
		st.reader, st.closeReader, st.sim, st.lib = reader, reader.Close, simulated, lib
	}
	enrichers, err := f.enrichers(logger, st)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	if acct, err := f.startAccounting(logger, st, enrichers); err != nil {
		_ = st.Close()
		return nil, err
	} else if acct != nil {
		enrichers = append(enrichers, acct) // last: it reads nothing of the snapshot
	}
	watcher := healthlog.New(healthlog.Options{Logger: logger, Hints: st.sources.hints})
	var started sync.Once
	st.pipeline = pipeline.New(st.reader, pipeline.Options{
		Timeout: f.timeout,
		OnCollect: func(snap *snapshot.Snapshot, err error) {
			// The first collection, whichever command asked for it,
			// tells the start log what was found.
			started.Do(func() { st.logStart(logger, f, snap, err) })
			if f.longRunning() {
				watcher.Observe(snap, err)
			}
		},
		RequireGPU: f.backend == "nvml",
	}, enrichers...)
	st.exporter, err = exporter.New(st.pipeline, exporter.Options{
		Collectors: f.enabledCollectors(),
		Metrics:    filter,
		PIDLabels:  f.pidLabels,
		Compat:     compat,
		Hostname:   f.compatHostname(),
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	cluster, err := f.slurm.collector(logger)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	if cluster != nil {
		st.extra = append(st.extra, cluster)
	}
	return st, nil
}

// openReader starts the NVML reader on the driver or on the simulator.
// With --backend=sim it also returns the simulator.
func (f *commonFlags) openReader(logger *slog.Logger) (*nvmlbackend.Reader, *sim.Sim, nvml.Interface, error) {
	opts := nvmlbackend.Options{Groups: f.enabledCollectors(), Logger: logger, WaitForGPM: f.waitForGPM, StartTimeout: f.timeout}
	var lib nvml.Interface
	var simulated *sim.Sim
	switch f.backend {
	case "sim":
		s, err := f.simulator()
		if err != nil {
			return nil, nil, nil, err
		}
		lib, opts.Now, opts.Library, simulated = s.Library(), s.Now, "simulator", s
	default:
		lib = nvml.New()
	}
	reader, err := nvmlbackend.New(lib, opts)
	if errors.Is(err, nvmlbackend.ErrLibraryNotFound) {
		return nil, nil, nil, fmt.Errorf("cannot load libnvidia-ml.so.1 (is the NVIDIA driver installed and on the library path?); %s", f.simHint())
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the %s backend: %w", f.backend, err)
	}
	return reader, simulated, lib, nil
}

// enrichers builds what fills in process owners. Owners are only worth
// looking up when processes are read at all. What must be released at the
// end is added to st.closers.
func (f *commonFlags) enrichers(logger *slog.Logger, st *stack) ([]pipeline.Enricher, error) {
	if !f.enabledCollectors()[snapshot.GroupProcesses] || !f.attribution.enabled {
		return nil, nil
	}
	attr, slurmFlags := f.attribution, f.slurm
	if f.backend == "sim" && !f.ownSources() {
		env, err := f.startDemo(logger, st.sim)
		if err != nil {
			return nil, err
		}
		st.closers = append(st.closers, env.Close)
		st.demo = true
		attr.useDemo(env)
		slurmFlags.runner = env.Slurm
	}
	jobs, err := slurmFlags.jobLookup()
	if err != nil {
		return nil, err
	}
	if jobs == nil && slurmFlags.jobs == "auto" {
		st.sources.absent = append(st.sources.absent, "slurm")
	}
	if jobs != nil {
		st.sources.slurm = &slurmFlags
	}
	at, closeAttribution, err := attr.attributor(logger, jobs, slurmFlags.nodeName, &st.sources)
	if err != nil {
		return nil, err
	}
	st.closers = append(st.closers, closeAttribution)
	return []pipeline.Enricher{at}, nil
}

func (f *commonFlags) metricFilter() (*exporter.MetricFilter, error) {
	if f.metricsFile == "" {
		return nil, nil
	}
	return exporter.LoadMetricFilter(f.metricsFile)
}

// simulator builds the simulated fleet from --sim.config and --sim.profile.
func (f *commonFlags) simulator() (*sim.Sim, error) {
	var cfg sim.Config
	if f.simConfig != "" {
		c, err := sim.LoadConfig(f.simConfig)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if f.simProfile != "" {
		cfg.Profile = f.simProfile
	}
	if cfg.Profile == "" {
		return nil, fmt.Errorf("--backend=sim needs --sim.profile (one of %s) or a --sim.config file that names a profile", simProfileList())
	}
	if f.simPinTime > 0 {
		d := sim.Duration(f.simPinTime)
		cfg.PinTime = &d
	}
	if f.simSeed != "" {
		cfg.Seed = f.simSeed
	}
	if cfg.Seed == "" {
		cfg.Seed, _ = os.Hostname()
	}
	return sim.New(cfg)
}

// logStart writes the one start summary: what gpuwatch runs on, what it
// found on its first collection, and which owner sources are on.
func (s *stack) logStart(logger *slog.Logger, f *commonFlags, snap *snapshot.Snapshot, err error) {
	args := []any{"version", version.Info(), "backend", f.backend}
	if s.sim != nil {
		args = append(args, "profile", s.sim.Profile(), "sim_seed", s.sim.Seed())
		if s.demo {
			args = append(args, "owners", "demo (simulated procfs, Docker, CRI, kubelet, Slurm; name an attribution source such as --path.procfs to use your own)")
		}
	}
	if err != nil {
		logger.Warn("gpuwatch started, but the first GPU collection failed", append(args, "err", err)...)
		return
	}
	args = append(args, healthlog.Describe(snap)...)
	if s.sources.how != "" {
		args = append(args, "owner_sources", strings.Join(s.sources.on, ","), "absent", listOrNone(s.sources.absent), "attribution", s.sources.how)
	} else {
		args = append(args, "owner_sources", "none (--no-attribution or --no-collector.processes)")
	}
	logger.Info("gpuwatch started", args...)
}

func listOrNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ",")
}

// compatHostname is the Hostname label of dcgm-exporter's series: the flag,
// else the Kubernetes node name that a DaemonSet passes in NODE_NAME (as
// dcgm-exporter reads it), else the host name.
func (f *commonFlags) compatHostname() string {
	if f.hostname != "" {
		return f.hostname
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}
