package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/internal/backend/smibackend"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// nvidiaSMIMetrics are the metrics of the catalog that --backend=nvidia-smi
// can give: those the exporter renders from the fullest snapshot that
// backend produces, plus what attribution adds on this host (allocations).
// Derived from the code that runs, so it cannot drift from it.
func nvidiaSMIMetrics() (map[string]bool, error) {
	snap := smibackend.Fullest()
	d := snap.Devices[0]
	snap.AttributionErrors = map[string]uint64{"procfs": 0}
	snap.Allocations = []snapshot.Allocation{
		{GPU: d.Index, GPUUUID: d.UUID, Pod: snapshot.Pod{Name: "p", Namespace: "n", Container: "c"}},
		{GPU: d.Index, GPUUUID: d.UUID, Slurm: snapshot.SlurmJob{JobID: "1"}},
	}
	on := map[string]bool{}
	for _, g := range snapshot.AllGroups {
		on[g] = true
	}
	all, err := exporter.ParseMetricFilter("every metric", []byte("enable: ['*']\n"))
	if err != nil {
		return nil, err
	}
	e, err := exporter.New(exporter.SourceFunc(func(context.Context) (*snapshot.Snapshot, error) { return snap, nil }),
		exporter.Options{Collectors: on, Metrics: all})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(e); err != nil {
		return nil, err
	}
	families, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range families {
		out[f.GetName()] = true
	}
	return out, nil
}

// backendsIntro says what the backend table is; docs/nvidia-smi.md
// carries the markdown form.
const backendsIntro = `Which backend gives each metric: nvml (the driver's library; sim, the
simulator behind the same interface, gives the same) and nvidia-smi (the
properties nvidia-smi --query-gpu and --query-compute-apps print). Metrics of
owners and allocations need attribution on the GPUs' own host: not with
--nvidia-smi.host. The accounting counters need --backend=nvml.
`

// writeBackends writes which backends give each metric.
func writeBackends(w io.Writer, format string) error {
	smi, err := nvidiaSMIMetrics()
	if err != nil {
		return err
	}
	var b strings.Builder
	switch format {
	case "markdown":
		b.WriteString("\n## Metrics by backend\n\n" + backendsIntro + "\n| Metric | nvml, sim | nvidia-smi |\n|---|---|---|\n")
		for _, m := range exporter.Catalog() {
			fmt.Fprintf(&b, "| `%s` | yes | %s |\n", m.Name, yesNo(smi[m.Name]))
		}
	case "table":
		b.WriteString("\nMETRICS BY BACKEND\n" + backendsIntro + "nvidia-smi gives every metric above except:\n")
		for _, m := range exporter.Catalog() {
			if !smi[m.Name] {
				b.WriteString("  " + m.Name + "\n")
			}
		}
	default:
		return nil
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
