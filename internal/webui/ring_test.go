package webui

import (
	"slices"
	"sync"
	"testing"
)

func TestRingKeepsNewestInOrder(t *testing.T) {
	r := NewRing[int](3)
	if got := r.Values(); len(got) != 0 {
		t.Fatalf("empty ring holds %v", got)
	}
	r.Push(1)
	r.Push(2)
	if got := r.Values(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("after 1,2: %v", got)
	}
	for v := 3; v <= 7; v++ {
		r.Push(v)
	}
	if got := r.Values(); !slices.Equal(got, []int{5, 6, 7}) {
		t.Fatalf("after 1..7 in a ring of 3: %v, want [5 6 7]", got)
	}
	if r.Len() != 3 || r.Cap() != 3 {
		t.Fatalf("len %d cap %d, want 3 3", r.Len(), r.Cap())
	}
}

func TestRingValuesIsACopy(t *testing.T) {
	r := NewRing[int](2)
	r.Push(1)
	got := r.Values()
	got[0] = 99
	if r.Values()[0] != 1 {
		t.Fatal("changing Values' result changed the ring")
	}
}

func TestRingBoundedUnderConcurrentUse(t *testing.T) {
	r := NewRing[int](10)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				r.Push(w*1000 + i)
				_ = r.Values()
			}
		})
	}
	wg.Wait()
	if r.Len() != 10 || len(r.Values()) != 10 {
		t.Fatalf("ring of 10 holds %d values after 4000 pushes", r.Len())
	}
}

func TestRingCapacityAtLeastOne(t *testing.T) {
	r := NewRing[int](0)
	r.Push(4)
	r.Push(5)
	if got := r.Values(); !slices.Equal(got, []int{5}) {
		t.Fatalf("ring of 0 (made 1): %v", got)
	}
}
