//go:build cgo

package nvmlbackend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// readBy reads with a deadline and checks that Read kept to it, with a
// margin a loaded machine cannot eat.
func readBy(t *testing.T, r *Reader, deadline time.Duration) *snapshot.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	snap, err := r.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if took := time.Since(start); took > deadline+3*time.Second {
		t.Errorf("Read took %v with a %v deadline", took, deadline)
	}
	return snap
}

// A slow driver (every call answers late; the
// simulator's slow_calls) takes longer to read a GPU than the deadline.
// Its reads still complete: the reading that completed late is served by
// the next collections with its age, and the GPU is up. Read itself keeps
// to its deadline, and the healthy GPUs are read fresh every time.
func TestSlowGPUIsServedItsLateReading(t *testing.T) {
	s, err := sim.New(sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 1, SlowCalls: durationPtr(10 * time.Millisecond)}}})
	if err != nil {
		t.Fatal(err)
	}
	// A read of GPU 1 makes well over a hundred calls: over a second,
	// four times the deadline.
	const deadline = 300 * time.Millisecond
	r := newReaderWith(t, s, Options{Groups: AllGroups(), Now: s.Now, StartTimeout: 5 * time.Second, DownAfter: time.Minute})
	healthyUp := func(snap *snapshot.Snapshot) {
		t.Helper()
		for i, d := range snap.Devices {
			if i != 1 && !d.Up {
				t.Fatalf("healthy GPU %d down (%s) beside the slow one", i, d.DownReason)
			}
		}
	}
	snap := readBy(t, r, deadline)
	healthyUp(snap)
	var late snapshot.Device
	testenv.Eventually(t, 30*time.Second, func() error {
		snap := readBy(t, r, deadline)
		healthyUp(snap)
		if late = snap.Devices[1]; !late.Up {
			return fmt.Errorf("the slow GPU is down (%s)", late.DownReason)
		}
		return nil
	})
	if late.ReadingAge < deadline {
		t.Errorf("the slow GPU's reading is %v old, want older than the %v deadline it missed", late.ReadingAge, deadline)
	}
	if !late.Temperature.GPU.Valid || late.UUID == "" {
		t.Errorf("the slow GPU's late reading lost its readings: %+v", late)
	}
	// It stays up: every later read of it completes too.
	for range 3 {
		if d := readBy(t, r, deadline).Devices[1]; !d.Up {
			t.Fatalf("the slow GPU went down (%s) though its reads complete", d.DownReason)
		}
	}
}

// A GPU that answered, then stops answering, is served its last reading
// only while its hung read is younger than DownAfter; then it is down
// (not_answering), and back once its call returns.
func TestGPUThatStopsAnsweringIsDownAfterDownAfter(t *testing.T) {
	s, err := sim.New(sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 2, HangAfter: durationPtr(time.Hour), HangFor: durationPtr(30 * time.Minute)}}})
	if err != nil {
		t.Fatal(err)
	}
	const downAfter = 2 * time.Second
	r := newReaderWith(t, s, Options{Groups: AllGroups(), Now: s.Now, StartTimeout: 5 * time.Second, DownAfter: downAfter})
	if d := readBy(t, r, 5*time.Second).Devices[2]; !d.Up {
		t.Fatalf("GPU 2 down (%s) before its hang", d.DownReason)
	}
	s.SetElapsed(time.Hour) // every call on GPU 2 now blocks
	hungAt := time.Now()
	testenv.Eventually(t, 30*time.Second, func() error {
		d := readBy(t, r, 200*time.Millisecond).Devices[2]
		if d.Up {
			return errors.New("the hung GPU is still served")
		}
		if d.DownReason != "not_answering" {
			t.Fatalf("hung GPU down for %q, want not_answering", d.DownReason)
		}
		return nil
	})
	if since := time.Since(hungAt); since < downAfter {
		t.Errorf("the hung GPU was down %v after its hang, before DownAfter (%v)", since, downAfter)
	}
	s.SetElapsed(2 * time.Hour) // past the hang: its blocked call returns
}
