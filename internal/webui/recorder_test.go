package webui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// countingSource hands out snapshots and counts collections.
type countingSource struct {
	mu    sync.Mutex
	calls int
}

func (c *countingSource) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	s := testSnapshot(time.Unix(1000, 0).Add(time.Duration(c.calls) * 10 * time.Millisecond))
	return s, nil
}

func (c *countingSource) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// TestRecorderRunCollectsAtOnceThenEveryInterval: the first collection
// does not wait an interval (the page has data at once), later ones come
// on the ticker, and Run returns when its context ends.
func TestRecorderRunCollectsAtOnceThenEveryInterval(t *testing.T) {
	src := &countingSource{}
	rec := newTestRecorder(t, src, 10*time.Millisecond, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rec.Run(ctx); close(done) }()
	defer cancel()
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := src.count(); n < 3 {
			return fmt.Errorf("%d collections, want at least 3", n)
		}
		return nil
	})
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if s, err := rec.Latest(); s == nil || err != nil {
		t.Errorf("latest = %v, %v after collections", s, err)
	}
	if h := rec.History(); len(h.GPUs) != 2 || len(h.GPUs[0].TimeMilli) < 2 {
		t.Errorf("history after %d collections: %+v", src.count(), h.GPUs)
	}
}

// TestRecorderFirstCollectionIsImmediate: with an hour-long interval the
// page still gets its first snapshot at once.
func TestRecorderFirstCollectionIsImmediate(t *testing.T) {
	src := &countingSource{}
	rec := newTestRecorder(t, src, time.Hour, time.Hour)
	ctx := t.Context()
	go rec.Run(ctx)
	testenv.Eventually(t, 30*time.Second, func() error {
		if s, _ := rec.Latest(); s == nil {
			return errors.New("no snapshot since Run started with a 1 h interval")
		}
		return nil
	})
}

func newTestRecorder(t testing.TB, src Source, interval, history time.Duration) *Recorder {
	t.Helper()
	rec, err := NewRecorder(src, interval, history)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A zero or negative interval, or a history shorter than one interval, is
// an error, not a division by zero or an empty ring.
func TestNewRecorderRefusesBadIntervals(t *testing.T) {
	for _, c := range []struct{ interval, history time.Duration }{
		{0, time.Hour}, {-time.Second, time.Hour}, {time.Second, 0}, {time.Minute, time.Second},
	} {
		if _, err := NewRecorder(&fakeSource{}, c.interval, c.history); err == nil {
			t.Errorf("NewRecorder(%v, %v) accepted", c.interval, c.history)
		}
	}
}
