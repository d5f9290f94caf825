package exporter

import (
	"slices"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The dcgm-exporter compatible series (--compat=dcgm): the same readings as
// the native collectors, renamed, converted to dcgm-exporter's units and
// labelled as dcgm-exporter labels them. Whole-GPU readings carry no
// GPU_I_* labels; on a MIG-enabled GPU, memory and profiling come per GPU
// instance instead, as dcgm-exporter reports them.

const (
	mib          = 1 << 20
	hertzPerMHz  = 1e6
	percent      = 100
	mJPerJoule   = 1000
	dcgmDevicePx = "nvidia"
)

// throttleReasonBits are NVML's nvmlClocksEventReason* bits by the reason
// names the snapshot uses, for DCGM_FI_DEV_CLOCK_THROTTLE_REASONS.
var throttleReasonBits = map[string]uint64{
	"gpu_idle":                    0x1,
	"applications_clocks_setting": 0x2,
	"sw_power_cap":                0x4,
	"hw_slowdown":                 0x8,
	"sync_boost":                  0x10,
	"sw_thermal_slowdown":         0x20,
	"hw_thermal_slowdown":         0x40,
	"hw_power_brake_slowdown":     0x80,
	"display_clock_setting":       0x100,
}

// dcgmSeries writes the series of one device, or of one MIG instance of it,
// once per workload that holds it (once with empty workload labels when
// none does), as dcgm-exporter's pod and HPC job mappings do.
type dcgmSeries struct {
	em     *emitter
	gen    *dcgmGen // the names and units of --compat.dcgm-version
	lv     []string // dcgmLabels values; identity filled by setDevice
	owners []*snapshot.Allocation
}

func (w *dcgmSeries) emit(m *metricDef, v float64) {
	if m == nil || !w.em.on(m) {
		return
	}
	if len(w.owners) == 0 {
		w.em.emit(m, v, w.lv)
		return
	}
	for _, a := range w.owners {
		w.lv[dcgmLabelContainer], w.lv[dcgmLabelNamespace], w.lv[dcgmLabelPod] = a.Pod.Container, a.Pod.Namespace, a.Pod.Name
		w.lv[dcgmLabelHPCJob] = a.Slurm.JobID
		w.em.emit(m, v, w.lv)
	}
	w.lv[dcgmLabelContainer], w.lv[dcgmLabelNamespace], w.lv[dcgmLabelPod], w.lv[dcgmLabelHPCJob] = "", "", "", ""
}

// emitXID writes DCGM_FI_DEV_XID_ERRORS with dcgm-exporter's err_code and
// err_msg labels: the code again, and its description.
func (w *dcgmSeries) emitXID(code uint64) {
	base := w.lv
	w.lv = w.lv[:len(w.gen.xid.Labels)]
	w.lv[len(base)], w.lv[len(base)+1] = utoa(code), xidMessage(code)
	w.emit(w.gen.xid, float64(code))
	clear(w.lv[len(base):])
	w.lv = base
}

func dcgmOpt[T number](w *dcgmSeries, m *metricDef, o snapshot.Opt[T], scale float64) {
	if o.Valid {
		w.emit(m, float64(o.Value)*scale)
	}
}

func dcgmOptBool(w *dcgmSeries, m *metricDef, o snapshot.Opt[bool]) {
	if o.Valid {
		w.emit(m, bool01(o.Value))
	}
}

// collectDCGM renders one device that is up. A GPU in MIG mode is
// rendered once per GPU instance, every field included: dcgm-exporter's
// default device setting (--devices=f) watches a MIG GPU's GPU instances in
// place of the GPU, so each series carries the instance's GPU_I_* labels
// and the pod that holds the instance.
func (e *Exporter) collectDCGM(em *emitter, s *snapshot.Snapshot, d *snapshot.Device) {
	lv := em.lv[:len(dcgmLabels)]
	clear(lv)
	lv[0], lv[1], lv[2] = itoa(d.Index), d.UUID, d.Info.PCIBusID
	// dcgm-exporter writes "nvidia" and DCGM's GPU id, which follows the
	// NVML index, not the device node's minor number.
	lv[3] = dcgmDevicePx + lv[0]
	lv[4], lv[e.hostLabel], lv[7] = d.Info.Name, e.hostname, s.DriverVersion
	w := dcgmSeries{em: em, gen: e.dcgmGen, lv: lv}
	if len(d.MIGInstances) > 0 {
		e.collectDCGMInstances(&w, s, d)
		return
	}
	w.owners = e.dcgmOwners(s, d, nil)
	dcgmDeviceReadings(&w, d)
	m, g := &d.Memory, w.gen
	dcgmOpt(&w, g.fbTotal, m.Total, g.memoryScale)
	dcgmOpt(&w, g.fbFree, m.Free, g.memoryScale)
	dcgmOpt(&w, g.fbUsed, m.Used, g.memoryScale)
	dcgmGPM(&w, &d.GPM)
}

// collectDCGMInstances writes every field once per GPU instance of a
// MIG-enabled GPU: the instance's own memory and profiling, and the GPU's
// readings (temperature, power, clocks, XID, ECC, ...) repeated, as DCGM
// answers a GPU instance's device-level fields with its GPU's. A sum over
// the instances of a GPU therefore counts those readings once per instance
// (docs/dcgm-compat.md). A GPU instance holding several compute instances
// is written once, with the pods of all of them.
func (e *Exporter) collectDCGMInstances(w *dcgmSeries, s *snapshot.Snapshot, d *snapshot.Device) {
	for i := 0; i < len(d.MIGInstances); {
		mi := &d.MIGInstances[i]
		j := i + 1
		for j < len(d.MIGInstances) && d.MIGInstances[j].GPUInstanceID == mi.GPUInstanceID {
			j++
		}
		same := d.MIGInstances[i:j]
		i = j
		w.lv[dcgmLabelGIProfile], w.lv[dcgmLabelGIID] = gpuInstanceProfile(mi.Profile), itoa(mi.GPUInstanceID)
		w.owners = e.dcgmOwners(s, d, func(migUUID string) bool {
			return slices.ContainsFunc(same, func(c snapshot.MIGInstance) bool { return c.UUID == migUUID })
		})
		dcgmDeviceReadings(w, d)
		g := w.gen
		dcgmOpt(w, g.fbTotal, mi.MemoryTotal, g.memoryScale)
		dcgmOpt(w, g.fbUsed, mi.MemoryUsed, g.memoryScale)
		if mi.MemoryTotal.Valid && mi.MemoryUsed.Valid && mi.MemoryTotal.Value >= mi.MemoryUsed.Value {
			w.emit(g.fbFree, float64(mi.MemoryTotal.Value-mi.MemoryUsed.Value)*g.memoryScale)
		}
		dcgmGPM(w, &mi.GPM)
	}
	w.lv[dcgmLabelGIProfile], w.lv[dcgmLabelGIID] = "", ""
}

// dcgmDeviceReadings writes the readings that belong to the whole GPU.
func dcgmDeviceReadings(w *dcgmSeries, d *snapshot.Device) {
	g := w.gen
	t := &d.Temperature
	dcgmOpt(w, g.gpuTemp, t.GPU, 1)
	dcgmOpt(w, g.memoryTemp, t.Memory, 1)
	dcgmOpt(w, g.slowdownTemp, t.SlowdownThreshold, 1)
	dcgmOpt(w, g.shutdownTemp, t.ShutdownThreshold, 1)

	p := &d.Power
	dcgmOpt(w, g.powerUsage, p.Usage, 1)
	dcgmOpt(w, g.powerLimit, p.EnforcedLimit, 1)
	dcgmOpt(w, g.enforcedLimit, p.EnforcedLimit, 1)
	dcgmOpt(w, g.energy, p.Energy, g.energyScale)

	for _, c := range d.Clocks {
		switch c.Type {
		case "sm":
			dcgmOpt(w, g.smClock, c.Current, g.clockScale)
		case "memory":
			dcgmOpt(w, g.memClock, c.Current, g.clockScale)
		}
	}
	if d.ClockEvents != nil {
		var mask uint64
		for _, ev := range d.ClockEvents {
			if ev.Active {
				mask |= throttleReasonBits[ev.Reason]
			}
		}
		w.emit(g.throttleReasons, float64(mask))
	}

	u := &d.Utilization
	dcgmOpt(w, g.gpuUtil, u.GPU, g.utilScale)
	dcgmOpt(w, g.memCopyUtil, u.Memory, g.utilScale)
	dcgmOpt(w, g.encUtil, u.Encoder, g.utilScale)
	dcgmOpt(w, g.decUtil, u.Decoder, g.utilScale)
	dcgmOpt(w, g.fanSpeed, d.FanSpeed, percent)
	dcgmOpt(w, g.fbReserved, d.Memory.Reserved, g.memoryScale)

	dcgmBusTraffic(w, d)

	if d.XIDLastCode.Valid {
		w.emitXID(d.XIDLastCode.Value)
	}

	pc := &d.PCIe
	dcgmOpt(w, g.pcieReplay, pc.ReplayCounter, 1)
	dcgmOpt(w, g.pcieLinkGen, pc.LinkGen, 1)
	dcgmOpt(w, g.pcieLinkWidth, pc.LinkWidth, 1)

	dcgmECC(w, &d.ECC)

	// DCGM answers 0 (no vGPU license) for a GPU that is not a vGPU guest.
	if mode := d.Info.VirtualizationMode; mode != "" && mode != "vgpu" {
		w.emit(g.vgpuLicense, 0)
	}

	dcgmNVLinkErrors(w, d.NVLinks)
	dcgmOpt(w, g.fabricHealthMask, d.Fabric.HealthMask, 1)
	dcgmOpt(w, g.fabricHealthSummary, d.Fabric.HealthSummary, 1)
}

// dcgmBusTraffic writes the PCIe and NVLink rates, which are the whole
// GPU's, MIG or not.
func dcgmBusTraffic(w *dcgmSeries, d *snapshot.Device) {
	g, gpm := w.gen, &d.GPM
	dcgmOpt(w, g.profPCIeTx, gpm.PCIeTxBytesPerSecond, 1)
	dcgmOpt(w, g.profPCIeRx, gpm.PCIeRxBytesPerSecond, 1)
	dcgmOpt(w, g.profNVLinkTx, gpm.NVLinkTxBytesPerSecond, 1)
	dcgmOpt(w, g.profNVLinkRx, gpm.NVLinkRxBytesPerSecond, 1)
	// The NVLink bandwidth is GPM's where the GPU has it, else the links'
	// byte counters between two reads (NVML's throughput fields, which
	// DCGM reads on every generation).
	if gpm.NVLinkTxBytesPerSecond.Valid && gpm.NVLinkRxBytesPerSecond.Valid {
		w.emit(g.nvlinkBandwidth, (gpm.NVLinkTxBytesPerSecond.Value+gpm.NVLinkRxBytesPerSecond.Value)*g.nvlinkScale)
	} else {
		dcgmOpt(w, g.nvlinkBandwidth, d.NVLinkBytesPerSecond, g.nvlinkScale)
	}
}

// dcgmECC writes the ECC counters and the memory repair state.
func dcgmECC(w *dcgmSeries, ecc *snapshot.ECC) {
	g := w.gen
	dcgmOpt(w, g.eccSBEVol, ecc.VolatileCorrected, 1)
	dcgmOpt(w, g.eccDBEVol, ecc.VolatileUncorrected, 1)
	dcgmOpt(w, g.eccSBEAgg, ecc.AggregateCorrected, 1)
	dcgmOpt(w, g.eccDBEAgg, ecc.AggregateUncorrected, 1)
	dcgmOpt(w, g.retiredSBE, ecc.RetiredPagesSingleBit, 1)
	dcgmOpt(w, g.retiredDBE, ecc.RetiredPagesDoubleBit, 1)
	dcgmOptBool(w, g.retiredPending, ecc.RetiredPagesPending)
	dcgmOpt(w, g.remapCorrectable, ecc.RemappedRowsCorrectable, 1)
	dcgmOpt(w, g.remapUncorrectable, ecc.RemappedRowsUncorrectable, 1)
	dcgmOptBool(w, g.remapFailure, ecc.RemappedRowsFailure)
	dcgmOptBool(w, g.remapPending, ecc.RemappedRowsPending)
}

// gpuInstanceProfile is the GPU instance's profile of a MIG instance's
// profile: a compute instance smaller than its GPU instance is named
// "4c.7g.80gb" (4 of the 7 slices), DCGM's GPU_I_PROFILE names the GPU
// instance, "7g.80gb".
func gpuInstanceProfile(p string) string {
	if i := strings.IndexByte(p, '.'); i > 1 && p[i-1] == 'c' && allDigits(p[:i-1]) {
		return p[i+1:]
	}
	return p
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func dcgmGPM(w *dcgmSeries, gpm *snapshot.GPM) {
	g := w.gen
	dcgmOpt(w, g.profGREngine, gpm.GraphicsActive, 1)
	dcgmOpt(w, g.profSMActive, gpm.SMActive, 1)
	dcgmOpt(w, g.profSMOccupancy, gpm.SMOccupancy, 1)
	dcgmOpt(w, g.profTensor, gpm.TensorActive, 1)
	dcgmOpt(w, g.profDRAM, gpm.DRAMActive, 1)
	dcgmOpt(w, g.profFP64, gpm.FP64Active, 1)
	dcgmOpt(w, g.profFP32, gpm.FP32Active, 1)
	dcgmOpt(w, g.profFP16, gpm.FP16Active, 1)
}

// dcgmNVLinkErrors writes the per-GPU totals of the link error counters,
// which is how dcgm-exporter's *_COUNT_TOTAL fields report them.
func dcgmNVLinkErrors(w *dcgmSeries, links []snapshot.NVLink) {
	if len(links) == 0 {
		return
	}
	sum := func(get func(*snapshot.NVLink) snapshot.Opt[uint64]) snapshot.Opt[uint64] {
		var total snapshot.Opt[uint64]
		for i := range links {
			if v := get(&links[i]); v.Valid {
				total.Value += v.Value
				total.Valid = true
			}
		}
		return total
	}
	g := w.gen
	dcgmOpt(w, g.nvlinkCRCFlit, sum(func(l *snapshot.NVLink) snapshot.Opt[uint64] { return l.CRCFlitErrors }), 1)
	dcgmOpt(w, g.nvlinkCRCData, sum(func(l *snapshot.NVLink) snapshot.Opt[uint64] { return l.CRCDataErrors }), 1)
	dcgmOpt(w, g.nvlinkReplay, sum(func(l *snapshot.NVLink) snapshot.Opt[uint64] { return l.ReplayErrors }), 1)
	dcgmOpt(w, g.nvlinkRecovery, sum(func(l *snapshot.NVLink) snapshot.Opt[uint64] { return l.RecoveryErrors }), 1)
}

// dcgmOwners lists the workloads that hold a whole GPU (inMIG nil) or a
// MIG instance of it (inMIG reports the instance's MIG UUID), each once: a
// pod holding several time-sliced replicas of a GPU is listed by the
// kubelet once per replica.
func (e *Exporter) dcgmOwners(s *snapshot.Snapshot, d *snapshot.Device, inMIG func(migUUID string) bool) []*snapshot.Allocation {
	var out []*snapshot.Allocation
	for i := range s.Allocations {
		a := &s.Allocations[i]
		sameGPU := a.GPUUUID == d.UUID || (a.GPUUUID == "" && a.GPU == d.Index)
		if !sameGPU {
			continue
		}
		if inMIG == nil && a.MIGUUID != "" || inMIG != nil && (a.MIGUUID == "" || !inMIG(a.MIGUUID)) {
			continue
		}
		dup := false
		for _, o := range out {
			if o.Pod == a.Pod && o.Slurm.JobID == a.Slurm.JobID {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, a)
		}
	}
	return out
}
