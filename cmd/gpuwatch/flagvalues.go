// What the common flags mean: derived values the commands share. Building
// the stack from them is stack.go's.

package main

import (
	"os"

	"github.com/gpuwatch/gpuwatch/internal/exporter"
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

// ownSources reports whether the user named any attribution source. With
// --backend=sim and none named, the demo (internal/demo) gives the
// simulated processes owners to find; naming one (a fixture /proc, a
// runtime socket, Slurm) means the user brings their own.
func (f *commonFlags) ownSources() bool {
	a, s := f.attribution.set, f.slurm.set
	return a.procfs || a.rootfs || a.docker || a.cri || a.kubelet || s.jobs || s.scontrol || s.squeue
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
