//go:build cgo

package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/accounting"
	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// rig drives the real NVML reader against the simulator on a pinned
// clock, gives processes their owners by PID and allocations by elapsed
// time (attribution has its own tests), and feeds the real accountant and
// a Recorder one tick per step, as the accounting's ticker does.
type rig struct {
	t      *testing.T
	sim    *sim.Sim
	reader *nvmlbackend.Reader
	acct   *accounting.Accountant
	rec    *Recorder
	dir    string
	owners map[uint32]snapshot.Owner
	allocs []timedAllocation
}

// timedAllocation is an allocation listed from from to to (elapsed).
type timedAllocation struct {
	from, to time.Duration
	alloc    snapshot.Allocation
}

func newRig(t *testing.T, cfg sim.Config, owners map[uint32]snapshot.Owner, allocs []timedAllocation, opts Options) *rig {
	t.Helper()
	zero := sim.Duration(0)
	cfg.PinTime = &zero
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups := accounting.ReaderGroups()
	for g := range JournalGroups() {
		groups[g] = true
	}
	r, err := nvmlbackend.NewAccountingReader(s, nvmlbackend.AccountingOptions{Options: nvmlbackend.Options{Groups: groups, Now: s.Now, Library: "simulator"},
		ListProcessesEvery: accounting.ListProcessesEvery(accounting.DefaultInterval), ListProcessesSteadyEvery: accounting.ListProcessesSteadyEvery(accounting.DefaultInterval)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	a, err := accounting.New(accounting.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Node = "node1"
	rec, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.journal.Close() })
	return &rig{t: t, sim: s, reader: r, acct: a, rec: rec, dir: opts.Dir, owners: owners, allocs: allocs}
}

// tick reads, attributes and integrates one snapshot at the sim's time.
func (r *rig) tick() {
	r.t.Helper()
	s, err := r.reader.Read(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	for i := range s.Processes {
		s.Processes[i].Owner = r.owners[s.Processes[i].PID]
	}
	e := r.sim.Elapsed()
	for _, a := range r.allocs {
		if e >= a.from && e <= a.to {
			s.Allocations = append(s.Allocations, a.alloc)
		}
	}
	r.acct.Observe(s)
	r.rec.Observe(s, r.acct.Totals())
}

// run ticks every step from the sim's current time until end (inclusive).
func (r *rig) run(step, end time.Duration) {
	r.t.Helper()
	for e := r.sim.Elapsed(); e <= end; e += step {
		r.sim.SetElapsed(e)
		r.tick()
	}
}

func (r *rig) uuid(gpu int) string { return r.sim.GPUUUIDs()[gpu] }

func dur(d time.Duration) *sim.Duration { v := sim.Duration(d); return &v }

func near(t *testing.T, what string, got *float64, want, tol float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s is absent, want %.3f", what, want)
		return
	}
	if *got < want-tol || *got > want+tol {
		t.Errorf("%s = %.3f, want %.3f ± %.3f", what, *got, want, tol)
	}
}

// crashAndRestart drops the recorder without closing it (as a SIGKILL
// would: nothing but what it already synced survives) and starts a new
// reader, accountant and recorder on the same simulator and directory.
func (r *rig) crashAndRestart(opts Options) {
	r.t.Helper()
	_ = r.rec.journal.f.Close() // the file descriptors, as the kernel closes them
	_ = r.rec.journal.dir.close()
	groups := accounting.ReaderGroups()
	for g := range JournalGroups() {
		groups[g] = true
	}
	reader, err := nvmlbackend.NewAccountingReader(r.sim, nvmlbackend.AccountingOptions{Options: nvmlbackend.Options{Groups: groups, Now: r.sim.Now, Library: "simulator"},
		ListProcessesEvery: accounting.ListProcessesEvery(accounting.DefaultInterval), ListProcessesSteadyEvery: accounting.ListProcessesSteadyEvery(accounting.DefaultInterval)})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = reader.Close() })
	a, err := accounting.New(accounting.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	opts.Dir, opts.Node = r.dir, "node1"
	rec, err := Open(opts)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = rec.journal.Close() })
	r.reader, r.acct, r.rec = reader, a, rec
}
