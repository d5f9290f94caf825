package webui

import "math"

// The history is kept as it is served: in buckets a whole number of
// intervals wide, aligned to multiples of that width, at most maxPoints of
// them per series. A day at 1 s is then 600 points per chart instead of
// 86 400 samples, both in memory and on the wire, and recording a sample
// costs the same at any window.

// maxPoints bounds the points of one series, the current bucket included.
const maxPoints = 600

// bucketIntervals is how many intervals one bucket spans so that a
// window of samples collections fits in maxPoints buckets: the window's
// complete buckets, plus the one still filling.
func bucketIntervals(samples int) int {
	return max(1, (samples+maxPoints-2)/(maxPoints-1))
}

// meanOf averages the readings present: for ratios (utilization) and
// power, where a bucket's mean is what the interval amounted to.
type meanOf struct {
	sum float64
	n   uint32
}

func (m *meanOf) add(v reading) {
	if !math.IsNaN(float64(v)) {
		m.sum += float64(v)
		m.n++
	}
}

func (m meanOf) value() reading {
	if m.n == 0 {
		return reading(math.NaN())
	}
	return reading(m.sum / float64(m.n))
}

// maxOf keeps the highest reading present: for memory and temperature,
// where the peak is what matters (the headroom left, the hottest moment).
// The zero value is "no reading yet".
type maxOf struct {
	v   reading
	any bool
}

func (m *maxOf) add(v reading) {
	if !math.IsNaN(float64(v)) && (!m.any || v > m.v) {
		m.v, m.any = v, true
	}
}

func (m maxOf) value() reading {
	if !m.any {
		return reading(math.NaN())
	}
	return m.v
}

type gpuBucket struct {
	utilization meanOf
	memoryUsed  maxOf
	power       meanOf
	temperature maxOf
}

func (b *gpuBucket) add(s gpuSample) {
	b.utilization.add(s.Utilization)
	b.memoryUsed.add(s.MemoryUsed)
	b.power.add(s.Power)
	b.temperature.add(s.Temperature)
}

type ownerBucket struct {
	memoryUsed maxOf
	sm         meanOf
}

func (b *ownerBucket) add(s ownerSample) {
	b.memoryUsed.add(s.MemoryUsed)
	b.sm.add(s.SM)
}

// buckets is a fixed-size ring of buckets in time order, each with the
// time it starts; the newest is the one still filling.
type buckets[B any] struct {
	buf    []B
	starts []int64
	next   int // where the next bucket goes
	count  int
}

func newBuckets[B any](capacity int) *buckets[B] {
	capacity = max(1, capacity)
	return &buckets[B]{buf: make([]B, capacity), starts: make([]int64, capacity)}
}

// at returns the bucket starting at startMilli: the newest one when it
// starts there, else a new empty one (dropping the oldest when full). A
// sample from before the newest bucket (the wall clock stepped back)
// joins the newest rather than reorder the series.
func (r *buckets[B]) at(startMilli int64) *B {
	if r.count > 0 {
		newest := (r.next - 1 + len(r.buf)) % len(r.buf)
		if r.starts[newest] >= startMilli {
			return &r.buf[newest]
		}
	}
	var zero B
	i := r.next
	r.buf[i], r.starts[i] = zero, startMilli
	r.next = (r.next + 1) % len(r.buf)
	r.count = min(r.count+1, len(r.buf))
	return &r.buf[i]
}

// since copies, oldest first, the buckets that start at or after
// fromMilli, with their starts.
func (r *buckets[B]) since(fromMilli int64) (starts []int64, values []B) {
	first := (r.next - r.count + len(r.buf)) % len(r.buf)
	for i := range r.count {
		j := (first + i) % len(r.buf)
		if r.starts[j] >= fromMilli {
			starts, values = append(starts, r.starts[j]), append(values, r.buf[j])
		}
	}
	return starts, values
}

// bucketStart is the start of the bucket of width widthMilli holding ms.
func bucketStart(ms, widthMilli int64) int64 {
	return ms - ((ms%widthMilli)+widthMilli)%widthMilli
}
