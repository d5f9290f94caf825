//go:build cgo

package sim

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// device is one simulated physical GPU. It implements nvml.Device: modelled
// calls are methods here and in the device_*.go files; the rest fall through
// to the embedded unmodelledDevice, which answers ERROR_NOT_SUPPORTED (or
// ERROR_GPU_IS_LOST once the GPU is lost; see safetynet.go).
type device struct {
	unmodelledDevice

	sim   *Sim
	model *gpuModel
	index int

	uuid, serial       string
	busID, busIDLegacy string
	pci                nvml.PciInfo

	// features is what this device answers: the model's features minus
	// those a fault made unsupported.
	features featureSet
	// lostAfter is the elapsed time from which the GPU is lost; -1 never.
	lostAfter time.Duration
	// lostHandle: once lost, DeviceGetHandleByIndex answers GPU_IS_LOST.
	lostHandle bool
	// processListSize is the process_list_size fault ("" none).
	processListSize string
	// retiredPagesSize is the retired_pages_size fault ("" none).
	retiredPagesSize string
	// hangAfter is the elapsed time from which every call blocks until
	// hangUntil (-1: never; hangUntil -1: forever).
	hangAfter, hangUntil time.Duration
	xids                 []scheduledXID
	memory               memoryFaults
	// sick: a driver in trouble (slow calls, bogus values, a counter
	// reset; sick.go).
	sick sickness

	act       activity
	nvlinkUp  bool
	processes []simProcess
	// processesUsed is set when every configured process lives for the
	// whole run: their memory on the device and in each GPU instance,
	// summed once (memory reads would scan every process each time,
	// once per MIG instance: most of a simulated memory read).
	processesUsed *usedMemory
	// steadySamples is set when every process on the device that has a
	// compute context lives throughout at one utilization: any read
	// then answers these, with the read's time stamp (processes.go).
	steadySamples []steadySample
	// giWeights are giShare's parts (gpm.go).
	giWeights  giWeights
	migEnabled bool
	// migPending: a MIG mode change waits for a reset (fault mig_mode_pending).
	migPending bool
	// fabricDegraded: the fabric reports degraded bandwidth (fault
	// fabric_degraded).
	fabricDegraded bool
	gpuInsts       []*gpuInstance
	migDevices     []*migDevice // in MIG device index order
}

var _ nvml.Device = (*device)(nil)

// memoryFaults are a device's injected memory errors, each at an elapsed
// time, and its GPU resets.
type memoryFaults struct {
	ecc    []scheduledCount
	remaps []scheduledRemap
	resets []time.Duration
}

type scheduledCount struct {
	n  uint64
	at time.Duration
}

type scheduledRemap struct {
	failure bool
	at      time.Duration
}

// lastReset is the elapsed time of the last GPU reset at or before e; -1
// when none.
func (m *memoryFaults) lastReset(e time.Duration) time.Duration {
	last := time.Duration(-1)
	for _, r := range m.resets {
		if r <= e && r > last {
			last = r
		}
	}
	return last
}

// uncorrected is the injected uncorrectable ECC errors at e: since the
// last reset (volatile) and in all (aggregate).
func (m *memoryFaults) uncorrected(e time.Duration) (volatile, aggregate uint64) {
	reset := m.lastReset(e)
	for _, c := range m.ecc {
		if c.at > e {
			continue
		}
		aggregate += c.n
		if c.at > reset {
			volatile += c.n
		}
	}
	return volatile, aggregate
}

// remapState is the injected remaps at e: rows remapped for uncorrectable
// errors (a pending one counts: its row is marked), whether one waits for
// a reset, and whether one failed.
func (m *memoryFaults) remapState(e time.Duration) (rows int, pending, failure bool) {
	reset := m.lastReset(e)
	for _, r := range m.remaps {
		if r.at > e {
			continue
		}
		switch {
		case r.failure:
			failure = true
		case r.at > reset:
			rows++
			pending = true
		default:
			rows++
		}
	}
	return rows, pending, failure
}

// scheduledXID is one XID event a fault raises at elapsed time at.
type scheduledXID struct {
	xid uint64
	at  time.Duration
}

func newDevice(s *Sim, index int) *device {
	p := s.profile
	m := p.model
	d := &device{
		sim: s, model: m, index: index,
		uuid:      "GPU-" + s.stableUUID(p.name, fmt.Sprint(index)),
		features:  m.features,
		lostAfter: -1,
		hangAfter: -1,
		hangUntil: -1,
		nvlinkUp:  p.nvlinkActive && m.nvlinks > 0,
		// Golden-ratio spacing spreads the phases evenly over the circle.
		act: activity{phase: 2 * math.Pi * math.Mod(float64(index)*0.6180339887, 1)},
	}
	d.unmodelledDevice = deviceSafetyNet(d)
	if m.serialPrefix != "" {
		d.serial = fmt.Sprintf("%s%08d", m.serialPrefix, stableNumber(s.hostParts(p.name, fmt.Sprint(index))...)%100000000)
	}
	bus := p.busIDs[index%len(p.busIDs)]
	domain := uint32(index / len(p.busIDs))
	d.busID = fmt.Sprintf("%08X:%02X:00.0", domain, bus)
	d.busIDLegacy = fmt.Sprintf("%04X:%02X:00.0", domain, bus)
	d.pci = nvml.PciInfo{
		Domain: domain, Bus: bus, Device: 0,
		PciDeviceId: m.pciDeviceID, PciSubSystemId: m.pciSubsystemID,
	}
	copyCString(d.pci.BusId[:], d.busID)
	copyCString(d.pci.BusIdLegacy[:], d.busIDLegacy)
	if layout, ok := p.mig[index]; ok {
		d.migEnabled = true
		d.buildMIG(layout)
	}
	return d
}

// stableUUID derives an identifier of this simulated host from its parts:
// the same in every run with the same seed, different on another host.
func (s *Sim) stableUUID(parts ...string) string { return stableUUID(s.hostParts(parts...)...) }

// hostParts puts the host's seed before parts; without a seed the parts are
// kept as they are, so the profile's own identifiers stay what they were.
func (s *Sim) hostParts(parts ...string) []string {
	if s.seed == "" {
		return parts
	}
	return append([]string{"seed", s.seed}, parts...)
}

// stableUUID derives a UUID-formatted string from its parts, so that UUIDs
// are the same in every run (golden files) yet differ between GPUs.
func stableUUID(parts ...string) string {
	h := sha1.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	b := h.Sum(nil)
	b[6] = b[6]&0x0f | 0x50 // version 5 (name-based, SHA-1)
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func stableNumber(parts ...string) uint64 {
	h := sha1.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// copyCString writes s NUL-terminated into NVML's fixed char array.
func copyCString(dst []int8, s string) {
	n := min(len(s), len(dst)-1)
	for i := range n {
		dst[i] = int8(s[i])
	}
	dst[n] = 0
}

// hang blocks a call made inside the hang window until the window ends
// (never, for an endless hang or a pinned clock) and returns the elapsed
// time the call then proceeds at.
func (d *device) hang(elapsed time.Duration) time.Duration {
	for d.hangAfter >= 0 && elapsed >= d.hangAfter && (d.hangUntil < 0 || elapsed < d.hangUntil) {
		time.Sleep(10 * time.Millisecond)
		elapsed = d.sim.elapsed()
	}
	return elapsed
}

func (d *device) lost(elapsed time.Duration) bool {
	return d.lostAfter >= 0 && elapsed >= d.lostAfter
}

// begin is the common prologue of every modelled device call: it returns
// the elapsed time the reading is made at, and SUCCESS, or the error NVML
// would answer (uninitialized library, lost GPU, unsupported feature).
func (d *device) begin(f feature) (time.Duration, nvml.Return) {
	if !d.sim.initialized() {
		return 0, nvml.ERROR_UNINITIALIZED
	}
	d.sick.slow()
	e := d.hang(d.sim.elapsed())
	if d.lost(e) {
		return e, nvml.ERROR_GPU_IS_LOST
	}
	if !d.features.has(f) {
		return e, nvml.ERROR_NOT_SUPPORTED
	}
	return e, nvml.SUCCESS
}

// always is begin for calls every device supports.
func (d *device) always() (time.Duration, nvml.Return) {
	if !d.sim.initialized() {
		return 0, nvml.ERROR_UNINITIALIZED
	}
	d.sick.slow()
	e := d.hang(d.sim.elapsed())
	if d.lost(e) {
		return e, nvml.ERROR_GPU_IS_LOST
	}
	return e, nvml.SUCCESS
}

// --- identity ---

func (d *device) GetIndex() (int, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.index, r
}

func (d *device) GetMinorNumber() (int, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.index, r
}

func (d *device) GetUUID() (string, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return "", r
	}
	return d.uuid, r
}

func (d *device) GetName() (string, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return "", r
	}
	return d.model.name, r
}

func (d *device) GetBrand() (nvml.BrandType, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.brand, r
}

func (d *device) GetArchitecture() (nvml.DeviceArchitecture, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.arch, r
}

func (d *device) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return nvml.PciInfo{}, r
	}
	return d.pci, r
}

func (d *device) GetSerial() (string, nvml.Return) {
	_, r := d.begin(featSerial)
	if r != nvml.SUCCESS {
		return "", r
	}
	return d.serial, r
}

func (d *device) GetVbiosVersion() (string, nvml.Return) {
	_, r := d.begin(featVBIOS)
	if r != nvml.SUCCESS {
		return "", r
	}
	return d.model.vbios, r
}

func (d *device) GetCudaComputeCapability() (int, int, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, 0, r
	}
	return d.model.ccMajor, d.model.ccMinor, r
}

func (d *device) GetPersistenceMode() (nvml.EnableState, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	if d.model.persistence {
		return nvml.FEATURE_ENABLED, r
	}
	return nvml.FEATURE_DISABLED, r
}

// GetVirtualizationMode: the simulated hosts are bare metal.
func (d *device) GetVirtualizationMode() (nvml.GpuVirtualizationMode, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return nvml.GPU_VIRTUALIZATION_MODE_NONE, r
}

func (d *device) GetComputeMode() (nvml.ComputeMode, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return nvml.COMPUTEMODE_DEFAULT, r
}

// GetMigMode reports current and pending mode; MIG-capable cards not in
// MIG mode answer DISABLE, others NOT_SUPPORTED. The pending mode differs
// only with the mig_mode_pending fault (a change waiting for a reset).
func (d *device) GetMigMode() (int, int, nvml.Return) {
	_, r := d.begin(featMIG)
	if r != nvml.SUCCESS {
		return 0, 0, r
	}
	current := nvml.DEVICE_MIG_DISABLE
	if d.migEnabled {
		current = nvml.DEVICE_MIG_ENABLE
	}
	pending := current
	if d.migPending {
		pending = nvml.DEVICE_MIG_ENABLE + nvml.DEVICE_MIG_DISABLE - current
	}
	return current, pending, r
}

func (d *device) IsMigDeviceHandle() (bool, nvml.Return) {
	_, r := d.always()
	return false, r
}

func (d *device) GetSupportedEventTypes() (uint64, nvml.Return) {
	_, r := d.begin(featEvents)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.eventTypes, r
}
