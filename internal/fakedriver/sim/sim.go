//go:build cgo

package sim

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
)

// Epoch is the simulated clock's zero, unless Config.WallClock: Sim.Now()
// is Epoch + elapsed time.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Simulated host-wide versions, as a 550-series datacenter driver reports them.
const (
	DriverVersion     = "550.90.07"
	NVMLVersion       = "12.550.90.07"
	CUDADriverVersion = 12040
)

// Sim is a simulated host of NVIDIA GPUs. It implements nvml.Interface, so
// the NVML reader runs against it unchanged. It is safe for concurrent use.
//
// Modelled calls are methods of Sim and its device types. Every other
// method of nvml.Interface falls through to the embedded unmodelledLibrary,
// which forwards calls on a handle to the handle and answers the rest
// with ERROR_NOT_SUPPORTED (see safetynet.go), so no call ever panics.
type Sim struct {
	unmodelledLibrary

	profile *profile
	devices []*device
	branch  *nvmlbranch.Branch // the simulated driver branch; nil: every function

	missingMu    sync.Mutex
	missingCalls []string // calls the guard refused (guard.go)
	seed         string   // Config.Seed
	privileged   bool     // Config.Privileged
	// live holds the processes of Config.ProcessesFrom; nil without it.
	live *liveProcesses
	// initError is what Init answers (Config.InitError); SUCCESS normally.
	initError nvml.Return
	// driverVersionText replaces the reported driver version when set
	// (Config.DriverVersion).
	driverVersionText *string
	// everyPeriod: GetProcessUtilization answers every buffered sample
	// (Config.ProcessSamples "every_period").
	everyPeriod bool

	start time.Time // real time at New, origin of the unpinned clock
	// epoch is the simulated clock's zero: Epoch, or the real time at New
	// (Config.WallClock), so that Now is the real time.
	epoch time.Time
	// pinned holds the pinned elapsed time in nanoseconds, or -1.
	pinned atomic.Int64
	// initCount is NVML's Init reference count: calls other than Init
	// answer ERROR_UNINITIALIZED while it is zero.
	initCount atomic.Int64

	// clockMu guards clockChanged, closed and replaced each time the pinned
	// clock moves, so that a waiting EventSet re-evaluates what is due.
	clockMu      sync.Mutex
	clockChanged chan struct{}
}

var _ nvml.Interface = (*Sim)(nil)

// New builds the simulated host described by cfg. An unknown profile, a
// GPU index out of range, an unknown unsupported name or a process that
// does not fit its GPU is an error naming the config entry.
func New(cfg Config) (*Sim, error) {
	if err := cfg.validateShape(); err != nil {
		return nil, err
	}
	p, err := lookupProfile(cfg.Profile)
	if err != nil {
		if cfg.source != "" {
			return nil, fmt.Errorf("%s: %w", cfg.source, err)
		}
		return nil, err
	}
	s := &Sim{profile: p, seed: cfg.Seed, privileged: cfg.Privileged, start: time.Now(), clockChanged: make(chan struct{})}
	s.unmodelledLibrary = librarySafetyNet(s)
	s.initError = nvml.SUCCESS
	if cfg.InitError != "" {
		s.initError = initErrors[cfg.InitError] // validateShape checked it
	}
	s.driverVersionText = cfg.DriverVersion
	s.everyPeriod = cfg.ProcessSamples == ProcessSamplesEveryPeriod
	if cfg.Driver != "" {
		s.branch, _ = nvmlbranch.Lookup(cfg.Driver) // validateShape checked it
	}
	s.pinned.Store(-1)
	s.epoch = Epoch
	if cfg.PinTime != nil {
		s.pinned.Store(int64(*cfg.PinTime))
	} else if cfg.WallClock {
		s.epoch = s.start.UTC().Round(0)
	}
	s.devices = make([]*device, p.count)
	for i := range p.count {
		s.devices[i] = newDevice(s, i)
	}
	if err := s.applyFaults(&cfg); err != nil {
		return nil, err
	}
	procs := p.processes
	if cfg.Processes != nil || cfg.processesSet {
		procs = cfg.Processes
	}
	if err := s.placeProcesses(&cfg, procs); err != nil {
		return nil, err
	}
	if cfg.ProcessesFrom != "" {
		if err := s.startProcessesFrom(cfg.ProcessesFrom); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// applyFaults checks each fault against the profile and attaches it to its device.
func (s *Sim) applyFaults(cfg *Config) error {
	for i, f := range cfg.Faults {
		if f.GPU >= len(s.devices) {
			return fmt.Errorf("%s: gpu %d out of range (profile %s has GPUs 0-%d)",
				cfg.where("faults", i, f.line), f.GPU, s.profile.name, len(s.devices)-1)
		}
		d := s.devices[f.GPU]
		if f.LostAfter != nil {
			lost := f.LostAfter.D()
			if d.lostAfter < 0 || lost < d.lostAfter {
				d.lostAfter = lost
			}
		}
		if f.LostHandle {
			d.lostHandle = true
		}
		if f.ProcessListSize != "" {
			d.processListSize = f.ProcessListSize
		}
		if f.HangAfter != nil {
			d.hangAfter = f.HangAfter.D()
			if f.HangFor != nil {
				d.hangUntil = d.hangAfter + f.HangFor.D()
			}
		}
		for _, name := range f.Unsupported {
			feat, err := featureByName(name)
			if err != nil {
				return fmt.Errorf("%s: %w", cfg.where("faults", i, f.line), err)
			}
			d.features &^= setOf(feat)
		}
		d.sick.apply(&f)
		if err := d.applyFeatureFaults(&f); err != nil {
			return fmt.Errorf("%s: %w", cfg.where("faults", i, f.line), err)
		}
		if f.XID != 0 {
			var at time.Duration
			if f.At != nil {
				at = f.At.D()
			}
			d.xids = append(d.xids, scheduledXID{xid: f.XID, at: at})
		}
		if err := d.applyMemoryFaults(&f); err != nil {
			return fmt.Errorf("%s: %w", cfg.where("faults", i, f.line), err)
		}
	}
	return nil
}

// applyFeatureFaults applies the faults that only a GPU with the feature
// they break can have: page retirement, MIG, an NVSwitch fabric.
func (d *device) applyFeatureFaults(f *Fault) error {
	if f.RetiredPagesSize != "" {
		if !d.model.features.has(featRetiredPages) {
			return fmt.Errorf("retired_pages_size: gpu %d (%s) has no page retirement (it remaps rows); the v100 profile has", f.GPU, d.model.name)
		}
		d.retiredPagesSize = f.RetiredPagesSize
	}
	if f.MIGModePending {
		if !d.features.has(featMIG) {
			return fmt.Errorf("mig_mode_pending: gpu %d (%s) has no MIG", f.GPU, d.model.name)
		}
		d.migPending = true
	}
	if f.FabricDegraded {
		if !d.hasFabric() {
			return fmt.Errorf("fabric_degraded: gpu %d (%s) has no NVSwitch fabric", f.GPU, d.model.name)
		}
		d.fabricDegraded = true
	}
	return nil
}

// applyMemoryFaults schedules a fault's ECC errors, row remap and GPU
// reset on d.
func (d *device) applyMemoryFaults(f *Fault) error {
	var at time.Duration
	if f.At != nil {
		at = f.At.D()
	}
	if f.ECCUncorrectable != 0 {
		if !d.model.features.has(featECC) {
			return fmt.Errorf("ecc_uncorrectable: gpu %d (%s) has no ECC", f.GPU, d.model.name)
		}
		d.memory.ecc = append(d.memory.ecc, scheduledCount{n: f.ECCUncorrectable, at: at})
	}
	if f.RowRemap != "" {
		if !d.model.features.has(featRemappedRows) {
			return fmt.Errorf("row_remap: gpu %d (%s) does not remap rows (page retirement instead)", f.GPU, d.model.name)
		}
		d.memory.remaps = append(d.memory.remaps, scheduledRemap{failure: f.RowRemap == RowRemapFailure, at: at})
	}
	if f.ResetAt != nil {
		d.memory.resets = append(d.memory.resets, f.ResetAt.D())
	}
	return nil
}

// elapsed is the simulated time since the start: the pinned value, or the
// real (monotonic) time since New.
func (s *Sim) elapsed() time.Duration {
	if p := s.pinned.Load(); p >= 0 {
		return time.Duration(p)
	}
	return time.Since(s.start)
}

// Now returns the simulated wall clock: its zero (Epoch, or the real time
// at New with Config.WallClock) plus the elapsed time.
func (s *Sim) Now() time.Time { return s.epoch.Add(s.elapsed()) }

// ClockStart is the simulated clock's zero: Now at elapsed time 0.
func (s *Sim) ClockStart() time.Time { return s.epoch }

// Elapsed returns the simulated time since the start.
func (s *Sim) Elapsed() time.Duration { return s.elapsed() }

// SetElapsed pins the simulated clock at d (tests, golden files). From then
// on the clock only moves through SetElapsed.
func (s *Sim) SetElapsed(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s.pinned.Store(int64(d))
	s.notifyClock()
}

// notifyClock wakes every EventSet.Wait so it re-checks which events are due.
func (s *Sim) notifyClock() {
	s.clockMu.Lock()
	close(s.clockChanged)
	s.clockChanged = make(chan struct{})
	s.clockMu.Unlock()
}

func (s *Sim) clockSignal() <-chan struct{} {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	return s.clockChanged
}

func (s *Sim) initialized() bool { return s.initCount.Load() > 0 }

// Init starts the library; like NVML it is reference counted.
func (s *Sim) Init() nvml.Return {
	if s.initError != nvml.SUCCESS {
		return s.initError
	}
	s.initCount.Add(1)
	return nvml.SUCCESS
}

// InitWithFlags is Init; the flags do not change the simulation.
func (s *Sim) InitWithFlags(uint32) nvml.Return { return s.Init() }

// Shutdown undoes one Init. Shutting down more often than initialising is
// ERROR_UNINITIALIZED, as in NVML.
func (s *Sim) Shutdown() nvml.Return {
	for {
		n := s.initCount.Load()
		if n <= 0 {
			return nvml.ERROR_UNINITIALIZED
		}
		if s.initCount.CompareAndSwap(n, n-1) {
			return nvml.SUCCESS
		}
	}
}

// ErrorString is NVML's text for a return code.
func (s *Sim) ErrorString(r nvml.Return) string { return r.Error() }

// Extensions answers symbol lookups as the simulated driver branch's
// library would (every symbol without a branch; see driver.go).
func (s *Sim) Extensions() nvml.ExtendedInterface { return driverSymbols{s.branch} }

func (s *Sim) SystemGetDriverVersion() (string, nvml.Return) {
	if !s.initialized() {
		return "", nvml.ERROR_UNINITIALIZED
	}
	return s.driverVersion(), nvml.SUCCESS
}

func (s *Sim) SystemGetNVMLVersion() (string, nvml.Return) {
	if !s.initialized() {
		return "", nvml.ERROR_UNINITIALIZED
	}
	return s.nvmlVersion(), nvml.SUCCESS
}

func (s *Sim) SystemGetCudaDriverVersion() (int, nvml.Return) {
	if !s.initialized() {
		return 0, nvml.ERROR_UNINITIALIZED
	}
	return s.cudaDriverVersion(), nvml.SUCCESS
}

func (s *Sim) SystemGetCudaDriverVersion_v2() (int, nvml.Return) {
	return s.SystemGetCudaDriverVersion()
}

func (s *Sim) DeviceGetCount() (int, nvml.Return) {
	if !s.initialized() {
		return 0, nvml.ERROR_UNINITIALIZED
	}
	return len(s.devices), nvml.SUCCESS
}

// DeviceGetHandleByIndex returns the handle even for a lost GPU: the loss
// shows on the calls made through it. With the lost_handle fault it
// answers GPU_IS_LOST itself, as nvml.h allows.
func (s *Sim) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if !s.initialized() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	if i < 0 || i >= len(s.devices) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if d := s.devices[i]; d.lostHandle && d.lost(s.elapsed()) {
		return nil, nvml.ERROR_GPU_IS_LOST
	}
	return s.devices[i], nvml.SUCCESS
}

func (s *Sim) DeviceGetHandleByUUID(uuid string) (nvml.Device, nvml.Return) {
	if !s.initialized() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	for _, d := range s.devices {
		if d.uuid == uuid {
			if d.lost(s.elapsed()) {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return d, nvml.SUCCESS
		}
		for _, m := range d.migDevices {
			if m.uuid == uuid {
				return m, nvml.SUCCESS
			}
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

func (s *Sim) DeviceGetHandleByPciBusId(busID string) (nvml.Device, nvml.Return) {
	if !s.initialized() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	for _, d := range s.devices {
		if d.busID == busID || d.busIDLegacy == busID {
			return d, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

func (s *Sim) DeviceGetHandleBySerial(serial string) (nvml.Device, nvml.Return) {
	if !s.initialized() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	for _, d := range s.devices {
		if d.serial != "" && d.serial == serial {
			return d, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}
