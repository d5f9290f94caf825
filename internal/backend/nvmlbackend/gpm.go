//go:build cgo

package nvmlbackend

import (
	"context"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// GPM (GPU Performance Monitoring, Hopper and later) reports utilization
// between two samples taken by the caller. nvml.h wants more than 100 ms
// between them; a window that short is also mostly noise. So the reader
// keeps, per device (and per MIG GPU instance), the sample that opened the
// current window, and closes the window only once it spans gpmMinWindow.
// A read that comes sooner (the read right after start, a second
// Prometheus server scraping a moment after the first) reports the last
// complete window again instead of a short one.

// gpmMinWindow is the shortest interval a GPM reading covers.
const gpmMinWindow = time.Second

// mibPerSecond converts GPM's MiB/s bandwidth metrics to bytes per second.
const mibPerSecond = 1 << 20

// gpmMetrics are the metrics read, where each goes, and the factor from
// NVML's unit (percent, MiB/s) to the snapshot's (ratio, bytes/s).
// wholeGPU metrics mean nothing for a MIG instance and are not asked there.
var gpmMetrics = [...]struct {
	id       nvml.GpmMetricId
	scale    float64
	wholeGPU bool
	field    func(*snapshot.GPM) *snapshot.Opt[float64]
}{
	{nvml.GPM_METRIC_SM_UTIL, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.SMActive }},
	{nvml.GPM_METRIC_SM_OCCUPANCY, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.SMOccupancy }},
	{nvml.GPM_METRIC_ANY_TENSOR_UTIL, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.TensorActive }},
	{nvml.GPM_METRIC_DRAM_BW_UTIL, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.DRAMActive }},
	{nvml.GPM_METRIC_FP16_UTIL, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.FP16Active }},
	{nvml.GPM_METRIC_FP32_UTIL, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.FP32Active }},
	{nvml.GPM_METRIC_FP64_UTIL, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.FP64Active }},
	{nvml.GPM_METRIC_GRAPHICS_UTIL, 0.01, false, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.GraphicsActive }},
	{nvml.GPM_METRIC_PCIE_TX_PER_SEC, mibPerSecond, true, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.PCIeTxBytesPerSecond }},
	{nvml.GPM_METRIC_PCIE_RX_PER_SEC, mibPerSecond, true, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.PCIeRxBytesPerSecond }},
	{nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, mibPerSecond, true, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.NVLinkTxBytesPerSecond }},
	{nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, mibPerSecond, true, func(g *snapshot.GPM) *snapshot.Opt[float64] { return &g.NVLinkRxBytesPerSecond }},
}

// asksGPM says whether a read asks the driver for metric id: a metric of
// the whole GPU only of a whole GPU, and with AccountingOptions.GPMOnlyMIG the SM
// activity alone.
func (r *Reader) asksGPM(id nvml.GpmMetricId, ofWholeGPU, wholeGPU bool) bool {
	if r.gpmOnlyMIG {
		return id == nvml.GPM_METRIC_SM_UTIL
	}
	return wholeGPU || !ofWholeGPU
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
	// When prev was taken: on the reader's clock and on the monotonic one.
	prevAt, prevMono time.Time
	// last is the newest complete window's reading.
	last      snapshot.GPM
	lastValid bool
	// computed is gpmCompute's scratch: the metrics are set through a
	// table of field accessors, which would move a local reading to the
	// heap at every window of every GPU and MIG instance.
	computed snapshot.GPM
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
	if !d.gpmSupported() {
		return
	}
	if enabled, _ := d.migMode(gGPM); enabled {
		d.readMIGGPM()
	} else if !d.r.gpmOnlyMIG {
		d.readDeviceGPM()
	}
}

// gpmSupported asks the device once whether it has GPM (Hopper and later);
// a failed question is asked again at the next read.
func (d *deviceReader) gpmSupported() bool {
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
			return false
		}
	}
	return gs.support == gpmSupported
}

// readDeviceGPM fills Device.GPM of a GPU without MIG.
func (d *deviceReader) readDeviceGPM() {
	if values, ok := d.gpmStep(&d.st.gpm.device, "GpmSampleGet", true, func(sample nvml.GpmSample) nvml.Return {
		return d.dev.GpmSampleGet(sample)
	}); ok {
		d.out.device.GPM = values
	}
}

// readMIGGPM fills the GPM of each MIG instance, sampled once per GPU
// instance, and frees the samples of GPU instances that no longer exist.
func (d *deviceReader) readMIGGPM() {
	if !d.can(callGpmMigSampleGet) {
		return
	}
	gs := &d.st.gpm
	if gs.mig == nil {
		gs.mig = make(map[int]*gpmSampler)
	}
	for _, s := range gs.mig {
		s.seen = false
	}
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
		values, ok := d.gpmStep(s, "GpmMigSampleGet", false, func(sample nvml.GpmSample) nvml.Return {
			return d.dev.GpmMigSampleGet(gi, sample)
		})
		if ok {
			d.setInstanceGPM(gi, values)
		}
	}
	for gi, s := range gs.mig {
		if !s.seen && d.gone == "" {
			s.free()
			delete(gs.mig, gi)
		}
	}
}

// setInstanceGPM gives values to every compute instance of GPU instance gi.
func (d *deviceReader) setInstanceGPM(gi int, values snapshot.GPM) {
	instances := d.out.device.MIGInstances
	for i := range instances {
		if instances[i].GPUInstanceID == gi {
			instances[i].GPM = values
		}
	}
}

// gpmStep returns the metrics of the newest window of at least
// gpmMinWindow: it closes the current window with a new sample when it is
// long enough, and otherwise returns the last complete one. ok is false
// until a first window completed, and on failure.
func (d *deviceReader) gpmStep(s *gpmSampler, call string, wholeGPU bool, take func(nvml.GpmSample) nvml.Return) (values snapshot.GPM, ok bool) {
	if d.st.retired {
		return values, false
	}
	if s.primed && d.r.gpmWindow(s.prevAt, s.prevMono) < gpmMinWindow {
		return s.last, s.lastValid
	}
	if !d.allocSample(&s.cur) || !d.allocSample(&s.prev) {
		return values, false
	}
	at, mono := d.r.now(), time.Now()
	if !d.ok(gGPM, call, take(s.cur)) {
		return values, false
	}
	if s.primed && d.gpmCompute(s.prev, s.cur, wholeGPU, &s.computed) {
		s.last, s.lastValid = s.computed, true
	}
	s.prev, s.cur = s.cur, s.prev
	s.primed, s.prevAt, s.prevMono = true, at, mono
	return s.last, s.lastValid
}

// gpmWindow is how long ago a window opened. In production both clocks are
// the wall clock; under the simulator Options.Now is simulated time, which
// tests move by hand, while the driver's counters (and the simulator's)
// also see real time pass.
func (r *Reader) gpmWindow(openedAt, openedMono time.Time) time.Duration {
	return max(r.now().Sub(openedAt), time.Since(openedMono))
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

// gpmCompute asks NVML for the metrics between two samples, into values;
// percentages become ratios. ok says any metric was read.
func (d *deviceReader) gpmCompute(older, newer nvml.GpmSample, wholeGPU bool, values *snapshot.GPM) (ok bool) {
	*values = snapshot.GPM{}
	req := gpmRequests.Get().(*nvml.GpmMetricsGetType)
	defer gpmRequests.Put(req)
	req.Sample1, req.Sample2 = older, newer
	asked := req.Metrics[:0]
	for _, m := range gpmMetrics {
		if d.r.asksGPM(m.id, m.wholeGPU, wholeGPU) {
			asked = append(asked, nvml.GpmMetric{MetricId: uint32(m.id)})
		}
	}
	req.NumMetrics = uint32(len(asked))
	ret := d.r.lib.GpmMetricsGet(req)
	// Do not keep the samples reachable from the pooled request.
	defer func() { req.Sample1, req.Sample2 = nil, nil }()
	if !d.ok(gGPM, "GpmMetricsGet", ret) {
		return false
	}
	i := 0
	for _, m := range gpmMetrics {
		if !d.r.asksGPM(m.id, m.wholeGPU, wholeGPU) {
			continue
		}
		result := req.Metrics[i]
		i++
		if d.ok(gGPM, "GpmMetricsGet(metric)", nvml.Return(result.NvmlReturn)) {
			*m.field(values) = snapshot.Some(result.Value * m.scale)
			ok = true
		}
	}
	return ok
}

// primeGPM takes the first sample of every GPM-capable device at start, so
// that the first Read already reports GPM values. Failures are only logged:
// Read retries, and reports them. It returns the devices that did not
// answer within timeout (see callEach).
func (r *Reader) primeGPM(timeout time.Duration) (hung []int) {
	if !r.caps.gpm() {
		return nil
	}
	count, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		r.log.Warn("gpm: cannot count devices", "err", nvmlErr(ret))
		return nil
	}
	primed := make([]bool, count)
	errs := make([]error, count)
	devices := allDevices(count)
	outcomes := r.blocked.callEach(timeout, devices, func(i int) {
		dev, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			return
		}
		st := r.state(i, uuid)
		st.mu.Lock()
		defer st.mu.Unlock()
		var out deviceResult
		d := &deviceReader{r: r, index: i, dev: dev, st: st, out: &out}
		d.run(gGPM, d.readGPM)
		primed[i] = st.gpm.device.primed || len(st.gpm.mig) > 0
		errs[i] = out.stats[gGPM].err
	})
	anyPrimed := false
	for i, o := range outcomes {
		if o != callAnswered {
			continue
		}
		anyPrimed = anyPrimed || primed[i]
		if errs[i] != nil {
			r.log.Warn("gpm: cannot take the first sample", "gpu", i, "err", errs[i])
		}
	}
	if anyPrimed {
		// Taken after the last sample, so every primed window spans it.
		r.mu.Lock()
		r.gpmFirstWindow = time.Now().Add(gpmMinWindow)
		r.mu.Unlock()
	}
	return unanswered(devices, outcomes)
}

// waitFirstGPMWindow makes the first Read after New wait, within ctx, until
// the GPM windows opened at start span gpmMinWindow (Options.WaitForGPM),
// so that a one-shot reading has GPM values. Later Reads never wait.
func (r *Reader) waitFirstGPMWindow(ctx context.Context) {
	r.mu.Lock()
	until := r.gpmFirstWindow
	r.gpmFirstWindow = time.Time{}
	r.mu.Unlock()
	if !r.waitForGPM || until.IsZero() {
		return
	}
	wait := time.Until(until)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
