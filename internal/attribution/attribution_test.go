package attribution

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// fakeSlurm answers job lookups like internal/slurm's, and counts them.
type fakeSlurm struct {
	mu    sync.Mutex
	calls map[string]int
	delay time.Duration // set before lookups start
}

func (f *fakeSlurm) lookup(ctx context.Context, jobID string) (snapshot.SlurmJob, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = make(map[string]int)
	}
	f.calls[jobID]++
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return snapshot.SlurmJob{}, ctx.Err()
		}
	}
	if jobID == "124" {
		return snapshot.SlurmJob{}, errors.New("squeue: invalid job id")
	}
	return snapshot.SlurmJob{JobID: jobID, Step: "ignored", User: "carol", Account: "physics", Partition: "gpu", JobName: "train-" + jobID}, nil
}

func (f *fakeSlurm) count(jobID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[jobID]
}

func TestEnrichSlurm(t *testing.T) {
	fs := &fakeSlurm{}
	a := newFixtureAttributor(t, Options{Slurm: fs.lookup})
	s := procs(1023, 1024, 1026, 1028, 1029)
	a.Enrich(context.Background(), s)

	want := snapshot.SlurmJob{JobID: "123", Step: "0", User: "carol", Account: "physics", Partition: "gpu", JobName: "train-123"}
	if got := s.Processes[0].Owner.Slurm; got != want {
		t.Errorf("job 123:\n got %+v\nwant %+v", got, want)
	}
	// The lookup failed: the job id and step from the cgroup remain.
	if got := s.Processes[1].Owner.Slurm; got != (snapshot.SlurmJob{JobID: "124", Step: "batch"}) {
		t.Errorf("job 124: got %+v", got)
	}
	if got := s.Processes[3].Owner.Slurm; got.JobID != "128" || got.Partition != "gpu" {
		t.Errorf("job 128 from the environment: got %+v", got)
	}
	if got := s.Processes[4].Owner.Slurm; got != (snapshot.SlurmJob{}) {
		t.Errorf("no job: got %+v", got)
	}
	if got := s.AttributionErrors[SourceSlurm]; got != 1 {
		t.Errorf("slurm errors = %d, want 1", got)
	}

	a.Enrich(context.Background(), procs(1023, 1024))
	if n := fs.count("123"); n != 1 {
		t.Errorf("job 123 looked up %d times, want once (cached)", n)
	}
	if n := fs.count("124"); n != 1 {
		t.Errorf("job 124 looked up %d times, want once (negative cache)", n)
	}
}

func TestSlowSlurmDoesNotHoldEnrich(t *testing.T) {
	// The lookup takes far longer than the budget, and the bound below
	// sits between the two with a margin a loaded machine cannot eat.
	fs := &fakeSlurm{delay: 2 * time.Second}
	a := newFixtureAttributor(t, Options{Slurm: fs.lookup, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	s := procs(1023)
	a.Enrich(ctx, s)
	if took := time.Since(start); took > 50*time.Millisecond+time.Second {
		t.Errorf("Enrich took %v with a 50ms budget", took)
	}
	if got := s.Processes[0].Owner.Slurm; got.JobID != "123" || got.User != "" {
		t.Errorf("first scrape: got %+v, want the job id only", got)
	}
	// The lookup goes on in the background; a later scrape has its answer
	// (polled: how soon depends on the machine's load, not on the code).
	testenv.Eventually(t, 10*time.Second, func() error {
		s = procs(1023)
		a.Enrich(context.Background(), s)
		if got := s.Processes[0].Owner.Slurm; got.User != "carol" {
			return fmt.Errorf("no scrape has the background lookup's answer: got %+v", got)
		}
		return nil
	})
	if n := fs.count("123"); n != 1 {
		t.Errorf("looked up %d times, want once", n)
	}
}

func TestCacheExpiryRefreshesAndKeepsStaleAnswer(t *testing.T) {
	fs := &fakeSlurm{}
	a := newFixtureAttributor(t, Options{Slurm: fs.lookup, CacheTTL: time.Minute, RevalidateInterval: time.Hour})
	clock := newFakeClock()
	a.now = clock.Now
	a.Enrich(context.Background(), procs(1023))
	fs.delay = time.Hour // the refresh will not answer during this test
	clock.Advance(2 * time.Minute)
	s := procs(1023)
	start := time.Now()
	a.Enrich(context.Background(), s)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Enrich waited %v for the refresh of an expired answer", took)
	}
	if s.Processes[0].Owner.Slurm.User != "carol" {
		t.Errorf("expired answer not served while refreshing: got %+v", s.Processes[0].Owner.Slurm)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := fs.count("123"); n != 2 {
			return fmt.Errorf("looked up %d times after the TTL, want 2", n)
		}
		return nil
	})
}

// fakeAllocations stands in for the kubelet pod-resources source.
type fakeAllocations struct {
	allocs []snapshot.Allocation
	err    error
	hang   bool
}

func (f fakeAllocations) Source() string { return SourceKubelet }
func (f fakeAllocations) List(ctx context.Context, _ []snapshot.Device) ([]snapshot.Allocation, error) {
	if f.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.allocs, f.err
}

func TestAllocationSources(t *testing.T) {
	alloc := snapshot.Allocation{GPU: 3, GPUUUID: "GPU-3", Pod: snapshot.Pod{Name: "p", Namespace: "ns", Container: "c"}}
	a := newFixtureAttributor(t, Options{AllocationSources: []AllocationSource{fakeAllocations{allocs: []snapshot.Allocation{alloc}}}})
	s := procs()
	a.Enrich(context.Background(), s)
	if len(s.Allocations) != 1 || s.Allocations[0] != alloc {
		t.Errorf("allocations = %+v", s.Allocations)
	}
	if n, ok := s.AttributionErrors[SourceKubelet]; !ok || n != 0 {
		t.Errorf("kubelet errors = %d (present %v), want 0", n, ok)
	}

	hanging := newFixtureAttributor(t, Options{Timeout: 100 * time.Millisecond,
		AllocationSources: []AllocationSource{fakeAllocations{hang: true}}})
	start := time.Now()
	s = procs()
	hanging.Enrich(context.Background(), s)
	if took := time.Since(start); took > time.Second {
		t.Errorf("Enrich took %v with a hanging allocation source and a 100ms timeout", took)
	}
	if len(s.Allocations) != 0 {
		t.Errorf("allocations = %+v", s.Allocations)
	}
}

// cachingAllocations is an allocation source whose cache answers while
// fresh is set; List counts its calls.
type cachingAllocations struct {
	fakeAllocations
	fresh bool
	lists *atomic.Int32
}

func (c cachingAllocations) List(ctx context.Context, d []snapshot.Device) ([]snapshot.Allocation, error) {
	c.lists.Add(1)
	return c.fakeAllocations.List(ctx, d)
}

func (c cachingAllocations) ListCached([]snapshot.Device) ([]snapshot.Allocation, bool) {
	if !c.fresh {
		return nil, false
	}
	return c.allocs, true
}

// A source whose cache answers is not called (no goroutine, no wait); one
// whose cache cannot is, and both answers are in the snapshot.
func TestCachedAllocationSourcesAnswerWithoutACall(t *testing.T) {
	cached := snapshot.Allocation{GPU: 1, Pod: snapshot.Pod{Name: "cached", Namespace: "ns"}}
	called := snapshot.Allocation{GPU: 2, Slurm: snapshot.SlurmJob{JobID: "7"}}
	var freshLists, staleLists atomic.Int32
	a := newFixtureAttributor(t, Options{AllocationSources: []AllocationSource{
		cachingAllocations{fakeAllocations{allocs: []snapshot.Allocation{cached}}, true, &freshLists},
		cachingAllocations{fakeAllocations{allocs: []snapshot.Allocation{called}}, false, &staleLists},
	}})
	s := procs()
	a.Enrich(context.Background(), s)
	if !slices.ContainsFunc(s.Allocations, func(x snapshot.Allocation) bool { return x == cached }) ||
		!slices.ContainsFunc(s.Allocations, func(x snapshot.Allocation) bool { return x == called }) || len(s.Allocations) != 2 {
		t.Errorf("allocations = %+v, want the cached one and the called one", s.Allocations)
	}
	if n := freshLists.Load(); n != 0 {
		t.Errorf("the source whose cache answered was called %d times", n)
	}
	if n := staleLists.Load(); n != 1 {
		t.Errorf("the source whose cache could not answer was called %d times, want 1", n)
	}
}

func TestUnconfiguredSourcesAreNotReported(t *testing.T) {
	a := newFixtureAttributor(t, Options{})
	s := procs(1001)
	a.Enrich(context.Background(), s)
	if len(s.AttributionErrors) != 1 {
		t.Errorf("AttributionErrors = %v, want procfs only", s.AttributionErrors)
	}
}

// Concurrent Enrich calls (a scrape and the live page's collection) share
// the caches: under -race this finds unguarded state, and in any run each
// call must give the owners a lone call gives.
func TestEnrichIsSafeConcurrently(t *testing.T) {
	fs := &fakeSlurm{}
	a := newFixtureAttributor(t, Options{Slurm: fs.lookup})
	want := procs(1001, 1023, 1026, 1031, 99999)
	a.Enrich(context.Background(), want)
	if want.Processes[0].Owner.User == "" {
		t.Fatalf("the lone Enrich found no owner: %+v", want.Processes[0])
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				s := procs(1001, 1023, 1026, 1031, 99999)
				a.Enrich(context.Background(), s)
				for i := range s.Processes {
					if got := s.Processes[i].Owner; !reflect.DeepEqual(got, want.Processes[i].Owner) {
						t.Errorf("pid %d: concurrent owner %+v, lone %+v", s.Processes[i].PID, got, want.Processes[i].Owner)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
