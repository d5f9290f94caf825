//go:build cgo

package sim

// HostProcess is one process the simulated driver reports on a GPU.
type HostProcess struct {
	GPU     int
	GPUUUID string
	PID     uint32
}

// Processes lists the simulated host's GPU processes, in GPU order and then
// in the order they were configured. The demo environment
// (internal/demo) gives each of them an owner to find.
func (s *Sim) Processes() []HostProcess {
	var out []HostProcess
	for _, d := range s.devices {
		for _, p := range d.procs() {
			out = append(out, HostProcess{GPU: d.index, GPUUUID: d.uuid, PID: p.pid})
		}
	}
	return out
}

// ProcessEnded says whether process pid has ended for good: its
// configured end has passed (false for an unknown PID or one that never
// ends).
func (s *Sim) ProcessEnded(pid uint32) bool {
	e := s.elapsed()
	for _, d := range s.devices {
		for _, p := range d.processes {
			if p.pid == pid && (p.end < 0 || e < p.end) {
				return false
			}
		}
	}
	for _, d := range s.devices {
		for _, p := range d.processes {
			if p.pid == pid {
				return true
			}
		}
	}
	return false
}

// GPUUUIDs lists the simulated GPUs' UUIDs by index.
func (s *Sim) GPUUUIDs() []string {
	out := make([]string, len(s.devices))
	for i, d := range s.devices {
		out[i] = d.uuid
	}
	return out
}

// Profile is the simulated host's profile name.
func (s *Sim) Profile() string { return s.profile.name }

// Seed is what makes this host's UUIDs its own (Config.Seed).
func (s *Sim) Seed() string { return s.seed }

// IdleGPUInstance is a MIG GPU instance that no process runs in, with
// what NVIDIA's Kubernetes DRA driver names it by: the parent's minor
// number, the GPU instance profile and its placement.
type IdleGPUInstance struct {
	GPU, Minor     int
	GPUUUID        string
	Profile        string // "2g.20gb"
	ProfileID      int    // GPU instance profile ID (nvidia-smi mig -lgip)
	PlacementStart int
}

// IdleGPUInstances lists the simulated host's idle MIG GPU instances, in
// GPU order and then in layout order. The demo environment gives one of
// them to a Kubernetes pod through a DRA claim.
func (s *Sim) IdleGPUInstances() []IdleGPUInstance {
	var out []IdleGPUInstance
	for _, d := range s.devices {
		busy := map[*gpuInstance]bool{}
		for _, p := range d.procs() {
			if p.mig != nil {
				busy[p.mig.gi] = true
			}
		}
		for _, gi := range d.gpuInsts {
			if busy[gi] {
				continue
			}
			out = append(out, IdleGPUInstance{
				// The simulated minor number is the index (GetMinorNumber).
				GPU: d.index, Minor: d.index, GPUUUID: d.uuid, Profile: gi.shape.name,
				ProfileID: int(gi.info.Id), PlacementStart: int(gi.placement.Start),
			})
		}
	}
	return out
}
