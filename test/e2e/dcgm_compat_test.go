//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The --compat=dcgm tests: dcgm-exporter's names, units and labels, checked
// as a golden page per profile, through promtool, and by running the queries
// of dcgm-exporter's reference dashboard (Grafana 12239) and the usual
// Prometheus Adapter rule against a real Prometheus.

// dcgmGoldenArgs pin everything host-specific out of the page, as TestGolden does.
func dcgmGoldenArgs(t *testing.T, profile string) []string {
	return []string{"--backend=sim", "--sim.profile=" + profile, "--sim.pin-time=1h",
		"--compat=dcgm", "--compat.hostname=golden-host", "--sim.seed=golden",
		"--path.procfs=" + t.TempDir(), "--slurm.jobs=false",
		"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket="}
}

// TestGoldenDCGM compares each profile's --compat=dcgm page with
// testdata/golden/dcgm/PROFILE.prom (make golden rewrites them).
func TestGoldenDCGM(t *testing.T) {
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			base, _ := startGpuwatch(t, dcgmGoldenArgs(t, profile)...)
			settle(t, base)
			got := stableExposition(httpGet(t, base+"/metrics"))
			for line := range strings.SplitSeq(got, "\n") {
				if strings.HasPrefix(line, "gpu_") && !strings.HasPrefix(line, "gpu_up{") && !strings.HasPrefix(line, "gpu_health_") {
					t.Fatalf("--compat=dcgm serves a native series: %s", line)
				}
			}
			if !strings.Contains(got, "DCGM_FI_DEV_GPU_TEMP{") {
				t.Fatalf("--compat=dcgm page lacks DCGM_FI_DEV_GPU_TEMP:\n%s", got)
			}
			path := filepath.Join("testdata", "golden", "dcgm", profile+".prom")
			compareGolden(t, path, got, "--compat=dcgm /metrics for "+profile)
		})
	}
}

// dcgmNamingLint are the promtool lint findings that dcgm-exporter's own
// names carry, and that a drop-in must therefore carry too: camelCase labels
// (UUID, modelName, Hostname, GPU_I_ID), counters without _total, and
// DCGM_FI_DEV_PCIE_REPLAY_COUNTER, a counter named "counter", and
// DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY, a gauge named "summary". Any other
// finding, and any parse error, fails the test.
var dcgmNamingLint = []string{
	"label names should be written in 'snake_case' not 'camelCase'",
	`counter metrics should have "_total" suffix`,
	"metric name should not include type 'counter'",
	"metric name should not include type 'summary'",
}

func TestPromtoolCheckDCGM(t *testing.T) {
	t.Parallel()
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			base, _ := startGpuwatch(t, dcgmGoldenArgs(t, profile)...)
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(httpGet(t, base+"/metrics"))
			out, _ := cmd.CombinedOutput()
			for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
				if line == "" {
					continue
				}
				known := false
				for _, l := range dcgmNamingLint {
					if strings.HasPrefix(line, "DCGM_FI_") && strings.HasSuffix(line, l) {
						known = true
					}
				}
				if !known {
					t.Errorf("promtool check metrics: %s", line)
				}
			}
		})
	}
}

// TestFakeNVMLDCGMVGPULicense: through the real cgo path and a driver
// branch's C library, DCGM_FI_DEV_VGPU_LICENSE_STATUS is 0 on the bare-metal
// simulated GPU (nvmlDeviceGetVirtualizationMode answers NONE), as DCGM
// reports it there; the basic library lacks the function, so the series is
// absent rather than a made-up 0.
func TestFakeNVMLDCGMVGPULicense(t *testing.T) {
	t.Parallel()
	for variant, want := range map[string]bool{nvmlbranch.Newest().Name: true, "basic": false} {
		t.Run(variant, func(t *testing.T) {
			env := fakeEnv(t, variant, h100Config)
			base, p, up := startWithEnv(t, env, append([]string{"--backend=nvml", "--compat=dcgm"}, isolated(t)...)...)
			if !up {
				t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
			}
			settle(t, base)
			fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
			mf, got := fams["DCGM_FI_DEV_VGPU_LICENSE_STATUS"]
			if got != want {
				t.Fatalf("DCGM_FI_DEV_VGPU_LICENSE_STATUS present %v, want %v", got, want)
			}
			if got && (len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 0) {
				t.Errorf("DCGM_FI_DEV_VGPU_LICENSE_STATUS = %v, want one series with 0", mf.GetMetric())
			}
		})
	}
}

// dcgmTableColumns are the GPU columns of docs/dcgm-compat.md's default
// counter table and the simulated profile of each.
var dcgmTableColumns = []struct{ column, profile string }{
	{"V100", "v100"}, {"A100", "dgx-a100-mig"}, {"H100", "h100"}, {"RTX 4090", "rtx4090"},
}

// TestDCGMDefaultCounterTable checks every cell of docs/dcgm-compat.md's
// "Default counters by GPU generation" table against what gpuwatch
// --compat=dcgm serves on that GPU: a cell starting with ✓ must be served
// (on the GPUs not in MIG mode), one starting with – must not. The
// profiles run unpinned, past their second collection, as a server does.
func TestDCGMDefaultCounterTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "dcgm-compat.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Default counters by GPU generation")
	if !ok {
		t.Fatal("docs/dcgm-compat.md has no default counter table")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var header []string
	rows := map[string][]string{}
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.TrimSpace(line), "|")
		cells = cells[1 : len(cells)-1]
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		rows[strings.Trim(cells[0], "`")] = cells
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, c := range dcgmTableColumns {
		t.Run(c.profile, func(t *testing.T) {
			i, ok := col[c.column]
			if !ok {
				t.Fatalf("no column %q in %v", c.column, header)
			}
			base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile="+c.profile, "--compat=dcgm,native",
				"--path.procfs="+t.TempDir(), "--slurm.jobs=false", "--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=")
			settle(t, base)
			fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
			wholeGPU := map[string]bool{} // GPUs not in MIG mode
			for _, m := range fams["gpu_info"].GetMetric() {
				l := labelMap(m.GetLabel())
				if l["mig_mode"] != "enabled" {
					wholeGPU[l["gpu"]] = true
				}
			}
			served := func(name string) bool {
				for fam, mf := range fams {
					if !strings.HasPrefix(fam, "DCGM_FI_") {
						continue
					}
					for _, m := range mf.GetMetric() {
						l := labelMap(m.GetLabel())
						if wholeGPU[l["gpu"]] && (fam == name || l[name] != "") {
							return true
						}
					}
				}
				return false
			}
			if len(rows) < 25 {
				t.Fatalf("only %d rows in the table", len(rows))
			}
			for name, cells := range rows {
				if len(cells) != len(header) {
					t.Fatalf("row %s has %d cells, the header %d", name, len(cells), len(header))
				}
				cell := cells[i]
				want := strings.HasPrefix(cell, "✓")
				if !want && !strings.HasPrefix(cell, "–") {
					t.Errorf("%s, %s: cell %q is neither ✓ nor –", name, c.column, cell)
					continue
				}
				if got := served(name); got != want {
					t.Errorf("%s on %s: the table says %q, gpuwatch serves it: %v", name, c.column, cell, got)
				}
			}
		})
	}
}

func labelMap(lps []*dto.LabelPair) map[string]string {
	l := map[string]string{}
	for _, lp := range lps {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// TestDCGMHostnameLabelFlag: --compat.hostname-label=hostname writes the
// host's name as hostname (dcgm-exporter's next release), never Hostname;
// the default writes Hostname (its latest release).
func TestDCGMHostnameLabelFlag(t *testing.T) {
	for flag, want := range map[string]string{"": "Hostname", "--compat.hostname-label=hostname": "hostname"} {
		args := []string{"--backend=sim", "--sim.profile=h100", "--compat=dcgm", "--compat.hostname=node-x",
			"--path.procfs=" + t.TempDir(), "--slurm.jobs=false", "--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket="}
		if flag != "" {
			args = append(args, flag)
		}
		base, _ := startGpuwatch(t, args...)
		fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
		mf := fams["DCGM_FI_DEV_GPU_TEMP"]
		if mf == nil || len(mf.GetMetric()) == 0 {
			t.Fatalf("%q: no DCGM_FI_DEV_GPU_TEMP", flag)
		}
		for _, m := range mf.GetMetric() {
			l := labelMap(m.GetLabel())
			other := map[string]string{"Hostname": "hostname", "hostname": "Hostname"}[want]
			if l[want] != "node-x" || l[other] != "" {
				t.Errorf("%q: labels %v, want %s=node-x and no %s", flag, l, want, other)
			}
		}
	}
	if out, code := runGpuwatch(t, "--compat.hostname-label=HOSTNAME", "--backend=sim", "--sim.profile=h100", "textfile", "--output="+filepath.Join(t.TempDir(), "x.prom")); code == 0 || !strings.Contains(out, "compat.hostname-label") {
		t.Errorf("a bad --compat.hostname-label: exit %d, %s", code, out)
	}
}
