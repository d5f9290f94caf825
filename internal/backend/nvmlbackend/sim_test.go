//go:build cgo

package nvmlbackend

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The reader through the simulator: the same code that reads a real GPU,
// against realistic, deterministic profiles.

func durationPtr(d time.Duration) *sim.Duration {
	v := sim.Duration(d)
	return &v
}

// newSim builds a simulator with its clock pinned at start.
func newSim(t testing.TB, cfg sim.Config, start time.Duration) *sim.Sim {
	t.Helper()
	cfg.PinTime = durationPtr(start)
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New(%s): %v", cfg.Profile, err)
	}
	return s
}

func newSimReader(t testing.TB, s *sim.Sim, groups map[string]bool) *Reader {
	t.Helper()
	return newReaderWith(t, s, Options{Groups: groups, Now: s.Now})
}

// newSimReaderPastGPM starts a reader and moves the pinned clock past the
// first GPM window, so that the first Read has GPM values.
func newSimReaderPastGPM(t testing.TB, s *sim.Sim, groups map[string]bool) *Reader {
	t.Helper()
	r := newSimReader(t, s, groups)
	s.SetElapsed(s.Elapsed() + gpmMinWindow)
	return r
}

func inRange(t *testing.T, what string, o snapshot.Opt[float64], lo, hi float64) {
	t.Helper()
	if !o.Valid || o.Value < lo || o.Value > hi {
		t.Errorf("%s = %+v, want a value in [%g, %g]", what, o, lo, hi)
	}
}

func ratio(t *testing.T, what string, o snapshot.Opt[float64]) { t.Helper(); inRange(t, what, o, 0, 1) }

func TestSimDGXH100EveryGroupPlausible(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, time.Hour)
	r := newSimReaderPastGPM(t, s, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)

	if !snap.Time.Equal(s.Now()) {
		t.Errorf("snapshot time %v, want the simulator's %v", snap.Time, s.Now())
	}
	if snap.DriverVersion != sim.DriverVersion || snap.CUDADriverVersion != "12.4" || snap.NVMLVersion != sim.NVMLVersion {
		t.Errorf("versions = %q %q %q", snap.DriverVersion, snap.CUDADriverVersion, snap.NVMLVersion)
	}
	if len(snap.Devices) != 8 {
		t.Fatalf("got %d devices, want 8", len(snap.Devices))
	}
	uuids := map[string]bool{}
	for i, d := range snap.Devices {
		t.Run(fmt.Sprintf("gpu%d", i), func(t *testing.T) {
			if !d.Up || d.Index != i || !strings.HasPrefix(d.UUID, "GPU-") || uuids[d.UUID] {
				t.Fatalf("identity: up=%v index=%d uuid=%q", d.Up, d.Index, d.UUID)
			}
			uuids[d.UUID] = true
			// GPU 7 runs in MIG mode; the others are whole GPUs.
			isMIG := i == 7
			wantMIGMode := map[bool]string{false: "disabled", true: "enabled"}[isMIG]
			in := d.Info
			if in.Name != "NVIDIA H100 80GB HBM3" || in.Architecture != "hopper" || in.Brand != "nvidia" ||
				in.ComputeCapability != "9.0" || in.PCIBusID == "" || in.Serial == "" || in.VBIOSVersion == "" ||
				in.PersistenceMode != "enabled" || in.ComputeMode == "" || in.MIGMode != wantMIGMode || in.ECCMode != "enabled" {
				t.Errorf("info = %+v", in)
			}

			if isMIG {
				// NVML has no whole-GPU utilization in MIG mode.
				wantAbsent(t, "utilization.gpu in MIG mode", d.Utilization.GPU)
				wantAbsent(t, "utilization.memory in MIG mode", d.Utilization.Memory)
			} else {
				ratio(t, "utilization.gpu", d.Utilization.GPU)
				ratio(t, "utilization.memory", d.Utilization.Memory)
			}
			if d.Utilization.Decoder.Valid {
				ratio(t, "utilization.decoder", d.Utilization.Decoder)
			}

			m := d.Memory
			if !m.Total.Valid || m.Total.Value < 79*gib || m.Total.Value > 81*gib {
				t.Errorf("memory.total = %+v, want about 80 GiB", m.Total)
			}
			if !m.Used.Valid || !m.Free.Valid || !m.Reserved.Valid || m.Used.Value+m.Free.Value+m.Reserved.Value != m.Total.Value {
				t.Errorf("memory used %+v + free %+v + reserved %+v != total %+v", m.Used, m.Free, m.Reserved, m.Total)
			}
			if !m.BAR1Total.Valid || !m.BAR1Used.Valid || m.BAR1Used.Value > m.BAR1Total.Value {
				t.Errorf("bar1 = %+v / %+v", m.BAR1Used, m.BAR1Total)
			}

			inRange(t, "temperature.gpu", d.Temperature.GPU, 20, 95)
			inRange(t, "temperature.memory", d.Temperature.Memory, 20, 100)
			inRange(t, "temperature.slowdown", d.Temperature.SlowdownThreshold, 70, 100)
			inRange(t, "temperature.shutdown", d.Temperature.ShutdownThreshold, d.Temperature.SlowdownThreshold.Value, 110)
			inRange(t, "temperature.mem_max", d.Temperature.MemoryMaxThreshold, 70, 110)
			wantAbsent(t, "fan (SXM modules have none)", d.FanSpeed)

			if len(d.Clocks) != 4 {
				t.Errorf("clocks = %+v", d.Clocks)
			}
			for _, c := range d.Clocks {
				inRange(t, "clock "+c.Type+" max", c.Max, 5e8, 3e9)
				inRange(t, "clock "+c.Type+" current", c.Current, 1e8, c.Max.Value)
			}
			inRange(t, "pstate", snapshot.Opt[float64]{Value: float64(d.PState.Value), Valid: d.PState.Valid}, 0, 15)
			// Every reason but the display clock, which an H100 cannot report.
			if len(d.ClockEvents) != len(clockEventReasons)-1 {
				t.Errorf("clock events = %+v", d.ClockEvents)
			}

			inRange(t, "power.limit", d.Power.EnforcedLimit, 700, 700)
			inRange(t, "power.usage", d.Power.Usage, 50, 700)
			// The simulated driver was loaded before the exporter started:
			// the counter starts with history, so only its sign is known.
			inRange(t, "power.energy", d.Power.Energy, 1, 1e12)

			if !d.PCIe.TxBytes.Valid || !d.PCIe.RxBytes.Valid {
				t.Errorf("pcie traffic = %+v / %+v", d.PCIe.TxBytes, d.PCIe.RxBytes)
			}
			want(t, "pcie.max_gen", d.PCIe.MaxLinkGen, 5)
			want(t, "pcie.max_width", d.PCIe.MaxLinkWidth, 16)
			if !d.PCIe.LinkGen.Valid || !d.PCIe.LinkWidth.Valid || !d.PCIe.ReplayCounter.Valid {
				t.Errorf("pcie link = %+v", d.PCIe)
			}

			e := d.ECC
			for name, o := range map[string]snapshot.Opt[uint64]{
				"volatile_corrected": e.VolatileCorrected, "volatile_uncorrected": e.VolatileUncorrected,
				"aggregate_corrected": e.AggregateCorrected, "aggregate_uncorrected": e.AggregateUncorrected,
			} {
				if !o.Valid {
					t.Errorf("ecc.%s absent", name)
				}
			}
			if isMIG {
				wantAbsent(t, "remapped rows in MIG mode", e.RemappedRowsCorrectable)
			} else if !e.RemappedRowsCorrectable.Valid || !e.RemappedRowsUncorrectable.Valid ||
				!e.RemappedRowsPending.Valid || !e.RemappedRowsFailure.Valid {
				t.Errorf("remapped rows absent: %+v", e)
			}
			wantAbsent(t, "retired pages (Hopper remaps rows instead)", e.RetiredPagesSingleBit)

			if len(d.NVLinks) != 18 {
				t.Fatalf("nvlinks = %d, want 18", len(d.NVLinks))
			}
			for _, l := range d.NVLinks {
				if !l.Active || !l.TxBytes.Valid || !l.RxBytes.Valid || !l.CRCFlitErrors.Valid ||
					!l.CRCDataErrors.Valid || !l.ReplayErrors.Valid || !l.RecoveryErrors.Valid {
					t.Errorf("nvlink %d = %+v", l.Link, l)
				}
			}

			if isMIG {
				// GPM is sampled per GPU instance; see TestSimMIGGPMHopperNotAmpere.
				if d.GPM != (snapshot.GPM{}) {
					t.Errorf("whole-GPU GPM in MIG mode: %+v", d.GPM)
				}
				if len(d.MIGInstances) != 4 {
					t.Errorf("MIG instances = %+v, want 4", d.MIGInstances)
				}
				for _, m := range d.MIGInstances {
					ratio(t, "mig "+m.Profile+" gpm.sm_active", m.GPM.SMActive)
				}
				return
			}
			allGPM(t, "gpm", d.GPM)
			if d.MIGInstances != nil {
				t.Errorf("MIG instances on a non-MIG GPU: %+v", d.MIGInstances)
			}
		})
	}

	// The profile's processes: one per GPU 0-5, two on GPU 6, one in a MIG
	// instance of GPU 7.
	perGPU := map[int]int{}
	for _, p := range snap.Processes {
		perGPU[p.GPU]++
		if p.GPUUUID != snap.Devices[p.GPU].UUID || p.Type != "compute" || !p.UsedMemory.Valid || p.PID == 0 {
			t.Errorf("process = %+v", p)
		}
		if inMIG := p.MIGUUID != ""; inMIG != (p.GPU == 7) {
			t.Errorf("process %d on gpu %d: MIG uuid %q", p.PID, p.GPU, p.MIGUUID)
		}
	}
	if len(snap.Processes) != 8 || perGPU[5] != 0 || perGPU[6] != 2 || perGPU[7] != 1 {
		t.Errorf("processes per GPU = %v", perGPU)
	}
	if p := snap.Processes[0]; p.PID != 71201 || p.UsedMemory.Value != 74*gib {
		t.Errorf("first process = %+v", p)
	} else {
		inRange(t, "pid 71201 sm utilization", p.SMUtilization, 0.5, 1)
	}

	// Counters only grow.
	s.SetElapsed(2 * time.Hour)
	later := read(t, r)
	noGroupErrors(t, later)
	for i := range snap.Devices {
		a, b := snap.Devices[i], later.Devices[i]
		// One simulated hour between the reads: between idle and limit power.
		inRange(t, fmt.Sprintf("gpu %d energy over 1h", i),
			snapshot.Some(b.Power.Energy.Value-a.Power.Energy.Value), 50*3600, 700*3600)
		if b.Power.Energy.Value <= a.Power.Energy.Value || b.PCIe.TxBytes.Value < a.PCIe.TxBytes.Value ||
			b.NVLinks[0].TxBytes.Value < a.NVLinks[0].TxBytes.Value {
			t.Errorf("gpu %d: counters went backwards or stalled: energy %v→%v pcie %v→%v",
				i, a.Power.Energy, b.Power.Energy, a.PCIe.TxBytes, b.PCIe.TxBytes)
		}
	}
}

func TestSimRTX4090AbsentNotZero(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "rtx4090"}, time.Minute)
	r := newSimReader(t, s, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[0]
	if !d.Up || d.Info.Architecture != "ada" || !strings.Contains(d.Info.Name, "4090") {
		t.Fatalf("device = %+v", d)
	}
	if d.Info.ECCMode != "" || d.Info.MIGMode != "" || d.Info.Serial != "" {
		t.Errorf("unsupported info must be empty: %+v", d.Info)
	}
	if d.ECC != (snapshot.ECC{}) {
		t.Errorf("ECC = %+v, want every reading absent", d.ECC)
	}
	if d.NVLinks != nil {
		t.Errorf("NVLinks = %+v, want nil", d.NVLinks)
	}
	if d.GPM != (snapshot.GPM{}) {
		t.Errorf("GPM = %+v, want every reading absent", d.GPM)
	}
	wantAbsent(t, "memory temperature", d.Temperature.Memory)
	ratio(t, "fan speed", d.FanSpeed)
	ratio(t, "utilization.gpu", d.Utilization.GPU)
	inRange(t, "power.usage", d.Power.Usage, 5, 600)
	if !d.Memory.Total.Valid || d.Memory.Total.Value < 23*gib {
		t.Errorf("memory.total = %+v", d.Memory.Total)
	}
	kinds := map[string]bool{}
	for _, p := range snap.Processes {
		kinds[p.Type] = true
	}
	if !kinds["graphics"] || !kinds["compute"] {
		t.Errorf("processes = %+v, want Xorg (graphics) and a compute job", snap.Processes)
	}
}

func TestSimLostGPU(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 3, LostAfter: durationPtr(30 * time.Second)}}}, 0)
	r := newSimReader(t, s, AllGroups())
	before := read(t, r)
	if !before.Devices[3].Up {
		t.Fatalf("gpu 3 down before its fault: %s", before.Devices[3].DownReason)
	}
	s.SetElapsed(31 * time.Second)
	snap := read(t, r)
	noGroupErrors(t, snap)
	lost := snap.Devices[3]
	if lost.Up || lost.DownReason != "gpu_is_lost" || lost.Index != 3 || lost.UUID != before.Devices[3].UUID {
		t.Errorf("gpu 3 = up %v reason %q uuid %q (want the last known uuid)", lost.Up, lost.DownReason, lost.UUID)
	}
	if lost.Power.Usage.Valid || lost.Memory.Total.Valid || lost.NVLinks != nil || lost.GPM.SMActive.Valid {
		t.Errorf("lost GPU carries readings: %+v", lost)
	}
	for _, p := range snap.Processes {
		if p.GPU == 3 {
			t.Errorf("process on the lost GPU: %+v", p)
		}
	}
	for i, d := range snap.Devices {
		gpm := d.GPM.SMActive
		if i == 7 && len(d.MIGInstances) > 0 { // MIG: GPM per GPU instance
			gpm = d.MIGInstances[0].GPM.SMActive
		}
		if i != 3 && (!d.Up || !d.Power.Usage.Valid || !gpm.Valid || len(d.NVLinks) != 18) {
			t.Errorf("gpu %d not read normally next to the lost one: up=%v", i, d.Up)
		}
	}
}

func TestSimUnsupportedFault(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{
		{GPU: 1, Unsupported: []string{"power", "energy", "ecc", "nvlink", "gpm", "memory_temperature"}},
	}}, time.Minute)
	r := newSimReaderPastGPM(t, s, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[1]
	if !d.Up {
		t.Fatalf("gpu 1 down")
	}
	wantAbsent(t, "power.usage", d.Power.Usage)
	wantAbsent(t, "power.energy", d.Power.Energy)
	wantAbsent(t, "ecc.volatile_corrected", d.ECC.VolatileCorrected)
	wantAbsent(t, "gpm.sm_active", d.GPM.SMActive)
	wantAbsent(t, "temperature.memory", d.Temperature.Memory)
	if d.NVLinks != nil {
		t.Errorf("NVLinks = %d links, want nil", len(d.NVLinks))
	}
	// What was not made unsupported is still there, on this GPU and the others.
	if !d.Power.EnforcedLimit.Valid || !d.Temperature.GPU.Valid || !d.Memory.Total.Valid {
		t.Errorf("other readings of gpu 1 missing: %+v", d)
	}
	other := snap.Devices[0]
	if !other.Power.Usage.Valid || !other.ECC.VolatileCorrected.Valid || !other.GPM.SMActive.Valid || other.NVLinks == nil {
		t.Errorf("gpu 0 lost readings because of gpu 1's fault")
	}
}

func TestSimXIDCountedOnTheRightDevice(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 2, XID: 79, At: durationPtr(10 * time.Second)}}}, 0)
	r := newSimReader(t, s, AllGroups())
	if snap := read(t, r); snap.Devices[2].XIDErrors != nil {
		t.Fatalf("xid before its time: %+v", snap.Devices[2].XIDErrors)
	}
	s.SetElapsed(11 * time.Second)
	snap := pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Devices[2].XIDErrors != nil })
	noGroupErrors(t, snap)
	if got := snap.Devices[2].XIDErrors; len(got) != 1 || got[0] != (snapshot.XIDCount{XID: 79, Count: 1}) {
		t.Errorf("gpu 2 xids = %+v", got)
	}
	for i, d := range snap.Devices {
		if i != 2 && d.XIDErrors != nil {
			t.Errorf("gpu %d has xids %+v", i, d.XIDErrors)
		}
	}
}

func TestSimGPMOnHopperOnly(t *testing.T) {
	a100 := newSimReader(t, newSim(t, sim.Config{Profile: "dgx-a100-mig"}, time.Minute), AllGroups())
	snap := read(t, a100)
	noGroupErrors(t, snap)
	for _, d := range snap.Devices {
		if d.GPM != (snapshot.GPM{}) {
			t.Errorf("A100 gpu %d has GPM %+v", d.Index, d.GPM)
		}
		for _, m := range d.MIGInstances {
			if m.GPM != (snapshot.GPM{}) {
				t.Errorf("A100 MIG %s has GPM %+v", m.UUID, m.GPM)
			}
		}
	}
	h100 := newSimReaderPastGPM(t, newSim(t, sim.Config{Profile: "h100"}, time.Minute), AllGroups())
	snap = read(t, h100)
	noGroupErrors(t, snap)
	ratio(t, "H100 gpm.sm_active on the first read", snap.Devices[0].GPM.SMActive)
	if snap.Devices[0].GPM.SMActive.Value == 0 {
		t.Errorf("H100 with a running job reports 0 SM activity")
	}
}

// allGPM checks that every GPM reading is a ratio.
func allGPM(t *testing.T, what string, g snapshot.GPM) {
	t.Helper()
	for name, o := range map[string]snapshot.Opt[float64]{
		"sm_active": g.SMActive, "sm_occupancy": g.SMOccupancy, "tensor": g.TensorActive,
		"dram": g.DRAMActive, "fp16": g.FP16Active, "fp32": g.FP32Active, "fp64": g.FP64Active,
	} {
		ratio(t, what+"."+name, o)
	}
}

// TestSimMIGGPMHopperNotAmpere reads MIG instances through the simulator:
// on the H100 in MIG mode (dgx-h100 GPU 7) the reader samples GPM per GPU
// instance with GpmMigSampleGet and every instance gets all GPM readings,
// the busy one above zero; on the A100 MIG instances (no GPM before
// Hopper) every GPM reading stays absent.
func TestSimMIGGPMHopperNotAmpere(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, time.Minute)
	r := newSimReader(t, s, AllGroups())
	for _, at := range []time.Duration{time.Minute + gpmMinWindow, 3 * time.Minute} {
		s.SetElapsed(at)
		snap := read(t, r)
		noGroupErrors(t, snap)
		d := snap.Devices[7]
		if d.Info.MIGMode != "enabled" || d.GPM != (snapshot.GPM{}) {
			t.Fatalf("gpu 7: mig %q, whole-GPU GPM %+v", d.Info.MIGMode, d.GPM)
		}
		want := []struct {
			gi      int
			profile string
			busy    bool
		}{{1, "3g.40gb", true}, {5, "2g.20gb", false}, {13, "1g.10gb", false}, {14, "1g.10gb", false}}
		if len(d.MIGInstances) != len(want) {
			t.Fatalf("gpu 7 MIG instances = %+v", d.MIGInstances)
		}
		for i, w := range want {
			m := d.MIGInstances[i]
			if m.GPUInstanceID != w.gi || m.ComputeInstanceID != 0 || m.Profile != w.profile || !strings.HasPrefix(m.UUID, "MIG-") {
				t.Errorf("instance %d = %+v, want gi %d %s", i, m, w.gi, w.profile)
			}
			allGPM(t, fmt.Sprintf("at %v gi %d gpm", at, w.gi), m.GPM)
			if busy := m.GPM.SMActive.Value > 0 && m.GPM.TensorActive.Value > 0; busy != w.busy {
				t.Errorf("at %v gi %d: sm active %v tensor %v, busy %v", at, w.gi, m.GPM.SMActive, m.GPM.TensorActive, w.busy)
			}
		}
		if m := d.MIGInstances[0]; m.MemoryTotal.Value < 39*gib || m.MemoryTotal.Value > 40*gib {
			t.Errorf("3g.40gb memory total %v, want 39.5 GiB", m.MemoryTotal)
		}
		var inMIG []snapshot.Process
		for _, p := range snap.Processes {
			if p.GPU == 7 {
				inMIG = append(inMIG, p)
			}
		}
		if len(inMIG) != 1 || inMIG[0].PID != 95120 || inMIG[0].MIGUUID != d.MIGInstances[0].UUID ||
			inMIG[0].GPUInstanceID != snapshot.Some(1) || inMIG[0].ComputeInstanceID != snapshot.Some(0) {
			t.Errorf("gpu 7 processes = %+v", inMIG)
		}
	}

	a100 := newSimReader(t, newSim(t, sim.Config{Profile: "dgx-a100-mig"}, time.Minute), AllGroups())
	read(t, a100)
	snap := read(t, a100)
	noGroupErrors(t, snap)
	instances := 0
	for _, d := range snap.Devices {
		for _, m := range d.MIGInstances {
			instances++
			if m.GPM != (snapshot.GPM{}) {
				t.Errorf("A100 gpu %d MIG gi %d has GPM %+v", d.Index, m.GPUInstanceID, m.GPM)
			}
		}
	}
	if instances != 15 {
		t.Errorf("A100 MIG instances = %d, want 15", instances)
	}
}

func TestSimMIGInstances(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-a100-mig"}, time.Minute)
	r := newSimReader(t, s, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)

	gpu0 := snap.Devices[0]
	if gpu0.Info.MIGMode != "enabled" || len(gpu0.MIGInstances) != 7 {
		t.Fatalf("gpu 0: mig %q, %d instances", gpu0.Info.MIGMode, len(gpu0.MIGInstances))
	}
	migByUUID := map[string]snapshot.MIGInstance{}
	for _, m := range gpu0.MIGInstances {
		migByUUID[m.UUID] = m
		if m.Profile != "1g.10gb" || !strings.HasPrefix(m.UUID, "MIG-") || m.GPUInstanceID < 7 || m.GPUInstanceID > 13 || m.ComputeInstanceID != 0 {
			t.Errorf("gpu 0 instance = %+v", m)
		}
		if !m.MemoryTotal.Valid || m.MemoryTotal.Value < 9*gib || m.MemoryTotal.Value > 11*gib || !m.MemoryUsed.Valid {
			t.Errorf("gpu 0 instance %s memory = %+v / %+v", m.UUID, m.MemoryUsed, m.MemoryTotal)
		}
	}
	gpu2 := snap.Devices[2]
	if len(gpu2.MIGInstances) != 2 || gpu2.MIGInstances[0].GPUInstanceID != gpu2.MIGInstances[1].GPUInstanceID {
		t.Errorf("gpu 2 (one GPU instance, two compute instances) = %+v", gpu2.MIGInstances)
	}
	for i := 4; i < 8; i++ {
		if d := snap.Devices[i]; d.Info.MIGMode != "disabled" || d.MIGInstances != nil {
			t.Errorf("gpu %d: mig %q instances %+v", i, d.Info.MIGMode, d.MIGInstances)
		}
	}

	// Processes in MIG instances carry the instance's identity.
	var onGPU0 []snapshot.Process
	for _, p := range snap.Processes {
		if p.GPU == 0 {
			onGPU0 = append(onGPU0, p)
		}
		if p.GPU >= 4 && (p.MIGUUID != "" || p.GPUInstanceID.Valid) {
			t.Errorf("whole-GPU process has MIG identity: %+v", p)
		}
	}
	if len(onGPU0) != 3 {
		t.Fatalf("gpu 0 processes = %+v", onGPU0)
	}
	for _, p := range onGPU0 {
		m, ok := migByUUID[p.MIGUUID]
		if !ok || !p.GPUInstanceID.Valid || p.GPUInstanceID.Value != m.GPUInstanceID || p.ComputeInstanceID != snapshot.Some(m.ComputeInstanceID) {
			t.Errorf("MIG process %+v does not match an instance", p)
		}
	}
	if p := onGPU0[0]; p.PID != 30511 || p.GPUInstanceID.Value != 7 || p.UsedMemory.Value != 7*gib {
		t.Errorf("pid 30511 = %+v", p)
	}
}

func TestSimConcurrentReads(t *testing.T) {
	s, err := sim.New(sim.Config{Profile: "dgx-h100"}) // real clock
	if err != nil {
		t.Fatal(err)
	}
	r := newSimReader(t, s, AllGroups())
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 10 {
				snap, err := r.Read(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				for name, st := range snap.Groups {
					if st.Err != nil {
						t.Errorf("group %s: %v", name, st.Err)
						return
					}
				}
				if len(snap.Devices) != 8 || len(snap.Processes) != 8 {
					t.Errorf("snapshot has %d devices, %d processes", len(snap.Devices), len(snap.Processes))
					return
				}
			}
		})
	}
	wg.Wait()
}

func benchmarkRead(b *testing.B, profile string) {
	s, err := sim.New(sim.Config{Profile: profile})
	if err != nil {
		b.Fatal(err)
	}
	r := newSimReader(b, s, AllGroups())
	ctx := context.Background()
	if _, err := r.Read(ctx); err != nil { // first read discovers and caches
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	for _, profile := range []string{"dgx-h100", "large"} {
		b.Run(profile, func(b *testing.B) { benchmarkRead(b, profile) })
	}
}

func TestSimV100RetiredPagesInsteadOfRemappedRows(t *testing.T) {
	r := newSimReader(t, newSim(t, sim.Config{Profile: "v100"}, time.Minute), AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[0]
	if d.Info.Architecture != "volta" || d.Info.ComputeCapability != "7.0" {
		t.Errorf("info = %+v", d.Info)
	}
	e := d.ECC
	if !e.RetiredPagesSingleBit.Valid || !e.RetiredPagesDoubleBit.Valid || !e.RetiredPagesPending.Valid {
		t.Errorf("retired pages absent on Volta: %+v", e)
	}
	wantAbsent(t, "remapped rows (Ampere and later)", e.RemappedRowsCorrectable)
	if d.GPM != (snapshot.GPM{}) {
		t.Errorf("GPM on Volta: %+v", d.GPM)
	}
}

func TestSimXIDOfALostGPUIsKept(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{
		{GPU: 5, XID: 79, At: durationPtr(9 * time.Second), LostAfter: durationPtr(10 * time.Second)},
	}}, 0)
	r := newSimReader(t, s, AllGroups())
	read(t, r)
	s.SetElapsed(9 * time.Second)
	pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Devices[5].XIDErrors != nil })
	s.SetElapsed(11 * time.Second)
	snap := read(t, r)
	d := snap.Devices[5]
	if d.Up || len(d.XIDErrors) != 1 || d.XIDErrors[0].XID != 79 {
		t.Errorf("lost gpu 5: up=%v xids=%+v, want down with its XID 79", d.Up, d.XIDErrors)
	}
}

func TestSimLargeProfile(t *testing.T) {
	r := newSimReaderPastGPM(t, newSim(t, sim.Config{Profile: "large"}, time.Minute), AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)
	if len(snap.Devices) != 64 || len(snap.Processes) != 56 {
		t.Fatalf("%d devices, %d processes; want 64, 56", len(snap.Devices), len(snap.Processes))
	}
	for i, d := range snap.Devices {
		if d.Index != i || !d.Up || !d.GPM.SMActive.Valid {
			t.Errorf("device %d: index %d up %v", i, d.Index, d.Up)
		}
	}
}

// TestSimMIGPlacements checks that each MIG instance carries its GPU
// instance's profile ID and placement, read from the parent's GPU instance
// (what NVIDIA's DRA driver names MIG devices by), and that every compute
// instance of one GPU instance carries the same.
func TestSimMIGPlacements(t *testing.T) {
	snap := read(t, newSimReader(t, newSim(t, sim.Config{Profile: "dgx-h100", Privileged: true}, time.Minute), AllGroups()))
	noGroupErrors(t, snap)
	type placement struct{ gi, profileID, start, size int }
	var got []placement
	for _, m := range snap.Devices[7].MIGInstances {
		got = append(got, placement{m.GPUInstanceID, m.GPUInstanceProfileID.Value, m.PlacementStart.Value, m.PlacementSize.Value})
		if !m.GPUInstanceProfileID.Valid || !m.PlacementStart.Valid || !m.PlacementSize.Valid {
			t.Errorf("gpu 7 instance %+v: placement absent", m)
		}
	}
	// `nvidia-smi mig -cgi 9,14,19,19 -C` on an H100: 3g.40gb at 4 (4
	// memory slices), 2g.20gb at 0 (2), 1g.10gb at 2 and 3 (1 each).
	want := []placement{{1, 9, 4, 4}, {5, 14, 0, 2}, {13, 19, 2, 1}, {14, 19, 3, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("gpu 7 placements = %+v, want %+v", got, want)
	}
	for _, d := range snap.Devices[:7] {
		if d.MIGInstances != nil {
			t.Errorf("gpu %d: MIG instances %+v", d.Index, d.MIGInstances)
		}
	}
	// Privileged, the parent's process list answers too: the MIG
	// process is still listed once, with its instance.
	var onGPU7 []snapshot.Process
	for _, p := range snap.Processes {
		if p.GPU == 7 {
			onGPU7 = append(onGPU7, p)
		}
	}
	if len(onGPU7) != 1 || onGPU7[0].MIGUUID != snap.Devices[7].MIGInstances[0].UUID || onGPU7[0].GPUInstanceID != snapshot.Some(1) {
		t.Errorf("gpu 7 processes, privileged = %+v", onGPU7)
	}

	a100 := read(t, newSimReader(t, newSim(t, sim.Config{Profile: "dgx-a100-mig", Privileged: true}, time.Minute), AllGroups()))
	noGroupErrors(t, a100)
	split := a100.Devices[2].MIGInstances // one 7g GPU instance, 4c + 3c
	if len(split) != 2 || split[0].PlacementStart != split[1].PlacementStart ||
		split[0].GPUInstanceProfileID != split[1].GPUInstanceProfileID || split[0].PlacementSize != snapshot.Some(8) {
		t.Errorf("gpu 2 compute instances of one GPU instance: %+v", split)
	}
}

// countGpuInstanceByID counts the GetGpuInstanceById calls on a device.
type countGpuInstanceByID struct {
	nvml.Device
	calls *int
}

func (d countGpuInstanceByID) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	*d.calls++
	return d.Device.GetGpuInstanceById(id)
}

// TestSimMIGPlacementsUnprivilegedAreAbsentNotErrors: an unprivileged
// caller (the simulator's default, as nvml.h says) gets NO_PERMISSION for
// GPU instances; the MIG instances are read without their placement, no
// error is counted, and the call is not repeated for each instance.
func TestSimMIGPlacementsUnprivilegedAreAbsentNotErrors(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, time.Minute)
	calls := 0
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device { return countGpuInstanceByID{d, &calls} }}
	snap := read(t, newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupMIG), Now: s.Now}))
	noGroupErrors(t, snap)
	migs := snap.Devices[7].MIGInstances
	if len(migs) != 4 {
		t.Fatalf("gpu 7 MIG instances = %+v, want 4", migs)
	}
	for _, m := range migs {
		if m.GPUInstanceProfileID.Valid || m.PlacementStart.Valid || m.PlacementSize.Valid || m.UUID == "" || m.Profile == "" {
			t.Errorf("instance %+v: want its UUID and profile, and no placement", m)
		}
	}
	if calls != 1 {
		t.Errorf("GetGpuInstanceById called %d times in one read after NO_PERMISSION, want 1", calls)
	}
}
