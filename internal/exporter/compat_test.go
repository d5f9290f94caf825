package exporter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func TestParseCompat(t *testing.T) {
	for in, want := range map[string]Compat{
		"native": {Native: true}, "dcgm": {DCGM: true}, "dcgm,native": {Native: true, DCGM: true}, " native , dcgm ": {Native: true, DCGM: true},
	} {
		got, err := ParseCompat(in)
		if err != nil || got != want {
			t.Errorf("ParseCompat(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ",", "dcgm-exporter", "native,DCGM"} {
		if _, err := ParseCompat(bad); err == nil || !strings.Contains(err.Error(), CompatNames) {
			t.Errorf("ParseCompat(%q) = %v, want an error listing %s", bad, err, CompatNames)
		}
	}
}

func TestCompatCatalogConventions(t *testing.T) {
	dcgm := CompatCatalog(compatDCGM)
	if len(dcgm) < 30 {
		t.Fatalf("%d dcgm metrics, want the default counter set and the common extras", len(dcgm))
	}
	for _, m := range dcgm {
		if !strings.HasPrefix(m.Name, "DCGM_FI_DEV_") && !strings.HasPrefix(m.Name, "DCGM_FI_PROF_") {
			t.Errorf("%s: not a dcgm-exporter field name", m.Name)
		}
		extra := []string{}
		if m.Name == "DCGM_FI_DEV_XID_ERRORS" {
			extra = []string{"err_code", "err_msg"}
		}
		if !slices.Equal(m.Labels, withLabels(dcgmLabels, extra...)) {
			t.Errorf("%s: labels %v, want dcgm-exporter's %v plus %v", m.Name, m.Labels, dcgmLabels, extra)
		}
	}
	for _, m := range Catalog() {
		if m.Compat != "" {
			t.Errorf("Catalog() lists the compat metric %s", m.Name)
		}
	}
}

// dcgmValues renders s with the given schemes and returns the value of each
// DCGM series, keyed by name and the labels that tell series apart.
func dcgmValues(t *testing.T, s *snapshot.Snapshot, c Compat) (map[string]float64, []*dto.MetricFamily) {
	t.Helper()
	e := newExporter(t, s, Options{Compat: c, Hostname: "node-a"})
	var out map[string]float64
	var fams []*dto.MetricFamily
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		out, fams = map[string]float64{}, mfs
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "DCGM_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				if l["Hostname"] != "node-a" || l["modelName"] == "" || l["UUID"] == "" {
					t.Errorf("%s: identity labels missing: %v", mf.GetName(), l)
				}
				key := mf.GetName() + "/" + l["gpu"] + "/" + l["GPU_I_ID"] + "/" + l["pod"] + l["hpc_job"]
				out[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	})
	return out, fams
}

// TestDCGMUnits checks that each compat series carries dcgm-exporter's unit:
// percent, MiB, mJ and MHz where gpuwatch's own names use ratios and base
// units, and NVML's bitmask for the throttle reasons.
func TestDCGMUnits(t *testing.T) {
	s := fullSnapshot(2, 2)
	s.Allocations = nil // workload labels: TestDCGMWorkloadAndMIGLabels
	d := &s.Devices[0]
	d.Utilization.GPU = some(0.87)
	d.Memory.Used = someU(3 << 30)
	d.Power.Energy = some(12.5)
	d.XIDLastCode = someU(79)
	d.ClockEvents = []snapshot.ClockEvent{{Reason: "gpu_idle", Active: false}, {Reason: "sw_power_cap", Active: true}, {Reason: "hw_thermal_slowdown", Active: true}}
	got, _ := dcgmValues(t, s, Compat{DCGM: true})
	for key, want := range map[string]float64{
		"DCGM_FI_DEV_GPU_UTIL/0//":                 87,
		"DCGM_FI_DEV_FB_USED/0//":                  3072,
		"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION/0//": 12500,
		"DCGM_FI_DEV_SM_CLOCK/0//":                 1980,
		"DCGM_FI_DEV_GPU_TEMP/0//":                 61,
		"DCGM_FI_DEV_XID_ERRORS/0//":               79,
		"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS/0//":   0x4 | 0x40,
	} {
		if v, ok := got[key]; !ok || v < want-1e-9 || v > want+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}

func TestDCGMSchemeSelection(t *testing.T) {
	for _, c := range []Compat{{DCGM: true}, {Native: true, DCGM: true}, {Native: true}, {}} {
		_, fams := dcgmValues(t, fullSnapshot(1, 0), c)
		names := familyNames(fams)
		native, dcgm := slices.Contains(names, "gpu_temperature_celsius"), slices.Contains(names, "DCGM_FI_DEV_GPU_TEMP")
		wantNative := c.Native || c == (Compat{})
		if native != wantNative || dcgm != c.DCGM {
			t.Errorf("%+v: native %v dcgm %v", c, native, dcgm)
		}
		if !slices.Contains(names, "gpuwatch_collector_success") {
			t.Errorf("%+v: the exporter's own series are gone", c)
		}
		if !slices.Contains(names, "gpu_up") {
			t.Errorf("%+v: gpu_up is gone; it is served under every scheme", c)
		}
	}
}

// TestDCGMWorkloadAndMIGLabels: the pod and the Slurm job that hold a GPU
// or a MIG instance label its series as dcgm-exporter's pod and HPC job
// mappings do, and a MIG-enabled GPU reports every field once per GPU
// instance (dcgm-exporter's default --devices=f), memory its own, the
// whole-GPU readings repeated.
func TestDCGMWorkloadAndMIGLabels(t *testing.T) {
	s := fullSnapshot(2, 0)
	d1 := &s.Devices[1]
	d1.MIGInstances = []snapshot.MIGInstance{
		{GPUInstanceID: 1, ComputeInstanceID: 0, UUID: "MIG-a", Profile: "3g.40gb", MemoryTotal: someU(40 << 30), MemoryUsed: someU(1 << 30)},
		{GPUInstanceID: 1, ComputeInstanceID: 1, UUID: "MIG-b", Profile: "3g.40gb", MemoryTotal: someU(40 << 30), MemoryUsed: someU(1 << 30)},
		{GPUInstanceID: 2, ComputeInstanceID: 0, UUID: "MIG-c", Profile: "3g.40gb", MemoryTotal: someU(40 << 30), MemoryUsed: someU(2 << 30)},
	}
	s.Allocations = []snapshot.Allocation{
		{GPU: 0, GPUUUID: s.Devices[0].UUID, Pod: snapshot.Pod{Name: "trainer-0", Namespace: "research", Container: "pytorch"}},
		{GPU: 0, GPUUUID: s.Devices[0].UUID, Pod: snapshot.Pod{Name: "trainer-0", Namespace: "research", Container: "pytorch"}}, // a time-sliced replica
		{GPU: 1, GPUUUID: d1.UUID, MIGUUID: "MIG-c", Slurm: snapshot.SlurmJob{JobID: "4242"}},
		{GPU: 1, GPUUUID: d1.UUID, MIGUUID: "MIG-b", Pod: snapshot.Pod{Name: "infer-0", Namespace: "serving", Container: "vllm"}},
	}
	got, _ := dcgmValues(t, s, Compat{DCGM: true})
	if _, ok := got["DCGM_FI_DEV_GPU_TEMP/0//trainer-0"]; !ok {
		t.Errorf("GPU 0 temperature lacks the pod label: %v", keysWith(got, "GPU_TEMP"))
	}
	if _, ok := got["DCGM_FI_DEV_GPU_TEMP/0//"]; ok {
		t.Errorf("GPU 0 also has a series without its pod")
	}
	// MIG GPU 1: each GPU instance has the GPU's temperature, with the
	// pod of its second compute instance and the job of GPU instance 2;
	// no series of the GPU as a whole.
	for key, want := range map[string]float64{
		"DCGM_FI_DEV_GPU_TEMP/1/1/infer-0":    d1.Temperature.GPU.Value,
		"DCGM_FI_DEV_GPU_TEMP/1/2/4242":       d1.Temperature.GPU.Value,
		"DCGM_FI_DEV_POWER_USAGE/1/1/infer-0": d1.Power.Usage.Value,
		"DCGM_FI_DEV_POWER_USAGE/1/2/4242":    d1.Power.Usage.Value,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want GPU 1's reading %v", key, v, ok, want)
		}
	}
	if _, ok := got["DCGM_FI_DEV_XID_ERRORS/1/2/4242"]; !ok {
		t.Errorf("GPU instance 2 has no XID series: %v", keysWith(got, "XID"))
	}
	if n := len(keysWith(got, "DCGM_FI_DEV_GPU_TEMP/1/")); n != 2 {
		t.Errorf("MIG GPU 1 has %d temperature series, want one per GPU instance: %v", n, keysWith(got, "DCGM_FI_DEV_GPU_TEMP/1/"))
	}
	if v := got["DCGM_FI_DEV_FB_USED/1/1/infer-0"]; v != 1024 {
		t.Errorf("GPU instance 1 FB_USED = %v, want 1024 MiB once (not per compute instance)", v)
	}
	if v := got["DCGM_FI_DEV_FB_USED/1/2/4242"]; v != 2048 {
		t.Errorf("GPU instance 2 FB_USED = %v, want 2048", v)
	}
	if _, ok := got["DCGM_FI_DEV_FB_USED/1//4242"]; ok {
		t.Errorf("a MIG GPU also reports whole-GPU FB_USED, which sum() would count twice")
	}
}

func keysWith(m map[string]float64, part string) []string {
	var out []string
	for k := range m {
		if strings.Contains(k, part) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestDCGMCompatDocCoversEveryName keeps docs/dcgm-compat.md in step with
// the compat catalog: every name served is in the mapping table.
func TestDCGMCompatDocCoversEveryName(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "dcgm-compat.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range CompatCatalog(compatDCGM) {
		if !strings.Contains(string(doc), "| `"+m.Name+"` |") {
			t.Errorf("docs/dcgm-compat.md has no mapping row for %s", m.Name)
		}
	}
}
