//go:build cgo

package jobs

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// An idle job (a GPU held, no process on it) has SM-seconds 0, known, and
// the energy its GPU drew while held: the increase of the GPU's idle
// energy, split equally among the jobs holding it idle together. A job
// whose processes run keeps its processes' figures, and gets the idle
// energy of the intervals in which it held its GPU without them.
func TestIdleJobsGetZeroSMAndTheirGPUsIdleEnergy(t *testing.T) {
	cfg := sim.Config{Profile: "dgx-h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 100, UsedMemoryBytes: 1 << 30, SMUtilization: 0.8, Start: dur(4 * time.Second), End: dur(41 * time.Second)},
	}}
	busy := snapshot.SlurmJob{JobID: "10", User: "alice"}
	idleA := snapshot.SlurmJob{JobID: "11", User: "bob"}
	idleB := snapshot.SlurmJob{JobID: "12", User: "carol"}
	allocs := []timedAllocation{
		{4 * time.Second, 40 * time.Second, snapshot.Allocation{GPU: 0, Slurm: busy}},
		{4 * time.Second, 40 * time.Second, snapshot.Allocation{GPU: 1, Slurm: idleA}},
		{20 * time.Second, 40 * time.Second, snapshot.Allocation{GPU: 1, Slurm: idleB}},
	}
	r := newRig(t, cfg, map[uint32]snapshot.Owner{100: {User: "alice", Slurm: busy}}, allocs, Options{})
	for i := range r.allocs {
		r.allocs[i].alloc.GPUUUID = r.uuid(r.allocs[i].alloc.GPU)
	}
	idleEnergy := map[time.Duration]float64{} // GPU 1's, at each tick
	busyIdle := map[time.Duration]float64{}   // GPU 0's, at each tick
	var busyEnergy float64                    // the busy job's processes', at its end
	for e := time.Duration(0); e <= 60*time.Second; e += step {
		r.sim.SetElapsed(e)
		r.tick()
		acc := r.acct.Totals()
		for _, d := range acc.IdleEnergy {
			switch d.GPUUUID {
			case r.uuid(0):
				busyIdle[e] = d.Joules
			case r.uuid(1):
				idleEnergy[e] = d.Joules
			}
		}
		for _, o := range acc.Owners {
			if o.Key.SlurmJob == busy.JobID && o.EnergyJoules.Valid {
				busyEnergy = o.EnergyJoules.Value
			}
		}
	}
	// An allocation holds its GPU in the interval that ends at each tick
	// that lists it (the accountant's allocated seconds count so).
	var wantA, wantB float64
	for e := 4 * time.Second; e <= 40*time.Second; e += step {
		increase := idleEnergy[e] - idleEnergy[e-step]
		if e < 20*time.Second {
			wantA += increase
		} else {
			wantA, wantB = wantA+increase/2, wantB+increase/2
		}
	}
	if wantB <= 0 {
		t.Fatalf("GPU 1 drew no idle energy (%v): the simulator's idle power is gone", idleEnergy)
	}
	recs, _, err := ReadJournal(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]GPU{}
	for _, rec := range recs {
		if len(rec.GPUs) != 1 {
			t.Fatalf("job %s's record has GPUs %+v, want one", rec.ID, rec.GPUs)
		}
		byID[rec.ID] = rec.GPUs[0]
	}
	for _, c := range []struct {
		job    string
		energy float64
	}{{idleA.JobID, wantA}, {idleB.JobID, wantB}} {
		g, ok := byID[c.job]
		if !ok {
			t.Fatalf("no record of idle job %s in %+v", c.job, recs)
		}
		near(t, "idle job "+c.job+"'s SM-seconds", g.SMSeconds, 0, 0)
		near(t, "idle job "+c.job+"'s mean SM utilization", g.SMUtilizationMean, 0, 0)
		near(t, "idle job "+c.job+"'s max SM utilization", g.SMUtilizationMax, 0, 0)
		near(t, "idle job "+c.job+"'s energy", g.EnergyJoules, c.energy, 1e-6*c.energy)
	}
	g, ok := byID[busy.JobID]
	if !ok {
		t.Fatalf("no record of busy job %s in %+v", busy.JobID, recs)
	}
	// The busy job's allocation starts a tick before the accountant
	// first sees its process: that interval is idle and held.
	wantBusy := busyEnergy + busyIdle[4*time.Second] - busyIdle[2*time.Second]
	if busyIdle[4*time.Second] <= busyIdle[2*time.Second] {
		t.Errorf("GPU 0 drew no idle energy from 2s to 4s (%v): the process's start moved", busyIdle)
	}
	near(t, "busy job's energy", g.EnergyJoules, wantBusy, 1e-6*wantBusy)
	near(t, "busy job's SM-seconds", g.SMSeconds, 36*0.8, 0.8*step.Seconds())
}
