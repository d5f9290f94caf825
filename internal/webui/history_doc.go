package webui

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// HistoryDoc is /api/v1/history: one column per reading, absent readings
// null. Each point is a bucket of BucketSeconds (a whole number of
// intervals), at TimeMilli its start in milliseconds since the epoch,
// aligned to a multiple of its width: utilization, SM utilization and
// power are the bucket's mean, memory and temperature its peak.
type HistoryDoc struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	// MaxSamples is the window, in intervals (--ui.history/--ui.interval).
	MaxSamples int `json:"max_samples"`
	// BucketSeconds is the width of a point; MaxPoints the most points of
	// one series.
	BucketSeconds float64 `json:"bucket_seconds"`
	MaxPoints     int     `json:"max_points"`
	// NewestMilli is the newest sample's time, left out before the first:
	// a page asks ?since=NewestMilli next.
	NewestMilli *int64 `json:"newest_ms,omitempty"`
	// SinceMilli is set when the answer holds only the points with samples
	// newer than it (?since=): such a point replaces the page's point at
	// the same time, and later ones are added. Every series held is listed,
	// with no points when nothing changed; a series not listed is gone.
	SinceMilli *int64        `json:"since_ms,omitempty"`
	GPUs       []GPUSeries   `json:"gpus"`
	Owners     []OwnerSeries `json:"owners"`
	// OwnersDropped counts the owners that got no history because
	// MaxOwners other owners were all seen in the same collection.
	OwnersDropped uint64 `json:"owners_dropped"`
}

// GPUSeries is one GPU's history.
type GPUSeries struct {
	Index              int      `json:"index"`
	UUID               string   `json:"uuid,omitempty"`
	TimeMilli          []int64  `json:"time_ms"`
	UtilizationGPU     readings `json:"utilization_gpu"`
	MemoryUsedBytes    readings `json:"memory_used_bytes"`
	PowerWatts         readings `json:"power_watts"`
	TemperatureCelsius readings `json:"temperature_celsius"`
}

// OwnerSeries is one owner's history, summed over its processes.
type OwnerSeries struct {
	Kind            string   `json:"kind"`
	Name            string   `json:"name"`
	TimeMilli       []int64  `json:"time_ms"`
	MemoryUsedBytes readings `json:"memory_used_bytes"`
	SMUtilization   readings `json:"sm_utilization"`
}

// beforeEncode runs between copying the history and encoding it; tests
// hold it to see what waits for an encoding.
var beforeEncode = func() {}

// HistoryJSON is the history encoded as JSON: all of it for since < 0,
// else the points with samples newer than since (see HistoryDoc). The
// whole history is encoded once per collection, whoever asks. Encoding
// happens outside the recorder's lock.
func (r *Recorder) HistoryJSON(since int64) ([]byte, error) {
	if since >= 0 {
		r.mu.Lock()
		doc := r.history(since)
		r.mu.Unlock()
		beforeEncode()
		return encodeHistory(doc)
	}
	r.encodeMu.Lock()
	defer r.encodeMu.Unlock()
	r.mu.Lock()
	gen := r.generation
	if r.historyJSON != nil && r.historyGen == gen {
		r.mu.Unlock()
		return r.historyJSON, nil
	}
	doc := r.history(-1)
	r.mu.Unlock()
	beforeEncode()
	b, err := encodeHistory(doc)
	if err != nil {
		return nil, err
	}
	r.historyJSON, r.historyGen = b, gen
	return b, nil
}

func encodeHistory(doc HistoryDoc) ([]byte, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// History copies the whole history held.
func (r *Recorder) History() HistoryDoc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.history(-1)
}

// history copies the points in the window, all of them for since < 0 or
// since after the newest sample (a page that saw another gpuwatch, or one
// before a restart), else those with samples newer than since. r.mu is
// held.
func (r *Recorder) history(since int64) HistoryDoc {
	doc := HistoryDoc{IntervalSeconds: r.interval.Seconds(), MaxSamples: r.samples,
		BucketSeconds: float64(r.bucketMilli) / 1000, MaxPoints: r.points,
		GPUs: []GPUSeries{}, Owners: []OwnerSeries{}, OwnersDropped: r.ownersDropped}
	if r.generation == 0 {
		return doc
	}
	newest := r.newestMilli
	doc.NewestMilli = &newest
	// The window is the points that start within its span before the
	// newest sample: exactly the newest samples when a point is one
	// interval, a little less than the span when a point is wider.
	from := r.newestMilli - r.windowMilli() + 1
	if since >= 0 && since <= r.newestMilli {
		doc.SinceMilli = &since
		if since == r.newestMilli {
			from = r.newestMilli + 1 // nothing is newer
		} else {
			from = max(from, bucketStart(since+1, r.bucketMilli))
		}
	}
	for idx, h := range r.gpus {
		starts, points := h.points.since(from)
		g := GPUSeries{Index: idx, UUID: h.uuid, TimeMilli: nonNil(starts),
			UtilizationGPU: make(readings, len(points)), MemoryUsedBytes: make(readings, len(points)),
			PowerWatts: make(readings, len(points)), TemperatureCelsius: make(readings, len(points))}
		for i, p := range points {
			g.UtilizationGPU[i], g.MemoryUsedBytes[i], g.PowerWatts[i], g.TemperatureCelsius[i] =
				p.utilization.value(), p.memoryUsed.value(), p.power.value(), p.temperature.value()
		}
		doc.GPUs = append(doc.GPUs, g)
	}
	slices.SortFunc(doc.GPUs, func(a, b GPUSeries) int { return a.Index - b.Index })
	for _, h := range r.owners {
		starts, points := h.points.since(from)
		o := OwnerSeries{Kind: h.kind, Name: h.name, TimeMilli: nonNil(starts),
			MemoryUsedBytes: make(readings, len(points)), SMUtilization: make(readings, len(points))}
		for i, p := range points {
			o.MemoryUsedBytes[i], o.SMUtilization[i] = p.memoryUsed.value(), p.sm.value()
		}
		doc.Owners = append(doc.Owners, o)
	}
	slices.SortFunc(doc.Owners, func(a, b OwnerSeries) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return doc
}

// nonNil makes an empty column encode as [], not null.
func nonNil(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

// readings is a history column. It encodes itself in one buffer: a day's
// history is about 200 000 values, which encoded one by one (each
// reading's MarshalJSON) cost as many allocations.
type readings []reading

// MarshalJSON writes the column as reading.MarshalJSON writes each value.
func (c readings) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+12*len(c))
	b = append(b, '[')
	for i, r := range c {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendReading(b, r)
	}
	return append(b, ']'), nil
}

// appendReading writes r with the digits a float32 needs, NaN as null.
func appendReading(b []byte, r reading) []byte {
	if f := float64(r); !math.IsNaN(f) && !math.IsInf(f, 0) {
		return strconv.AppendFloat(b, f, 'g', -1, 32)
	}
	return append(b, "null"...)
}
