package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The info collector: gpu_info, one series per device carrying its
// descriptive facts as labels, joined to other series in PromQL.
func init() {
	registerCollector(snapshot.GroupInfo, collector{device: collectInfo})
}

func collectInfo(em *emitter, s *snapshot.Snapshot, d *snapshot.Device) {
	in := &d.Info
	em.devN(mInfo, 1,
		in.Name, in.Brand, in.Architecture, in.PCIBusID, in.Serial, in.VBIOSVersion,
		s.DriverVersion, s.CUDADriverVersion, in.ComputeCapability,
		in.PersistenceMode, in.ComputeMode, in.MIGMode, in.ECCMode)
}
