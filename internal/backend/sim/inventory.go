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
		for _, p := range d.processes {
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
