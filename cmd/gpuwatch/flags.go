package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"

	"github.com/gpuwatch/gpuwatch/internal/backend/sim"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// commonFlags are the flags every command shares: where readings come from,
// which collectors run, and logging.
type commonFlags struct {
	backend     string
	simProfile  string
	simConfig   string
	simPinTime  time.Duration
	collectors  map[string]*bool
	metricsFile string
	pidLabels   bool
	timeout     time.Duration
	log         *promslog.Config
}

func registerCommonFlags(app *kingpin.Application) *commonFlags {
	f := &commonFlags{collectors: map[string]*bool{}, log: &promslog.Config{}}
	app.Flag("backend", "Where GPU readings come from: nvml (the NVIDIA driver's libnvidia-ml.so.1) or sim (a simulated fleet, no GPU needed).").
		Default("nvml").EnumVar(&f.backend, "nvml", "sim")
	app.Flag("sim.profile", "Simulated fleet for --backend=sim: "+simProfileList()+". Overrides the profile in --sim.config.").
		StringVar(&f.simProfile)
	app.Flag("sim.config", "YAML file describing the simulated fleet, its processes and faults (see README, 'Simulator').").
		ExistingFileVar(&f.simConfig)
	app.Flag("sim.pin-time", "Freeze the simulator's clock this long after its start, so every reading is constant (golden tests). 0 lets it run.").
		Default("0s").DurationVar(&f.simPinTime)

	for g, on := range defaultCollectorFlags() {
		f.collectors[g] = app.Flag("collector."+g, fmt.Sprintf("Enable the %s collector (default %s; --no-collector.%s disables it).", g, onOff(on), g)).
			Default(fmt.Sprint(on)).Bool()
	}
	app.Flag("metrics.config", "YAML file that enables or disables metrics by name or glob (enable: [...], disable: [...]).").
		ExistingFileVar(&f.metricsFile)
	app.Flag("collector.processes.pid-labels", "Export one series per GPU process with pid and command labels instead of one per owner. Raises cardinality; off by default.").
		Default("false").BoolVar(&f.pidLabels)
	app.Flag("collection.timeout", "Upper bound on one collection of every GPU; a scrape never waits longer.").
		Default("10s").DurationVar(&f.timeout)
	promslogflag.AddFlags(app, f.log)
	return f
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func simProfileList() string {
	var names []string
	for _, p := range sim.Profiles() {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// enabledCollectors maps every collector group to whether the flags switch
// it on. Every group is present, so no package falls back to its own default.
func (f *commonFlags) enabledCollectors() map[string]bool {
	out := make(map[string]bool, len(f.collectors))
	for g, on := range f.collectors {
		out[g] = *on
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
