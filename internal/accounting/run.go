package accounting

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Source gives the accounting its enriched snapshots.
type Source interface {
	Snapshot(ctx context.Context) (*snapshot.Snapshot, error)
}

// maxLeftBehind bounds the ticks left behind at once, each on a goroutine
// blocked in a driver call: one per GPU of an eight-GPU node. Past it the
// ticks wait for a blocked one to return.
const maxLeftBehind = 8

// Run observes a snapshot from src every interval until ctx ends. A tick
// whose collection fails is skipped; the next one integrates the whole
// interval since the last success (energy and samples are not lost: the
// counter and the driver's sample buffer carry them over).
//
// The accounting's reader reads the GPUs on the tick's own goroutine
// (nvmlbackend.NewAccountingReader: no hand-offs to other goroutines, a
// third of a tick's cost), so a GPU that hangs in a driver call holds the
// tick. A tick that has not returned within Options.TickTimeout is left
// behind: the ticks go on from a new goroutine (whose reads serve the
// hung GPU from its last reading, or as down), and the snapshot the tick
// left behind returns, if ever, is dropped. Run returns when ctx ends and
// the current tick has returned, or after stopGrace: a tick still in
// progress then is left behind (a collection ends soon after its context,
// but for a call blocked in the driver).
func (a *Accountant) Run(ctx context.Context, src Source, interval time.Duration, onError func(error)) {
	t := &ticks{a: a, src: src, interval: interval, onError: onError, ctx: ctx, ended: make(chan struct{})}
	go t.loop(0)
	select {
	case <-t.ended:
		return
	case <-ctx.Done():
	}
	stop := time.NewTimer(stopGrace)
	defer stop.Stop()
	select {
	case <-t.ended:
	case <-stop.C:
		t.leaveBehind()
	}
}

// stopGrace is how long Run waits, once its context has ended, for the
// tick in progress: the collection's reads and owner lookups end with the
// context, a call blocked in a hung GPU does not.
const stopGrace = 500 * time.Millisecond

// ticks is one Run: the goroutine that ticks (its generation current) and
// those left behind in a tick.
type ticks struct {
	a        *Accountant
	src      Source
	interval time.Duration
	onError  func(error)
	ctx      context.Context

	mu         sync.Mutex
	current    uint64    // the generation whose loop ticks
	inTick     uint64    // the number of the tick in progress; 0 between ticks
	tickStart  time.Time // when the tick in progress began
	tickCount  uint64
	leftBehind int
	ended      chan struct{}
	endOnce    sync.Once
}

// loop ticks while gen is the current generation.
func (t *ticks) loop(gen uint64) {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	// One watchdog for the loop, set again at each tick (a timer and its
	// function made at every tick were a few per cent of a tick).
	watchdog := time.AfterFunc(time.Hour, func() { t.watchdogFired(gen) })
	watchdog.Stop()
	defer watchdog.Stop()
	for {
		var (
			current bool
			err     error
		)
		cpu, measured := onTickThread(func() {
			var s *snapshot.Snapshot
			s, current, err = t.collect(gen, watchdog)
			if current && err == nil {
				t.a.Observe(s)
				if t.a.afterTick != nil {
					t.a.afterTick(s, t.a.Totals())
				}
			}
		})
		// A tick left behind costs what it cost too.
		t.a.addTick(cpu, measured)
		if !current {
			return
		}
		switch {
		case err == nil:
		case errors.Is(t.ctx.Err(), context.Canceled):
			t.end()
			return
		case t.onError != nil:
			t.onError(err)
		}
		select {
		case <-t.ctx.Done():
			t.end()
			return
		case <-tick.C:
		}
	}
}

// collect takes one snapshot for generation gen, with watchdog set to
// leave it behind after TickTimeout; current is false when the tick was
// left behind meanwhile (its snapshot is dropped).
func (t *ticks) collect(gen uint64, watchdog *time.Timer) (s *snapshot.Snapshot, current bool, err error) {
	t.mu.Lock()
	t.tickCount++
	t.inTick = t.tickCount
	t.tickStart = time.Now()
	t.mu.Unlock()
	watchdog.Reset(t.a.opts.TickTimeout)
	s, err = t.src.Snapshot(t.ctx)
	watchdog.Stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current != gen {
		t.leftBehind--
		return nil, false, nil
	}
	t.inTick = 0
	return s, true, err
}

// watchdogFired is generation gen's watchdog: the tick in progress is
// overdue when it began TickTimeout ago or more. A firing for an earlier
// tick (one that returned as the timer fired, after which the next tick
// set the timer again) finds the tick in progress younger, and leaves it
// to its own firing.
func (t *ticks) watchdogFired(gen uint64) {
	t.mu.Lock()
	n, started := t.inTick, t.tickStart
	t.mu.Unlock()
	if n == 0 || time.Since(started) < t.a.opts.TickTimeout {
		return
	}
	t.overdue(gen, n)
}

// overdue leaves tick n of generation gen behind, if it is still in
// progress, and ticks on from a new goroutine; or ends Run when ctx has
// ended. With maxLeftBehind ticks left behind already, it waits for the
// tick another TickTimeout (so that Run still ends soon after ctx does).
func (t *ticks) overdue(gen, n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current != gen || t.inTick != n {
		return
	}
	if t.leftBehind >= maxLeftBehind && t.ctx.Err() == nil {
		time.AfterFunc(t.a.opts.TickTimeout, func() { t.overdue(gen, n) })
		return
	}
	t.current++
	t.inTick = 0
	t.leftBehind++
	if t.ctx.Err() != nil {
		t.end()
		return
	}
	go t.loop(t.current)
}

func (t *ticks) end() { t.endOnce.Do(func() { close(t.ended) }) }

// leaveBehind leaves the current loop behind for good (Run is ending): if
// its tick ever returns, it is dropped.
func (t *ticks) leaveBehind() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.current++
	t.inTick = 0
	t.leftBehind++
	t.end()
}
