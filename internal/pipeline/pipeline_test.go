package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

type countingReader struct {
	calls   atomic.Int32
	release chan struct{}
	err     error
}

func (r *countingReader) Read(ctx context.Context) (*snapshot.Snapshot, error) {
	r.calls.Add(1)
	if r.release != nil {
		<-r.release
	}
	if r.err != nil {
		return nil, r.err
	}
	return &snapshot.Snapshot{Devices: []snapshot.Device{{Index: 0, Up: true}}}, nil
}

type markEnricher struct{}

func (markEnricher) Enrich(_ context.Context, s *snapshot.Snapshot) {
	s.Processes = append(s.Processes, snapshot.Process{PID: 7, Owner: snapshot.Owner{User: "alice"}})
}

func TestConcurrentCallersShareOneCollection(t *testing.T) {
	r := &countingReader{release: make(chan struct{})}
	p := New(r, Options{})
	const callers = 16
	var wg sync.WaitGroup
	results := make(chan *snapshot.Snapshot, callers)
	for range callers {
		wg.Go(func() {
			s, err := p.Snapshot(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			results <- s
		})
	}
	// Every caller must have joined the in-flight collection before it
	// finishes: with MaxAge zero, one that arrives later starts another.
	// A sleep cannot promise that on a loaded machine; the callers'
	// stacks can.
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := testenv.GoroutinesWaitingIn("pipeline.(*Pipeline).Snapshot"); n != callers {
			return fmt.Errorf("%d of %d callers wait for the collection", n, callers)
		}
		return nil
	})
	close(r.release)
	wg.Wait()
	close(results)
	if got := r.calls.Load(); got != 1 {
		t.Fatalf("reader called %d times for %d concurrent callers, want 1", got, callers)
	}
	var first *snapshot.Snapshot
	for s := range results {
		if first == nil {
			first = s
		}
		if s != first {
			t.Fatal("callers got different snapshots from one shared collection")
		}
	}
}

func TestEnrichersRunAndMaxAgeReuses(t *testing.T) {
	r := &countingReader{}
	p := New(r, Options{MaxAge: time.Hour}, markEnricher{})
	s1, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s1.Processes) != 1 || s1.Processes[0].Owner.User != "alice" {
		t.Fatalf("enricher did not run: %+v", s1.Processes)
	}
	if s1.Duration <= 0 {
		t.Fatalf("collection duration not recorded: %v", s1.Duration)
	}
	s2, _ := p.Snapshot(context.Background())
	if s1 != s2 || r.calls.Load() != 1 {
		t.Fatalf("MaxAge did not reuse the snapshot (calls=%d)", r.calls.Load())
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready after a good collection: %v", err)
	}
}

func TestCallerContextEndsWithoutCancellingCollection(t *testing.T) {
	r := &countingReader{release: make(chan struct{})}
	p := New(r, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Snapshot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("impatient caller got %v, want deadline exceeded", err)
	}
	close(r.release)
	s, err := p.Snapshot(context.Background())
	if err != nil || s == nil {
		t.Fatalf("later caller: %v", err)
	}
}

func TestReadyReflectsFailures(t *testing.T) {
	r := &countingReader{err: errors.New("nvml went away")}
	p := New(r, Options{})
	if err := p.Ready(); err == nil {
		t.Fatal("ready before any collection")
	}
	if _, err := p.Snapshot(context.Background()); err == nil {
		t.Fatal("want the reader's error")
	}
	if err := p.Ready(); err == nil || err.Error() != "nvml went away" {
		t.Fatalf("Ready = %v", err)
	}
}

// fixedReader returns the same devices at every read.
type fixedReader struct{ devices []snapshot.Device }

func (r fixedReader) Read(context.Context) (*snapshot.Snapshot, error) {
	return &snapshot.Snapshot{Devices: append([]snapshot.Device(nil), r.devices...)}, nil
}

// TestReadyNeedsAnAnsweringGPU: /readyz is not ready when every GPU is
// down, or when the driver finds no GPU at all, and it says which.
func TestReadyNeedsAnAnsweringGPU(t *testing.T) {
	for _, tc := range []struct {
		name       string
		devices    []snapshot.Device
		requireGPU bool
		want       string // "" for ready
	}{
		{"one of two down", []snapshot.Device{{Index: 0, DownReason: "gpu_is_lost"}, {Index: 1, Up: true}}, true, ""},
		{"every GPU down", []snapshot.Device{{Index: 0, DownReason: "gpu_is_lost"}, {Index: 1, DownReason: "not_answering"}}, true,
			"every GPU is down: 0 (gpu_is_lost), 1 (not_answering)"},
		{"no GPU on a driver", nil, true, "no GPU found: the driver reports 0 devices"},
		{"no GPU, not required", nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(fixedReader{tc.devices}, Options{RequireGPU: tc.requireGPU})
			if _, err := p.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			err := p.Ready()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Ready() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOnCollectSeesEveryCollection(t *testing.T) {
	var seen []error
	boom := errors.New("boom")
	r := &countingReader{}
	p := New(r, Options{OnCollect: func(s *snapshot.Snapshot, err error) {
		if (s == nil) != (err != nil) {
			t.Errorf("OnCollect(%v, %v)", s, err)
		}
		seen = append(seen, err)
	}})
	_, _ = p.Snapshot(context.Background())
	r.err = boom
	_, _ = p.Snapshot(context.Background())
	if len(seen) != 2 || seen[0] != nil || seen[1] != boom {
		t.Errorf("OnCollect saw %v", seen)
	}
}

// deadlineReader returns its snapshot only when its context's deadline
// has passed, as the NVML reader does while one GPU is at its deadline.
type deadlineReader struct{}

func (deadlineReader) Read(ctx context.Context) (*snapshot.Snapshot, error) {
	<-ctx.Done()
	return &snapshot.Snapshot{Devices: []snapshot.Device{{Index: 0, Up: true}}, Processes: []snapshot.Process{{PID: 7}}}, nil
}

// ownerEnricher names the owner of every process while its context lasts.
type ownerEnricher struct{}

func (ownerEnricher) Enrich(ctx context.Context, s *snapshot.Snapshot) {
	if ctx.Err() != nil {
		return
	}
	for i := range s.Processes {
		s.Processes[i].Owner.User = "alice"
	}
}

// The owner lookup has its own budget. A read that
// spends its whole budget (one slow GPU) used to leave the enrichers a
// context already done, and every process, the healthy GPUs' too,
// without an owner.
func TestEnrichersHaveTheirOwnBudget(t *testing.T) {
	p := New(deadlineReader{}, Options{Timeout: 50 * time.Millisecond, EnrichTimeout: 10 * time.Second}, ownerEnricher{})
	s, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Processes[0].Owner.User; got != "alice" {
		t.Errorf("owner after a read that used its whole budget = %q, want alice", got)
	}
}

// ctxReader answers when its context ends, with the context's error, and
// says on which goroutine it ran (by a value only that goroutine's
// caller put in the context).
type ctxReader struct{ sawCaller atomic.Bool }

type callerKey struct{}

func (r *ctxReader) Read(ctx context.Context) (*snapshot.Snapshot, error) {
	r.sawCaller.Store(ctx.Value(callerKey{}) != nil)
	<-ctx.Done()
	return nil, ctx.Err()
}

// With OwnCaller the collection runs within the caller's context: it
// sees the caller's values and ends when the caller gives up (a shared
// collection goes on for other callers; see the test above).
func TestOwnCallerCollectsWithinTheCallersContext(t *testing.T) {
	r := &ctxReader{}
	p := New(r, Options{OwnCaller: true, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), callerKey{}, true))
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := p.Snapshot(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Snapshot = %v, want the caller's cancellation", err)
	}
	if !r.sawCaller.Load() {
		t.Error("the collection did not run within the caller's context")
	}
	if err := p.Ready(); !errors.Is(err, context.Canceled) {
		t.Errorf("Ready after the cancelled collection = %v, want its error", err)
	}

	shared := &ctxReader{}
	sp := New(shared, Options{Timeout: 50 * time.Millisecond})
	if _, err := sp.Snapshot(context.WithValue(context.Background(), callerKey{}, true)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shared Snapshot = %v, want its own deadline", err)
	}
	if shared.sawCaller.Load() {
		t.Error("a shared collection ran within one caller's context")
	}
}

// TestReadyNowNeedsFreshReadings: besides Ready's conditions, a GPU that
// does not answer makes the pipeline not ready; a late reading the reader
// still serves, or a lost GPU, does not.
func TestReadyNowNeedsFreshReadings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devices []snapshot.Device
		want    string // "" for ready
	}{
		{"fresh", []snapshot.Device{{Index: 0, Up: true, ReadingAge: time.Second}, {Index: 1, Up: true}}, ""},
		{"one lost, one fresh", []snapshot.Device{{Index: 0, DownReason: "gpu_is_lost"}, {Index: 1, Up: true}}, ""},
		{"one hung", []snapshot.Device{{Index: 0, Up: true}, {Index: 1, DownReason: "not_answering"}, {Index: 2, DownReason: "not_answering"}},
			"no fresh reading of GPU 1, 2: not answering"},
		{"one late, still served", []snapshot.Device{{Index: 0, Up: true, ReadingAge: 16 * time.Second}, {Index: 1, Up: true}}, ""},
		{"every GPU down", []snapshot.Device{{Index: 0, DownReason: "not_answering"}}, "every GPU is down: 0 (not_answering)"},
		{"no GPU", nil, "no GPU found: the driver reports 0 devices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(fixedReader{tc.devices}, Options{RequireGPU: true})
			err := p.ReadyNow(t.Context())
			if tc.want == "" {
				if err != nil {
					t.Errorf("ReadyNow = %v, want ready", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("ReadyNow = %v, want %q", err, tc.want)
			}
		})
	}
	// A collection that cannot finish in the probe's time is not ready.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p := New(deadlineReader{}, Options{Timeout: 100 * time.Millisecond})
	if err := p.ReadyNow(ctx); err == nil || !strings.Contains(err.Error(), "no collection within the probe's time") {
		t.Errorf("ReadyNow with an ended context = %v", err)
	}
}
