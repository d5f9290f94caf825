//go:build cgo

package accounting

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Ground truth: simulated processes that start and end at known times with
// known utilization over time; each owner's SM-seconds must be within 1 %
// of the integral of its configured utilization where the driver measures
// it per process, and energy is conserved within 0.5 % everywhere.

const step = DefaultInterval

// eachSampleDriver runs test against both drivers nvml.h admits: one
// sample per process per read (its mean since the last read, what drivers
// are seen to do) and every buffered 1/6 s sample.
func eachSampleDriver(t *testing.T, test func(t *testing.T, samples string)) {
	for _, samples := range []string{sim.ProcessSamplesPerProcess, sim.ProcessSamplesEveryPeriod} {
		t.Run(samples, func(t *testing.T) { test(t, samples) })
	}
}

func pod(ns, name string) snapshot.Owner {
	return snapshot.Owner{User: "root", Pod: snapshot.Pod{Namespace: ns, Name: name, Container: "main"}}
}

func TestExclusiveGPU(t *testing.T) { eachSampleDriver(t, testExclusiveGPU) }

func testExclusiveGPU(t *testing.T, samples string) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{{
		GPU: 0, PID: 100, UsedMemoryBytes: 10 << 30, SMUtilization: 0.3,
		Start: dur(10 * time.Second), End: dur(310 * time.Second),
		Schedule: []sim.UtilizationStep{
			{At: sim.Duration(110 * time.Second), SMUtilization: 0.9},
			{At: sim.Duration(210 * time.Second), SMUtilization: 0.5},
		},
	}}}
	cfg.ProcessSamples = samples
	r := newRig(t, cfg, map[uint32]snapshot.Owner{100: {User: "alice"}}, Options{})
	r.run(step, 400*time.Second)

	o := r.ownerTotal(byUser("alice"))
	near(t, "SM-seconds", o.SMSeconds, 100*0.3+100*0.9+100*0.5, 0.01)
	// Held time and memory are per tick: off by less than a tick at each end.
	if o.Seconds < 300-2*step.Seconds() || o.Seconds > 300+2*step.Seconds() {
		t.Errorf("held %.1f s, want 300 ± 2 ticks", o.Seconds)
	}
	near(t, "memory byte-seconds", o.MemoryByteSeconds, float64(10<<30)*o.Seconds, 1e-9)
	// Alone on its GPU, the owner gets all of the energy of the intervals
	// it held the GPU; the rest is idle.
	if !o.EnergyJoules.Valid || o.EnergyJoules.Value <= 0 {
		t.Errorf("energy %+v, want a positive share", o.EnergyJoules)
	}
	r.checkConservation()
	// Per-process samples measure a whole GPU: its reader reads no GPM.
	if r.last.Devices[0].GPM.SMActive.Valid {
		t.Error("the accounting's reader read GPM on a whole GPU")
	}
}

// Three pods time-slicing one GPU (the same device in pod-resources for
// each), starting and ending at different times, one of them idle for a
// while: each gets its own measured SM time.
func TestTimeSlicingPods(t *testing.T) { eachSampleDriver(t, testTimeSlicingPods) }

func testTimeSlicingPods(t *testing.T, samples string) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 201, UsedMemoryBytes: 4 << 30, SMUtilization: 0.2, Start: dur(0), End: dur(240 * time.Second)},
		{GPU: 0, PID: 202, UsedMemoryBytes: 4 << 30, SMUtilization: 0.5, Start: dur(60 * time.Second),
			Schedule: []sim.UtilizationStep{{At: sim.Duration(120 * time.Second), SMUtilization: 0.01}, {At: sim.Duration(180 * time.Second), SMUtilization: 0.4}}},
		{GPU: 0, PID: 203, UsedMemoryBytes: 4 << 30, SMUtilization: 0.25, Start: dur(100 * time.Second), End: dur(200 * time.Second)},
		{GPU: 0, PID: 204, UsedMemoryBytes: 2 << 30, SMUtilization: 0.1, Start: dur(30 * time.Second), End: dur(90 * time.Second)},
	}}
	owners := map[uint32]snapshot.Owner{201: pod("ml", "a"), 202: pod("ml", "b"), 203: pod("web", "c"), 204: pod("web", "d")}
	cfg.ProcessSamples = samples
	r := newRig(t, cfg, owners, Options{})
	// The kubelet lists every pod on the same GPU.
	allocs := func() []snapshot.Allocation {
		var out []snapshot.Allocation
		for _, p := range []string{"a", "b"} {
			out = append(out, snapshot.Allocation{GPU: 0, GPUUUID: r.uuid(0), Pod: snapshot.Pod{Namespace: "ml", Name: p, Container: "main"}})
		}
		return out
	}
	for e := time.Duration(0); e <= 300*time.Second; e += step {
		r.sim.SetElapsed(e)
		s := r.readAttributed()
		s.Allocations = allocs()
		r.observe(s)
	}
	near(t, "pod a SM-seconds", r.ownerTotal(byPod("a")).SMSeconds, 240*0.2, 0.01)
	near(t, "pod b SM-seconds", r.ownerTotal(byPod("b")).SMSeconds, 60*0.5+60*0.01+120*0.4, 0.01)
	near(t, "pod c SM-seconds", r.ownerTotal(byPod("c")).SMSeconds, 100*0.25, 0.01)
	near(t, "pod d SM-seconds", r.ownerTotal(byPod("d")).SMSeconds, 60*0.1, 0.01)
	r.checkConservation()

	// Pod b held the GPU from 0 s (its allocation) and was idle (below 5 %)
	// before its process started and from 120 s to 180 s.
	for _, a := range r.acct.Totals().Allocations {
		if a.Pod != "b" {
			continue
		}
		if !within(a.Seconds, 300, 0.02) {
			t.Errorf("pod b allocation held %.1f s, want 300", a.Seconds)
		}
		if !a.IdleSeconds.Valid || a.IdleSeconds.Value < 120-3*step.Seconds() || a.IdleSeconds.Value > 120+3*step.Seconds() {
			t.Errorf("pod b idle %+v s, want 120 (60 before start, 60 at 1 %%)", a.IdleSeconds)
		}
	}
}

// MPS: three clients in three containers, and the MPS server, which holds
// a context (and memory) of its own and must never be an owner.
func TestMPSClients(t *testing.T) { eachSampleDriver(t, testMPSClients) }

func testMPSClients(t *testing.T, samples string) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 300, UsedMemoryBytes: 1 << 30, Type: "compute"},
		{GPU: 0, PID: 301, UsedMemoryBytes: 3 << 30, SMUtilization: 0.15, Type: "compute+mps", Start: dur(20 * time.Second)},
		{GPU: 0, PID: 302, UsedMemoryBytes: 3 << 30, SMUtilization: 0.35, Type: "compute+mps", End: dur(150 * time.Second)},
		{GPU: 0, PID: 303, UsedMemoryBytes: 3 << 30, SMUtilization: 0.4, Type: "compute+mps",
			Schedule: []sim.UtilizationStep{{At: sim.Duration(100 * time.Second), SMUtilization: 0.2}}},
	}}
	owners := map[uint32]snapshot.Owner{
		300: {User: "root", Command: "nvidia-cuda-mps-server"},
		301: {User: "u1", Container: snapshot.Container{Name: "c1"}},
		302: {User: "u2", Container: snapshot.Container{Name: "c2"}},
		303: {User: "u3", Container: snapshot.Container{Name: "c3"}},
	}
	cfg.ProcessSamples = samples
	r := newRig(t, cfg, owners, Options{})
	r.run(step, 200*time.Second)
	near(t, "client 1 SM-seconds", r.ownerTotal(byContainer("c1")).SMSeconds, 180*0.15, 0.01)
	near(t, "client 2 SM-seconds", r.ownerTotal(byContainer("c2")).SMSeconds, 150*0.35, 0.01)
	near(t, "client 3 SM-seconds", r.ownerTotal(byContainer("c3")).SMSeconds, 100*0.4+100*0.2, 0.01)
	for _, o := range r.acct.Totals().Owners {
		if o.Key.Container == "" {
			t.Errorf("the MPS server is an owner: %+v", o.Key)
		}
	}
	r.checkConservation()
}

// MIG: three of the four instances of a DGX H100's GPU 7 are used. The
// driver has no per-process samples on MIG; GPM measures each instance.
// Energy follows the documented model: each instance's part of the GPU
// is its compute slices over the instances' total (3+2+1+1 = 7), given to
// its owner while held; the empty 1g instance's part is idle.
func TestMIGInstances(t *testing.T) {
	cfg := sim.Config{Profile: "dgx-h100", Processes: []sim.ProcessSpec{
		{GPU: 7, PID: 701, UsedMemoryBytes: 20 << 30, SMUtilization: 0.6, GPUInstance: new(1), ComputeInstance: new(0)},
		{GPU: 7, PID: 702, UsedMemoryBytes: 8 << 30, SMUtilization: 0.3, GPUInstance: new(5), ComputeInstance: new(0)},
		{GPU: 7, PID: 703, UsedMemoryBytes: 4 << 30, SMUtilization: 0.8, GPUInstance: new(13), ComputeInstance: new(0)},
	}}
	owners := map[uint32]snapshot.Owner{701: pod("a", "p1"), 702: pod("b", "p2"), 703: pod("c", "p3")}
	r := newRig(t, cfg, owners, Options{})
	// The kubelet allocates MIG instances: p1's (busy) and the empty
	// 1g instance (GPU instance 14) to a pod that runs nothing.
	migOf := func(s *snapshot.Snapshot, gi int) string {
		for _, m := range s.Devices[7].MIGInstances {
			if m.GPUInstanceID == gi {
				return m.UUID
			}
		}
		t.Fatalf("no GPU instance %d", gi)
		return ""
	}
	for e := time.Duration(0); e <= 120*time.Second; e += step {
		r.sim.SetElapsed(e)
		s := r.readAttributed()
		s.Allocations = []snapshot.Allocation{
			{GPU: 7, GPUUUID: r.uuid(7), MIGUUID: migOf(s, 1), Pod: snapshot.Pod{Namespace: "a", Name: "p1"}},
			{GPU: 7, GPUUUID: r.uuid(7), MIGUUID: migOf(s, 14), Pod: snapshot.Pod{Namespace: "d", Name: "p4"}},
		}
		r.observe(s)
	}
	if n := len(r.acct.Totals().Allocations); n != 2 {
		t.Fatalf("%d allocation totals, want 2", n)
	}
	for _, a := range r.acct.Totals().Allocations {
		wantIdle := map[string]float64{"p1": 0, "p4": a.Seconds}[a.Pod]
		if !within(a.Seconds, 120, 0.001) || !a.IdleSeconds.Valid || a.IdleSeconds.Value != wantIdle {
			t.Errorf("MIG allocation %s: held %.0f s, idle %+v; want 120 s held, %.0f idle", a.Pod, a.Seconds, a.IdleSeconds, wantIdle)
		}
	}
	inc := r.energyIncrease(r.uuid(7))
	want := map[string]float64{"p1": 3.0 / 7, "p2": 2.0 / 7, "p3": 1.0 / 7}
	migs := map[string]bool{}
	for name, part := range want {
		o := r.ownerTotal(byPod(name))
		near(t, name+" energy", o.EnergyJoules, inc*part, 0.005)
		if o.Key.MIGUUID == "" || migs[o.Key.MIGUUID] {
			t.Errorf("%s: MIG instance %q missing or shared", name, o.Key.MIGUUID)
		}
		migs[o.Key.MIGUUID] = true
		// GPM measures the instance: present, a ratio of the held time.
		if !o.SMSeconds.Valid || o.SMSeconds.Value <= 0 || o.SMSeconds.Value > o.Seconds {
			t.Errorf("%s SM-seconds %+v, want a GPM measure in (0, %.0f]", name, o.SMSeconds, o.Seconds)
		}
	}
	for _, e := range r.acct.Totals().IdleEnergy {
		if e.GPU == 7 && !within(e.Joules, inc/7, 0.005) {
			t.Errorf("GPU 7 idle energy %.1f J, want the empty 1g instance's 1/7: %.1f J", e.Joules, inc/7)
		}
	}
	r.checkConservation()
}

// Without GPM (A100) nothing measures SM time on a MIG instance: the
// figure is absent, not 0, and energy still follows the slices.
func TestMIGWithoutGPMHasNoSMTime(t *testing.T) {
	cfg := sim.Config{Profile: "dgx-a100-mig", Processes: []sim.ProcessSpec{
		{GPU: 1, PID: 801, UsedMemoryBytes: 8 << 30, SMUtilization: 0.6, GPUInstance: new(1), ComputeInstance: new(0)},
	}}
	r := newRig(t, cfg, map[uint32]snapshot.Owner{801: pod("a", "p1")}, Options{})
	r.run(step, 40*time.Second)
	o := r.ownerTotal(byPod("p1"))
	if o.SMSeconds.Valid {
		t.Errorf("SM-seconds %+v on an A100 MIG instance, want absent", o.SMSeconds)
	}
	inc := r.energyIncrease(r.uuid(1))
	near(t, "energy", o.EnergyJoules, inc*3/6, 0.005) // 3g of two 3g instances
	r.checkConservation()
}

// A job shorter than a scrape interval (8 s) is counted whole.
func TestShortJob(t *testing.T) { eachSampleDriver(t, testShortJob) }

func testShortJob(t *testing.T, samples string) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 900, UsedMemoryBytes: 1 << 30, SMUtilization: 0.6, Start: dur(101 * time.Second), End: dur(109 * time.Second)},
	}}
	cfg.ProcessSamples = samples
	r := newRig(t, cfg, map[uint32]snapshot.Owner{900: {Slurm: snapshot.SlurmJob{JobID: "77"}, User: "bob"}}, Options{})
	r.run(step, 140*time.Second)
	near(t, "short job SM-seconds", r.ownerTotal(byUser("bob")).SMSeconds, 8*0.6, 0.01)
	r.checkConservation()
}

// Jobs that start on a GPU idle since gpuwatch started, and again after
// a minute idle, are counted whole: the reader asks the driver for the
// interval since its last answer, not for everything since the last
// sample it saw (a minute back, or none), whose one mean per process is
// over as much of its buffer as it keeps.
func TestJobsAfterAnIdleGPU(t *testing.T) { eachSampleDriver(t, testJobsAfterAnIdleGPU) }

func testJobsAfterAnIdleGPU(t *testing.T, samples string) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 900, UsedMemoryBytes: 1 << 30, SMUtilization: 0.6, Start: dur(11 * time.Second), End: dur(31 * time.Second)},
		{GPU: 0, PID: 901, UsedMemoryBytes: 1 << 30, SMUtilization: 0.5, Start: dur(101 * time.Second), End: dur(121 * time.Second)},
	}}
	cfg.ProcessSamples = samples
	r := newRig(t, cfg, map[uint32]snapshot.Owner{900: {User: "alice"}, 901: {User: "bob"}}, Options{})
	r.run(step, 140*time.Second)
	near(t, "first job SM-seconds", r.ownerTotal(byUser("alice")).SMSeconds, 20*0.6, 0.01)
	near(t, "job after the gap SM-seconds", r.ownerTotal(byUser("bob")).SMSeconds, 20*0.5, 0.01)
	r.checkConservation()
}

func (r *rig) readAttributed() *snapshot.Snapshot {
	r.t.Helper()
	s, err := r.reader.Read(t0ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := range s.Processes {
		s.Processes[i].Owner = r.owners[s.Processes[i].PID]
	}
	if r.last == nil {
		for _, d := range s.Devices {
			if e, ok := d.Power.Energy.Get(); ok {
				r.energyStart[d.UUID] = e
			}
		}
	}
	return s
}

func (r *rig) observe(s *snapshot.Snapshot) {
	r.acct.Observe(s)
	r.acct.Enrich(t0ctx, s)
	r.last = s
}

// Where the driver gives SM samples to the MPS server itself, they are the
// clients' work: shared among the clients in proportion to their own SM
// time (modelled), never kept by the server.
func TestMPSServerSamplesGoToClients(t *testing.T) {
	eachSampleDriver(t, testMPSServerSamplesGoToClients)
}

func testMPSServerSamplesGoToClients(t *testing.T, samples string) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 300, UsedMemoryBytes: 1 << 30, SMUtilization: 0.3, Type: "compute"},
		{GPU: 0, PID: 301, UsedMemoryBytes: 3 << 30, SMUtilization: 0.1, Type: "compute+mps"},
		{GPU: 0, PID: 302, UsedMemoryBytes: 3 << 30, SMUtilization: 0.2, Type: "compute+mps"},
	}}
	owners := map[uint32]snapshot.Owner{
		300: {User: "root", Command: "/usr/bin/nvidia-cuda-mps-server"},
		301: {User: "u1", Container: snapshot.Container{Name: "c1"}},
		302: {User: "u2", Container: snapshot.Container{Name: "c2"}},
	}
	cfg.ProcessSamples = samples
	r := newRig(t, cfg, owners, Options{})
	r.run(step, 100*time.Second)
	// 100 s: client 1 0.1 + 1/3 of the server's 0.3; client 2 0.2 + 2/3.
	near(t, "client 1 SM-seconds", r.ownerTotal(byContainer("c1")).SMSeconds, 100*(0.1+0.3/3), 0.01)
	near(t, "client 2 SM-seconds", r.ownerTotal(byContainer("c2")).SMSeconds, 100*(0.2+0.3*2/3), 0.01)
	r.checkConservation()
}

// A tick longer than the driver's sample buffer (the simulator keeps 10 s;
// docs/accounting.md, "Why 5 s") sees only the samples still held; they
// stand for the whole interval. Steady load stays exact; each change of
// load costs up to one interval of the old or new value.
func TestIntervalLongerThanTheDriverBuffer(t *testing.T) {
	eachSampleDriver(t, testIntervalLongerThanTheDriverBuffer)
}

func testIntervalLongerThanTheDriverBuffer(t *testing.T, samples string) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{{
		GPU: 0, PID: 100, UsedMemoryBytes: 1 << 30, SMUtilization: 0.4,
		Start: dur(10 * time.Second), End: dur(610 * time.Second),
		Schedule: []sim.UtilizationStep{{At: sim.Duration(310 * time.Second), SMUtilization: 0.8}},
	}}}
	cfg.ProcessSamples = samples
	r := newRig(t, cfg, map[uint32]snapshot.Owner{100: {User: "alice"}}, Options{})
	r.run(15*time.Second, 700*time.Second)
	near(t, "SM-seconds", r.ownerTotal(byUser("alice")).SMSeconds, 300*0.4+300*0.8, 0.02)
	r.checkConservation()
}
