package validate

import (
	"math"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

type drops map[string]int

func (d drops) add(field string) { d[field]++ }

func f(v float64) snapshot.Opt[float64] { return snapshot.Some(v) }
func u(v uint64) snapshot.Opt[uint64]   { return snapshot.Some(v) }

// A plausible H100 reading passes untouched, edge values included.
func TestPlausibleReadingsPass(t *testing.T) {
	d := snapshot.Device{Up: true,
		Temperature: snapshot.Temperature{GPU: f(95), ShutdownThreshold: f(MaxCelsius)},
		Power:       snapshot.Power{Usage: f(1399), MaxLimit: f(700), Energy: f(1e9)},
		Utilization: snapshot.Utilization{GPU: f(1), Memory: f(0)},
		Memory:      snapshot.Memory{Total: u(80 << 30), Used: u(80 << 30), Free: u(0)},
		Clocks:      []snapshot.Clock{{Type: "sm", Current: f(3.9e9), Max: f(1.98e9)}},
		PState:      snapshot.Some(15),
		FanSpeed:    f(1),
		PCIe:        snapshot.PCIe{LinkGen: snapshot.Some(5), LinkWidth: snapshot.Some(16), TxBytes: u(1 << 50)},
		ECC:         snapshot.ECC{VolatileCorrected: u(3)},
	}
	want := d
	want.Clocks = []snapshot.Clock{d.Clocks[0]}
	got := drops{}
	Device(&d, nil, got.add)
	if len(got) != 0 {
		t.Errorf("plausible readings dropped: %v", got)
	}
	if d.Temperature != want.Temperature || d.Power != want.Power || d.Memory != want.Memory || d.Clocks[0] != want.Clocks[0] {
		t.Errorf("plausible readings changed: %+v", d)
	}
}

// Each sentinel and impossible value seen from a sick driver is dropped
// and counted under its field.
func TestImpossibleReadingsAreDropped(t *testing.T) {
	const max32 = math.MaxUint32
	d := snapshot.Device{Up: true,
		Temperature: snapshot.Temperature{GPU: f(max32)},
		Power:       snapshot.Power{Usage: f(max32 / 1000.0), MaxLimit: f(700), Energy: f(math.MaxUint64 / 1000.0)},
		Utilization: snapshot.Utilization{GPU: f(2.55), Memory: f(math.NaN())},
		Memory:      snapshot.Memory{Total: u(80 << 30), Used: u(81 << 30), Free: u(math.MaxUint64 - 1<<30)},
		Clocks:      []snapshot.Clock{{Type: "sm", Current: f(max32 * 1e6), Max: f(1.98e9)}, {Type: "video", Current: f(max32 * 1e6)}},
		PState:      snapshot.Some(-1),
		FanSpeed:    f(max32 / 100.0),
		PCIe:        snapshot.PCIe{LinkGen: snapshot.Some(-1), LinkWidth: snapshot.Some(max32), ReplayCounter: u(math.MaxUint64)},
		ECC:         snapshot.ECC{VolatileCorrected: u(math.MaxUint64), VolatileUncorrected: u(0)},
		NVLinks:     []snapshot.NVLink{{Link: 0, CRCFlitErrors: u(math.MaxUint64), TxBytes: u(1 << 40)}},
	}
	got := drops{}
	Device(&d, nil, got.add)
	want := drops{FieldTemperature: 1, FieldPower: 1, FieldEnergy: 1, FieldUtilization: 2, FieldMemory: 2, FieldClock: 2, FieldPState: 1, FieldFanSpeed: 1,
		FieldPCIe: 3, FieldECC: 1, FieldNVLink: 1}
	for field, n := range want {
		if got[field] != n {
			t.Errorf("dropped %s: %d, want %d (all: %v)", field, got[field], n, got)
		}
	}
	if d.Temperature.GPU.Valid || d.Power.Usage.Valid || d.Power.Energy.Valid || d.Utilization.GPU.Valid ||
		d.Memory.Used.Valid || d.Memory.Free.Valid || d.PState.Valid || d.FanSpeed.Valid {
		t.Errorf("an impossible reading is still present: %+v", d)
	}
	if d.PCIe.LinkGen.Valid || d.PCIe.LinkWidth.Valid || d.PCIe.ReplayCounter.Valid || d.ECC.VolatileCorrected.Valid || d.NVLinks[0].CRCFlitErrors.Valid {
		t.Errorf("a sentinel counter or link reading is still present: %+v %+v %+v", d.PCIe, d.ECC, d.NVLinks)
	}
	if !d.Memory.Total.Valid || !d.Power.MaxLimit.Valid || !d.ECC.VolatileUncorrected.Valid || !d.NVLinks[0].TxBytes.Valid {
		t.Error("a plausible reading beside the impossible ones was dropped")
	}
	if len(d.Clocks) != 1 || d.Clocks[0].Type != "sm" || d.Clocks[0].Current.Valid || !d.Clocks[0].Max.Valid {
		t.Errorf("clocks = %+v, want sm with its max only (video had nothing left)", d.Clocks)
	}
}

// Without a maximum limit a power reading is bounded by MaxWatts.
func TestPowerWithoutLimits(t *testing.T) {
	d := snapshot.Device{Power: snapshot.Power{Usage: f(4294967.295)}}
	got := drops{}
	Device(&d, nil, got.add)
	if d.Power.Usage.Valid || got[FieldPower] != 1 {
		t.Errorf("4 294 967 W without limits kept: %+v %v", d.Power, got)
	}
}

func TestProcessMemory(t *testing.T) {
	procs := []snapshot.Process{{PID: 1, UsedMemory: u(1 << 30)}, {PID: 2, UsedMemory: u(1 << 63)}, {PID: 3, UsedMemory: u(90 << 30)}}
	got := drops{}
	Processes(procs, u(80<<30), got.add)
	if !procs[0].UsedMemory.Valid || procs[1].UsedMemory.Valid || procs[2].UsedMemory.Valid || got[FieldProcessMemory] != 2 {
		t.Errorf("processes = %+v, dropped %v", procs, got)
	}
	// Without the device's total only the sentinel range is refused.
	procs = []snapshot.Process{{PID: 1, UsedMemory: u(90 << 30)}, {PID: 2, UsedMemory: u(1 << 63)}}
	Processes(procs, snapshot.Opt[uint64]{}, got.add)
	if !procs[0].UsedMemory.Valid || procs[1].UsedMemory.Valid {
		t.Errorf("without a total: %+v", procs)
	}
}

// The counter carries over a driver reset: it never goes down, and grows
// by what the driver counts after it.
func TestCounterCarriesOverAReset(t *testing.T) {
	var c Counter
	for _, step := range []struct{ raw, want float64 }{
		{100, 100}, {150, 150}, {10, 160}, {30, 180}, {5, 185}, {5, 185},
	} {
		if got := c.Carry(step.raw); got != step.want {
			t.Errorf("Carry(%v) = %v, want %v", step.raw, got, step.want)
		}
	}
}

func TestSumOverflow(t *testing.T) {
	if s, ok := Sum(1<<63, 1<<62); !ok || s != 3<<62 {
		t.Errorf("Sum without overflow = %d, %v", s, ok)
	}
	if _, ok := Sum(1<<63, 1<<63); ok {
		t.Error("2^63 + 2^63 reported without overflow")
	}
}
