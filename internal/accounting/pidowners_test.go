package accounting

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// A list finds a process's owner through the list before when the PID
// and its owner are the same: a PID that now belongs to someone else (the
// kernel reuses PIDs) must go to its new owner, and an owner that holds
// several processes must stay one owner.
func TestReusedPIDGoesToItsNewOwner(t *testing.T) {
	const gib = 1 << 30
	a, _ := New(Options{NewOwnerHold: time.Nanosecond})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	proc := func(pid uint32, user string, mem uint64) snapshot.Process {
		return snapshot.Process{GPU: 0, GPUUUID: "GPU-0", PID: pid, Type: "compute",
			UsedMemory: snapshot.Some(mem), Owner: snapshot.Owner{User: user}}
	}
	tick := func(i int, procs ...snapshot.Process) {
		a.Observe(&snapshot.Snapshot{
			Time:      start.Add(time.Duration(i) * time.Second),
			Devices:   []snapshot.Device{{Index: 0, UUID: "GPU-0", Up: true}},
			Processes: procs,
		})
	}
	tick(0, proc(10, "alice", 1*gib), proc(11, "bob", 2*gib))
	tick(1, proc(10, "alice", 1*gib), proc(11, "bob", 2*gib))
	// PID 10 is bob's now; alice runs PID 12, and bob PID 13 beside it.
	tick(2, proc(10, "bob", 4*gib), proc(12, "alice", 8*gib), proc(13, "bob", 16*gib))
	tick(3, proc(10, "bob", 4*gib), proc(12, "alice", 8*gib), proc(13, "bob", 16*gib))

	want := map[string]float64{
		"alice": (1 + 8 + 8) * gib, // PID 10, then PID 12 for two seconds
		"bob":   (2 + 20 + 20) * gib,
	}
	got := map[string]float64{}
	for _, o := range a.Totals().Owners {
		if _, dup := got[o.Key.User]; dup {
			t.Errorf("owner %q listed twice", o.Key.User)
		}
		got[o.Key.User] = o.MemoryByteSeconds.Value
	}
	for user, w := range want {
		if got[user] != w {
			t.Errorf("%s: %g GiB·s, want %g", user, got[user]/gib, w/gib)
		}
	}
	if len(got) != len(want) {
		t.Errorf("owners %v, want %v", got, want)
	}
}

// Processes are found by device whatever the order of the snapshot's
// devices, and by index when they name no UUID.
func TestProcessesFoundOnTheirDevice(t *testing.T) {
	a, _ := New(Options{NewOwnerHold: time.Nanosecond})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		a.Observe(&snapshot.Snapshot{
			Time: start.Add(time.Duration(i) * time.Second),
			// Not in index order: position 0 holds GPU 1.
			Devices: []snapshot.Device{{Index: 1, UUID: "GPU-b", Up: true}, {Index: 0, UUID: "GPU-a", Up: true}, {Index: 2, UUID: "GPU-c", Up: true}},
			Processes: []snapshot.Process{
				{GPU: 0, GPUUUID: "GPU-a", PID: 1, Owner: snapshot.Owner{User: "on-a"}},
				{GPU: 1, PID: 2, Owner: snapshot.Owner{User: "on-b"}}, // no UUID: by index
				{GPU: 7, GPUUUID: "GPU-c", PID: 3, Owner: snapshot.Owner{User: "on-c"}},
				{GPU: 9, GPUUUID: "GPU-gone", PID: 4, Owner: snapshot.Owner{User: "nowhere"}},
			},
		})
	}
	got := map[string]string{}
	for _, o := range a.Totals().Owners {
		got[o.Key.User] = o.Key.GPUUUID
		if o.Seconds != 1 {
			t.Errorf("%s on %s: held %g s, want 1", o.Key.User, o.Key.GPUUUID, o.Seconds)
		}
	}
	want := map[string]string{"on-a": "GPU-a", "on-b": "GPU-b", "on-c": "GPU-c"}
	if len(got) != len(want) {
		t.Errorf("owners on GPUs %v, want %v", got, want)
	}
	for user, uuid := range want {
		if got[user] != uuid {
			t.Errorf("%s on %q, want %q", user, got[user], uuid)
		}
	}
}
