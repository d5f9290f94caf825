package main

import (
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"

	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// commonFlags are the flags every command shares: where readings come from,
// which collectors run, and logging.
type commonFlags struct {
	// waitForGPM is set by the commands that read once and show GPM
	// figures (textfile, doctor's dashboard check): their first reading
	// waits for a whole GPM window.
	waitForGPM bool
	// readsOnce is set by textfile without --interval: it writes one
	// reading and exits, so nothing that integrates between readings
	// (accounting, the job journal) starts.
	readsOnce bool

	backend    string
	simProfile string
	simConfig  string
	simPinTime time.Duration
	simSeed    string
	// command is the subcommand that runs, for hints ("" or "serve").
	command     string
	collectors  map[string]*bool
	metricsFile string
	pidLabels   bool
	compat      string
	hostname    string
	timeout     time.Duration
	log         *promslog.Config
	attribution attributionFlags
	slurm       slurmFlags
	smi         smiFlags

	// hostnameLabel names the host label of the dcgm series; empty: the
	// name dcgmVersion's release writes.
	hostnameLabel string
	// dcgmVersion is the dcgm-exporter release whose names --compat=dcgm
	// serves.
	dcgmVersion string
	accounting  accountingFlags
	journal     journalFlags
	health      healthFlags
}

func registerCommonFlags(app *kingpin.Application) *commonFlags {
	f := &commonFlags{collectors: map[string]*bool{}, log: &promslog.Config{}}
	app.Flag("backend", "Where GPU readings come from: nvml (the NVIDIA driver's libnvidia-ml.so.1), nvidia-smi (runs nvidia-smi each collection: fewer metrics, no cgo; on Windows, or a remote host with --nvidia-smi.command), sim (a simulated fleet, no GPU needed) or none (no GPU: a Slurm controller serving only --collector.slurm).").
		Default(defaultBackend).EnumVar(&f.backend, "nvml", "nvidia-smi", "sim", "none")
	app.Flag("sim.profile", "Simulated fleet for --backend=sim: "+simProfileList()+". Overrides the profile in --sim.config.").
		StringVar(&f.simProfile)
	app.Flag("sim.config", "YAML file describing the simulated fleet, its processes and faults (see docs/simulator.md).").
		ExistingFileVar(&f.simConfig)
	app.Flag("sim.pin-time", "Freeze the simulator's clock this long after its start, so every reading is constant (golden tests). 0 lets it run.").
		Default("0s").DurationVar(&f.simPinTime)
	app.Flag("sim.seed", "Makes the simulated GPUs' UUIDs and serials this host's own (stable across restarts), so that two simulated hosts never share a UUID. Default: the seed in --sim.config, else the host name.").
		StringVar(&f.simSeed)

	defaults := defaultCollectorFlags()
	for _, g := range snapshot.AllGroups {
		on := defaults[g]
		f.collectors[g] = app.Flag("collector."+g, fmt.Sprintf("Enable the %s collector: %s (default %s).", g, collectorHelp[g], onOff(on))).
			Default(fmt.Sprint(on)).Bool()
	}
	app.Flag("metrics.config", "YAML file that enables or disables metrics by name or glob (enable: [...], disable: [...]).").
		ExistingFileVar(&f.metricsFile)
	app.Flag("collector.processes.pid-labels", "Export one series per GPU process with pid and command labels instead of one per owner. command is the executable's name (the whole command line only with --attribution.full-command-lines). Raises cardinality; off by default.").
		Default("false").BoolVar(&f.pidLabels)
	app.Flag("compat", "Naming schemes to export, comma-separated: native (gpuwatch's names), dcgm (dcgm-exporter's DCGM_FI_* names, units and labels, so its dashboards, alerts and autoscaler rules keep working), or dcgm,native (both; see docs/dcgm-compat.md).").
		Default("native").StringVar(&f.compat)
	app.Flag("compat.hostname", "Hostname label of the --compat=dcgm series. Empty: $NODE_NAME when set (Kubernetes), else the host name.").
		StringVar(&f.hostname)
	app.Flag("compat.hostname-label", "Name of the host label of the --compat=dcgm series: Hostname, as dcgm-exporter releases up to 4.5.3-4.8.2 write it, or hostname, as 4.8.3 and later write it (upstream pull request #655). Default: Hostname with --compat.dcgm-version=4.8, hostname with 4.9 and 4.10.").
		EnumVar(&f.hostnameLabel, exporter.DCGMHostnameLabel, exporter.DCGMHostnameLabelLower)
	app.Flag("compat.dcgm-version", "dcgm-exporter release whose metric names, units and labels --compat=dcgm serves: 4.8 (releases up to 4.8: DCGM_FI_DEV_GPU_UTIL in percent, DCGM_FI_DEV_FB_USED in MiB, ...), 4.9 (DCGM 4.7's names, several in base units: DCGM_FI_DEV_GPU_UTIL_RATIO, DCGM_FI_DEV_FB_USED_BYTES, ..., and the DCGM_FI_SYSTEM_DRIVER_VERSION label) or 4.10 (4.9 with DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND and its kin). Pick the release your dashboards, alerts and adapter rules were written for; see docs/dcgm-compat.md.").
		Default(exporter.DCGMVersionNames[0]).EnumVar(&f.dcgmVersion, exporter.DCGMVersionNames...)
	app.Flag("collection.timeout", "Upper bound on reading every GPU in one collection (owner lookups get --attribution.timeout more). A GPU whose read has not returned by then is served from its last completed reading (gpu_reading_age_seconds says how old: a slow driver), and reported down (gpu_up 0) once no read of it has returned for three timeouts. 5s: a healthy GPU reads in milliseconds, and 5s plus 1s of attribution stays below Prometheus's default 10s scrape_timeout; keep the sum below yours.").
		Default("5s").DurationVar(&f.timeout)
	f.smi.register(app)
	f.attribution.register(app)
	f.slurm.register(app)
	f.accounting.register(app)
	f.journal.register(app)
	f.health.register(app)
	promslogflag.AddFlags(app, f.log)
	return f
}

// collectorHelp says in a few words what each collector group reads.
var collectorHelp = map[string]string{
	snapshot.GroupInfo:        "gpu_info identity (name, bus id, serial, driver, modes)",
	snapshot.GroupUtilization: "GPU, memory, encoder and decoder utilization",
	snapshot.GroupMemory:      "framebuffer memory total/used/free/reserved and BAR1",
	snapshot.GroupTemperature: "GPU and memory temperature and slowdown/shutdown thresholds",
	snapshot.GroupFan:         "fan speed (boards with fans; SXM modules have none)",
	snapshot.GroupClocks:      "current and max clocks per domain, performance state",
	snapshot.GroupClockEvents: "clock-event (throttle) reasons, one series per reason",
	snapshot.GroupPower:       "power draw, enforced limit and the energy counter",
	snapshot.GroupPCIe:        "PCIe traffic counters, link generation and width, replays",
	snapshot.GroupECC:         "ECC error counters, retired pages and remapped rows",
	snapshot.GroupNVLink:      "per-link NVLink state, traffic and error counters",
	snapshot.GroupXID:         "XID error events counted by code (NVML event set)",
	snapshot.GroupGPM:         "Hopper+ GPM profiling: SM, tensor, DRAM and FP activity",
	snapshot.GroupMIG:         "MIG instances: identity, memory and GPM per instance",
	snapshot.GroupProcesses:   "GPU processes: memory and SM/memory utilization per owner",
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// enabledCollectors maps every collector group to whether the flags switch
// it on. Every group is present, so no package falls back to its own default.
func (f *commonFlags) enabledCollectors() map[string]bool {
	out := make(map[string]bool, len(f.collectors))
	for g, on := range f.collectors {
		// Without a GPU no GPU group can succeed: off, rather than reported failing.
		out[g] = *on && f.backend != "none"
	}
	return out
}

// defaultCollectorFlags is every collector group with its default state.
func defaultCollectorFlags() map[string]bool {
	defaults := exporter.DefaultCollectors()
	out := make(map[string]bool, len(snapshot.AllGroups))
	for _, g := range snapshot.AllGroups {
		out[g] = defaults[g]
	}
	return out
}

// check refuses nonsensical values of the shared flags, naming the flag:
// a zero or negative timeout or interval would otherwise be replaced by a
// default somewhere below, silently.
func (f *commonFlags) check() error {
	positive := []struct {
		flag string
		d    time.Duration
	}{
		{"--collection.timeout", f.timeout},
		{"--attribution.timeout", f.attribution.timeout},
		{"--attribution.cache-ttl", f.attribution.cacheTTL},
		{"--attribution.revalidate-interval", f.attribution.revalidate},
		{"--slurm.timeout", f.slurm.timeout},
		{"--slurm.poll-interval", f.slurm.pollInterval},
	}
	for _, p := range positive {
		if p.d <= 0 {
			return fmt.Errorf("%s=%s: must be positive", p.flag, p.d)
		}
	}
	if f.simPinTime < 0 {
		return fmt.Errorf("--sim.pin-time=%s: must not be negative (0 lets the clock run)", f.simPinTime)
	}
	return f.smi.check(f.backend)
}
