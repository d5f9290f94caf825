//go:build cgo

package nvmlbackend

// The accounting's reader (readMode.processSamples) reads at every tick
// for one consumer, which is done with a snapshot before it reads the
// next. Its per-process slices (the samples, the process lists) go into
// two buffers that take turns instead of new ones: what a read hands out
// stands until the read after the next one begins. Fresh slices made most
// of the accounting's garbage (bench/RESULTS.md).

// alternating is a pair of buffers that take turns.
type alternating[T any] struct {
	bufs [2][]T
	turn int
}

// take is the buffer whose turn it is, emptied (never nil), with room for
// n; hand it back with keep, which passes the turn on.
func (a *alternating[T]) take(n int) []T {
	buf := a.bufs[a.turn][:0]
	if buf == nil || cap(buf) < n {
		buf = make([]T, 0, n)
	}
	return buf
}

// keep stores buf, filled (and perhaps grown) since take, as the buffer of
// this turn, and passes the turn on.
func (a *alternating[T]) keep(buf []T) []T {
	a.bufs[a.turn] = buf
	a.turn ^= 1
	return buf
}
