package webui

import "sync"

// Ring keeps the newest Cap values pushed into it; older ones are
// overwritten, so its memory is fixed from the start.
type Ring[T any] struct {
	mu    sync.Mutex
	buf   []T
	next  int // where the next value goes
	count int
}

// NewRing makes a ring holding at most capacity values (at least 1).
func NewRing[T any](capacity int) *Ring[T] {
	if capacity < 1 {
		capacity = 1
	}
	return &Ring[T]{buf: make([]T, capacity)}
}

// Push adds v, dropping the oldest value when the ring is full.
func (r *Ring[T]) Push(v T) {
	r.mu.Lock()
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.count < len(r.buf) {
		r.count++
	}
	r.mu.Unlock()
}

// Values returns a copy of the held values, oldest first.
func (r *Ring[T]) Values() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, 0, r.count)
	start := (r.next - r.count + len(r.buf)) % len(r.buf)
	for i := range r.count {
		out = append(out, r.buf[(start+i)%len(r.buf)])
	}
	return out
}

// Len is the number of values held.
func (r *Ring[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Cap is the most values the ring holds.
func (r *Ring[T]) Cap() int { return len(r.buf) }
