package attribution

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// switchingAllocations is a cached allocation source whose answer the
// test replaces, as a source makes a new slice when its answer changes.
type switchingAllocations struct {
	fakeAllocations
	answer *atomic.Pointer[[]snapshot.Allocation]
}

func (s switchingAllocations) ListCached([]snapshot.Device) ([]snapshot.Allocation, bool) {
	return *s.answer.Load(), true
}

// Enrich calls whose sources all answer from their caches with the same
// slices share one joined slice, which an append cannot write into; a
// source's new answer is joined anew, and a source that must be called
// gets the snapshot a slice of its own.
func TestCachedAllocationsJoinedOnceWhileTheyStand(t *testing.T) {
	pod := snapshot.Allocation{GPU: 0, GPUUUID: "GPU-0", Pod: snapshot.Pod{Name: "p", Namespace: "ns"}}
	job := snapshot.Allocation{GPU: 1, GPUUUID: "GPU-1", Slurm: snapshot.SlurmJob{JobID: "7"}}
	job2 := snapshot.Allocation{GPU: 3, GPUUUID: "GPU-3", Slurm: snapshot.SlurmJob{JobID: "8"}}
	// Three sources of one allocation each: joined by appends, their
	// slice would have room for a fourth.
	var podAnswer, jobAnswer, job2Answer atomic.Pointer[[]snapshot.Allocation]
	podAnswer.Store(&[]snapshot.Allocation{pod})
	jobAnswer.Store(&[]snapshot.Allocation{job})
	job2Answer.Store(&[]snapshot.Allocation{job2})
	a := newFixtureAttributor(t, Options{AllocationSources: []AllocationSource{
		switchingAllocations{answer: &podAnswer}, switchingAllocations{answer: &jobAnswer}, switchingAllocations{answer: &job2Answer},
	}})
	enrich := func() []snapshot.Allocation {
		s := procs()
		a.Enrich(context.Background(), s)
		return s.Allocations
	}

	first, second := enrich(), enrich()
	if !slices.Equal(first, []snapshot.Allocation{pod, job, job2}) {
		t.Fatalf("allocations = %+v, want the pod's then the jobs'", first)
	}
	if &first[0] != &second[0] || len(second) != 3 {
		t.Errorf("two Enrich calls with the same cached answers joined them twice")
	}
	if cap(first) != len(first) {
		t.Errorf("the shared slice has room for %d more: an append to one snapshot's allocations would write into the next's", cap(first)-len(first))
	}

	moved := pod
	moved.GPU, moved.GPUUUID = 2, "GPU-2"
	podAnswer.Store(&[]snapshot.Allocation{moved})
	third := enrich()
	if !slices.Equal(third, []snapshot.Allocation{moved, job, job2}) {
		t.Errorf("after the pod source's new answer, allocations = %+v, want the moved pod and the jobs", third)
	}
	if !slices.Equal(first, []snapshot.Allocation{pod, job, job2}) {
		t.Errorf("the earlier snapshot's allocations changed to %+v", first)
	}

	var lists atomic.Int32
	jobAnswer.Store(&[]snapshot.Allocation{job, job2})
	b := newFixtureAttributor(t, Options{AllocationSources: []AllocationSource{
		switchingAllocations{answer: &jobAnswer},
		cachingAllocations{fakeAllocations{allocs: []snapshot.Allocation{pod}}, false, &lists},
	}})
	s1, s2 := procs(), procs()
	b.Enrich(context.Background(), s1)
	b.Enrich(context.Background(), s2)
	if len(s1.Allocations) != 3 || len(s2.Allocations) != 3 || &s1.Allocations[0] == &s2.Allocations[0] {
		t.Errorf("with a source called: allocations %+v and %+v, want three each, in slices of their own", s1.Allocations, s2.Allocations)
	}
}
