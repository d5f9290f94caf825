package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"

	"github.com/gpuwatch/gpuwatch/internal/backend/none"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/health"
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
	// nv is the NVML reader, its library and the simulator
	// (stack_cgo.go); nil unless --backend is nvml or sim.
	nv      *nvmlStack
	sources sourceReport
	demo    bool // the simulated processes' owners come from internal/demo
	closers []func()
	// extra are collectors beside the GPU exporter (the Slurm cluster
	// collector), exported by both /metrics and the textfile.
	extra []prometheus.Collector
	// jobs keeps the per-job records; nil when it does not run.
	jobs *jobs.Recorder
	// health judges every snapshot of the pipeline (Snapshot.Health).
	health *health.Judge
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
		collectors.NewGoCollector(),
		selfstats.NewProcessCollector(),
	)
	runtime.MustRegister(s.extra...)
	return s.exporter.TextHandler(runtime)
}

// parseCompat reads --compat and --compat.dcgm-version.
func (f *commonFlags) parseCompat() (exporter.Compat, error) {
	compat, err := exporter.ParseCompat(f.compat)
	if err != nil {
		return compat, fmt.Errorf("--compat: %w", err)
	}
	if compat.DCGMVersion, err = exporter.ParseDCGMVersion(f.dcgmVersion); err != nil {
		return compat, fmt.Errorf("--compat.dcgm-version: %w", err)
	}
	return compat, nil
}

// hostnameLowerCase says whether the host label of the dcgm series is
// hostname: as --compat.hostname-label says, else as the release writes
// it (Hostname up to 4.8.2, the release --compat.dcgm-version=4.8 follows;
// hostname from 4.8.3 on).
func (f *commonFlags) hostnameLowerCase(v exporter.DCGMVersion) bool {
	if f.hostnameLabel != "" {
		return f.hostnameLabel == exporter.DCGMHostnameLabelLower
	}
	return v != exporter.DCGM48
}

// buildStack opens the backend the flags name and wires the outputs to it.
func (f *commonFlags) buildStack(logger *slog.Logger) (_ *stack, err error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	filter, err := f.metricFilter()
	if err != nil {
		return nil, err
	}
	compat, err := f.parseCompat()
	if err != nil {
		return nil, err
	}
	// The policy is checked before anything starts, so its error is the
	// only line printed.
	judge, err := f.health.judge()
	if err != nil {
		return nil, err
	}
	st := &stack{reader: none.Reader{}, sources: sourceReport{hints: map[string]string{}}, health: judge}
	// A step that fails closes what the steps before it opened.
	defer func() {
		if err != nil {
			_ = st.Close()
		}
	}()
	switch f.backend {
	case "none":
	case "nvidia-smi":
		reader, err := f.smiReader(logger)
		if err != nil {
			return nil, err
		}
		st.reader, st.closeReader = reader, reader.Close
	default:
		if err := f.openNVML(logger, st); err != nil {
			return nil, err
		}
	}
	enrichers, err := f.enrichers(logger, st)
	if err != nil {
		return nil, err
	}
	acct, err := f.startAccounting(logger, st, enrichers)
	if err != nil {
		return nil, err
	}
	if acct != nil {
		enrichers = append(enrichers, acct) // it reads nothing of the snapshot
	}
	// Last: it judges what the others filled in.
	enrichers = append(enrichers, st.health)
	watcher := healthlog.New(healthlog.Options{Logger: logger, Hints: st.sources.hints})
	var started sync.Once
	st.pipeline = pipeline.New(st.reader, pipeline.Options{
		Timeout: f.timeout,
		// Owner lookups start their budget after the read, so a GPU at
		// its deadline does not strip the healthy GPUs' owners.
		EnrichTimeout: f.attribution.timeout,
		OnCollect: func(snap *snapshot.Snapshot, err error) {
			// The first collection, whichever command asked for it,
			// tells the start log what was found.
			started.Do(func() { st.logStart(logger, f, snap, err) })
			if f.longRunning() {
				watcher.Observe(snap, err)
			}
		},
		RequireGPU: f.backend == "nvml" || f.backend == "nvidia-smi",
	}, enrichers...)
	st.exporter, err = exporter.New(st.pipeline, exporter.Options{
		Collectors:        f.enabledCollectors(),
		Metrics:           filter,
		PIDLabels:         f.pidLabels,
		Compat:            compat,
		Hostname:          f.compatHostname(),
		HostnameLowerCase: f.hostnameLowerCase(compat.DCGMVersion),
	})
	if err != nil {
		return nil, err
	}
	cluster, err := f.slurm.collector(logger)
	if err != nil {
		return nil, err
	}
	if cluster != nil {
		st.extra = append(st.extra, cluster)
	}
	return st, nil
}

// enrichers builds what fills in process owners. Owners are only worth
// looking up when processes are read at all. What must be released at the
// end is added to st.closers.
func (f *commonFlags) enrichers(logger *slog.Logger, st *stack) ([]pipeline.Enricher, error) {
	if !f.enabledCollectors()[snapshot.GroupProcesses] || !f.attribution.enabled || f.smi.remote() {
		return nil, nil
	}
	if owners := platformOwners(&st.sources); owners != nil {
		return []pipeline.Enricher{owners}, nil
	}
	attr, slurmFlags := f.attribution, f.slurm
	if f.backend == "sim" && !f.ownSources() {
		if err := f.startDemo(logger, st, &attr, &slurmFlags); err != nil {
			return nil, err
		}
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

// logStart writes the one start summary: what gpuwatch runs on, what it
// found on its first collection, and which owner sources are on.
func (s *stack) logStart(logger *slog.Logger, f *commonFlags, snap *snapshot.Snapshot, err error) {
	args := []any{"version", version.Info(), "backend", f.backend}
	if s.simulated() {
		args = append(args, s.simIdentity()...)
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
	} else if f.smi.remote() {
		args = append(args, "owner_sources", "none (the GPUs are --nvidia-smi.host's)")
	} else {
		args = append(args, "owner_sources", "none (--no-attribution or --no-collector.processes)")
	}
	logger.Info("gpuwatch started", args...)
}

// settledSnapshot is the reading of a command that reads once (ps,
// doctor, textfile without --interval). A GPU whose first read missed
// --collection.timeout may be slow rather than hung: its read runs on,
// and the command waits for it, polling, as long as the exporter would
// before reporting it down (nvmlbackend.DownAfterTimeouts collection
// timeouts). A slow driver's GPUs then appear with their late readings
// and processes; a GPU that stopped answering is down, and the wait cost
// three timeouts.
func (s *stack) settledSnapshot(f *commonFlags) (*snapshot.Snapshot, error) {
	// The pipeline bounds each collection (--collection.timeout, then
	// --attribution.timeout).
	collect := func() (*snapshot.Snapshot, error) { return s.pipeline.Snapshot(context.Background()) }
	snap, err := collect()
	deadline := time.Now().Add(downAfterTimeouts*f.timeout + time.Second)
	for err == nil && notAnswering(snap) && time.Now().Before(deadline) {
		// A GPU whose read is in flight is not read again: these
		// collections cost only the healthy GPUs' reads.
		time.Sleep(250 * time.Millisecond)
		snap, err = collect()
	}
	return snap, err
}

func notAnswering(s *snapshot.Snapshot) bool {
	return slices.ContainsFunc(s.Devices, func(d snapshot.Device) bool { return !d.Up && d.DownReason == "not_answering" })
}

func listOrNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ",")
}
