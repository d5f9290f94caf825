package exporter

import (
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The accounting counters: running totals that the accounting stage
// integrates on its own ticker and hands on in the snapshot
// (Snapshot.Accounting, nil when accounting is off). They belong to the
// processes collector: they answer "who used this GPU", over time. A
// total's figure that was never measured is absent, not 0.
func collectAccounting(em *emitter, s *snapshot.Snapshot) {
	acc := s.Accounting
	if acc == nil {
		return
	}
	for i := range acc.Owners {
		o := &acc.Owners[i]
		k := &o.Key
		em.lv[0], em.lv[1] = itoa(k.GPU), k.GPUUUID
		em.lv[2], em.lv[3], em.lv[4], em.lv[5] = k.User, k.Container, k.ComposeProject, k.ComposeService
		em.lv[6], em.lv[7], em.lv[8], em.lv[9] = k.Pod, k.Namespace, k.SlurmJob, k.MIGUUID
		lvs := em.lv[:10]
		if em.on(mAcctSeconds) {
			em.emit(mAcctSeconds, o.Seconds, lvs)
		}
		if v, ok := o.SMSeconds.Get(); ok && em.on(mAcctSMSeconds) {
			em.emit(mAcctSMSeconds, v, lvs)
		}
		if v, ok := o.MemoryByteSeconds.Get(); ok && em.on(mAcctMemory) {
			em.emit(mAcctMemory, v, lvs)
		}
		if v, ok := o.EnergyJoules.Get(); ok && em.on(mAcctEnergy) {
			em.emit(mAcctEnergy, v, lvs)
		}
	}
	if em.on(mAcctIdleEnergy) {
		for i := range acc.IdleEnergy {
			e := &acc.IdleEnergy[i]
			em.lv[0], em.lv[1] = itoa(e.GPU), e.GPUUUID
			em.emit(mAcctIdleEnergy, e.Joules, em.lv[:2])
		}
	}
	for i := range acc.Allocations {
		a := &acc.Allocations[i]
		em.lv[0], em.lv[1], em.lv[2] = itoa(a.GPU), a.GPUUUID, a.MIGUUID
		em.lv[3], em.lv[4], em.lv[5], em.lv[6], em.lv[7] = a.Namespace, a.Pod, a.Container, a.SlurmJob, a.User
		lvs := em.lv[:8]
		if em.on(mAcctAllocSeconds) {
			em.emit(mAcctAllocSeconds, a.Seconds, lvs)
		}
		if v, ok := a.IdleSeconds.Get(); ok && em.on(mAcctAllocIdle) {
			em.emit(mAcctAllocIdle, v, lvs)
		}
	}
}
