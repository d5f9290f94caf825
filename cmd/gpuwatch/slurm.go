package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// slurmFlags configure the Slurm cluster collector (controller or login
// node) and the job lookups that attribute GPUs to jobs (compute nodes).
type slurmFlags struct {
	cluster      bool
	jobs         string
	squeue       string
	sinfo        string
	sdiag        string
	scontrol     string
	timeout      time.Duration
	pollInterval time.Duration
	format       string
	sdiagOn      bool
	nodeName     string
	// set records which job-lookup flags the user gave (see demo.go).
	set struct{ jobs, scontrol, squeue bool }
	// runner answers the job lookups' commands instead of running them
	// (the demo's Slurm); nil runs the commands.
	runner slurm.CommandRunner
}

func (s *slurmFlags) register(app *kingpin.Application) {
	app.Flag("collector.slurm", "Export Slurm cluster metrics from squeue, sinfo and sdiag: jobs, pending reasons, node states, CPUs and GPUs per node and partition. Meant for the controller or a login node.").
		Default("false").BoolVar(&s.cluster)
	app.Flag("slurm.jobs", "Attribute GPUs and GPU processes to Slurm jobs (job id, user, account, partition) on a compute node, from scontrol. auto: on when scontrol is on PATH at start; true; false.").
		Default("auto").IsSetByUser(&s.set.jobs).EnumVar(&s.jobs, "auto", "true", "false")
	app.Flag("slurm.squeue-path", "squeue command.").Default("squeue").IsSetByUser(&s.set.squeue).StringVar(&s.squeue)
	app.Flag("slurm.sinfo-path", "sinfo command.").Default("sinfo").StringVar(&s.sinfo)
	app.Flag("slurm.sdiag-path", "sdiag command.").Default("sdiag").StringVar(&s.sdiag)
	app.Flag("slurm.scontrol-path", "scontrol command (job lookups; health --slurm.drain and --slurm.resume).").Default("scontrol").IsSetByUser(&s.set.scontrol).StringVar(&s.scontrol)
	app.Flag("slurm.timeout", "Timeout of each Slurm command; a command that hangs is killed with its process group.").
		Default("10s").DurationVar(&s.timeout)
	app.Flag("slurm.poll-interval", "How long one answer of each Slurm command serves scrapes, so many scrapers do not multiply the controller's load.").
		Default("30s").DurationVar(&s.pollInterval)
	app.Flag("slurm.format", "How to read squeue, sinfo and (health --slurm.drain) scontrol show node: auto (JSON, falling back to formatted text where the command has no --json: squeue and sinfo before Slurm 21.08, scontrol before 23.02), json or text.").
		Default("auto").EnumVar(&s.format, "auto", "json", "text")
	app.Flag("slurm.sdiag", "Export scheduler health from sdiag with --collector.slurm.").Default("true").BoolVar(&s.sdiagOn)
	app.Flag("slurm.node-name", "This node's name in Slurm: for the GPUs its jobs hold, and the node health --slurm.drain drains. Default: the short host name.").
		Default(shortHostname()).StringVar(&s.nodeName)
}

func shortHostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(h, ".")
	return name
}

// collector returns the cluster collector, or nil when it is off.
func (s *slurmFlags) collector(logger *slog.Logger) (*slurm.Collector, error) {
	if !s.cluster {
		return nil, nil
	}
	c, err := slurm.NewCollector(slurm.Options{
		SqueuePath: s.squeue, SinfoPath: s.sinfo, SdiagPath: s.sdiag, ScontrolPath: s.scontrol,
		Timeout: s.timeout, PollInterval: s.pollInterval, Format: s.format, SkipSdiag: !s.sdiagOn,
		Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("--collector.slurm: %w", err)
	}
	return c, nil
}

// jobLookup returns the job lookup for attribution, or nil when Slurm job
// attribution is off (or auto and scontrol is absent).
func (s *slurmFlags) jobLookup() (*slurm.JobLookup, error) {
	switch s.jobs {
	case "false":
		return nil, nil
	case "auto":
		if _, err := exec.LookPath(s.scontrol); err != nil && s.runner == nil {
			return nil, nil
		}
	}
	l, err := slurm.NewJobLookup(slurm.JobLookupOptions{
		ScontrolPath: s.scontrol, SqueuePath: s.squeue, Timeout: s.timeout, ListInterval: s.pollInterval,
		Runner: s.runner,
	})
	if err != nil {
		return nil, fmt.Errorf("--slurm.jobs: %w", err)
	}
	return l, nil
}

// slurmCatalog describes the Slurm collector's metrics for `gpuwatch metrics`.
func slurmCatalog() []exporter.Metric {
	out := make([]exporter.Metric, 0, len(slurm.Metrics))
	for _, m := range slurm.Metrics {
		out = append(out, exporter.Metric{
			Name: m.Name, Type: m.Type, Unit: unitOf(m.Name), Labels: m.Labels,
			Help: m.Help, Source: m.Source, Collector: "slurm", Default: false,
		})
	}
	return out
}

// unitOf reads the base unit from a metric name's suffix, the convention
// every gpuwatch metric follows.
func unitOf(name string) string {
	name = strings.TrimSuffix(name, "_total")
	for _, unit := range []string{"seconds", "bytes", "ratio"} {
		if strings.HasSuffix(name, "_"+unit) {
			return unit
		}
	}
	return ""
}
