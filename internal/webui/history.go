package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Source is where the recorder gets its snapshots: the pipeline, whose
// collection it shares with concurrent scrapes.
type Source interface {
	Snapshot(ctx context.Context) (*snapshot.Snapshot, error)
}

// gpuSample is one GPU's readings at one collection: 24 bytes, so an hour
// at 1 s for 8 GPUs is about 0.7 MB.
type gpuSample struct {
	UnixMilli   int64
	Utilization reading
	MemoryUsed  reading
	Power       reading
	Temperature reading
}

// ownerSample is what one owner held on all GPUs at one collection.
type ownerSample struct {
	UnixMilli  int64
	MemoryUsed reading
	SM         reading
}

type gpuHistory struct {
	uuid    string
	samples *Ring[gpuSample]
}

type ownerHistory struct {
	kind, name string
	samples    *Ring[ownerSample]
	lastMilli  int64
}

// MaxOwners bounds how many owners have a history at once; an owner seen
// while the table is full gets none until an old one ages out.
const MaxOwners = 64

// Recorder collects a snapshot every interval, keeps the latest for the
// API, and keeps a bounded history per GPU and per owner.
type Recorder struct {
	src      Source
	interval time.Duration
	samples  int

	mu            sync.Mutex
	latest        *snapshot.Snapshot
	latestErr     error
	gpus          map[int]*gpuHistory
	owners        map[string]*ownerHistory
	ownersDropped uint64
	// generation counts recorded collections; historyJSON is the
	// history encoded at historyGen, so that any number of open pages
	// cost one encoding per collection.
	generation  uint64
	historyJSON []byte
	historyGen  uint64
}

// NewRecorder keeps history long / interval samples per GPU and owner.
func NewRecorder(src Source, interval, history time.Duration) *Recorder {
	n := int(history / interval)
	if n < 1 {
		n = 1
	}
	return &Recorder{src: src, interval: interval, samples: n, gpus: map[int]*gpuHistory{}, owners: map[string]*ownerHistory{}}
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
	for i := range s.Devices {
		d := &s.Devices[i]
		h := r.gpus[d.Index]
		if h == nil {
			h = &gpuHistory{samples: NewRing[gpuSample](r.samples)}
			r.gpus[d.Index] = h
		}
		if d.UUID != "" {
			h.uuid = d.UUID
		}
		h.samples.Push(gpuSample{
			UnixMilli: ms, Utilization: readingOf(d.Utilization.GPU), MemoryUsed: readingOfBytes(d.Memory.Used),
			Power: readingOf(d.Power.Usage), Temperature: readingOf(d.Temperature.GPU),
		})
	}
	r.recordOwners(s, ms)
}

func (r *Recorder) recordOwners(s *snapshot.Snapshot, ms int64) {
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
	windowMilli := int64(r.samples) * r.interval.Milliseconds()
	for key, h := range r.owners {
		if ms-h.lastMilli > windowMilli {
			delete(r.owners, key)
		}
	}
	for key, a := range sums {
		h := r.owners[key]
		if h == nil {
			if len(r.owners) >= MaxOwners {
				r.ownersDropped++
				continue
			}
			h = &ownerHistory{kind: a.kind, name: a.name, samples: NewRing[ownerSample](r.samples)}
			r.owners[key] = h
		}
		smp := ownerSample{UnixMilli: ms, MemoryUsed: nan(), SM: nan()}
		if a.memOK {
			smp.MemoryUsed = reading(a.mem)
		}
		if a.smOK {
			smp.SM = reading(a.sm)
		}
		h.samples.Push(smp)
		h.lastMilli = ms
	}
}

// OwnerOf names who a process belongs to, most specific first: Slurm
// job, pod, compose service, container, user.
func OwnerOf(o snapshot.Owner) (kind, name string) {
	switch {
	case o.Slurm.JobID != "":
		return "slurm_job", o.Slurm.JobID
	case o.Pod.Name != "":
		return "pod", o.Pod.Namespace + "/" + o.Pod.Name
	case o.Container.ComposeService != "":
		return "compose_service", o.Container.ComposeProject + "/" + o.Container.ComposeService
	case o.Container.Name != "":
		return "container", o.Container.Name
	case o.User != "":
		return "user", o.User
	case o.UID != "":
		return "user", "uid " + o.UID
	}
	return "unknown", ""
}

// Latest is the newest good snapshot (nil before the first) and the
// latest collection's error.
func (r *Recorder) Latest() (*snapshot.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest, r.latestErr
}

// HistoryDoc is /api/v1/history: one column per reading, times in
// milliseconds since the epoch, absent readings null.
type HistoryDoc struct {
	IntervalSeconds float64       `json:"interval_seconds"`
	MaxSamples      int           `json:"max_samples"`
	GPUs            []GPUSeries   `json:"gpus"`
	Owners          []OwnerSeries `json:"owners"`
	// OwnersDropped counts owners that got no history because MaxOwners
	// owners already had one.
	OwnersDropped uint64 `json:"owners_dropped"`
}

// GPUSeries is one GPU's history.
type GPUSeries struct {
	Index              int       `json:"index"`
	UUID               string    `json:"uuid,omitempty"`
	TimeMilli          []int64   `json:"time_ms"`
	UtilizationGPU     []reading `json:"utilization_gpu"`
	MemoryUsedBytes    []reading `json:"memory_used_bytes"`
	PowerWatts         []reading `json:"power_watts"`
	TemperatureCelsius []reading `json:"temperature_celsius"`
}

// OwnerSeries is one owner's history, summed over its processes.
type OwnerSeries struct {
	Kind            string    `json:"kind"`
	Name            string    `json:"name"`
	TimeMilli       []int64   `json:"time_ms"`
	MemoryUsedBytes []reading `json:"memory_used_bytes"`
	SMUtilization   []reading `json:"sm_utilization"`
}

// HistoryJSON is History encoded as JSON, encoded once per collection.
func (r *Recorder) HistoryJSON() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.historyJSON != nil && r.historyGen == r.generation {
		return r.historyJSON, nil
	}
	b, err := json.Marshal(r.history())
	if err != nil {
		return nil, err
	}
	r.historyJSON, r.historyGen = append(b, '\n'), r.generation
	return r.historyJSON, nil
}

// History copies the held history.
func (r *Recorder) History() HistoryDoc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.history()
}

func (r *Recorder) history() HistoryDoc {
	doc := HistoryDoc{IntervalSeconds: r.interval.Seconds(), MaxSamples: r.samples, GPUs: []GPUSeries{}, Owners: []OwnerSeries{}, OwnersDropped: r.ownersDropped}
	for idx, h := range r.gpus {
		v := h.samples.Values()
		g := GPUSeries{Index: idx, UUID: h.uuid, TimeMilli: make([]int64, len(v)),
			UtilizationGPU: make([]reading, len(v)), MemoryUsedBytes: make([]reading, len(v)),
			PowerWatts: make([]reading, len(v)), TemperatureCelsius: make([]reading, len(v))}
		for i, s := range v {
			g.TimeMilli[i], g.UtilizationGPU[i], g.MemoryUsedBytes[i], g.PowerWatts[i], g.TemperatureCelsius[i] =
				s.UnixMilli, s.Utilization, s.MemoryUsed, s.Power, s.Temperature
		}
		doc.GPUs = append(doc.GPUs, g)
	}
	sort.Slice(doc.GPUs, func(i, j int) bool { return doc.GPUs[i].Index < doc.GPUs[j].Index })
	for _, h := range r.owners {
		v := h.samples.Values()
		o := OwnerSeries{Kind: h.kind, Name: h.name, TimeMilli: make([]int64, len(v)),
			MemoryUsedBytes: make([]reading, len(v)), SMUtilization: make([]reading, len(v))}
		for i, s := range v {
			o.TimeMilli[i], o.MemoryUsedBytes[i], o.SMUtilization[i] = s.UnixMilli, s.MemoryUsed, s.SM
		}
		doc.Owners = append(doc.Owners, o)
	}
	sort.Slice(doc.Owners, func(i, j int) bool {
		if doc.Owners[i].Kind != doc.Owners[j].Kind {
			return doc.Owners[i].Kind < doc.Owners[j].Kind
		}
		return doc.Owners[i].Name < doc.Owners[j].Name
	})
	return doc
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 32) }

func nan() reading { return readingOf(snapshot.Opt[float64]{}) }

// CheckFlags refuses an interval or history length that makes no sense.
func CheckFlags(interval, history time.Duration) error {
	switch {
	case interval <= 0:
		return fmt.Errorf("--ui.interval=%s: must be positive", interval)
	case interval < 100*time.Millisecond:
		return fmt.Errorf("--ui.interval=%s: must be at least 100ms", interval)
	case history < interval:
		return fmt.Errorf("--ui.history=%s: must be at least --ui.interval (%s)", history, interval)
	case history/interval > maxSamples:
		return fmt.Errorf("--ui.history=%s at --ui.interval=%s is %d samples per GPU; at most %d", history, interval, history/interval, maxSamples)
	}
	return nil
}

// maxSamples bounds the history per GPU: 1 day at 1 s (2 MB per GPU).
const maxSamples = 86400
