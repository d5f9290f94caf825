package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPM (Hopper and later). Samples are handles of this library.

//export nvmlGpmQueryDeviceSupport
func nvmlGpmQueryDeviceSupport(device C.uintptr_t, support unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		if support == nil {
			return invalidArgument
		}
		v, r := d.GpmQueryDeviceSupport()
		v.Version = (*nvml.GpmSupport)(support).Version
		return put(support, v, r)
	})
}

//export nvmlGpmSampleAlloc
func nvmlGpmSampleAlloc(sample unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		s, r := l.GpmSampleAlloc()
		return putHandle(sample, s, r)
	})
}

//export nvmlGpmSampleFree
func nvmlGpmSampleFree(sample C.uintptr_t) C.int {
	return onHandle(sample, func(s nvml.GpmSample) C.int { return C.int(s.Free()) })
}

//export nvmlGpmSampleGet
func nvmlGpmSampleGet(device C.uintptr_t, sample C.uintptr_t) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		s, ok := lookup[nvml.GpmSample](sample)
		if !ok {
			return invalidArgument
		}
		return C.int(s.Get(d))
	})
}

//export nvmlGpmMigSampleGet
func nvmlGpmMigSampleGet(device C.uintptr_t, gpuInstanceID C.uint, sample C.uintptr_t) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		s, ok := lookup[nvml.GpmSample](sample)
		if !ok {
			return invalidArgument
		}
		return C.int(s.MigGet(d, int(gpuInstanceID)))
	})
}

// cGpmMetricsGet is the head of nvmlGpmMetricsGet_t; its metrics array
// (NVML_GPM_METRIC_MAX entries, which grows between releases) follows.
type cGpmMetricsGet struct {
	Version    uint32
	NumMetrics uint32
	Sample1    uintptr
	Sample2    uintptr
}

// cGpmMetric is nvmlGpmMetric_t; metricInfo's names are left NULL.
type cGpmMetric struct {
	MetricID   uint32
	NvmlReturn uint32
	Value      float64
	ShortName  uintptr
	LongName   uintptr
	Unit       uintptr
}

//export nvmlGpmMetricsGet
func nvmlGpmMetricsGet(metricsGet unsafe.Pointer) C.int {
	if lib() == nil {
		return uninitialized
	}
	if metricsGet == nil {
		return invalidArgument
	}
	head := (*cGpmMetricsGet)(metricsGet)
	var m nvml.GpmMetricsGetType
	if int(head.NumMetrics) > len(m.Metrics) {
		return invalidArgument
	}
	s1, ok1 := lookup[nvml.GpmSample](C.uintptr_t(head.Sample1))
	s2, ok2 := lookup[nvml.GpmSample](C.uintptr_t(head.Sample2))
	if !ok1 || !ok2 {
		return invalidArgument
	}
	metrics := unsafe.Slice((*cGpmMetric)(unsafe.Add(metricsGet, unsafe.Sizeof(*head))), int(head.NumMetrics))
	m.Version, m.NumMetrics, m.Sample1, m.Sample2 = head.Version, head.NumMetrics, s1, s2
	for i := range metrics {
		m.Metrics[i].MetricId = metrics[i].MetricID
	}
	r := lib().GpmMetricsGet(&m)
	for i := range metrics {
		metrics[i].NvmlReturn = m.Metrics[i].NvmlReturn
		metrics[i].Value = m.Metrics[i].Value
	}
	return C.int(r)
}
