//go:build cgo

package nvmlbackend

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func TestEveryCallIsKnownToTheMethodTable(t *testing.T) {
	for c := range numCalls {
		syms := c.symbols()
		if len(syms) == 0 {
			t.Errorf("%s: nvmlbranch knows no C function behind it", nvmlCalls[c])
		}
	}
}

// wantLimits is, per driver branch, the groups it limits and how, for a
// reader with every group on (the README's driver-support table says the
// same in words).
var wantLimits = map[string][]string{
	"R470": {"memory: partial: no reserved memory", "pcie: partial: no PCIe traffic counters",
		"gpm: unavailable: no GPM, GPM per MIG instance", "processes: partial: no MPS processes"},
	"R510": {"pcie: partial: no PCIe traffic counters", "gpm: unavailable: no GPM, GPM per MIG instance"},
	"R525": {"pcie: partial: no PCIe traffic counters"},
	"R535": {"pcie: partial: no PCIe traffic counters"},
	"R550": {"pcie: partial: no PCIe traffic counters"},
	"R570": nil,
	"R575": nil,
	"R580": nil,
}

func limitStrings(limits []snapshot.DriverLimit) []string {
	var out []string
	for _, l := range limits {
		out = append(out, l.Group+": "+l.Reason)
	}
	return out
}

// Every branch from R470 on: full reads of a host with MIG, GPM, NVLink
// and processes never call a function the branch's library lacks, and
// exactly the expected groups are limited.
func TestEveryBranchReadsWithoutMissingFunctions(t *testing.T) {
	// Each reader's Close waits out an XID wait: close them all at once.
	var readers []*Reader
	defer func() {
		var wg sync.WaitGroup
		for _, r := range readers {
			wg.Go(func() {
				if err := r.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		wg.Wait()
	}()
	for _, b := range nvmlbranch.Branches() {
		want, ok := wantLimits[b.Name]
		if !ok {
			t.Errorf("no expectation for branch %s: add it to wantLimits and the README table", b.Name)
			continue
		}
		for _, profile := range []string{"dgx-h100", "dgx-a100-mig", "rtx4090"} {
			t.Run(b.Name+"/"+profile, func(t *testing.T) {
				// The simulator answers as that branch's library: its
				// symbol table, field IDs and versions; a call to a
				// function the branch lacks panics and is recorded.
				s := newSim(t, sim.Config{Profile: profile, Driver: b.Name}, time.Hour)
				r, err := New(s.Library(), Options{Groups: AllGroups(), Now: s.Now})
				if err != nil {
					t.Fatal(err)
				}
				readers = append(readers, r)
				read(t, r)
				s.SetElapsed(time.Hour + 30*time.Second)
				snap := read(t, r)
				if v := s.MissingFunctionCalls(); len(v) > 0 {
					t.Fatalf("called functions %s lacks: %v", b.Name, v)
				}
				if snap.Driver.Branch != b.Name {
					t.Errorf("driver branch %q, want %s", snap.Driver.Branch, b.Name)
				}
				for g, st := range snap.Groups {
					if st.Err != nil {
						t.Errorf("group %s: %v", g, st.Err)
					}
				}
				if got := limitStrings(snap.Driver.Limits); !slices.Equal(got, want) {
					t.Errorf("limits\n got %q\nwant %q", got, want)
				}
				if profile != "dgx-h100" {
					return
				}
				d := snap.Devices[0]
				if !d.Up || !d.Power.Usage.Valid || !d.Memory.Total.Valid || !d.Temperature.GPU.Valid {
					t.Errorf("basic readings missing: %+v", d)
				}
				if d.GPM.SMActive.Valid != b.HasFunction("nvmlGpmSampleGet") {
					t.Errorf("GPM sm_active valid=%v", d.GPM.SMActive.Valid)
				}
				if d.PCIe.TxBytes.Valid != b.KnowsField(nvml.FI_DEV_PCIE_COUNT_TX_BYTES) {
					t.Errorf("PCIe tx valid=%v", d.PCIe.TxBytes.Valid)
				}
				if d.Memory.Reserved.Valid != b.HasFunction("nvmlDeviceGetMemoryInfo_v2") {
					t.Errorf("reserved memory valid=%v", d.Memory.Reserved.Valid)
				}
				// Before R535 clock events come from the throttle-reasons
				// call: the same bits, so the group is never limited.
				if len(d.ClockEvents) == 0 {
					t.Errorf("no clock events")
				}
			})
		}
	}
}

// basicFunctions is a driver library stripped down to about twenty
// functions: what the owner checks gpuwatch against.
var basicFunctions = []string{
	"nvmlInit", "nvmlInit_v2", "nvmlShutdown", "nvmlErrorString",
	"nvmlDeviceGetCount", "nvmlDeviceGetCount_v2",
	"nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2",
	"nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetTemperature",
	"nvmlDeviceGetPowerUsage", "nvmlDeviceGetMemoryInfo",
	"nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
}

func TestBasicLibraryServesItsReadingsAndStaysUp(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, time.Hour)
	lib := newRestrictedLibrary(s, setExports(basicFunctions...))
	var logs bytes.Buffer
	r := newReaderWith(t, lib, Options{Groups: AllGroups(), Now: s.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		snap := read(t, r)
		if v := lib.Violations(); len(v) > 0 {
			t.Fatalf("called functions the library lacks: %v", v)
		}
		if len(snap.Devices) != 8 {
			t.Fatalf("%d devices", len(snap.Devices))
		}
		for _, d := range snap.Devices {
			if !d.Up || d.UUID == "" || d.Info.Name != "NVIDIA H100 80GB HBM3" || !d.Temperature.GPU.Valid ||
				!d.Power.Usage.Valid || !d.Memory.Total.Valid || !d.Memory.Used.Valid {
				t.Errorf("gpu %d: %+v", d.Index, d)
			}
			if d.Memory.Reserved.Valid || d.Utilization.GPU.Valid || d.Clocks != nil || d.GPM.SMActive.Valid {
				t.Errorf("gpu %d: readings the library cannot give are present", d.Index)
			}
		}
		if snap.DriverVersion != sim.DriverVersion || snap.NVMLVersion != sim.NVMLVersion || snap.CUDADriverVersion != "" {
			t.Errorf("versions %q %q %q", snap.DriverVersion, snap.NVMLVersion, snap.CUDADriverVersion)
		}
		for g, st := range snap.Groups {
			if st.Err != nil {
				t.Errorf("group %s: %v", g, st.Err)
			}
		}
		limited := map[string]string{}
		for _, l := range snap.Driver.Limits {
			limited[l.Group] = l.Reason
		}
		for _, g := range snapshot.AllGroups {
			reason, ok := limited[g]
			switch g {
			case snapshot.GroupInfo, snapshot.GroupMemory, snapshot.GroupTemperature, snapshot.GroupPower:
				if !strings.HasPrefix(reason, "partial: ") {
					t.Errorf("group %s: %q, want partial", g, reason)
				}
			default:
				if !ok || !strings.HasPrefix(reason, "unavailable: ") {
					t.Errorf("group %s: %q, want unavailable", g, reason)
				}
			}
		}
	}
	// Logged once, at start, naming each limited group and what it lacks.
	out := logs.String()
	if n := strings.Count(out, "driver limits a metric group"); n != len(snapshot.AllGroups) {
		t.Errorf("%d per-group lines, want %d:\n%s", n, len(snapshot.AllGroups), out)
	}
	if !strings.Contains(out, "group=gpm") || !strings.Contains(out, "nvmlGpmQueryDeviceSupport") {
		t.Errorf("log does not say why gpm is off:\n%s", out)
	}
}

func TestLibraryWithoutARequiredFunctionIsRefused(t *testing.T) {
	for _, drop := range []string{"nvmlDeviceGetUUID", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetCount_v2"} {
		s := newSim(t, sim.Config{Profile: "h100"}, 0)
		// Drop the function and its unversioned alternative.
		lib := newRestrictedLibrary(s, setExports(slices.DeleteFunc(slices.Clone(basicFunctions), func(f string) bool {
			return f == drop || f == strings.TrimSuffix(drop, "_v2")
		})...))
		_, err := New(lib, Options{Groups: AllGroups()})
		if !errors.Is(err, errMissingFunctions) || !strings.Contains(err.Error(), strings.TrimSuffix(drop, "_v2")) || strings.Contains(err.Error(), "\n") {
			t.Errorf("without %s: err = %v, want one line naming it", drop, err)
		}
		if v := lib.Violations(); len(v) > 0 {
			t.Errorf("without %s: called %v", drop, v)
		}
	}
}

// The harness itself: a call the table lacks is caught, so the tests above
// can fail.
func TestRestrictedLibraryCatchesMissingFunctions(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100"}, 0)
	r470, _ := nvmlbranch.Lookup("R470")
	lib := newRestrictedLibrary(s, branchExports(r470))
	if lib.Init() != nvml.SUCCESS {
		t.Fatal("init")
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("GpmQueryDeviceSupport on R470 did not panic")
			}
		}()
		dev.GpmQueryDeviceSupport()
	}()
	if v := lib.Violations(); len(v) != 1 || !strings.Contains(v[0], "nvmlGpmQueryDeviceSupport") {
		t.Errorf("violations = %v", v)
	}
	if lib.Extensions().LookupSymbol("nvmlGpmSampleGet") == nil || lib.Extensions().LookupSymbol("nvmlDeviceGetUUID") != nil {
		t.Errorf("LookupSymbol does not answer from the R470 table")
	}
}

// Fallbacks where NVML has an older call: memory v1, the single fan speed,
// throttle reasons.
func TestFallbacksToOlderCalls(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "rtx4090"}, time.Hour)
	exports := slices.Concat(basicFunctions, []string{"nvmlDeviceGetFanSpeed", "nvmlDeviceGetCurrentClocksThrottleReasons"})
	lib := newRestrictedLibrary(s, setExports(exports...))
	r := newReaderWith(t, lib, Options{Groups: AllGroups(), Now: s.Now})
	snap := read(t, r)
	if v := lib.Violations(); len(v) > 0 {
		t.Fatalf("called functions the library lacks: %v", v)
	}
	d := snap.Devices[0]
	if !d.Memory.Total.Valid || d.Memory.Reserved.Valid {
		t.Errorf("memory through v1: %+v", d.Memory)
	}
	if !d.FanSpeed.Valid {
		t.Errorf("fan speed through GetFanSpeed: absent")
	}
	if len(d.ClockEvents) == 0 {
		t.Errorf("clock events through throttle reasons: none")
	}
	for _, l := range snap.Driver.Limits {
		if l.Group == snapshot.GroupFan {
			t.Errorf("fan limited although GetFanSpeed stands in: %+v", l)
		}
	}
}
