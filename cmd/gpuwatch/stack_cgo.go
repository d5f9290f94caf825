//go:build cgo

// The NVML backends (--backend=nvml and --backend=sim) and what only they
// feed: go-nvml's types live in its cgo files, so a build without cgo (the
// Windows one) has neither (stack_nocgo.go).

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
)

// downAfterTimeouts is how many collection timeouts a one-shot command
// waits for a GPU whose read runs late (stack.settledSnapshot).
const downAfterTimeouts = nvmlbackend.DownAfterTimeouts

// nvmlStack is what the NVML backends hold beside the pipeline's reader.
type nvmlStack struct {
	sim *sim.Sim       // with --backend=sim
	lib nvml.Interface // the library the reader reads
	// reader is the scrapes' reader of lib: the accounting's reader
	// takes its XID counts from it.
	reader *nvmlbackend.Reader
}

// openNVML starts the NVML reader on the driver or on the simulator and
// makes it the stack's reader.
func (f *commonFlags) openNVML(logger *slog.Logger, st *stack) error {
	reader, simulated, lib, err := f.openReader(logger)
	if err != nil {
		return err
	}
	st.reader, st.closeReader, st.nv = reader, reader.Close, &nvmlStack{sim: simulated, lib: lib, reader: reader}
	return nil
}

// simulated says whether the stack reads the simulator.
func (s *stack) simulated() bool { return s.nv != nil && s.nv.sim != nil }

// simIdentity is the start log's words for the simulator.
func (s *stack) simIdentity() []any {
	return []any{"profile", s.nv.sim.Profile(), "sim_seed", s.nv.sim.Seed()}
}

// openReader starts the NVML reader on the driver or on the simulator.
// With --backend=sim it also returns the simulator.
func (f *commonFlags) openReader(logger *slog.Logger) (*nvmlbackend.Reader, *sim.Sim, nvml.Interface, error) {
	opts := nvmlbackend.Options{Groups: f.enabledCollectors(), Logger: logger, WaitForGPM: f.waitForGPM, StartTimeout: f.timeout,
		// A slow driver's late readings are served until no read has
		// returned for this long (see nvmlbackend.DownAfterTimeouts).
		DownAfter: nvmlbackend.DownAfterTimeouts * f.timeout}
	var lib nvml.Interface
	var simulated *sim.Sim
	switch f.backend {
	case "sim":
		s, err := f.simulator()
		if err != nil {
			return nil, nil, nil, err
		}
		lib, opts.Now, opts.Library, simulated = s.Library(), s.Now, "simulator", s
	default:
		lib = nvml.New()
	}
	reader, err := nvmlbackend.New(lib, opts)
	if errors.Is(err, nvmlbackend.ErrLibraryNotFound) {
		return nil, nil, nil, fmt.Errorf("%w: cannot load libnvidia-ml.so.1 (is the NVIDIA driver installed and on the library path?); %s",
			errNoDriver, f.simHint())
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the %s backend: %w", f.backend, err)
	}
	return reader, simulated, lib, nil
}

// simulator builds the simulated fleet from --sim.config and --sim.profile.
func (f *commonFlags) simulator() (*sim.Sim, error) {
	var cfg sim.Config
	if f.simConfig != "" {
		c, err := sim.LoadConfig(f.simConfig)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if f.simProfile != "" {
		cfg.Profile = f.simProfile
	}
	if cfg.Profile == "" {
		return nil, fmt.Errorf("--backend=sim needs --sim.profile (one of %s) or a --sim.config file that names a profile", simProfileList())
	}
	if f.simPinTime > 0 {
		d := sim.Duration(f.simPinTime)
		cfg.PinTime = &d
	}
	// An unpinned simulator's clock is the real time: the demo's page, ps
	// and job records say today's date, as the reports over its series do.
	cfg.WallClock = cfg.PinTime == nil
	if f.simSeed != "" {
		cfg.Seed = f.simSeed
	}
	if cfg.Seed == "" {
		cfg.Seed, _ = os.Hostname()
	}
	return sim.New(cfg)
}

func simProfileList() string {
	var names []string
	for _, p := range sim.Profiles() {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
