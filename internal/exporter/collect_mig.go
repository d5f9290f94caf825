package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The MIG collector: whether a MIG mode change waits for a reset, one
// gpu_mig_info per compute instance, and its memory
// and GPM ratios labelled by GPU instance, compute instance and MIG uuid.
func init() {
	registerCollector(snapshot.GroupMIG, collector{device: collectMIG})
}

func collectMIG(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	devOptBool(em, mMIGModePending, d.MIGModePending)
	for i := range d.MIGInstances {
		mi := &d.MIGInstances[i]
		gi, ci := itoa(mi.GPUInstanceID), itoa(mi.ComputeInstanceID)
		em.devN(mMIGInfo, 1, gi, ci, mi.UUID, mi.Profile)
		migOpt(em, mMIGMemTotal, mi.MemoryTotal, gi, ci, mi.UUID)
		migOpt(em, mMIGMemUsed, mi.MemoryUsed, gi, ci, mi.UUID)
		g := &mi.GPM
		migOpt(em, mMIGGPMSMActive, g.SMActive, gi, ci, mi.UUID)
		migOpt(em, mMIGGPMSMOccupancy, g.SMOccupancy, gi, ci, mi.UUID)
		migOpt(em, mMIGGPMTensor, g.TensorActive, gi, ci, mi.UUID)
		migOpt(em, mMIGGPMDRAM, g.DRAMActive, gi, ci, mi.UUID)
		migOpt(em, mMIGGPMFP16, g.FP16Active, gi, ci, mi.UUID)
		migOpt(em, mMIGGPMFP32, g.FP32Active, gi, ci, mi.UUID)
		migOpt(em, mMIGGPMFP64, g.FP64Active, gi, ci, mi.UUID)
	}
}

// migOpt emits a MIG instance series when the reading is present.
func migOpt[T number](em *emitter, m *metricDef, o snapshot.Opt[T], gi, ci, migUUID string) {
	if !o.Valid || !em.on(m) {
		return
	}
	em.lv[0], em.lv[1], em.lv[2], em.lv[3], em.lv[4] = em.gpu, em.uuid, gi, ci, migUUID
	em.emitDev(m, float64(o.Value), em.lv[:5])
}
