// What the common flags mean: derived values the commands share. Building
// the stack from them is stack.go's.

package main

import (
	"fmt"
	"os"

	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
)

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

// metricFilter loads --metrics.config; nil without it.
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
	// An unpinned simulator's clock is the real time: the demo's page, ps
	// and job records say today's date, as the reports over its series do.
	cfg.WallClock = cfg.PinTime == nil
	if f.simSeed != "" {
		cfg.Seed = f.simSeed
	}
	if cfg.Seed == "" {
		cfg.Seed, _ = os.Hostname()
	}
	return sim.New(cfg)
}

// compatHostname is the Hostname label of dcgm-exporter's series: the flag,
// else the Kubernetes node name that a DaemonSet passes in NODE_NAME (as
// dcgm-exporter reads it), else the host name.
func (f *commonFlags) compatHostname() string {
	if f.hostname != "" {
		return f.hostname
	}
	if f.smi.remote() {
		return f.smi.host
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}
