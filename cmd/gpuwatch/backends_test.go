package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// What nvidia-smi gives is what the exporter renders from the nvidia-smi
// backend's fullest snapshot: its readings, and none of what only NVML has.
func TestNvidiaSMIMetrics(t *testing.T) {
	got, err := nvidiaSMIMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gpu_up", "gpu_info", "gpu_power_usage_watts", "gpu_memory_used_bytes", "gpu_clock_event_active", "gpu_remapped_rows_pending",
		"gpu_mig_mode_pending", "gpu_process_memory_used_bytes", "gpuwatch_driver_limited_group", "gpuwatch_readings_dropped_total", "gpu_slurm_job_info"} {
		if !got[name] {
			t.Errorf("nvidia-smi gives no %s", name)
		}
	}
	for _, name := range []string{"gpu_energy_joules_total", "gpu_xid_errors_total", "gpu_gpm_sm_active_ratio", "gpu_nvlink_up", "gpu_mig_info",
		"gpu_process_sm_utilization_ratio", "gpu_pcie_transmit_bytes_total", "gpu_process_energy_joules_total"} {
		if got[name] {
			t.Errorf("nvidia-smi is said to give %s", name)
		}
	}
}

func TestMetricsCommandSaysWhichBackendGivesEachMetric(t *testing.T) {
	var md, table bytes.Buffer
	if err := writeMetricCatalog(&md, "markdown", nil); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| `gpu_energy_joules_total` | yes | no |", "| `gpu_power_usage_watts` | yes | yes |"} {
		if !strings.Contains(md.String(), row) {
			t.Errorf("markdown lacks %q", row)
		}
	}
	if err := writeMetricCatalog(&table, "table", nil); err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(table.String(), "nvidia-smi gives every metric above except:")
	if !strings.Contains(after, "\n  gpu_energy_joules_total\n") || strings.Contains(after, "gpu_power_usage_watts") {
		t.Errorf("table's backend section:\n%s", after)
	}
}

func TestNvidiaSMIFlagErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend=nvidia-smi", "--nvidia-smi.command=ssh gpu-box nvidia-smi"}, "--nvidia-smi.command=ssh gpu-box nvidia-smi: not a JSON list"},
		{[]string{"--backend=nvidia-smi", "--nvidia-smi.command=[]"}, "--nvidia-smi.command=[]: the list is empty"},
		{[]string{"--backend=nvidia-smi", `--nvidia-smi.command=["/usr/bin/ssh","gpu-box","nvidia-smi"]`}, "name the remote host with --nvidia-smi.host"},
		{[]string{"--backend=sim", "--nvidia-smi.host=gpu-box"}, "need --backend=nvidia-smi"},
	} {
		app := kingpin.New("test", "")
		f := registerCommonFlags(app)
		if _, err := app.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := f.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

// The remote host names the dcgm series' host unless --compat.hostname does.
func TestRemoteHostNamesTheDCGMHost(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend=nvidia-smi", "--nvidia-smi.host=gpu-box"}, "gpu-box"},
		{[]string{"--backend=nvidia-smi", "--nvidia-smi.host=gpu-box", "--compat.hostname=other"}, "other"},
	} {
		app := kingpin.New("test", "")
		f := registerCommonFlags(app)
		if _, err := app.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := f.compatHostname(); got != c.want {
			t.Errorf("%v: hostname %q, want %q", c.args, got, c.want)
		}
	}
}
