//go:build cgo

package accounting

import (
	"context"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// rig drives the real NVML reader against the simulator on a pinned clock,
// gives processes their owners by PID (attribution has its own tests) and
// feeds the accountant, one tick per step.
type rig struct {
	t      *testing.T
	sim    *sim.Sim
	reader *nvmlbackend.Reader
	acct   *Accountant
	owners map[uint32]snapshot.Owner
	// energyStart is each GPU's energy counter at the first tick.
	energyStart map[string]float64
	last        *snapshot.Snapshot
}

func newRig(t *testing.T, cfg sim.Config, owners map[uint32]snapshot.Owner, opts Options) *rig {
	t.Helper()
	zero := sim.Duration(0)
	cfg.PinTime = &zero
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := nvmlbackend.NewAccountingReader(s, nvmlbackend.AccountingOptions{Options: nvmlbackend.Options{Groups: ReaderGroups(), Now: s.Now, Library: "simulator"}, GPMOnlyMIG: true,
		ListProcessesEvery: ListProcessesEvery(DefaultInterval), ListProcessesSteadyEvery: ListProcessesSteadyEvery(DefaultInterval)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, sim: s, reader: r, acct: a, owners: owners, energyStart: map[string]float64{}}
}

// tick reads, attributes and integrates one snapshot at the sim's time.
func (r *rig) tick() *snapshot.Snapshot {
	r.t.Helper()
	s := r.readAttributed()
	r.observe(s)
	return s
}

var t0ctx = context.Background()

// run ticks every step from the sim's current time until end (inclusive).
func (r *rig) run(step, end time.Duration) {
	r.t.Helper()
	for e := r.sim.Elapsed(); e <= end; e += step {
		r.sim.SetElapsed(e)
		r.tick()
	}
}

// energyIncrease is a GPU's counter increase since the first tick.
func (r *rig) energyIncrease(uuid string) float64 {
	for _, d := range r.last.Devices {
		if d.UUID == uuid {
			return d.Power.Energy.Value - r.energyStart[uuid]
		}
	}
	r.t.Fatalf("no GPU %s", uuid)
	return 0
}

func (r *rig) uuid(gpu int) string { return r.sim.GPUUUIDs()[gpu] }

// ownerTotal finds the (unheld) total of the owner matching pred.
func (r *rig) ownerTotal(pred func(k snapshot.OwnerKey) bool) snapshot.OwnerTotal {
	r.t.Helper()
	var found []snapshot.OwnerTotal
	for _, o := range r.acct.Totals().Owners {
		if pred(o.Key) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		r.t.Fatalf("found %d owner totals, want 1: %+v", len(found), found)
	}
	return found[0]
}

func byPod(name string) func(snapshot.OwnerKey) bool {
	return func(k snapshot.OwnerKey) bool { return k.Pod == name }
}

func byContainer(name string) func(snapshot.OwnerKey) bool {
	return func(k snapshot.OwnerKey) bool { return k.Container == name }
}

func byUser(name string) func(snapshot.OwnerKey) bool {
	return func(k snapshot.OwnerKey) bool { return k.User == name }
}

// checkConservation: on every GPU, the owners' energy plus the idle energy
// equals the counter's increase, within 0.5 %.
func (r *rig) checkConservation() {
	r.t.Helper()
	tot := r.acct.Totals()
	for _, uuid := range r.sim.GPUUUIDs() {
		inc := r.energyIncrease(uuid)
		var sum float64
		for _, o := range tot.Owners {
			if o.Key.GPUUUID == uuid {
				sum += o.EnergyJoules.Value
			}
		}
		for _, e := range tot.IdleEnergy {
			if e.GPUUUID == uuid {
				sum += e.Joules
			}
		}
		if !within(sum, inc, 0.005) {
			r.t.Errorf("GPU %s: owners + idle = %.1f J, counter increase %.1f J (off by %.3f %%)", uuid, sum, inc, 100*(sum-inc)/inc)
		}
	}
}

func near(t *testing.T, what string, got snapshot.Opt[float64], want, rel float64) {
	t.Helper()
	if !got.Valid {
		t.Errorf("%s is absent, want %.3f", what, want)
		return
	}
	if !within(got.Value, want, rel) {
		t.Errorf("%s = %.3f, want %.3f ± %.1f %%", what, got.Value, want, 100*rel)
	}
}

func dur(d time.Duration) *sim.Duration { v := sim.Duration(d); return &v }
