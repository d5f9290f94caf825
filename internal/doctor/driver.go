package doctor

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// checkDriver: the library loads, its version and branch, and the metric
// groups that branch limits.
func checkDriver(env Env) []Result {
	if env.SnapshotErr != nil {
		return []Result{fail("driver", printable(env.SnapshotErr.Error()), driverFix(env.SnapshotErr), true)}
	}
	s := env.Snapshot
	d := s.Driver
	library := d.Library
	if env.Backend == "sim" {
		library = "simulator (--backend=sim)"
	}
	fix := "a newer driver branch serves them (docs/metrics-guide.md, driver branches); or turn the group off with --no-collector.GROUP"
	if env.Backend == "nvidia-smi" {
		fix = "--backend=nvml serves them where gpuwatch runs on the GPUs' host and can load libnvidia-ml.so.1 (docs/nvidia-smi.md); or turn the group off with --no-collector.GROUP"
	}
	version := d.Version
	if version == "" {
		version = s.DriverVersion
	}
	// The driver's own text: a terminal must not interpret it.
	version = printable(version)
	found := fmt.Sprintf("library %s, driver %s", library, orUnknown(version))
	if d.Branch != "" {
		found += ", branch " + d.Branch
	}
	if s.CUDADriverVersion != "" {
		found += ", CUDA " + s.CUDADriverVersion
	}
	out := []Result{ok("driver", found)}
	if len(d.Limits) == 0 {
		out = append(out, ok("driver limits", "the driver serves every enabled metric group"))
	} else {
		var parts []string
		for _, l := range d.Limits {
			parts = append(parts, l.Group+" ("+l.Reason+")")
		}
		out = append(out, fail("driver limits", "this driver branch limits: "+strings.Join(parts, "; "), fix, false))
	}
	return out
}

// checkDevices: per GPU, it answers and its device node is usable by this
// user; persistence mode; MIG; the process list.
func checkDevices(env Env) []Result {
	if env.Snapshot == nil {
		return nil
	}
	s := env.Snapshot
	if len(s.Devices) == 0 {
		return []Result{fail("GPUs", "the driver reports no GPU", "check `nvidia-smi -L` and dmesg for the driver's complaints", env.Backend == "nvml")}
	}
	var out []Result
	var down []string
	hung := true // every down GPU is not_answering, rather than lost
	for _, d := range s.Devices {
		if !d.Up {
			down = append(down, fmt.Sprintf("%d (%s)", d.Index, d.DownReason))
			hung = hung && d.DownReason == "not_answering"
		}
	}
	if len(down) > 0 {
		fix := "a lost GPU needs a reset or reboot (nvidia-smi -r); see dmesg for XIDs"
		if hung {
			fix = "no NVML call of theirs returned within three --collection.timeout: see dmesg for XIDs and the driver's health; a hung GPU needs a reset (nvidia-smi -r) or reboot"
		}
		out = append(out, fail("GPUs", fmt.Sprintf("%d GPUs, down: %s", len(s.Devices), strings.Join(down, ", ")),
			fix, len(down) == len(s.Devices)))
	} else {
		out = append(out, ok("GPUs", fmt.Sprintf("%d GPUs, every one answers", len(s.Devices))))
	}
	out = append(out, checkLatency(env)...)
	out = append(out, checkDeviceNodes(env)...)

	var persistOff, mig []string
	placementsHidden := false
	for _, d := range s.Devices {
		switch d.Info.PersistenceMode {
		case "disabled":
			persistOff = append(persistOff, fmt.Sprint(d.Index))
		}
		if d.Info.MIGMode == "enabled" {
			mig = append(mig, fmt.Sprint(d.Index))
		}
		for _, m := range d.MIGInstances {
			placementsHidden = placementsHidden || !m.PlacementStart.Valid
		}
	}
	if len(persistOff) > 0 {
		out = append(out, fail("persistence mode", "off on "+gpuList(persistOff),
			"run nvidia-persistenced (or nvidia-smi -pm 1): without it the driver tears GPU state down between clients and each collection pays to bring it back", false))
	} else {
		out = append(out, ok("persistence mode", "on (or not reported) on every GPU"))
	}
	if len(mig) > 0 {
		found := "MIG mode on " + gpuList(mig) + ": per-instance memory and GPM in gpu_mig_*; whole-GPU utilization is not reported there"
		if placementsHidden {
			// Only Kubernetes DRA claims on MIG devices need it
			// (docs/kubernetes-dra.md), so this is no failure.
			found += "; NVML does not tell this user the GPU instances' placements (it needs root with CAP_SYS_ADMIN or the MIG monitor capability), so DRA claims on MIG devices are matched by profile name only"
		}
		out = append(out, ok("MIG", found))
	} else {
		out = append(out, skip("MIG", "no GPU in MIG mode"))
	}
	if env.Collectors[snapshot.GroupProcesses] {
		out = append(out, checkProcessList(s))
	}
	return out
}

// checkProcessList: the driver lists each GPU's processes. A list that
// failed, or that the driver does not support, is no "0 processes".
func checkProcessList(s *snapshot.Snapshot) Result {
	var unsupported, neverFit []string
	for _, d := range s.Devices {
		if !d.Up {
			continue
		}
		switch d.ProcessesUnknown {
		case "not_supported":
			unsupported = append(unsupported, fmt.Sprint(d.Index))
		case "insufficient_size":
			neverFit = append(neverFit, fmt.Sprint(d.Index))
		}
	}
	st := s.Groups[snapshot.GroupProcesses]
	switch {
	case len(neverFit) > 0:
		found := "the driver's process lists of " + gpuList(neverFit) + " never fit (it keeps asking for more entries): their processes are unknown"
		if st.Err != nil {
			found += "; " + st.Err.Error()
		}
		return fail("process list", found,
			"a driver in trouble: check its health (dmesg, nvidia-smi); those GPUs' other readings and the other GPUs' processes are served", true)
	case st.Err != nil:
		return fail("process list", st.Err.Error(),
			"the process-list calls need the same device access as nvidia-smi; in a container, share the host PID namespace (--pid=host, hostPID: true)", true)
	case len(unsupported) > 0:
		return fail("process list", "the driver does not list processes on "+gpuList(unsupported)+" (not supported): their processes and gpu_processes are absent",
			"process lists need a driver that supports them on this GPU (a vGPU guest or an old consumer driver may not); nothing else is affected", false)
	}
	return ok("process list", fmt.Sprintf("the driver lists GPU processes to this user (%d now)", len(s.Processes)))
}

// slowCall is an NVML call slower than any a healthy driver makes (well
// under a millisecond; a first call without persistence mode, tens; a sick driver, hundreds).
const slowCall = 100 * time.Millisecond

// checkLatency: NVML answers at a healthy driver's speed. A slow one (no
// persistence mode on a busy host) reads each GPU in seconds: gpuwatch
// serves its late readings, but they age, and doctor says why.
func checkLatency(env Env) []Result {
	if env.Backend == "nvidia-smi" {
		return []Result{skip("NVML latency", "not measured: --backend=nvidia-smi runs nvidia-smi each collection (gpuwatch_collector_duration_seconds says how long it takes)")}
	}
	var slowest time.Duration
	var late []string
	for _, d := range env.Snapshot.Devices {
		if !d.Up {
			continue
		}
		slowest = max(slowest, d.CallLatency)
		if env.CollectionTimeout > 0 && d.ReadingAge > env.CollectionTimeout {
			late = append(late, fmt.Sprint(d.Index))
		}
	}
	if slowest < slowCall && len(late) == 0 {
		return []Result{ok("NVML latency", fmt.Sprintf("NVML calls answer in %s", slowest.Round(time.Microsecond)))}
	}
	found := fmt.Sprintf("NVML calls are slow (%d ms each)", slowest.Milliseconds())
	if len(late) > 0 {
		found += fmt.Sprintf("; %s read in more than --collection.timeout=%s and served late", gpuList(late), env.CollectionTimeout)
	}
	return []Result{fail("NVML latency", found,
		"raise --collection.timeout; check the driver's health (persistence mode: nvidia-persistenced or nvidia-smi -pm 1; dmesg for XIDs)", false)}
}

// printable replaces control characters (newlines, escapes) in text that
// comes from the driver, so that one line of the report stays one line
// and a terminal is not driven by it.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// gpuList names GPUs by index: "GPU 7", "GPUs 2, 7".
func gpuList(indexes []string) string {
	if len(indexes) == 1 {
		return "GPU " + indexes[0]
	}
	return "GPUs " + strings.Join(indexes, ", ")
}
