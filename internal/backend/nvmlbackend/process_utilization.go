//go:build cgo

package nvmlbackend

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Per-process utilization samples are read into a buffer the device keeps
// from one read to the next, in one call of the driver while they fit.
// go-nvml's GetProcessUtilization calls the driver twice (the first time
// for the count) and allocates a new array at every read: two calls and
// an array per GPU at every accounting tick, with hundreds of processes
// per GPU the largest part of a tick's garbage (bench/RESULTS.md). Like the process
// lists, the exchange is bounded (boundedExchange): go-nvml's handles are
// called through the C function (process_utilization_cgo.go), the
// simulator's through its sized form of it; other handles (go-nvml's mocks,
// test wrappers) through the Go method.

// processUtilizationBounds bound one read's exchange: the first buffer
// fits the last read's samples, and a read of the whole driver buffer
// (every sample of every process, as some drivers answer) fits within
// the limit.
var processUtilizationBounds = exchangeBounds{tries: 3, floor: 64, limit: maxProcessListEntries}

// sizedUtilizationSampler answers one call of the C function
// nvmlDeviceGetProcessUtilization with a buffer: the count of samples
// written into buf, or ERROR_INSUFFICIENT_SIZE and the count needed. The
// simulator's device handles are sizedUtilizationSamplers
// (sim.ProcessUtilizationSized).
type sizedUtilizationSampler interface {
	ProcessUtilizationSized(buf []nvml.ProcessUtilizationSample, lastSeen uint64) (uint32, nvml.Return)
}

// utilizationCall is one call of nvmlDeviceGetProcessUtilization into buf.
type utilizationCall func(buf []nvml.ProcessUtilizationSample, lastSeen uint64) (uint32, nvml.Return)

// sampleProcessUtilization reads the samples newer than since. The answer
// lives in the device's buffer until its next read: use it within this one.
// tooLong is set when the driver answered INSUFFICIENT_SIZE to every call.
func (d *deviceReader) sampleProcessUtilization(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return, *listTooLong) {
	var call utilizationCall
	switch h := d.dev.(type) {
	case sizedUtilizationSampler:
		call = h.ProcessUtilizationSized
	default:
		c, ok := cProcessUtilization(d.dev)
		if !ok {
			samples, ret := d.dev.GetProcessUtilization(since)
			if ret == nvml.ERROR_INSUFFICIENT_SIZE {
				// go-nvml sizes the buffer, then reads; samples that
				// arrived in between make the read fail. Once more.
				samples, ret = d.dev.GetProcessUtilization(since)
			}
			return samples, ret, nil
		}
		call = c
	}
	st := d.st
	samples, count, ret, tooLong := boundedExchange(processUtilizationBounds, processUtilizationBounds.fit(uint64(st.sampleHint)),
		func(capacity uint32) ([]nvml.ProcessUtilizationSample, uint32, nvml.Return) {
			if uint32(len(st.sampleBuf)) < capacity {
				st.sampleBuf = make([]nvml.ProcessUtilizationSample, capacity)
			}
			buf := st.sampleBuf[:capacity]
			n, ret := call(buf, since)
			if ret != nvml.SUCCESS {
				return nil, n, ret
			}
			return buf[:min(n, capacity)], n, ret
		})
	if ret == nvml.SUCCESS {
		st.sampleHint = int(count)
	}
	return samples, ret, tooLong
}

// samplesTooLong files a read whose samples never fit as the processes'
// error.
func (d *deviceReader) samplesTooLong(ret nvml.Return, tooLong *listTooLong) {
	d.out.stats.fail(gProcesses, fmt.Errorf("gpu %d: GetProcessUtilization: %w to all of %d calls (the driver last asked for %d samples; at most %d are offered): its per-process utilization is unknown",
		d.index, nvmlErr(ret), tooLong.tries, tooLong.asked, processUtilizationBounds.limit))
}
