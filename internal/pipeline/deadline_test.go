package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The lazy deadline answers Err and Deadline as context.WithDeadline does,
// with no timer until Done is asked for.
func TestLazyDeadlineErrAndDeadline(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	ctx, release := withLazyDeadline(parent, time.Now().Add(time.Hour))
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err before the deadline = %v", err)
	}
	if d, ok := ctx.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Errorf("Deadline = %v, %v; want about an hour from now", d, ok)
	}
	if ctx.Value(key{}) != "v" {
		t.Error("the parent's value is lost")
	}
	if ctx.armed != nil {
		t.Error("Err, Deadline and Value made the timer")
	}
	release()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after release = %v, want Canceled", err)
	}
	select {
	case <-ctx.Done():
	default:
		t.Error("Done asked after release is not closed")
	}

	past, release := withLazyDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer release()
	if err := past.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err past the deadline = %v, want DeadlineExceeded", err)
	}

	sooner, cancelSooner := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSooner()
	within, release := withLazyDeadline(sooner, time.Now().Add(time.Hour))
	defer release()
	if d, _ := within.Deadline(); time.Until(d) > 2*time.Minute {
		t.Errorf("Deadline = %v from now, want the parent's sooner one", time.Until(d))
	}
	cancelSooner()
	if err := within.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the parent's end = %v, want the parent's", err)
	}
}

// Done, once asked for, closes at the deadline, at release, or at the
// parent's end, and Err stays what ended it.
func TestLazyDeadlineDone(t *testing.T) {
	ctx, release := withLazyDeadline(context.Background(), time.Now().Add(30*time.Millisecond))
	defer release()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed 10 s after a 30 ms deadline")
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err = %v, want DeadlineExceeded", err)
	}
	release()
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err after a release past the deadline = %v, want DeadlineExceeded still", err)
	}

	ctx, release = withLazyDeadline(context.Background(), time.Now().Add(time.Hour))
	done := ctx.Done()
	release()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed by release")
	}

	parent, cancel := context.WithCancel(context.Background())
	ctx, release = withLazyDeadline(parent, time.Now().Add(time.Hour))
	defer release()
	child, cancelChild := context.WithCancel(ctx) // registers through Done
	defer cancelChild()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a child of the lazy deadline did not end with its parent's parent")
	}
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err = %v, want Canceled", err)
	}
}

// doneReader waits on its context's Done: an OwnCaller collection must end
// at its Timeout all the same.
type doneReader struct{}

func (doneReader) Read(ctx context.Context) (*snapshot.Snapshot, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestOwnCallerCollectionEndsAtItsTimeout(t *testing.T) {
	p := New(doneReader{}, Options{OwnCaller: true, Timeout: 50 * time.Millisecond})
	start := time.Now()
	if _, err := p.Snapshot(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Snapshot = %v, want its deadline", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("Snapshot returned after %v, before its 50 ms timeout", took)
	}
}
