package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheCheckPasses(t *testing.T) {
	var polls int
	Eventually(t, 10*time.Second, func() error {
		polls++
		if polls < 3 {
			return fmt.Errorf("poll %d", polls)
		}
		return nil
	})
	if polls != 3 {
		t.Errorf("check ran %d times, want 3: it must stop once it passes", polls)
	}
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	// Fatalf ends the goroutine it runs on, as t.Fatalf does; so the call
	// runs on its own goroutine and the message is read once it has ended.
	var polls int
	go func() {
		defer close(done)
		Eventually(rec, 30*time.Millisecond, func() error {
			polls++
			return fmt.Errorf("%d registrations", polls)
		})
	}()
	<-done
	msg := rec.msg.Load()
	if msg == nil {
		t.Fatal("a check that never passed did not fail the test")
	}
	var last int
	if _, err := fmt.Sscanf(*msg, "timed out after 30ms: %d registrations", &last); err != nil || last != polls {
		t.Fatalf("failure message %q, want the limit and the last poll's error", rec.message())
	}
}

func TestEventuallyTriesOnceMoreAfterTheLimit(t *testing.T) {
	// The first poll outlasts the whole limit, as one can on a loaded
	// machine; the check passes by the second, which must still run.
	var polls int
	Eventually(t, 200*time.Millisecond, func() error {
		polls++
		if polls == 1 {
			time.Sleep(300 * time.Millisecond)
			return errors.New("not yet")
		}
		return nil
	})
	if polls != 2 {
		t.Errorf("%d polls, want 2", polls)
	}
}

func TestWaitForNamesWhatItWaitedFor(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(rec, 150*time.Millisecond, "gpu_up{gpu=3} = 0", func() bool { return false })
	}()
	<-done
	if msg := rec.msg.Load(); msg == nil || *msg != "timed out after 150ms: waiting for gpu_up{gpu=3} = 0" {
		t.Fatalf("failure message %q, want it to name the limit and the condition", rec.message())
	}
	var polls int
	WaitFor(t, 10*time.Second, "the second poll", func() bool { polls++; return polls == 2 })
	if polls != 2 {
		t.Errorf("cond ran %d times, want 2: it must stop once it holds", polls)
	}
}

// fatalRecorder stands in for the test in Eventually's failure path: it
// keeps the message and ends the calling goroutine as testing.T does.
type fatalRecorder struct {
	testing.TB
	msg atomic.Pointer[string]
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.msg.Store(&msg)
	runtime.Goexit()
}

func (r *fatalRecorder) message() string {
	if msg := r.msg.Load(); msg != nil {
		return *msg
	}
	return ""
}
