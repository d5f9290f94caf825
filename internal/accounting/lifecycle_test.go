//go:build cgo

package accounting

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// A new owner's series first reads 0 (for the hold), then its whole total;
// an ended owner's stays for the retention, then goes.
func TestNewOwnerHoldAndRetention(t *testing.T) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 900, UsedMemoryBytes: 1 << 30, SMUtilization: 0.6, Start: dur(10 * time.Second), End: dur(20 * time.Second)},
	}}
	opts := Options{NewOwnerHold: 30 * time.Second, Retention: 60 * time.Second}
	r := newRig(t, cfg, map[uint32]snapshot.Owner{900: {User: "bob"}}, opts)
	published := func(s *snapshot.Snapshot) *snapshot.OwnerTotal {
		for i := range s.Accounting.Owners {
			if s.Accounting.Owners[i].Key.User == "bob" {
				return &s.Accounting.Owners[i]
			}
		}
		return nil
	}
	// The process starts at 10 s, idle until the driver's first sample of
	// it (at 10.17 s), which the next tick (15 s) reads: the reader lists
	// the processes then (a new PID in the samples), and bob is first
	// listed.
	firstListed := (10*time.Second + 170*time.Millisecond).Truncate(step) + step
	var firstSeen time.Duration = -1
	for e := time.Duration(0); e <= 120*time.Second; e += step {
		r.sim.SetElapsed(e)
		s := r.tick()
		o := published(s)
		switch {
		case e < firstListed:
			if o != nil {
				t.Fatalf("at %s: bob listed before his process's first sample", e)
			}
		case o == nil && e <= 20*time.Second-step+opts.Retention: // last seen at the last tick before 20 s or the one after
			t.Fatalf("at %s: bob not listed (listed from %s to %s, retention %s)", e, firstListed, 20*time.Second-step, opts.Retention)
		case o != nil && firstSeen < 0:
			firstSeen = e
			fallthrough
		case o != nil && e-firstSeen < opts.NewOwnerHold:
			if o.Seconds != 0 || o.SMSeconds.Value != 0 || o.EnergyJoules.Value != 0 || !o.SMSeconds.Valid {
				t.Fatalf("at %s (within the hold): %+v, want present zeros", e, o)
			}
		case o != nil:
			if !within(o.SMSeconds.Value, 10*0.6, 0.01) {
				t.Fatalf("at %s (after the hold): SM-seconds %.3f, want 6", e, o.SMSeconds.Value)
			}
		case e > 20*time.Second+step+opts.Retention:
			// gone, as it should be
		}
		if o != nil && e > 20*time.Second+step+opts.Retention {
			t.Fatalf("at %s: bob still listed %s after his process ended", e, e-20*time.Second)
		}
	}
	if firstSeen != firstListed {
		t.Errorf("first listed at %s, want %s", firstSeen, firstListed)
	}
}

func TestOptionsChecked(t *testing.T) {
	for _, o := range []Options{
		{IdleThreshold: 1.5}, {IdleThreshold: -0.1}, {NewOwnerHold: -time.Second},
		{Retention: 30 * time.Second}, // shorter than the default hold
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
