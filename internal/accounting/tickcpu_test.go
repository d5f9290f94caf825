package accounting

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// burnThread spins until the calling thread has used d of CPU.
func burnThread(t *testing.T, d time.Duration) {
	start, err := threadCPU()
	if err != nil {
		t.Error(err)
		return
	}
	for {
		now, err := threadCPU()
		if err != nil || now-start >= d {
			return
		}
	}
}

// busySource spends ownCPU on the collecting goroutine's thread and has
// another goroutine spend otherCPU on its own while the collection waits
// for it, as a collection waits for an owner lookup.
type busySource struct {
	t                *testing.T
	ownCPU, otherCPU time.Duration
	mu               sync.Mutex
	n                int
}

func (b *busySource) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	burnThread(b.t, b.ownCPU)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // its thread's clock measures its spin
		defer runtime.UnlockOSThread()
		burnThread(b.t, b.otherCPU)
	}()
	<-done
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	return &snapshot.Snapshot{Time: time.Unix(int64(b.n), 0)}, nil
}

// gpuwatch_accounting_cpu_seconds_total counts the CPU the ticks take on
// their own thread, and not what other goroutines spend meanwhile; the
// ticks are counted, and the figures reach the outputs through Enrich.
func TestTickCPUIsTheTickThreadsOwn(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const own, other = 5 * time.Millisecond, 30 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx, &busySource{t: t, ownCPU: own, otherCPU: other}, time.Millisecond, nil) })
	testenv.WaitFor(t, 60*time.Second, "ten ticks", func() bool { return a.Totals().Ticks >= 10 })
	cancel()
	wg.Wait()

	s := &snapshot.Snapshot{}
	a.Enrich(context.Background(), s)
	acc := s.Accounting
	cpu, ok := acc.TickCPUSeconds.Get()
	if !ok {
		t.Fatal("no tick CPU measured")
	}
	perTick := time.Duration(cpu / float64(acc.Ticks) * float64(time.Second))
	// Each tick spins own on its thread; the other goroutine's 30 ms must
	// not be in it (a tick's own remaining work is microseconds).
	if perTick < own || perTick >= own+other/2 {
		t.Errorf("%d ticks took %v of CPU each, want %v and more (their own), well under %v (with another goroutine's)", acc.Ticks, perTick, own, own+other)
	}
}
