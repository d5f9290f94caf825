//go:build cgo

package nvmlbackend

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/validate"
)

// deviceState is what the reader remembers about one device between reads.
// Its mutex is held for the whole read of the device, so concurrent Reads
// take turns per device and the state needs no finer locking.
type deviceState struct {
	mu   sync.Mutex
	uuid string
	// retired is set when the index now belongs to another GPU; a read still
	// holding this state must not allocate into it.
	retired bool

	// static identity, read once (it does not change while the driver is loaded).
	static *staticInfo
	// nvlinks lists the links that exist, discovered once; nvlinksKnown says
	// whether discovery finished.
	nvlinks      []int
	nvlinksKnown bool
	// fields is reused by every read for the batched GetFieldValues call.
	fields      []nvml.FieldValue
	fieldGroups []groupID
	// lastProcessSample is the newest GetProcessUtilization timestamp seen,
	// so each read asks only for newer samples.
	lastProcessSample uint64
	// samplesReadAt is when (Options.Now's clock) the accounting's reader
	// last had an answer to GetProcessUtilization, samples or none
	// (processes.go, sampleWindowStart).
	samplesReadAt time.Time
	// sampleBuf holds each read's process utilization samples, and
	// sampleHint is how many the last read had (process_utilization.go).
	sampleBuf  []nvml.ProcessUtilizationSample
	sampleHint int
	gpm        gpmDeviceState
	// migParentDenied: the MIG-enabled GPU's own process lists answered
	// NO_PERMISSION (unprivileged caller); only the MIG devices' are read.
	migParentDenied bool
	// processHint is how many processes the last read listed: it sizes
	// the first process-list buffer.
	processHint int
	// Scratch kept from one read to the next: merge is mergeContexts'
	// index of a long list, newestSample addUtilization's of many
	// samples.
	merge        map[contextKey]int32
	newestSample map[uint32]int32
	onMIG        map[processKey]bool // migProcesses' processes seen on MIG devices
	// samples hold Device.ProcessSamples, and processes the lists, of the
	// accounting's reader (readMode.processSamples; alternating.go).
	samples      alternating[snapshot.ProcessSample]
	processes    alternating[snapshot.Process]
	migInstances alternating[snapshot.MIGInstance]
	// migDevs keeps the storage of each read's MIG devices
	// (deviceReader.migDevs), giInfos that of its GPU instances' info
	// (by GPU instance ID, as of the last time the MIG devices were
	// listed: cleared then).
	migDevs []migDevice
	giInfos map[int]gpuInstanceRead
	// migReuse is, for the accounting's reader, whether the next read
	// may take migDevs and giInfos as they are (migListReuse), and
	// migReused how many reads have since they were listed.
	migReuse  bool
	migReused int
	// clockEventsSupported is the device's supported clock-event reasons,
	// read once (clockEventsSupportKnown).
	clockEventsSupported    uint64
	clockEventsSupportKnown bool
	// The PCIe byte counters, widened past their 32-bit wrap.
	pcieTx, pcieRx wrappingCounter
	// nvlinkTraffic is the previous read of the NVLink byte counters.
	nvlinkTraffic counterSample
	// energy carries the driver's energy counter over its resets (validate.go).
	energy validate.Counter
	// listing decides which reads list the processes (AccountingOptions.ListProcessesEvery).
	listing processListing
}

// deviceReader reads one device once. It is not shared between goroutines.
type deviceReader struct {
	r     *Reader
	index int
	dev   nvml.Device
	st    *deviceState
	out   *deviceResult

	// gone is set when a call reported the GPU lost mid-read; reading stops
	// and the device is reported down with this reason.
	gone string
	// listAll: this read lists the processes (AccountingOptions.ListProcessesEvery).
	listAll bool

	fields fieldBatch
	// lastEnd is when the last group run ended (run); the field batch
	// between groups moves it on.
	lastEnd time.Time

	// Facts read once per device read and shared by several groups.
	migModeRead  bool
	migModeKnown bool
	migEnabled   bool
	migPending   bool // a mode change waits for a GPU reset
	migListed    bool
	migDevs      []migDevice
	// migReusedList: migDevs is the last read's list (reusesMIGList);
	// migListWhole: this read listed them all.
	migReusedList, migListWhole bool
	giDenied                    bool // GetGpuInstanceById: NO_PERMISSION
}

// readDevice reads device index into out. It never panics: a panic inside a
// group (a broken binding, a mock without a function) becomes that group's
// error.
func (r *Reader) readDevice(index int, out *deviceResult, listAll bool) {
	out.device = snapshot.Device{Index: index}
	dev, ret := r.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		// nvml.h: the handle call itself answers GPU_IS_LOST for a GPU
		// that fell off the bus. Keep the last known UUID here too, so
		// that its gpu_up series and XID counts (the XID 79 that
		// explains the loss) stay with it.
		out.device.DownReason = downReason(ret)
		out.device.UUID = r.knownUUID(index)
		return
	}
	// GetUUID doubles as the liveness probe: it is called on every read,
	// and a lost GPU fails it with GPU_IS_LOST.
	probe := time.Now()
	uuid, ret := dev.GetUUID()
	out.device.CallLatency = time.Since(probe)
	if ret != nvml.SUCCESS {
		out.device.DownReason = downReason(ret)
		// Keep the last known UUID, so that gpu_up{uuid} stays the same
		// series and the device's XID counts stay attached to it.
		out.device.UUID = r.knownUUID(index)
		return
	}
	out.device.UUID = uuid
	out.device.Up = true

	st := r.state(index, uuid)
	st.mu.Lock()
	defer st.mu.Unlock()

	d := &deviceReader{r: r, index: index, dev: dev, st: st, out: out, listAll: listAll}
	d.readAll()
	if d.gone != "" {
		out.device = snapshot.Device{Index: index, UUID: uuid, DownReason: d.gone, CallLatency: out.device.CallLatency}
		out.processes = nil
	}
	r.validateReading(st, out)
}

// readAll runs every enabled group in an order that respects their
// dependencies: NVLink discovery before the batched field read that carries
// NVLink traffic, MIG instances before GPM (which fills per-instance
// metrics) and processes (which map to instances).
func (d *deviceReader) readAll() {
	dev := &d.out.device
	d.run(gInfo, d.readInfo)
	d.run(gNVLink, d.discoverNVLinks)
	d.readFieldBatch()
	d.run(gUtilization, func() { d.readUtilization(&dev.Utilization) })
	d.run(gMemory, func() { d.readMemory(&dev.Memory) })
	d.run(gTemperature, func() { d.readTemperature(&dev.Temperature) })
	d.run(gFan, func() { dev.FanSpeed = d.readFanSpeed() })
	d.run(gClocks, d.readClocks)
	d.run(gClockEvents, func() { dev.ClockEvents = d.readClockEvents() })
	d.run(gPower, func() { d.readPower(&dev.Power) })
	d.run(gPCIe, func() { d.readPCIe(&dev.PCIe) })
	d.run(gECC, func() { d.readECC(&dev.ECC) })
	d.run(gNVLink, func() { dev.NVLinks = d.readNVLinks() })
	d.run(gNVLink, func() { dev.Fabric = d.readFabric() })
	d.run(gMIG, func() {
		dev.MIGInstances = d.readMIGInstances()
		if _, known := d.migMode(gMIG); known {
			dev.MIGModePending = snapshot.Some(d.migPending)
		}
	})
	d.run(gGPM, d.readGPM)
	d.run(gProcesses, func() { d.out.processes = d.readProcesses() })
	d.keepMIGList()
}

// run calls fn if group g is enabled and the device still answers, adds the
// time it took to the group, and turns a panic into the group's error.
func (d *deviceReader) run(g groupID, fn func()) {
	if !d.r.groups[g] || d.gone != "" {
		return
	}
	// One clock read per group: a group starts when the one before it
	// ended (the groups run back to back), and the clock is slow to read
	// on some machines (a tenth of the accounting's tick on a VM).
	start := d.lastEnd
	if start.IsZero() {
		start = time.Now()
	}
	defer func() {
		d.lastEnd = time.Now()
		d.out.stats[g].dur += d.lastEnd.Sub(start)
		if p := recover(); p != nil {
			d.out.stats.fail(g, fmt.Errorf("gpu %d: %s: panic: %v", d.index, g, p))
		}
	}()
	fn()
}

// can reports whether the loaded library exports call c: a call it lacks
// would end the process.
func (d *deviceReader) can(c nvmlCall) bool { return d.r.caps.can(c) }

// ok reports whether an NVML call succeeded, and files its failure: nothing
// for NOT_SUPPORTED, device down for a lost GPU, the group's error otherwise.
func (d *deviceReader) ok(g groupID, call string, ret nvml.Return) bool {
	switch classify(ret) {
	case succeeded:
		return true
	case absent:
		return false
	case deviceGone:
		if d.gone == "" {
			d.gone = downReason(ret)
		}
		return false
	default:
		d.out.stats.fail(g, callError(d.index, call, ret))
		return false
	}
}
