package nvmlbackend

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// GPM (GPU Performance Monitoring, Hopper and later) reports utilization
// between two samples taken by the caller. The reader keeps the previous
// sample of every device (and of every MIG GPU instance) and, on each read,
// takes a new one and asks NVML for the metrics between the two.

// gpmMetrics are the metrics read, and where each goes.
var gpmMetrics = [...]struct {
	id    nvml.GpmMetricId
	field func(*snapshot.GPM) *snapshot.Opt[float64]
}{
	{nvml.GPM_METRIC_SM_UTIL, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.SMActive }},
	{nvml.GPM_METRIC_SM_OCCUPANCY, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.SMOccupancy }},
	{nvml.GPM_METRIC_ANY_TENSOR_UTIL, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.TensorActive }},
	{nvml.GPM_METRIC_DRAM_BW_UTIL, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.DRAMActive }},
	{nvml.GPM_METRIC_FP16_UTIL, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.FP16Active }},
	{nvml.GPM_METRIC_FP32_UTIL, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.FP32Active }},
	{nvml.GPM_METRIC_FP64_UTIL, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.FP64Active }},
}

// gpmRequests recycles the request struct: it holds 333 metric slots
// (about 16 KiB) and is only needed for the length of one call.
var gpmRequests = sync.Pool{New: func() any { return new(nvml.GpmMetricsGetType) }}

// gpmSampler is the sample pair of one device or GPU instance. After a
// successful step prev holds the newest sample and cur is free for the next.
type gpmSampler struct {
	prev, cur nvml.GpmSample
	primed    bool // prev holds a sample
	seen      bool // used in the current read; unused samplers are freed
}

type gpmSupport int8

const (
	gpmUnknown gpmSupport = iota
	gpmSupported
	gpmUnsupported
)

// gpmDeviceState lives in deviceState and is guarded by its mutex.
type gpmDeviceState struct {
	support gpmSupport
	device  gpmSampler
	mig     map[int]*gpmSampler // by GPU instance id
}

func (s *gpmSampler) free() {
	freeSample(s.prev)
	freeSample(s.cur)
	*s = gpmSampler{}
}

// freeSample frees one sample; a panicking binding must not stop Close.
func freeSample(sample nvml.GpmSample) {
	if sample == nil {
		return
	}
	defer func() { _ = recover() }()
	sample.Free()
}

func (g *gpmDeviceState) free() {
	g.device.free()
	for _, s := range g.mig {
		s.free()
	}
	g.mig = nil
}

// readGPM fills Device.GPM, or, on a MIG-enabled GPU, the GPM of each MIG
// instance (GPM is sampled per GPU instance, so the compute instances of one
// GPU instance share its values).
func (d *deviceReader) readGPM() {
	if !d.r.caps.gpm() {
		return // the driver predates GPM (R520)
	}
	gs := &d.st.gpm
	if gs.support == gpmUnknown {
		support, ret := d.dev.GpmQueryDeviceSupport()
		switch {
		case ret == nvml.SUCCESS && support.IsSupportedDevice != 0:
			gs.support = gpmSupported
		case ret == nvml.SUCCESS || classify(ret) == absent:
			gs.support = gpmUnsupported
		default:
			d.ok(gGPM, "GpmQueryDeviceSupport", ret)
			return
		}
	}
	if gs.support != gpmSupported {
		return
	}

	if enabled, _ := d.migMode(gGPM); !enabled {
		if values, ok := d.gpmStep(&gs.device, "GpmSampleGet", func(sample nvml.GpmSample) nvml.Return {
			return d.dev.GpmSampleGet(sample)
		}); ok {
			d.out.device.GPM = values
		}
		return
	}

	if !d.can(callGpmMigSampleGet) {
		return
	}
	if gs.mig == nil {
		gs.mig = make(map[int]*gpmSampler)
	}
	for _, s := range gs.mig {
		s.seen = false
	}
	instances := d.out.device.MIGInstances
	for _, m := range d.migDevices(gGPM) {
		gi := m.gpuInstanceID
		s := gs.mig[gi]
		if s == nil {
			s = &gpmSampler{}
			gs.mig[gi] = s
		}
		if s.seen {
			continue // another compute instance of the same GPU instance
		}
		s.seen = true
		values, ok := d.gpmStep(s, "GpmMigSampleGet", func(sample nvml.GpmSample) nvml.Return {
			return d.dev.GpmMigSampleGet(gi, sample)
		})
		if !ok {
			continue
		}
		for i := range instances {
			if instances[i].GPUInstanceID == gi {
				instances[i].GPM = values
			}
		}
	}
	// Free the samples of GPU instances that no longer exist.
	for gi, s := range gs.mig {
		if !s.seen && d.gone == "" {
			s.free()
			delete(gs.mig, gi)
		}
	}
}

// gpmStep takes a new sample with take and returns the metrics since the
// previous one. ok is false on the first step (there is nothing to compare
// with yet) and on failure.
func (d *deviceReader) gpmStep(s *gpmSampler, call string, take func(nvml.GpmSample) nvml.Return) (values snapshot.GPM, ok bool) {
	if d.st.retired {
		return values, false
	}
	if !d.allocSample(&s.cur) || !d.allocSample(&s.prev) {
		return values, false
	}
	if !d.ok(gGPM, call, take(s.cur)) {
		return values, false
	}
	if !s.primed {
		s.prev, s.cur = s.cur, s.prev
		s.primed = true
		return values, false
	}
	values, ok = d.gpmCompute(s.prev, s.cur)
	s.prev, s.cur = s.cur, s.prev
	return values, ok
}

func (d *deviceReader) allocSample(slot *nvml.GpmSample) bool {
	if *slot != nil {
		return true
	}
	sample, ret := d.r.lib.GpmSampleAlloc()
	if !d.ok(gGPM, "GpmSampleAlloc", ret) {
		return false
	}
	*slot = sample
	return true
}

// gpmCompute asks NVML for the metrics between two samples; percentages
// become ratios.
func (d *deviceReader) gpmCompute(older, newer nvml.GpmSample) (values snapshot.GPM, ok bool) {
	req := gpmRequests.Get().(*nvml.GpmMetricsGetType)
	defer gpmRequests.Put(req)
	req.NumMetrics = uint32(len(gpmMetrics))
	req.Sample1, req.Sample2 = older, newer
	for i, m := range gpmMetrics {
		req.Metrics[i] = nvml.GpmMetric{MetricId: uint32(m.id)}
	}
	ret := d.r.lib.GpmMetricsGet(req)
	// Do not keep the samples reachable from the pooled request.
	defer func() { req.Sample1, req.Sample2 = nil, nil }()
	if !d.ok(gGPM, "GpmMetricsGet", ret) {
		return values, false
	}
	for i, m := range gpmMetrics {
		result := req.Metrics[i]
		if d.ok(gGPM, "GpmMetricsGet(metric)", nvml.Return(result.NvmlReturn)) {
			*m.field(&values) = snapshot.Some(result.Value / 100)
			ok = true
		}
	}
	return values, ok
}

// primeGPM takes the first sample of every GPM-capable device at start, so
// that the first Read already reports GPM values. Failures are only logged:
// Read retries, and reports them.
func (r *Reader) primeGPM() {
	if !r.caps.gpm() {
		return
	}
	count, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		r.log.Warn("gpm: cannot count devices", "err", ret)
		return
	}
	for i := range count {
		dev, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		st := r.state(i, uuid)
		st.mu.Lock()
		var out deviceResult
		d := &deviceReader{r: r, index: i, dev: dev, st: st, out: &out}
		d.run(gGPM, d.readGPM)
		st.mu.Unlock()
		if err := out.stats[gGPM].err; err != nil {
			r.log.Warn("gpm: cannot take the first sample", "gpu", i, "err", err)
		}
	}
}
