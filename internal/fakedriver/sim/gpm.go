//go:build cgo

package sim

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPM (GPU Performance Monitoring, Hopper and later). A reader allocates
// two samples, fills them with GpmSampleGet some time apart, and asks
// GpmMetricsGet for metrics over the interval between them. The simulator
// records, in each sample, the device and the simulated time; metrics are
// the exact averages of the activity model over the interval (the
// instantaneous value when both samples were taken at the same simulated
// time, as with a pinned clock).

// gpmSample implements nvml.GpmSample.
type gpmSample struct {
	sim *Sim

	mu    sync.Mutex
	dev   *device
	giID  int           // GPU instance for MigGet, -1 for the whole device
	at    time.Duration // simulated time of the sample
	real  time.Time     // real time of the sample: the counters run in it too
	taken bool
	freed bool
}

// gpmMinInterval is what nvml.h asks between two samples: "greater than
// 100ms due to the sampling rate of the hardware". Over a shorter interval
// the simulated counters have not moved: every metric reads 0.
const gpmMinInterval = 100 * time.Millisecond

var _ nvml.GpmSample = (*gpmSample)(nil)

func (s *Sim) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) {
	if !s.initialized() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	return &gpmSample{sim: s, giID: -1}, nvml.SUCCESS
}

func (s *Sim) GpmSampleFree(sample nvml.GpmSample) nvml.Return {
	if sample == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return sample.Free()
}

func (s *Sim) GpmSampleGet(dev nvml.Device, sample nvml.GpmSample) nvml.Return {
	if sample == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return sample.Get(dev)
}

func (s *Sim) GpmMigSampleGet(dev nvml.Device, gpuInstanceID int, sample nvml.GpmSample) nvml.Return {
	if sample == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return sample.MigGet(dev, gpuInstanceID)
}

func (s *Sim) GpmQueryDeviceSupport(dev nvml.Device) (nvml.GpmSupport, nvml.Return) {
	if dev == nil {
		return nvml.GpmSupport{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GpmQueryDeviceSupport()
}

func (g *gpmSample) Free() nvml.Return {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	g.freed = true
	return nvml.SUCCESS
}

func (g *gpmSample) Get(dev nvml.Device) nvml.Return { return g.take(dev, -1) }

func (g *gpmSample) MigGet(dev nvml.Device, gpuInstanceID int) nvml.Return {
	return g.take(dev, gpuInstanceID)
}

func (g *gpmSample) take(dev nvml.Device, giID int) nvml.Return {
	d, ok := dev.(*device)
	if !ok || d == nil || d.sim != g.sim {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	e, r := d.begin(featGPM)
	if r != nvml.SUCCESS {
		return r
	}
	if giID >= 0 {
		if !d.migEnabled {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		found := false
		for _, gi := range d.gpuInsts {
			found = found || gi.id == giID
		}
		if !found {
			return nvml.ERROR_NOT_FOUND
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	g.dev, g.giID, g.at, g.real, g.taken = d, giID, e, time.Now(), true
	return nvml.SUCCESS
}

func (g *gpmSample) snapshot() (d *device, giID int, at time.Duration, real time.Time, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dev, g.giID, g.at, g.real, g.taken && !g.freed
}

// GpmQueryDeviceSupport answers SUCCESS on every device, with
// IsSupportedDevice 1 on Hopper and 0 elsewhere, as NVML does.
func (d *device) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return nvml.GpmSupport{}, r
	}
	out := nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION}
	if d.features.has(featGPM) {
		out.IsSupportedDevice = 1
	}
	return out, r
}

func (d *device) GpmSampleGet(sample nvml.GpmSample) nvml.Return {
	if sample == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return sample.Get(d)
}

func (d *device) GpmMigSampleGet(gpuInstanceID int, sample nvml.GpmSample) nvml.Return {
	if sample == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return sample.MigGet(d, gpuInstanceID)
}

// GPM metric shares: what fraction of SM activity each pipe shows, for a
// mixed-precision training-like load.
const (
	gpmOccupancyShare = 0.62
	gpmTensorShare    = 0.48
	gpmFP16Share      = 0.40
	gpmFP32Share      = 0.12
	gpmFP64Share      = 0.02
)

// GpmMetricsGet fills Metrics[0:NumMetrics] from the two samples: Value in
// percent and NvmlReturn per metric.
func (s *Sim) GpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	if !s.initialized() {
		return nvml.ERROR_UNINITIALIZED
	}
	if m == nil || int(m.NumMetrics) > len(m.Metrics) {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	w, r := gpmWindowOf(m)
	if r != nvml.SUCCESS {
		return r
	}
	m.Version = nvml.GPM_METRICS_GET_VERSION
	for i := range m.NumMetrics {
		w.fill(&m.Metrics[i])
	}
	return nvml.SUCCESS
}

// gpmWindow is what two GPM samples of one GPU (or GPU instance) measured.
type gpmWindow struct {
	d      *device
	gi     int     // GPU instance, or -1 for the whole GPU
	t1, t2 float64 // simulated seconds, t1 <= t2
	// measured is false when the samples are too close on both clocks:
	// then every metric reads 0, as NVML's do.
	measured  bool
	util, mem float64
}

// gpmWindowOf checks that the two samples belong together and measures
// the activity between them.
func gpmWindowOf(m *nvml.GpmMetricsGetType) (gpmWindow, nvml.Return) {
	s1, ok1 := m.Sample1.(*gpmSample)
	s2, ok2 := m.Sample2.(*gpmSample)
	if !ok1 || !ok2 || s1 == nil || s2 == nil {
		return gpmWindow{}, nvml.ERROR_INVALID_ARGUMENT
	}
	d1, gi1, t1, real1, ok1 := s1.snapshot()
	d2, gi2, t2, real2, ok2 := s2.snapshot()
	if !ok1 || !ok2 || d1 != d2 || gi1 != gi2 || s1 == s2 {
		return gpmWindow{}, nvml.ERROR_INVALID_ARGUMENT
	}
	if t2 < t1 {
		t1, t2 = t2, t1
	}
	realSpan := real2.Sub(real1)
	if realSpan < 0 {
		realSpan = -realSpan
	}
	w := gpmWindow{d: d1, gi: gi1, t1: seconds(t1), t2: seconds(t2), measured: max(realSpan, t2-t1) >= gpmMinInterval}
	w.util, w.mem = d1.averageActivity(w.t1, w.t2)
	if gi1 >= 0 {
		w.util *= d1.giShare(gi1)
		w.mem *= d1.giShare(gi1)
	}
	return w, nvml.SUCCESS
}

// gpmShares are, per activity metric, its share of the SM (or, for DRAM,
// memory) activity.
var gpmShares = map[nvml.GpmMetricId]struct {
	share  float64
	memory bool
}{
	nvml.GPM_METRIC_GRAPHICS_UTIL:   {1, false},
	nvml.GPM_METRIC_SM_UTIL:         {1, false},
	nvml.GPM_METRIC_SM_OCCUPANCY:    {gpmOccupancyShare, false},
	nvml.GPM_METRIC_ANY_TENSOR_UTIL: {gpmTensorShare, false},
	nvml.GPM_METRIC_DRAM_BW_UTIL:    {1, true},
	nvml.GPM_METRIC_FP16_UTIL:       {gpmFP16Share, false},
	nvml.GPM_METRIC_FP32_UTIL:       {gpmFP32Share, false},
	nvml.GPM_METRIC_FP64_UTIL:       {gpmFP64Share, false},
}

// fill answers one metric: a byte rate (PCIe, NVLink) in MiB/s, an
// activity in percent, or NOT_SUPPORTED.
func (w gpmWindow) fill(metric *nvml.GpmMetric) {
	id := nvml.GpmMetricId(metric.MetricId)
	notSupported := func() {
		metric.Value = 0
		metric.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
	}
	if rate, known := w.d.gpmRate(id, w.gi, w.t1, w.t2); known {
		if rate < 0 {
			notSupported()
			return
		}
		if !w.measured {
			rate = 0
		}
		metric.Value = rate / mib
		metric.NvmlReturn = uint32(nvml.SUCCESS)
		return
	}
	s, ok := gpmShares[id]
	if !ok {
		notSupported()
		return
	}
	ratio := s.share * w.util
	if s.memory {
		ratio = s.share * w.mem
	}
	if !w.measured {
		ratio = 0
	}
	metric.Value = 100 * ratio
	metric.NvmlReturn = uint32(nvml.SUCCESS)
}

// averageActivity is the mean utilization and memory utilization over
// [t1, t2] seconds, or the value at t1 when the interval is empty.
func (d *device) averageActivity(t1, t2 float64) (util, mem float64) {
	if t2 <= t1 {
		return d.act.util(t1), d.act.memUtil(t1)
	}
	span := t2 - t1
	return (d.act.utilIntegral(t2) - d.act.utilIntegral(t1)) / span,
		(d.act.memUtilIntegral(t2) - d.act.memUtilIntegral(t1)) / span
}

// giShare is the part of the device's activity that happens in one GPU
// instance, scaled to that instance's size (so a lone busy 1g instance
// reads as busy, not as 1/7 busy).
func (d *device) giShare(giID int) float64 {
	own, all := d.giWeights.own[giID], d.giWeights.all
	var slices uint32
	for _, gi := range d.gpuInsts {
		if gi.id == giID {
			slices = gi.info.SliceCount
		}
	}
	if all == 0 || slices == 0 {
		return 0
	}
	return min(1, own/all*migTotalSlices/float64(slices))
}

// giWeights are the MIG processes' SM utilization weighted by their
// compute instances' sizes, per GPU instance ID and in all: giShare's
// parts, which change only with the processes, summed when they are
// placed (a GPM read of each instance otherwise went through every
// process of the GPU twice).
type giWeights struct {
	own map[int]float64
	all float64
}

func giWeightsOf(procs []simProcess) giWeights {
	w := giWeights{own: map[int]float64{}}
	for i := range procs {
		p := &procs[i]
		if p.mig == nil {
			continue
		}
		pw := p.sm * float64(p.mig.ciSlices)
		w.all += pw
		w.own[p.mig.gi.id] += pw
	}
	return w
}

// gpmRate answers the bandwidth metrics, in bytes per second averaged over
// [t1, t2] (the instantaneous rate when the interval is empty). known is
// false for other metrics; rate is negative where the metric does not
// exist: PCIe and NVLink traffic on a MIG instance, NVLink on a card
// without it.
func (d *device) gpmRate(id nvml.GpmMetricId, giID int, t1, t2 float64) (rate float64, known bool) {
	var counter func(t float64) float64
	switch id {
	case nvml.GPM_METRIC_PCIE_TX_PER_SEC, nvml.GPM_METRIC_PCIE_RX_PER_SEC:
		tx := id == nvml.GPM_METRIC_PCIE_TX_PER_SEC
		counter = func(t float64) float64 { return d.pcieTotal(t, tx) }
	case nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
		if !d.features.has(featNVLink) {
			return -1, true
		}
		tx := id == nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC
		counter = func(t float64) float64 {
			var kib uint64
			for l := range d.model.nvlinks {
				kib += d.nvlinkKiB(t, l, tx, false)
			}
			return float64(kib) * 1024
		}
	default:
		return 0, false
	}
	if giID >= 0 {
		return -1, true
	}
	if t2 <= t1 {
		// The derivative, over a millisecond.
		t2 = t1 + 1e-3
	}
	return (counter(t2) - counter(t1)) / (t2 - t1), true
}
