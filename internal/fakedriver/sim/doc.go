//go:build cgo

// Package sim is a simulated host of NVIDIA GPUs behind go-nvml's
// nvml.Interface.
//
// gpuwatch's NVML reader talks to nvml.Interface. On a GPU node that is
// go-nvml's binding of libnvidia-ml.so.1; with --backend=sim it is a *Sim.
// The reader cannot tell them apart: the simulator answers the same calls
// with the same units (mW, mJ, MHz, percent, bytes, KiB for NVLink
// throughput fields) and the same return codes (ERROR_NOT_SUPPORTED for
// what a card lacks, ERROR_GPU_IS_LOST for a lost GPU, ERROR_UNINITIALIZED
// before Init, ERROR_TIMEOUT from an idle event set, ERROR_NOT_FOUND when
// no process-utilization sample is new). So the exact code that reads a
// real GPU runs in every test, in the golden files and in the demo.
//
// # Profiles
//
// A profile is a whole simulated host. Cards are shaped like the real ones:
// model name, memory size and driver reservation, power limit, idle and
// load power, clock ranges, temperature thresholds, PCI device IDs, PCIe
// generation, NVLink count, MIG profiles, and which NVML reads the card
// supports. MIG profiles are the real ones: the A100-SXM4-80GB's from
// go-nvml's mock/dgxa100 tables (copied), the H100-SXM5-80GB's from NVIDIA's MIG user
// guide (`nvidia-smi mig -lgip`: 1g.10gb id 19, 1g.10gb+me 20, 1g.20gb 15,
// 2g.20gb 14, 3g.40gb 9, 4g.40gb 5, 7g.80gb 0; 9.75 to 79.25 GiB).
//
//	h100          one NVIDIA H100 80GB HBM3 (SXM5, Hopper, cc 9.0, 700 W):
//	              GPM, ECC, row remapping, 18 NVLinks (inactive: no peer)
//	dgx-h100      eight H100 with 18 active NVLinks each; a 4-GPU training
//	              job, a 2-GPU job, an inference server; GPU 7 in MIG mode:
//	              3g.40gb (GI 1, running a service), 2g.20gb (GI 5) and
//	              2x1g.10gb (GI 13, 14), each with one compute instance
//	dgx-a100-mig  eight A100-SXM4-80GB (Ampere, cc 8.0, 400 W, 12 NVLinks);
//	              GPUs 0-3 in MIG mode: 7x1g.10gb, 2x3g.40gb, a 7g.80gb split
//	              into 4c+3c compute instances, and 3g.40gb+2g.20gb+2x1g.10gb
//	rtx4090       one GeForce RTX 4090 (Ada, cc 8.9, 450 W, two fans): ECC,
//	              NVLink, GPM, MIG, row remapping, page retirement, memory
//	              temperature and serial number answer NOT_SUPPORTED
//	v100          one Tesla V100-SXM2-32GB (Volta): page retirement instead
//	              of row remapping, no MIG, no GPM
//	large         64 H100 with NVLink, a process on 7 GPUs of every 8 (stress)
//
// SXM modules are passively cooled: like real NVML, their fan calls answer
// NOT_SUPPORTED. Ampere and Hopper answer NOT_SUPPORTED for page retirement
// (they remap rows instead). In MIG mode, device utilization, process
// utilization and remapped rows answer NOT_SUPPORTED, as on a real A100
// or H100.
//
// UUIDs, serial numbers and PCI bus IDs are derived from the profile name
// and GPU index, so they are the same in every run.
//
// # Readings
//
// Every reading is a deterministic function of (profile, GPU index,
// processes, elapsed simulated time). A busy GPU's utilization is a smooth
// wave (a 5-minute swell plus a 47-second ripple, phase-shifted per GPU)
// that never drops below its processes' SM utilization; a GPU without busy
// processes is idle at 0 %. Power, temperature, clocks, performance state
// and clock-event reasons follow utilization: idle GPUs report GPU_IDLE and
// idle clocks; a GPU drawing over powerCapFraction of its power limit
// reports SW_POWER_CAP and lower clocks. Memory used is the driver's reservation
// plus the processes' memory.
//
// Counters only ever grow. Energy (GetTotalEnergyConsumption, mJ), PCIe
// bytes (fields FI_DEV_PCIE_COUNT_TX_BYTES/RX_BYTES) and NVLink bytes
// (fields FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX and RAW_TX/RX, KiB, ScopeId
// = link) are closed-form integrals of their rates, as if the driver had
// been loaded 72 hours before the simulation started. ECC errors, PCIe
// replays and NVLink replay/CRC errors step up now and then on some GPUs.
//
// GPM (Hopper): GpmSampleGet records the device, the simulated time and
// the real time; GpmMetricsGet returns the exact mean of the activity over
// the interval between two samples, in percent (SM util, SM occupancy,
// graphics, tensor, DRAM bandwidth, FP16/32/64), and PCIe and NVLink
// bandwidth in MiB/s (the counters' mean rate), or the instantaneous value
// when both samples were taken at the same simulated time. As nvml.h
// warns, the hardware needs 100 ms between samples: when less than that
// passed on both the simulated and the real clock, every metric reads 0,
// and the same sample twice is INVALID_ARGUMENT. On a MIG-enabled H100,
// GpmMigSampleGet(gpuInstanceID) samples one GPU instance: its metrics are
// the GPU's activity scaled to the part its processes drive (an instance
// without processes reads 0; PCIe and NVLink answer NOT_SUPPORTED); samples
// of different instances cannot be compared (ERROR_INVALID_ARGUMENT), an
// unknown instance is ERROR_NOT_FOUND.
//
// PCIe byte counters are 32 bits wide, as on real drivers: they wrap at
// 2^32 (about every 0.4 s on a busy Gen5 GPU).
//
// GPU fabric (GpuFabricInfo, the C function nvmlDeviceGetGpuFabricInfoV):
// the GPUs of the NVSwitch profiles (dgx-h100, large: Hopper with active
// NVLinks) report a completed registration and a healthy fabric (every
// health field FALSE, the configuration NONE, summary HEALTHY); the fault
// fabric_degraded reports degraded bandwidth and LIMITED_CAPACITY. Every
// other GPU, and a MIG device, answers NOT_SUPPORTED.
//
// Processes: a process of type compute+graphics is in both process lists,
// each time with all of its memory. On a MIG-enabled GPU the GPU's own
// process lists, and its GPU instances (GetGpuInstances,
// GetGpuInstanceById), answer NO_PERMISSION, as NVML does for an
// unprivileged caller, unless privileged is set; the MIG device handles
// list their processes either way.
// GetProcessUtilization answers from a buffer of samples taken every 1/6 s
// over the last 10 s, for the busy compute processes: one sample per
// process, its mean utilization over the buffered periods newer than
// lastSeenTimestamp, stamped with the newest period's time (or, with
// process_samples: every_period, every buffered sample with its past
// timestamp); ERROR_NOT_FOUND when no process was busy.
//
// # Time
//
// The simulated clock is Epoch (2026-01-01T00:00:00Z) plus the elapsed
// time, or, with Config.WallClock (gpuwatch's --backend=sim when the clock
// is not pinned: the demo), the real time at New plus the elapsed time, so
// that the demo's page, ps and job records carry the real date; Sim.Now
// returns it and it stamps field values and process samples.
// Elapsed time is the real time since New, unless pinned: pin_time in the
// config (or Config.PinTime) freezes it, and Sim.SetElapsed moves a pinned
// clock (tests). With a pinned clock every reading and counter is constant,
// which is what golden files need.
//
// # Configuration
//
// A config file is YAML. The schema is a public contract: fields are
// added, never renamed. An unknown key is an error naming the file and
// line and listing the valid keys.
//
//	profile: dgx-h100          # required, unless --sim.profile gives it
//	pin_time: 1h               # optional: freeze the clock 1h after start
//	driver: R535               # optional: answer as that driver branch's
//	                           # library (see "Driver branches" below)
//	seed: node-7               # optional: this host's GPU UUIDs and serials
//	                           # (gpuwatch defaults it to the host name)
//	privileged: true           # optional: the caller is privileged (root with
//	                           # CAP_SYS_ADMIN): a MIG GPU's own process lists
//	                           # and GPU instances answer, not NO_PERMISSION
//	init_error: lib_rm_version_mismatch  # optional: nvmlInit fails with this
//	                           # error (lib_rm_version_mismatch,
//	                           # driver_not_loaded, no_permission, unknown_error)
//	driver_version: "550.90.07"  # optional: the version string the driver
//	                           # reports, verbatim (a hostile one for tests)
//	process_samples: every_period  # optional: GetProcessUtilization answers
//	                           # every buffered 1/6 s sample; default
//	                           # per_process: one per process, its mean since
//	                           # lastSeenTimestamp (see processes.go)
//	processes:                 # GPU processes the simulated driver reports;
//	                           # replaces the profile's defaults ([] = none)
//	  - gpu: 0                 # device index
//	    pid: 4242              # required, non-zero
//	    used_memory_bytes: 2147483648
//	    sm_utilization: 0.6    # ratio 0-1 (NVML reports percent)
//	    memory_utilization: 0.3
//	    type: compute          # compute (default), graphics, or compute+graphics
//	                           # (then in both process lists, as in NVML);
//	                           # mps (an MPS client, in the MPS list only)
//	                           # or compute+mps (in both)
//	    start: 10s             # optional: listed from 10s (default 0) ...
//	    end: 5m                # ... until 5m (default: for ever)
//	    schedule:              # optional: utilization over time (what the
//	      - {at: 1m, sm_utilization: 0.9, memory_utilization: 0.4}
//	                           # per-process samples report; the device's
//	                           # own readings keep following sm_utilization)
//	  - {gpu: 0, pid: 77, gpu_instance: 7, compute_instance: 0}
//	                           # on a MIG-enabled GPU gpu_instance is
//	                           # required; compute_instance defaults to 0
//	processes_from: live.yaml  # optional: GPU processes that come and go at
//	                           # run time: a file holding `processes:` entries
//	                           # as above, re-read whenever it changes (write
//	                           # it with a rename), each entry reported while
//	                           # its PID runs; a missing file is no processes.
//	                           # They hold memory and have utilization samples
//	                           # but leave the GPU's load as configured.
//	                           # Relative to the config file.
//	faults:
//	  - {gpu: 3, lost_after: 30s}                  # GPU_IS_LOST from then on
//	  - {gpu: 4, hang_after: 1m, hang_for: 20s}    # every call blocks meanwhile
//	  - {gpu: 1, unsupported: [power, fan_speed]}  # those reads: NOT_SUPPORTED
//	  - {gpu: 2, xid: 79, at: 10s}                 # one XID event at 10s
//	  - {gpu: 0, mig_mode_pending: true}           # a MIG mode change awaits a reset
//	  - {gpu: 3, fabric_degraded: true}            # NVSwitch fabric: degraded bandwidth
//	  - {gpu: 5, lost_after: 1m, lost_handle: true} # and the handle call answers it too
//	  - {gpu: 6, process_list_size: doubling}      # process lists never fit
//	  - {gpu: 0, retired_pages_size: one_more}     # retired-page counts never fit
//	                           # (a GPU with page retirement: profile v100)
//	  - {gpu: 5, slow_calls: 200ms}                # every call answers 200ms late
//	  - {gpu: 6, bogus_values: [temperature, power]}  # sentinels, impossible values
//	  - {gpu: 7, energy_reset_at: 1m}              # energy counter restarts (driver reload)
//	  - {gpu: 1, ecc_uncorrectable: 2, at: 30s}     # uncorrectable ECC errors
//	  - {gpu: 2, row_remap: pending, at: 30s}       # or failure
//	  - {gpu: 2, reset_at: 2m}                      # a GPU reset
//
// slow_calls: every call on the device waits this long before it answers
// (as a driver without persistence mode on a busy host does).
// bogus_values names readings that answer values no GPU can have:
// temperature (0xFFFFFFFF °C), power (0xFFFFFFFF mW), clocks
// (0xFFFFFFFF MHz current), utilization (255 %), memory (used 1 GiB above
// total, free wrapped to ~1.8e19), pstate (-1), fan_speed (0xFFFFFFFF %),
// process_memory (2^63 bytes per process); BogusValueNames lists them.
// energy_reset_at: the energy counter starts again from 0 at that elapsed
// time, as after a driver reload.
// ecc_uncorrectable: that many uncorrectable ECC errors at 'at'; the
// volatile and aggregate counts (GetTotalEccErrors, GetMemoryErrorCounter)
// rise. row_remap: at 'at', a row remap that is pending (waits for a GPU
// reset) or that failed (no spare row; it stays), in GetRemappedRows.
// reset_at: a GPU reset at that elapsed time: the volatile ECC counts
// start again from 0 and pending remaps are applied.
//
// Durations are Go durations ("500ms", "30s", "1h30m"). A fault entry may
// combine kinds. New checks the config against the profile: a GPU index
// out of range, an unknown profile or unsupported name, a MIG instance
// that does not exist, a duplicate PID or a process that does not fit in
// its GPU's memory is an error naming the entry's file and line.
//
// hang_after/hang_for: from hang_after on, every call on the device blocks,
// like an NVML call stuck on a GPU in a bad state, until hang_for has passed
// (forever without hang_for, or with a pinned clock). The reader reports such
// a GPU down ("not_answering") once its collection deadline passes.
//
// lost_after: from that elapsed time on, every call on the device, modelled
// or not, returns ERROR_GPU_IS_LOST (and so do its MIG devices).
// DeviceGetCount still counts it and DeviceGetHandleByIndex still returns
// its handle, as real NVML does for a GPU that fell off the bus; with
// lost_handle: true DeviceGetHandleByIndex answers ERROR_GPU_IS_LOST
// itself, as nvml.h documents for nvmlDeviceGetHandleByIndex_v2.
//
// process_list_size: the GPU's (and its MIG devices') process lists answer
// ERROR_INSUFFICIENT_SIZE to every buffer the caller offers, asking for
// twice the entries offered (doubling) or for one more (one_more: a list
// changing under the caller), as a driver in trouble does. The lists'
// C-function form, RunningProcessesSized(kind, capacity), is what the fake
// libnvidia-ml.so.1 answers with and what the NVML reader drives with a
// bound; the Go methods (GetComputeRunningProcesses, ...) answer
// ERROR_INSUFFICIENT_SIZE, the outcome a bounded caller ends with.
//
// retired_pages_size: doubling or one_more, the same for the GPU's retired
// pages (nvmlDeviceGetRetiredPages and _v2): every call answers
// ERROR_INSUFFICIENT_SIZE, the count query (capacity 0) included, asking
// for twice the entries offered or for one more, as a sick driver whose
// count keeps growing does. RetiredPagesSized(cause, capacity) is the C
// function's form, which the fake libnvidia-ml.so.1 answers with and the
// NVML reader drives with a bound; GetRetiredPages and GetRetiredPages_v2
// answer ERROR_INSUFFICIENT_SIZE. Only GPUs with page retirement take it
// (Volta: the v100 profile; Ampere and later remap rows instead): on
// another, New says so.
//
// xid/at: the XID is delivered once to every event set on which the device
// is registered for EventTypeXidCriticalError, as EventData{Device,
// EventType: EventTypeXidCriticalError, EventData: xid}, as soon as its
// time has passed, unless that time is before the device's registration:
// as nvml.h says, events that occurred before nvmlDeviceRegisterEvents are
// not recorded. EventSet.Wait(ms) blocks in real time up to the timeout,
// wakes when an event falls due or SetElapsed moves the clock, and returns
// ERROR_TIMEOUT when nothing is due. While a registered device is lost,
// Wait answers ERROR_GPU_IS_LOST (until the set is rebuilt without it);
// while one hangs, Wait blocks past its timeout. Free does not wake a Wait
// in progress.
//
// unsupported: the names below, each turning these NVML reads into
// ERROR_NOT_SUPPORTED (UnsupportedNames lists them):
//
//	utilization             GetUtilizationRates
//	encoder                 GetEncoderUtilization
//	decoder                 GetDecoderUtilization
//	memory                  GetMemoryInfo, GetMemoryInfo_v2
//	bar1                    GetBAR1MemoryInfo
//	temperature             GetTemperature
//	memory_temperature      field FI_DEV_MEMORY_TEMP
//	temperature_thresholds  GetTemperatureThreshold
//	fan_speed               GetNumFans, GetFanSpeed, GetFanSpeed_v2
//	pstate                  GetPerformanceState
//	power                   GetPowerUsage, field FI_DEV_POWER_INSTANT
//	power_limit             GetEnforcedPowerLimit, GetPowerManagementLimit(+Default, Constraints)
//	energy                  GetTotalEnergyConsumption, field FI_DEV_TOTAL_ENERGY_CONSUMPTION
//	clocks                  GetClockInfo, GetMaxClockInfo
//	clock_events            GetCurrentClocksEventReasons (and ...ThrottleReasons), GetSupportedClocksEventReasons
//	pcie                    PCIe link generation/width (current, max), fields FI_DEV_PCIE_COUNT_TX/RX_BYTES
//	pcie_replay             GetPcieReplayCounter, field FI_DEV_PCIE_REPLAY_COUNTER
//	ecc                     GetEccMode, GetTotalEccErrors, GetMemoryErrorCounter
//	retired_pages           GetRetiredPages(_v2), GetRetiredPagesPendingStatus
//	remapped_rows           GetRemappedRows
//	nvlink                  GetNvLinkState, GetNvLinkErrorCounter, GetNvLinkVersion, NVLink fields
//	gpm                     GpmSampleGet, GpmMigSampleGet; GpmQueryDeviceSupport says unsupported
//	processes               GetComputeRunningProcesses, GetGraphicsRunningProcesses
//	process_utilization     GetProcessUtilization
//	serial                  GetSerial
//	vbios                   GetVbiosVersion
//	mig                     GetMigMode, MIG device handles and instances
//	events                  GetSupportedEventTypes, RegisterEvents
//
// # Driver branches
//
// Without a driver key the simulated library has every function of the
// go-nvml it is built with. With driver: RNNN (one of nvmlbranch.Names:
// R470 R510 R525 R535 R550 R570 R575 R580) it is that branch's
// libnvidia-ml.so.1: Extensions().LookupSymbol finds only the functions
// the branch exports; a field ID the branch does not know answers a
// per-field ERROR_INVALID_ARGUMENT; the version calls report a released
// driver of the branch. Sim.Library returns the library a program should
// use: on it, calling a go-nvml method that needs a C function the branch
// lacks panics with a *MissingFunctionError, because a real process dies
// there (go-nvml binds lazily: "symbol lookup error: undefined symbol").
// gpuwatch --backend=sim uses Sim.Library. The guard is generated
// (guard_gen.go, by internal/fakedriver/sim/internal/genguard) from
// go-nvml's interfaces, and which C symbols each method calls comes from nvmlbranch.
//
// # Calls the simulator does not model
//
// NVML has hundreds of calls. The simulator's types embed small generated
// types (safetynet_gen.go) that have every method of go-nvml's interfaces:
// unmodelledLibrary (nvml.Interface), unmodelledDevice (nvml.Device, for
// physical and MIG device handles), unmodelledGpuInstance and
// unmodelledComputeInstance. Modelled calls are plain methods of the
// simulator's own types that shadow the generated ones. An unmodelled call
// returns zero values and ERROR_NOT_SUPPORTED (ERROR_GPU_IS_LOST on a lost
// GPU and on the MIG devices of one, ERROR_UNINITIALIZED before Init and
// after the last Shutdown), never a panic; on a hung GPU it blocks like a
// modelled call, even when it has no Return result. Library calls of the
// form DeviceGetX(device, ...) forward to device.GetX(...) (a nil handle
// is ERROR_INVALID_ARGUMENT), and likewise for GPU instances, compute
// instances, event sets and GPM samples, so both spellings agree.
//
// A handle's safety net is one func value that says which code its
// unmodelled calls answer (safetynet.go); the GPU and compute instance
// ones are empty. No reflect runs at run time, nothing records calls, and
// the simulator links none of go-nvml's mock packages (the A100 MIG table
// is a copy of go-nvml's mock/dgxa100 data, checked by a test). The
// generator (internal/fakedriver/sim/internal/gensafetynet) reads
// go-nvml's interfaces with reflect at go generate time. After a go-nvml upgrade that changes them
// the package does not compile (each generated type is checked against
// its interface), and the generator's and this package's tests say the
// file is stale, until it is regenerated with
//
//	go generate ./internal/fakedriver/sim
package sim
