//go:build cgo

package nvmlbranch

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch/genbranch"
)

// tables_gen.go must be what genbranch writes: after a go-nvml bump or a
// new entry in genbranch.Releases this fails until it is regenerated.
func TestGeneratedTablesAreCurrent(t *testing.T) {
	want, err := genbranch.Source()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(genbranch.FileName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		n := 0
		for n < len(have) && n < len(want) && have[n] == want[n] {
			n++
		}
		t.Fatalf("%s is stale (first difference at line %d): run go generate ./internal/fakedriver/nvmlbranch",
			genbranch.FileName, 1+bytes.Count(have[:n], []byte("\n")))
	}
}

// Facts from NVIDIA's headers that the tables must reflect.
func TestBranchFacts(t *testing.T) {
	get := func(name string) *Branch {
		b, ok := Lookup(name)
		if !ok {
			t.Fatalf("no branch %s", name)
		}
		return b
	}
	for _, tc := range []struct {
		branch, symbol string
		has            bool
	}{
		{"R470", "nvmlInit_v2", true},
		{"R470", "nvmlDeviceGetMemoryInfo", true},
		{"R470", "nvmlGpmQueryDeviceSupport", false}, // calling it on R470 kills the process
		{"R470", "nvmlDeviceGetMemoryInfo_v2", false},
		{"R510", "nvmlDeviceGetMemoryInfo_v2", true},
		{"R510", "nvmlDeviceGetCurrentClocksEventReasons", false},
		{"R525", "nvmlGpmQueryDeviceSupport", true},
		{"R525", "nvmlGpmMigSampleGet", true},
		{"R550", "nvmlDeviceGetCurrentClocksEventReasons", true},
		{"R580", "nvmlDeviceGetNumFans", true},
	} {
		if got := get(tc.branch).HasFunction(tc.symbol); got != tc.has {
			t.Errorf("%s.HasFunction(%s) = %v, want %v", tc.branch, tc.symbol, got, tc.has)
		}
	}
	const pcieTXBytes = 197 // NVML_FI_DEV_PCIE_COUNT_TX_BYTES
	if get("R550").KnowsField(pcieTXBytes) {
		t.Error("R550 knows field 197; its nvml.h ends at NVML_FI_MAX 200 without the PCIe byte counters")
	}
	if !get("R570").KnowsField(pcieTXBytes) || !get("R470").KnowsField(1) {
		t.Error("R570 must know field 197 and every branch field 1 (ECC_CURRENT)")
	}
	if get("R470").KnowsField(get("R470").FieldMax()) {
		t.Error("a branch must not know its own NVML_FI_MAX")
	}
	if !slices.IsSorted(Names()) || Newest().Name != "R580" {
		t.Errorf("branches %v: want sorted, newest R580", Names())
	}
	if b, ok := Lookup("535"); !ok || b.Name != "R535" {
		t.Error(`Lookup("535") must find R535`)
	}
	if _, ok := Lookup("R999"); ok {
		t.Error("Lookup(R999) must fail")
	}
}

func TestMethodSymbols(t *testing.T) {
	r470, _ := Lookup("R470")
	r525, _ := Lookup("R525")
	for _, tc := range []struct {
		method  string
		branch  *Branch
		missing string
	}{
		{"Init", r470, ""},
		{"DeviceGetCount", r470, ""},
		{"Device.GetName", r470, ""},
		{"Device.GetComputeRunningProcesses", r470, ""},
		{"Device.GpmQueryDeviceSupport", r470, "nvmlGpmQueryDeviceSupport"},
		{"DeviceGetMemoryInfo_v2", r470, "nvmlDeviceGetMemoryInfo_v2"},
		{"Device.GpmQueryDeviceSupport", r525, ""},
		{"Device.NoSuchMethod", r525, "Device.NoSuchMethod"},
	} {
		if got := tc.branch.MissingSymbol(tc.method); got != tc.missing {
			t.Errorf("%s.MissingSymbol(%s) = %q, want %q", tc.branch.Name, tc.method, got, tc.missing)
		}
	}
	syms, ok := MethodSymbols("Init")
	if !ok || !slices.Equal(syms[0], []string{"nvmlInit", "nvmlInit_v2"}) {
		t.Errorf("MethodSymbols(Init) = %v", syms)
	}
	// MethodSymbols searches the generated table by halves: every row must be found.
	for _, m := range methodSymbols {
		if got, ok := MethodSymbols(m.method); !ok || len(got) != len(m.symbols) {
			t.Errorf("MethodSymbols(%s) = %v, %v: the table is not sorted by method", m.method, got, ok)
		}
	}
}

// The newest table against the symbols a real R580 library exported
// (bench/device/r580-h100, driver 580.159.04, read on an H100): every
// function the table lists must be there.
func TestNewestBranchIsSubsetOfRealR580(t *testing.T) {
	f, err := os.Open("../../../bench/device/r580-h100/libnvml-symbols.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	real := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		real[sc.Text()] = true
	}
	if len(real) < 300 {
		t.Fatalf("read %d symbols, want the whole list", len(real))
	}
	r580, _ := Lookup("R580")
	for _, fn := range r580.Functions() {
		if !real[fn] {
			t.Errorf("R580 table lists %s, the real R580 library does not export it", fn)
		}
	}
}
