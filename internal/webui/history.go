package webui

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Source is where the recorder gets its snapshots: the pipeline, whose
// collection it shares with concurrent scrapes.
type Source interface {
	Snapshot(ctx context.Context) (*snapshot.Snapshot, error)
}

// gpuSample is one GPU's readings at one collection.
type gpuSample struct {
	Utilization reading
	MemoryUsed  reading
	Power       reading
	Temperature reading
}

// ownerSample is what one owner held on all GPUs at one collection.
type ownerSample struct {
	MemoryUsed reading
	SM         reading
}

type gpuHistory struct {
	uuid   string
	points *buckets[gpuBucket]
}

type ownerHistory struct {
	kind, name string
	points     *buckets[ownerBucket]
	lastMilli  int64
}

// MaxOwners bounds how many owners have a history at once; an owner seen
// while the table is full takes the slot of the owner seen longest ago,
// unless all of them were seen in the same collection.
const MaxOwners = 64

// maxDroppedRemembered bounds the owners remembered as turned away, so
// that each is counted once in owners_dropped however long it runs.
const maxDroppedRemembered = 16 * MaxOwners

// Recorder collects a snapshot every interval, keeps the latest for the
// API, and keeps a bounded history per GPU and per owner.
type Recorder struct {
	src         Source
	interval    time.Duration
	samples     int   // the window, in intervals
	bucketMilli int64 // the width of a point
	points      int   // buckets per series: the window's, and the one filling

	mu            sync.Mutex
	latest        *snapshot.Snapshot
	latestErr     error
	gpus          map[int]*gpuHistory
	owners        map[string]*ownerHistory
	ownersDropped uint64
	// dropped holds when each owner turned away was last seen, so that it
	// is counted once; it forgets them as the owner table forgets owners.
	dropped     map[string]int64
	newestMilli int64 // the newest sample's time; 0 before the first
	// generation counts recorded collections.
	generation uint64

	// encodeMu serializes encoding the whole history, and guards the
	// encoding of generation historyGen, so that any number of open pages
	// loading the page cost one encoding per collection. It is never held
	// with mu while encoding: collections and the other endpoints do not
	// wait for it.
	encodeMu    sync.Mutex
	historyJSON []byte
	historyGen  uint64
}

// NewRecorder keeps history long / interval samples per GPU and owner, in
// at most maxPoints buckets per series. The interval must be positive and
// the history at least one interval (the flags check the same, with their
// names, before this is called).
func NewRecorder(src Source, interval, history time.Duration) (*Recorder, error) {
	if interval <= 0 || history < interval {
		return nil, fmt.Errorf("live page history: interval %v must be positive and history %v at least one interval", interval, history)
	}
	n := int(history / interval)
	k := bucketIntervals(n)
	return &Recorder{src: src, interval: interval, samples: n,
		bucketMilli: int64(k) * max(1, interval.Milliseconds()), points: (n+k-1)/k + 1,
		gpus: map[int]*gpuHistory{}, owners: map[string]*ownerHistory{}, dropped: map[string]int64{}}, nil
}

// Run collects until ctx ends: at once, then every interval.
func (r *Recorder) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		s, err := r.src.Snapshot(ctx)
		if ctx.Err() != nil {
			return
		}
		r.Record(s, err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Record adds one collection's outcome.
func (r *Recorder) Record(s *snapshot.Snapshot, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latestErr = err
	if err != nil {
		return
	}
	r.latest = s
	r.generation++
	ms := s.Time.UnixMilli()
	r.newestMilli = max(r.newestMilli, ms)
	start := bucketStart(ms, r.bucketMilli)
	for i := range s.Devices {
		d := &s.Devices[i]
		h := r.gpus[d.Index]
		if h == nil {
			h = &gpuHistory{points: newBuckets[gpuBucket](r.points)}
			r.gpus[d.Index] = h
		}
		if d.UUID != "" {
			h.uuid = d.UUID
		}
		h.points.at(start).add(gpuSample{
			Utilization: readingOf(d.Utilization.GPU), MemoryUsed: readingOfBytes(d.Memory.Used),
			Power: readingOf(d.Power.Usage), Temperature: readingOf(d.Temperature.GPU),
		})
	}
	r.recordOwners(s, ms, start)
}

func (r *Recorder) recordOwners(s *snapshot.Snapshot, ms, start int64) {
	type sum struct {
		kind, name string
		mem, sm    float64
		memOK      bool
		smOK       bool
	}
	sums := map[string]*sum{}
	for _, p := range s.Processes {
		kind, name := OwnerOf(p.Owner)
		key := kind + "\x00" + name
		a := sums[key]
		if a == nil {
			a = &sum{kind: kind, name: name}
			sums[key] = a
		}
		if v, ok := p.UsedMemory.Get(); ok {
			a.mem, a.memOK = a.mem+float64(v), true
		}
		if v, ok := p.SMUtilization.Get(); ok {
			a.sm, a.smOK = a.sm+v, true
		}
	}
	// Owners gone for longer than the window have nothing left to show.
	windowMilli := r.windowMilli()
	for key, h := range r.owners {
		if ms-h.lastMilli > windowMilli {
			delete(r.owners, key)
		}
	}
	for key, seen := range r.dropped {
		if ms-seen > windowMilli {
			delete(r.dropped, key)
		}
	}
	add := func(h *ownerHistory, a *sum) {
		smp := ownerSample{MemoryUsed: nan(), SM: nan()}
		if a.memOK {
			smp.MemoryUsed = reading(a.mem)
		}
		if a.smOK {
			smp.SM = reading(a.sm)
		}
		h.points.at(start).add(smp)
		h.lastMilli = ms
	}
	// Owners with a history are marked seen first: a newcomer may take
	// the slot of an owner not seen now, never of one seen now.
	var newcomers []string
	for key, a := range sums {
		if h := r.owners[key]; h != nil {
			add(h, a)
		} else {
			newcomers = append(newcomers, key)
		}
	}
	slices.Sort(newcomers)
	for _, key := range newcomers {
		if len(r.owners) >= MaxOwners && !r.evictLeastRecentlySeen(ms) {
			r.turnAway(key, ms)
			continue
		}
		delete(r.dropped, key)
		a := sums[key]
		h := &ownerHistory{kind: a.kind, name: a.name, points: newBuckets[ownerBucket](r.points)}
		r.owners[key] = h
		add(h, a)
	}
}

// evictLeastRecentlySeen frees the slot of the owner seen longest ago,
// if one was not seen at ms.
func (r *Recorder) evictLeastRecentlySeen(ms int64) bool {
	var oldest string
	oldestMilli := ms
	for key, h := range r.owners {
		if h.lastMilli < oldestMilli || (h.lastMilli == oldestMilli && oldest != "" && key < oldest) {
			oldest, oldestMilli = key, h.lastMilli
		}
	}
	if oldest == "" {
		return false
	}
	delete(r.owners, oldest)
	return true
}

// turnAway counts an owner that gets no history, once however many
// collections it is seen in.
func (r *Recorder) turnAway(key string, ms int64) {
	if _, known := r.dropped[key]; !known {
		r.ownersDropped++
		if len(r.dropped) >= maxDroppedRemembered {
			// Forget the one seen longest ago: if it comes back it is
			// counted again, which beats holding every owner ever seen.
			forget, at := "", ms
			for k, seen := range r.dropped {
				if seen <= at {
					forget, at = k, seen
				}
			}
			delete(r.dropped, forget)
		}
	}
	r.dropped[key] = ms
}

func (r *Recorder) windowMilli() int64 {
	return int64(r.samples) * r.interval.Milliseconds()
}

// Latest is the newest good snapshot (nil before the first) and the
// latest collection's error.
func (r *Recorder) Latest() (*snapshot.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest, r.latestErr
}

func nan() reading { return readingOf(snapshot.Opt[float64]{}) }
