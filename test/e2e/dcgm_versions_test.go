//go:build cgo

package e2e

import (
	"bufio"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The --compat.dcgm-version tests: dcgm-exporter 4.9's and 4.10's names,
// units and labels, served by the binary on the simulator and through the
// fake libnvidia-ml.so.1, each page checked series by series against the
// 4.8 page of the same pinned GPUs and the factor of the rename table
// (internal/exporter/testdata/dcgm-names/renames.tsv), and by promtool.

type dcgmRenameRow struct {
	since, before, after string
	factor               float64
}

func dcgmRenameRows(t *testing.T) []dcgmRenameRow {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "internal", "exporter", "testdata", "dcgm-names", "renames.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []dcgmRenameRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		factor, err := strconv.ParseFloat(c[5], 64)
		if len(c) != 7 || err != nil {
			t.Fatalf("renames.tsv: bad row %q", sc.Text())
		}
		rows = append(rows, dcgmRenameRow{since: c[0], before: c[1], after: c[2], factor: factor})
	}
	return rows
}

// dcgmSeriesKeys maps each DCGM_* series to its value, keyed by name and
// the labels other than the host and driver labels, which the versions
// name differently.
func dcgmSeriesKeys(t *testing.T, fams map[string]*dto.MetricFamily, version string) map[string]float64 {
	t.Helper()
	host, driver := "hostname", "DCGM_FI_SYSTEM_DRIVER_VERSION"
	if version == "4.8" {
		host, driver = "Hostname", "DCGM_FI_DRIVER_VERSION"
	}
	out := map[string]float64{}
	for name, mf := range fams {
		if !strings.HasPrefix(name, "DCGM_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := labelMap(m.GetLabel())
			if l[host] != "golden-host" || l[driver] == "" {
				t.Errorf("%s %s: host label %s or driver label %s missing: %v", version, name, host, driver, l)
			}
			var parts []string
			for k, v := range l {
				if k != host && k != driver {
					parts = append(parts, k+"="+v)
				}
			}
			slices.Sort(parts)
			out[name+"{"+strings.Join(parts, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// dcgmVersionPages serves the same pinned GPUs as 4.8, 4.9 and 4.10,
// through the simulator or (fake) through the newest branch's library.
func dcgmVersionPages(t *testing.T, profile string, fake bool) map[string]string {
	config := "profile: " + profile + "\npin_time: 1h\nseed: golden\n"
	if profile == fabricProfile {
		config += "faults:\n  - {gpu: " + strconv.Itoa(fabricDegradedGPU) + ", fabric_degraded: true}\n"
	}
	pages := map[string]string{}
	var bases []string
	for _, v := range []string{"4.8", "4.9", "4.10"} {
		args := append([]string{"--compat=dcgm", "--compat.dcgm-version=" + v, "--compat.hostname=golden-host"}, isolated(t)...)
		var base string
		if fake {
			var p *testenv.Process
			var up bool
			base, p, up = startWithEnv(t, fakeEnv(t, nvmlbranch.Newest().Name, config), append(args, "--backend=nvml")...)
			if !up {
				t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
			}
		} else {
			path := filepath.Join(t.TempDir(), "sim.yaml")
			if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			base, _ = startGpuwatch(t, append(args, "--backend=sim", "--sim.config="+path)...)
		}
		bases = append(bases, base)
	}
	settle(t, bases...)
	for i, v := range []string{"4.8", "4.9", "4.10"} {
		pages[v] = httpGet(t, bases[i]+"/metrics")
	}
	return pages
}

func TestDCGMVersionsE2E(t *testing.T) {
	rows := dcgmRenameRows(t)
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	for _, door := range []string{"sim", "fakenvml"} {
		for _, profile := range []string{"dgx-h100", "dgx-a100-mig", "rtx4090", "v100"} {
			t.Run(door+"/"+profile, func(t *testing.T) {
				t.Parallel()
				pages := dcgmVersionPages(t, profile, door == "fakenvml")
				old := dcgmSeriesKeys(t, testenv.ParseMetrics(t, pages["4.8"]), "4.8")
				for _, v := range []string{"4.9", "4.10"} {
					fams := testenv.ParseMetrics(t, pages[v])
					got := dcgmSeriesKeys(t, fams, v)
					checkDCGMVersionPage(t, v, rows, old, got, fams, profile == fabricProfile)
					checkPromtool(t, promtool, v, pages[v])
				}
			})
		}
	}
}

// checkDCGMVersionPage: every series of the 4.8 page whose name version v
// renamed is on v's page under the new name, with the value times the
// table's factor, and no series has the old name; every other series is
// there unchanged, and DCGM_FI_DEV_ENFORCED_POWER_LIMIT is added; with
// fabric, the two fabric health fields are added beside every GPU's power
// limit (and absent, never 0, without).
func checkDCGMVersionPage(t *testing.T, v string, rows []dcgmRenameRow, old, got map[string]float64, fams map[string]*dto.MetricFamily, fabric bool) {
	t.Helper()
	renamed := map[string]dcgmRenameRow{}
	for _, r := range rows {
		if r.since == "4.9" || r.since == v {
			renamed[r.before] = r
		}
	}
	want := map[string]float64{}
	for key, val := range old {
		name, labels, _ := strings.Cut(key, "{")
		if r, ok := renamed[name]; ok {
			name, val = r.after, val*r.factor
		}
		want[name+"{"+labels] = val
		// New in 4.9 beside it: the enforced limit, the same reading.
		if name == "DCGM_FI_DEV_POWER_MGMT_LIMIT" {
			want["DCGM_FI_DEV_ENFORCED_POWER_LIMIT{"+labels] = val
			if fabric {
				mask, summary := fabricHealth(labels)
				want["DCGM_FI_DEV_FABRIC_HEALTH_MASK{"+labels] = mask
				want["DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY{"+labels] = summary
			}
		}
	}
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: %s absent", v, key)
			continue
		}
		if math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: %s = %v, want %v", v, key, g, w)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: %s served, but not on the 4.8 page under its old name", v, key)
		}
	}
	for before := range renamed {
		if _, ok := fams[before]; ok {
			t.Errorf("%s serves %s, which it renamed", v, before)
		}
	}
}

// fabricProfile is the profile whose GPUs are NVSwitch-connected Hoppers,
// the only ones with fabric health; fabricDegradedGPU is the GPU of it
// that the fabric_degraded fault degrades.
const (
	fabricProfile     = "dgx-h100"
	fabricDegradedGPU = 3
)

// fabricHealth is the health mask and summary nvml.h gives a healthy
// fabric, or for fabricDegradedGPU a fabric with degraded bandwidth and
// limited capacity, for the series of labels (dcgmSeriesKeys's form:
// "k=v,k=v}").
func fabricHealth(labels string) (mask, summary float64) {
	const healthy = nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW |
		nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY |
		nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY |
		nvml.GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY |
		nvml.GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION
	if !slices.Contains(strings.Split(strings.TrimSuffix(labels, "}"), ","), "gpu="+strconv.Itoa(fabricDegradedGPU)) {
		return healthy, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY
	}
	const degraded = healthy&^(nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW) |
		nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW
	return degraded, nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
}

func checkPromtool(t *testing.T, promtool, v, page string) {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	out, _ := cmd.CombinedOutput()
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		known := line == ""
		for _, l := range dcgmNamingLint {
			if strings.HasPrefix(line, "DCGM_FI_") && strings.HasSuffix(line, l) {
				known = true
			}
		}
		if !known {
			t.Errorf("%s: promtool check metrics: %s", v, line)
		}
	}
}

// TestDCGMTransitionRules: deploy/prometheus/dcgm-transition's recording
// rules, run by promtool on the series gpuwatch serves as 4.10, record
// every renamed series exactly as gpuwatch serves it as 4.8: same name,
// labels and value.
func TestDCGMTransitionRules(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	rulesFile, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "dcgm-transition", "dcgm-4.8-names.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rows := dcgmRenameRows(t)
	for _, profile := range []string{"dgx-h100", "dgx-a100-mig"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			pages := dcgmVersionPages(t, profile, false)
			type sample struct {
				Labels string  `json:"labels"`
				Value  float64 `json:"value"`
			}
			type exprTest struct {
				Expr       string   `json:"expr"`
				EvalTime   string   `json:"eval_time"`
				ExpSamples []sample `json:"exp_samples"`
			}
			type series struct {
				Series string `json:"series"`
				Values string `json:"values"`
			}
			var input []series
			for name, mf := range testenv.ParseMetrics(t, pages["4.10"]) {
				if strings.HasPrefix(name, "DCGM_") {
					for _, m := range mf.GetMetric() {
						input = append(input, series{Series: seriesText(name, m), Values: strconv.FormatFloat(m.GetGauge().GetValue()+m.GetCounter().GetValue(), 'g', -1, 64) + "x5"})
					}
				}
			}
			old := testenv.ParseMetrics(t, pages["4.8"])
			var tests []exprTest
			for _, r := range rows {
				mf, ok := old[r.before]
				if !ok {
					continue // not served on this GPU
				}
				et := exprTest{Expr: r.before, EvalTime: "4m"}
				for _, m := range mf.GetMetric() {
					et.ExpSamples = append(et.ExpSamples, sample{Labels: seriesText(r.before, m), Value: m.GetGauge().GetValue() + m.GetCounter().GetValue()})
				}
				tests = append(tests, et)
			}
			if len(tests) < 15 {
				t.Fatalf("only %d renamed metrics on the 4.8 page", len(tests))
			}
			doc, err := yaml.Marshal(map[string]any{
				"rule_files": []string{rulesFile}, "evaluation_interval": "1m",
				"tests": []any{map[string]any{"interval": "1m", "input_series": input, "promql_expr_test": tests}},
			})
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "transition_test.yml")
			writeFile(t, file, string(doc))
			if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
				t.Fatalf("promtool test rules: %v\n%s", err, out)
			}
		})
	}
}

// seriesText is a series in promtool's notation: name{label="value",...}.
func seriesText(name string, m *dto.Metric) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		parts = append(parts, lp.GetName()+"="+strconv.Quote(lp.GetValue()))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// TestDoctorDCGMCheckFile: `gpuwatch doctor --compat=dcgm
// --compat.check-file=FILE` names each dcgm-exporter name of a dashboard
// or rules file, its generation, whether the flags serve it and, where the
// flags' version renamed it, the name to query instead. A file it cannot
// read as either fails the check, naming the file; names it does not serve
// leave the host healthy.
func TestDoctorDCGMCheckFile(t *testing.T) {
	t.Parallel()
	dashboard := filepath.Join("..", "..", "internal", "exporter", "testdata", "dcgm-exporter", "dcgm-exporter-dashboard.json")
	transition := filepath.Join("..", "..", "deploy", "prometheus", "dcgm-transition", "dcgm-4.8-names.yml")
	base := []string{"--backend=sim", "--sim.profile=h100", "--compat=dcgm"}
	check := func(file, name string) string { return "dcgm names in " + file + ": " + name }

	r, out, code := runDoctor(t, append(base, "--compat.check-file="+dashboard)...)
	if code != 0 || !r.Healthy {
		t.Fatalf("4.8, the released dashboard: exit %d\n%s", code, out)
	}
	for _, n := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"} {
		if st, found := r.status(check(dashboard, n)); st != "ok" || !strings.Contains(found, "dcgm-exporter 4.8") {
			t.Errorf("4.8: %s: %s %s", n, st, found)
		}
	}

	r, out, code = runDoctor(t, append(base, "--compat.dcgm-version=4.10", "--compat.check-file="+dashboard)...)
	if code != 0 || !r.Healthy {
		t.Errorf("4.10, the released dashboard: names not served must not make the host unhealthy: exit %d\n%s", code, out)
	}
	for n, instead := range map[string]string{"DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_FB_USED": "DCGM_FI_DEV_FB_USED_BYTES"} {
		if st, found := r.status(check(dashboard, n)); st != "fail" || !strings.Contains(found, "query "+instead+" instead") || !strings.Contains(found, "--compat.dcgm-version=4.8") {
			t.Errorf("4.10: %s: %s %s", n, st, found)
		}
	}

	r, _, _ = runDoctor(t, append(base, "--compat.dcgm-version=4.10", "--compat.check-file="+transition)...)
	for n, want := range map[string]string{"DCGM_FI_DEV_GPU_UTIL_RATIO": "ok", "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND": "ok", "DCGM_FI_SYSTEM_DRIVER_VERSION": "ok"} {
		if st, found := r.status(check(transition, n)); st != want || !strings.Contains(found, "4.10") {
			t.Errorf("4.10, the transition rules: %s: %s %s", n, st, found)
		}
	}
	if st, found := r.status(check(transition, "DCGM_FI_DEV_GPU_UTIL")); st != "absent" {
		t.Errorf("a rule's record name counted as a use: %s %s", st, found)
	}

	notRules := filepath.Join(t.TempDir(), "notes.yml")
	writeFile(t, notRules, "just: text\n")
	r, out, code = runDoctor(t, append(base, "--compat.check-file="+notRules)...)
	if st, found := r.status("dcgm names in " + notRules); code == 0 || st != "fail" || !strings.Contains(found, notRules) {
		t.Errorf("a file that is neither: exit %d, %s %s\n%s", code, st, found, out)
	}
}
