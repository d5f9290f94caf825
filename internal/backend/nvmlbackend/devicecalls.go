//go:build cgo

package nvmlbackend

import "time"

// callOutcome is what became of one device's call in callEach.
type callOutcome int

const (
	// callAnswered: the call returned before the timeout.
	callAnswered callOutcome = iota
	// callAbandoned: the call was still blocked at the timeout; it is
	// left to return on its own, and the device is treated as hung
	// until it does.
	callAbandoned
	// callSkipped: an earlier call on the device is still blocked, so
	// none was started.
	callSkipped
)

// callEach runs call(i) for every device index in indices, all at once and
// each in its own goroutine, and waits until every call has returned or
// timeout has passed. It exists for the per-device work outside Read (the
// first GPM sample, XID registration): a GPU that hangs from its first NVML
// call must not keep gpuwatch from starting, and a hung GPU must not get a
// second blocked call, whichever code path makes it.
//
// The calls share the blocked-read bookkeeping with Read: a device whose
// earlier call is still blocked is skipped, and one abandoned here is
// reported not_answering by Read, without a call, until its call returns.
//
// call(i) may still be running after callEach returns for a device whose
// outcome is not callAnswered, so it must only write to what belongs to
// device i, and the caller must only read that for answered devices.
//
// outcomes[k] is the outcome for indices[k].
func (b *blockedReads) callEach(timeout time.Duration, indices []int, call func(i int)) (outcomes []callOutcome) {
	outcomes = make([]callOutcome, len(indices))
	done := make(chan int, len(indices)) // buffered: an abandoned call never blocks on it
	pending := make(map[int]bool, len(indices))
	for k, i := range indices {
		if !b.start(i, time.Now()) {
			outcomes[k] = callSkipped
			continue
		}
		pending[k] = true
		go func() {
			defer b.finish(i)
			call(i)
			done <- k
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(pending) > 0 {
		select {
		case k := <-done:
			delete(pending, k)
		case <-timer.C:
			for k := range pending {
				b.abandon(indices[k])
				outcomes[k] = callAbandoned
			}
			return outcomes
		}
	}
	return outcomes
}

// unanswered lists the indices whose outcome is not callAnswered.
func unanswered(indices []int, outcomes []callOutcome) []int {
	var out []int
	for k, o := range outcomes {
		if o != callAnswered {
			out = append(out, indices[k])
		}
	}
	return out
}

// allDevices is 0..count-1.
func allDevices(count int) []int {
	indices := make([]int, count)
	for i := range indices {
		indices[i] = i
	}
	return indices
}
