//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvml.h's functions that answer a list of variable length (process
// lists, retired pages) take an array and its capacity, and answer
// ERROR_INSUFFICIENT_SIZE with the count they need when it is too small.
// go-nvml (v0.13) retries that with no bound, so a driver that keeps
// asking for more runs gpuwatch out of memory or spins a core forever.
// boundedExchange is that exchange with a bound on the calls and on the
// buffer.

// exchangeBounds bounds one exchange.
type exchangeBounds struct {
	tries int    // calls at most
	floor uint32 // the smallest buffer offered after the first call, in entries
	limit uint32 // the largest buffer offered, in entries
}

// fit is a capacity for n entries plus room for entries that appear
// before the next call, within [floor, limit].
func (b exchangeBounds) fit(n uint64) uint32 {
	return uint32(min(max(n+n/4+8, uint64(b.floor)), uint64(b.limit)))
}

// listTooLong is the outcome of a list the driver never let fit.
type listTooLong struct {
	tries int
	asked uint32 // the count the last answer asked for
}

// boundedExchange makes at most b.tries calls, the first with a buffer of
// capacity entries, each later one sized to what the driver asked for
// and never over b.limit, and gives up with ERROR_INSUFFICIENT_SIZE and
// tooLong set. call answers one call: the list when it fits and its
// count, or INSUFFICIENT_SIZE and the count the driver asks for.
func boundedExchange[T any](b exchangeBounds, capacity uint32, call func(capacity uint32) ([]T, uint32, nvml.Return)) (list []T, count uint32, ret nvml.Return, tooLong *listTooLong) {
	var asked uint32
	tries := 0
	for tries < b.tries {
		tries++
		list, count, ret := call(capacity)
		if ret != nvml.ERROR_INSUFFICIENT_SIZE {
			return list, count, ret, nil
		}
		asked = count
		if capacity == b.limit {
			break
		}
		next := b.fit(uint64(count))
		if next <= capacity {
			// The driver asks for no more than it was offered, yet
			// says it is not enough: offer more than it asked.
			next = b.fit(2 * uint64(capacity))
		}
		capacity = next
	}
	return nil, 0, nvml.ERROR_INSUFFICIENT_SIZE, &listTooLong{tries: tries, asked: asked}
}
