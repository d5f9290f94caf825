package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The memory collector: framebuffer and BAR1 memory.
func init() {
	registerCollector(snapshot.GroupMemory, collector{device: collectMemory})
}

func collectMemory(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	m := &d.Memory
	devOpt(em, mMemTotal, m.Total)
	devOpt(em, mMemUsed, m.Used)
	devOpt(em, mMemFree, m.Free)
	devOpt(em, mMemReserved, m.Reserved)
	devOpt(em, mBAR1Total, m.BAR1Total)
	devOpt(em, mBAR1Used, m.BAR1Used)
	devOpt(em, mBAR1Free, m.BAR1Free)
}
