//go:build cgo

package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func memorySim(t *testing.T, yaml string) *Sim {
	t.Helper()
	cfg, err := ParseConfig([]byte(yaml), "cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PinTime = pinAt(0)
	return newSim(t, cfg)
}

// TestECCUncorrectableFault: injected uncorrectable errors raise the
// volatile and aggregate counts from their time on; a GPU reset starts
// the volatile count again and keeps the aggregate one.
func TestECCUncorrectableFault(t *testing.T) {
	s := memorySim(t, `profile: dgx-h100
faults:
  - {gpu: 2, ecc_uncorrectable: 2, at: 10s}
  - {gpu: 2, ecc_uncorrectable: 1, at: 20s}
  - {gpu: 2, reset_at: 30s}
`)
	counts := func() (volatile, aggregate uint64) {
		t.Helper()
		d := handle(t, s, 2)
		v, r1 := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		a, r2 := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC)
		m, r3 := d.GetMemoryErrorCounter(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, nvml.MEMORY_LOCATION_DRAM)
		if r1 != nvml.SUCCESS || r2 != nvml.SUCCESS || r3 != nvml.SUCCESS || m != v {
			t.Fatalf("ECC reads: %v %v %v, DRAM %d", r1, r2, r3, m)
		}
		return v, a
	}
	for _, c := range []struct {
		at                  time.Duration
		volatile, aggregate uint64
	}{{0, 0, 0}, {10 * time.Second, 2, 2}, {25 * time.Second, 3, 3}, {30 * time.Second, 0, 3}, {time.Hour, 0, 3}} {
		s.SetElapsed(c.at)
		if v, a := counts(); v != c.volatile || a != c.aggregate {
			t.Errorf("at %s: volatile %d, aggregate %d; want %d, %d", c.at, v, a, c.volatile, c.aggregate)
		}
	}
	// Another GPU is untouched.
	if v, _ := handle(t, s, 3).GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); v != 0 {
		t.Errorf("GPU 3: %d", v)
	}
}

// TestRowRemapFaults: a pending remap is pending from its time until a
// GPU reset applies it (its row stays counted); a failure stays.
func TestRowRemapFaults(t *testing.T) {
	s := memorySim(t, `profile: dgx-h100
faults:
  - {gpu: 1, row_remap: pending, at: 10s}
  - {gpu: 1, reset_at: 20s}
  - {gpu: 3, row_remap: failure, at: 10s}
  - {gpu: 3, reset_at: 20s}
`)
	type state struct {
		unc              int
		pending, failure bool
	}
	read := func(gpu int) state {
		t.Helper()
		_, unc, pending, failure, r := handle(t, s, gpu).GetRemappedRows()
		if r != nvml.SUCCESS {
			t.Fatalf("GPU %d: %v", gpu, r)
		}
		return state{unc, pending, failure}
	}
	for _, c := range []struct {
		at         time.Duration
		gpu1, gpu3 state
	}{
		{0, state{}, state{}},
		{10 * time.Second, state{1, true, false}, state{0, false, true}},
		{20 * time.Second, state{1, false, false}, state{0, false, true}},
	} {
		s.SetElapsed(c.at)
		if got := read(1); got != c.gpu1 {
			t.Errorf("at %s: GPU 1 %+v, want %+v", c.at, got, c.gpu1)
		}
		if got := read(3); got != c.gpu3 {
			t.Errorf("at %s: GPU 3 %+v, want %+v", c.at, got, c.gpu3)
		}
	}
}

func TestMemoryFaultConfigErrors(t *testing.T) {
	for yaml, want := range map[string]string{
		"profile: h100\nfaults:\n  - {gpu: 0, row_remap: soon}\n":                          `row_remap "soon" is not "pending" or "failure"`,
		"profile: v100\nfaults:\n  - {gpu: 0, row_remap: pending}\n":                       `does not remap rows`,
		"profile: h100\nfaults:\n  - {gpu: 0, at: 1s}\n":                                   `'at' needs an 'xid', 'ecc_uncorrectable' or 'row_remap'`,
		"profile: h100\nfaults:\n  - {gpu: 0, reset_at: 1s, at: 2s}\n":                     `'at' needs a non-zero 'xid', a non-zero 'ecc_uncorrectable' or a 'row_remap'`,
		"profile: h100\nfaults:\n  - {gpu: 0, ecc_uncorrectable: 1, unsupported: [ecc]}\n": "",
	} {
		cfg, err := ParseConfig([]byte(yaml), "cfg.yaml")
		if err == nil {
			_, err = New(cfg)
		}
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", yaml, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: error %v, want it to contain %q", yaml, err, want)
		}
	}
}
