// Command gpuwatch is a Prometheus exporter for NVIDIA GPUs: device health
// read straight from NVML, and who is using each GPU.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
)

// exitNoDriver is the exit status when NVIDIA's driver library is not on this
// host at all (sysexits' EX_UNAVAILABLE): scripts/run.sh starts the demo on it,
// and on nothing else, so that a driver that is there but failing is reported,
// never hidden behind simulated GPUs. gpuwatch itself never falls back.
const exitNoDriver = 69

// errNoDriver marks the error of a host without libnvidia-ml.so.1.
var errNoDriver = errors.New("no NVIDIA driver on this host")

func main() {
	// Heap profiling stays off unless /debug/pprof can serve the profile
	// (serve --web.enable-pprof turns it back on): its sampling keeps a
	// record per allocation site for the life of the process, memory that
	// an exporter nobody profiles would pay for in RSS.
	runtime.MemProfileRate = 0
	tuneGC()
	capMaxProcs()
	os.Exit(run(os.Args[1:]))
}

// run parses args and runs the chosen command; it returns the exit status.
func run(args []string) int {
	app, cmds := newApp()
	chosen, err := app.Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpuwatch: %v (see gpuwatch --help)\n", explainParseError(app, err, args))
		return 2
	}
	for _, c := range cmds {
		if c.name() == chosen {
			if err := c.run(); err != nil {
				if status, ok := errors.AsType[exitStatus](err); ok {
					if status.msg != "" {
						fmt.Fprintf(os.Stderr, "gpuwatch: %s\n", status.msg)
					}
					return status.code
				}
				fmt.Fprintf(os.Stderr, "gpuwatch: %v\n", err)
				if errors.Is(err, errNoDriver) {
					return exitNoDriver
				}
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "gpuwatch: unknown command %q\n", chosen)
	return 2
}

// newApp declares every flag and command.
func newApp() (*kingpin.Application, []command) {
	app := kingpin.New("gpuwatch", "Prometheus exporter for NVIDIA GPUs: device health straight from NVML (no DCGM), "+
		"and which process, container, pod or Slurm job uses each GPU.\n\n"+
		"Without a GPU, try the simulator: gpuwatch --backend=sim --sim.profile=dgx-h100")
	app.Version(version.Print("gpuwatch"))
	app.HelpFlag.Short('h')
	useCommandHelp(app)

	cfg := registerCommonFlags(app)
	serve := newServeCommand(app, cfg)
	cmds := []command{
		serve,
		newTextfileCommand(app, cfg),
		newMetricsCommand(app, cfg),
		newPsCommand(app, cfg),
		newHealthCommand(app, cfg, serve),
		newDoctorCommand(app, cfg, serve),
		newReportCommand(app),
		newJobCommand(app, cfg),
	}
	return app, append(cmds, newServiceCommands(app, serve)...)
}

// command is one subcommand: its kingpin name and what it does.
type command interface {
	name() string
	run() error
}
