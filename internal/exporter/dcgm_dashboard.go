package exporter

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// DCGMDashboardPanel is one panel of dcgm-exporter's released Grafana
// dashboard (grafana/dcgm-exporter-dashboard.json, Grafana.com 12239,
// unchanged from release 3.2.5-3.1.7 to 4.5.3-4.8.2) and the metric it plots.
type DCGMDashboardPanel struct {
	Title, Metric string
}

// DCGMDashboardPanels are the dashboard's panels in its order;
// TestDCGMDashboardPanelsMatchRelease holds them to the released file.
var DCGMDashboardPanels = []DCGMDashboardPanel{
	{"GPU Temperature", "DCGM_FI_DEV_GPU_TEMP"},
	{"GPU Avg. Temp", "DCGM_FI_DEV_GPU_TEMP"},
	{"GPU Power Usage", "DCGM_FI_DEV_POWER_USAGE"},
	{"GPU Power Total", "DCGM_FI_DEV_POWER_USAGE"},
	{"GPU SM Clocks", "DCGM_FI_DEV_SM_CLOCK"},
	{"GPU Utilization", "DCGM_FI_DEV_GPU_UTIL"},
	{"GPU Framebuffer Mem Used", "DCGM_FI_DEV_FB_USED"},
	{"Tensor Core Utilization", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
}

// DCGMPanelCoverage is what a panel shows on one host: the GPUs (by index)
// that have its metric and those that do not, with why.
type DCGMPanelCoverage struct {
	DCGMDashboardPanel
	Served, Missing []int
	// Why the metric is missing, when it is.
	Why string
}

// DCGMDashboardCoverage renders s as --compat=dcgm serves it and says, for
// each panel of the released dashboard, on which GPUs it has data.
func DCGMDashboardCoverage(s *snapshot.Snapshot) []DCGMPanelCoverage {
	e, err := New(SourceFunc(nil), Options{Compat: Compat{DCGM: true}, Hostname: "doctor"})
	if err != nil {
		return nil // every option above is valid
	}
	em := e.renderText(s, nil)
	defer e.releaseText(em)
	var out []DCGMPanelCoverage
	for _, p := range DCGMDashboardPanels {
		c := DCGMPanelCoverage{DCGMDashboardPanel: p}
		served := gpusIn(em.bufs[lookupMetric(p.Metric).id])
		for i := range s.Devices {
			d := &s.Devices[i]
			if slices.Contains(served, d.Index) {
				c.Served = append(c.Served, d.Index)
			} else {
				c.Missing = append(c.Missing, d.Index)
			}
		}
		if len(c.Missing) > 0 {
			c.Why = dcgmWhyMissing(p.Metric, s, c.Missing)
		}
		out = append(out, c)
	}
	return out
}

// gpusIn reads the gpu label (always the first) of each series of a
// metric's text exposition.
func gpusIn(body []byte) []int {
	var gpus []int
	for line := range bytes.Lines(body) {
		_, rest, ok := bytes.Cut(line, []byte(`{gpu="`))
		if !ok {
			continue
		}
		v, _, _ := bytes.Cut(rest, []byte(`"`))
		if n, err := strconv.Atoi(string(v)); err == nil && !slices.Contains(gpus, n) {
			gpus = append(gpus, n)
		}
	}
	return gpus
}

// dcgmWhyMissing says why a metric is absent on some GPUs.
func dcgmWhyMissing(metric string, s *snapshot.Snapshot, missing []int) string {
	switch metric {
	case "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE":
		return "NVML measures it only with GPM (Hopper and later, datacenter GPUs); DCGM's own profiling module measures it on Volta, Turing and Ampere datacenter GPUs, so keep dcgm-exporter for this panel there; GeForce GPUs have it from neither"
	case "DCGM_FI_DEV_GPU_UTIL":
		for _, i := range missing {
			for j := range s.Devices {
				if s.Devices[j].Index == i && s.Devices[j].Info.MIGMode == "enabled" {
					return "NVML (and so DCGM) has no whole-GPU utilization in MIG mode; DCGM_FI_PROF_GR_ENGINE_ACTIVE per GPU instance is its replacement (Hopper and later)"
				}
			}
		}
	}
	return "NVML does not report it on these GPUs, or the GPU is down; `gpuwatch doctor` without --compat says which metric groups the driver limits"
}
