package exporter

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// dcgmRename is a row of testdata/dcgm-names/renames.tsv.
type dcgmRename struct {
	since         DCGMVersion
	before, after string
	typ, unit     string
	factor        float64
}

func readDCGMRenames(t *testing.T) []dcgmRename {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "dcgm-names", "renames.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dcgmRename
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		if len(c) != 7 {
			t.Fatalf("renames.tsv:%d: %d columns, want 7", line, len(c))
		}
		v, err := ParseDCGMVersion(c[0])
		if err != nil {
			t.Fatalf("renames.tsv:%d: %v", line, err)
		}
		factor, err := strconv.ParseFloat(c[5], 64)
		if err != nil {
			t.Fatalf("renames.tsv:%d: factor: %v", line, err)
		}
		out = append(out, dcgmRename{since: v, before: c[1], after: c[2], typ: c[3], unit: c[4], factor: factor})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 26 {
		t.Fatalf("renames.tsv has %d rows", len(out))
	}
	return out
}

func TestParseDCGMVersion(t *testing.T) {
	for i, n := range DCGMVersionNames {
		if v, err := ParseDCGMVersion(n); err != nil || v != DCGMVersion(i) || v.String() != n {
			t.Errorf("ParseDCGMVersion(%q) = %v, %v", n, v, err)
		}
	}
	for _, bad := range []string{"", "4.7", "4.9.0", "v4.10"} {
		if _, err := ParseDCGMVersion(bad); err == nil || !strings.Contains(err.Error(), "4.8, 4.9, 4.10") {
			t.Errorf("ParseDCGMVersion(%q) = %v, want an error listing the versions", bad, err)
		}
	}
}

// selectedByName is the catalog entry c serves under name, or nil.
func selectedByName(c Compat, name string) *metricDef {
	var found *metricDef
	for _, m := range catalog {
		if m.Name == name && c.selects(m) {
			if found != nil {
				panic("two catalog entries served as " + name)
			}
			found = m
		}
	}
	return found
}

// TestDCGMRenameTable: each version serves the names, types and units of
// the rename table, and not the names it renamed.
func TestDCGMRenameTable(t *testing.T) {
	renames := readDCGMRenames(t)
	for v := range DCGMVersionNames {
		c := Compat{DCGM: true, DCGMVersion: DCGMVersion(v)}
		for _, r := range renames {
			now, old := selectedByName(c, r.after), selectedByName(c, r.before)
			if DCGMVersion(v) < r.since {
				if now != nil {
					t.Errorf("%s serves %s, which %s introduced", c.DCGMVersion, r.after, r.since)
				}
				continue
			}
			if old != nil {
				t.Errorf("%s still serves %s, renamed %s in %s", c.DCGMVersion, r.before, r.after, r.since)
			}
			if now == nil {
				t.Errorf("%s does not serve %s", c.DCGMVersion, r.after)
				continue
			}
			if now.Type != r.typ || now.Unit != r.unit {
				t.Errorf("%s: %s is %s in %q, the table says %s in %q", c.DCGMVersion, r.after, now.Type, now.Unit, r.typ, r.unit)
			}
		}
	}
}

// TestDCGMVersionsConvertExactly renders one snapshot, with a MIG GPU, as
// each version and checks that every renamed series equals its 4.8 twin
// times the table's factor, series by series, and that the driver-version
// label has the version's name.
func TestDCGMVersionsConvertExactly(t *testing.T) {
	renames := readDCGMRenames(t)
	s := fullSnapshot(3, 2)
	s.Allocations = nil
	d := &s.Devices[0]
	d.Utilization.GPU, d.Utilization.Encoder = some(0.37), some(0.05)
	d.Memory.Used, d.Memory.Reserved = someU(3<<30+12345<<10), someU(517<<20)
	d.Power.Energy = some(123456.789)
	d.XIDLastCode = someU(48)
	d2 := &s.Devices[2]
	d2.MIGInstances = []snapshot.MIGInstance{
		{GPUInstanceID: 1, UUID: "MIG-a", Profile: "3g.40gb", MemoryTotal: someU(40 << 30), MemoryUsed: someU(1<<30 + 4096)},
		{GPUInstanceID: 2, UUID: "MIG-b", Profile: "3g.40gb", MemoryTotal: someU(40 << 30), MemoryUsed: someU(2 << 30)},
	}
	v48, _ := dcgmValues(t, s, Compat{DCGM: true})
	for _, v := range []DCGMVersion{DCGM49, DCGM410} {
		got, fams := dcgmValues(t, s, Compat{DCGM: true, DCGMVersion: v})
		compared := 0
		for key, before := range v48 {
			name, rest, _ := strings.Cut(key, "/")
			for _, r := range renames {
				if r.before != name || v < r.since {
					continue
				}
				after, ok := got[r.after+"/"+rest]
				if !ok {
					t.Errorf("%s: %s/%s absent; its 4.8 twin %s is %v", v, r.after, rest, key, before)
					continue
				}
				if want := before * r.factor; math.Abs(after-want) > 1e-12*math.Max(1, math.Abs(want)) {
					t.Errorf("%s: %s/%s = %v, want %v (4.8's %v × %v)", v, r.after, rest, after, want, before, r.factor)
				}
				compared++
			}
		}
		if compared < 40 {
			t.Errorf("%s: only %d series compared", v, compared)
		}
		for _, mf := range fams {
			if !strings.HasPrefix(mf.GetName(), "DCGM_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				if l := labelsOf(m); l["DCGM_FI_SYSTEM_DRIVER_VERSION"] != s.DriverVersion || l["DCGM_FI_DRIVER_VERSION"] != "" {
					t.Errorf("%s: %s has driver labels %v", v, mf.GetName(), l)
					break
				}
			}
		}
		if got["DCGM_FI_DEV_FB_USED_BYTES/0//"] != float64(d.Memory.Used.Value) {
			t.Errorf("%s: FB_USED_BYTES = %v, want the bytes NVML gave, %d", v, got["DCGM_FI_DEV_FB_USED_BYTES/0//"], d.Memory.Used.Value)
		}
		if got["DCGM_FI_DEV_GPU_UTIL_RATIO/0//"] != 0.37 {
			t.Errorf("%s: GPU_UTIL_RATIO = %v, want 0.37", v, got["DCGM_FI_DEV_GPU_UTIL_RATIO/0//"])
		}
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.GetLabel() {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// TestDCGMVersionsServeOneGeneration: a version serves none of another
// version's names, and the 4.8 names are today's.
func TestDCGMVersionsServeOneGeneration(t *testing.T) {
	for v := range DCGMVersionNames {
		c := Compat{DCGM: true, DCGMVersion: DCGMVersion(v)}
		for _, m := range catalog {
			if m.Compat == "" {
				continue // native and always-on: TestDCGMSchemeSelection
			}
			want := m.Compat == compatDCGM && DCGMVersion(v) == DCGM48 ||
				m.Compat == compatDCGM49 && strings.Contains(","+strings.Join(m.DCGMVersions, ",")+",", ","+DCGMVersion(v).String()+",")
			if c.selects(m) != want {
				t.Errorf("%s: %s (%s %v) selected %v", c.DCGMVersion, m.Name, m.Compat, m.DCGMVersions, !want)
			}
		}
	}
	if (Compat{DCGM: true}).DCGMVersion != DCGM48 {
		t.Errorf("the zero version is not 4.8")
	}
}

// TestDCGMVersionsDocCoversEveryName keeps docs/dcgm-compat.md in step
// with the names of 4.9 and 4.10.
func TestDCGMVersionsDocCoversEveryName(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "dcgm-compat.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := CompatCatalog(compatDCGM49)
	if len(names) < 50 {
		t.Fatalf("%d metrics of 4.9 and 4.10", len(names))
	}
	for _, m := range names {
		if !strings.Contains(string(doc), "`"+m.Name+"`") {
			t.Errorf("docs/dcgm-compat.md does not name %s (%v)", m.Name, m.DCGMVersions)
		}
	}
}

// TestDCGMNameVersions: each renamed name belongs to its generation, and
// DCGMNameIn finds its counterpart in the other one, both ways.
func TestDCGMNameVersions(t *testing.T) {
	for _, r := range readDCGMRenames(t) {
		if got := DCGMNameIn(r.before, r.since); got != r.after {
			t.Errorf("DCGMNameIn(%s, %s) = %q, want %s", r.before, r.since, got, r.after)
		}
		if got := DCGMNameIn(r.after, DCGM48); got != r.before {
			t.Errorf("DCGMNameIn(%s, 4.8) = %q, want %s", r.after, got, r.before)
		}
		if v := DCGMNameVersions(r.after); len(v) == 0 || v[0] != r.since.String() {
			t.Errorf("DCGMNameVersions(%s) = %v, want from %s", r.after, v, r.since)
		}
	}
	for name, want := range map[string][]string{
		"DCGM_FI_DEV_GPU_UTIL":                  {"4.8"},
		"DCGM_FI_DEV_GPU_UTIL_RATIO":            {"4.9", "4.10"},
		"DCGM_FI_PROF_PCIE_TX_BYTES":            {"4.8", "4.9"},
		"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND": {"4.10"},
		"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":         {"4.8", "4.9", "4.10"},
		"DCGM_FI_DRIVER_VERSION":                {"4.8"},
		"DCGM_FI_SYSTEM_DRIVER_VERSION":         {"4.9", "4.10"},
		"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY":     {"4.9", "4.10"},
		"DCGM_FI_DEV_FABRIC_HEALTH_MASK":        {"4.9", "4.10"},
	} {
		if got := DCGMNameVersions(name); !slices.Equal(got, want) {
			t.Errorf("DCGMNameVersions(%s) = %v, want %v", name, got, want)
		}
	}
	if got := DCGMNameIn("DCGM_FI_DRIVER_VERSION", DCGM410); got != "DCGM_FI_SYSTEM_DRIVER_VERSION" {
		t.Errorf("the driver label in 4.10: %q", got)
	}
	if got := DCGMNameIn("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", DCGM48); got != "" {
		t.Errorf("4.8 has no enforced limit, DCGMNameIn says %q", got)
	}
}

// TestDCGMFabricHealth: 4.9 and 4.10 serve the snapshot's fabric mask and
// summary as they are, on the GPUs that have them; absent (never 0) on a
// GPU without fabric, and the 4.8 page has neither.
func TestDCGMFabricHealth(t *testing.T) {
	s := fullSnapshot(3, 2)
	s.Allocations = nil
	s.Devices[0].Fabric = snapshot.Fabric{HealthMask: someU(0x1a9), HealthSummary: someU(3)}
	// A version 2 answer, on a MIG GPU: on each GPU instance's series.
	s.Devices[1].Fabric = snapshot.Fabric{HealthMask: someU(0x1aa)}
	s.Devices[2].Fabric = snapshot.Fabric{}
	const mask, summary = "DCGM_FI_DEV_FABRIC_HEALTH_MASK", "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"
	v48, _ := dcgmValues(t, s, Compat{DCGM: true})
	for key := range v48 {
		if strings.HasPrefix(key, "DCGM_FI_DEV_FABRIC_") {
			t.Errorf("4.8 serves %s", key)
		}
	}
	for _, v := range []DCGMVersion{DCGM49, DCGM410} {
		got, _ := dcgmValues(t, s, Compat{DCGM: true, DCGMVersion: v})
		for key, want := range map[string]float64{mask + "/0//": 0x1a9, summary + "/0//": 3, mask + "/1/1/": 0x1aa, mask + "/1/2/": 0x1aa} {
			if g, ok := got[key]; !ok || g != want {
				t.Errorf("%s: %s = %v (present %v), want %v", v, key, g, ok, want)
			}
		}
		for _, key := range []string{summary + "/1/1/", mask + "/2//", summary + "/2//"} {
			if g, ok := got[key]; ok {
				t.Errorf("%s: %s = %v, want absent", v, key, g)
			}
		}
	}
}
