package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/internal/doctor"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

type doctorCommand struct {
	common    *commonFlags
	web       *web.FlagConfig
	output    string
	nvidiaSMI string
	// nvidiaSMITimeout bounds the nvidia-smi comparison on its own: a
	// healthy nvidia-smi takes seconds where a socket takes milliseconds.
	nvidiaSMITimeout time.Duration
	// checkFile is a dashboard or rules file whose dcgm-exporter names
	// doctor checks against --compat and --compat.dcgm-version.
	checkFile string
}

func newDoctorCommand(app *kingpin.Application, common *commonFlags, serve *serveCommand) *doctorCommand {
	c := &doctorCommand{common: common, web: serve.web}
	cmd := app.Command("doctor", "Check this host for what gpuwatch needs, with the flags given: driver, device access, procfs, cgroups, "+
		"each owner source, Slurm, the web config, readings against nvidia-smi, and with --compat=dcgm the panels of dcgm-exporter's released dashboard that stay empty on this host. One line per check (✔ ok, ✘ failed, – not applicable), "+
		"with the fix for each failure; exits 0 only when every check the flags need passes.")
	cmd.Flag("output", "Output format: text or json.").Short('o').Default("text").EnumVar(&c.output, "text", "json")
	cmd.Flag("doctor.nvidia-smi", "nvidia-smi to compare readings with; empty: nvidia-smi on PATH, if any.").StringVar(&c.nvidiaSMI)
	cmd.Flag("doctor.nvidia-smi-timeout", "How long nvidia-smi may take before the doctor gives up on it (and kills it with its children). "+
		"Without persistence mode nvidia-smi takes seconds on a multi-GPU node; that is slow, not broken.").
		Default(doctor.DefaultNvidiaSMITimeout.String()).DurationVar(&c.nvidiaSMITimeout)
	cmd.Flag("compat.check-file", "A Grafana dashboard (JSON) or Prometheus rules file (YAML) to check: which dcgm-exporter names its queries use, which dcgm-exporter versions (4.8, 4.9, 4.10) they belong to, and whether gpuwatch serves each with the --compat and --compat.dcgm-version given, with the name to use instead where the version renamed it.").
		StringVar(&c.checkFile)
	return c
}

func (c *doctorCommand) name() string { return "doctor" }

// errUnhealthy makes the exit status 1 once the report is printed; it
// prints nothing more, since the report's last line already says so.
var errUnhealthy = exitStatus{code: 1}

func (c *doctorCommand) run() error {
	// The report says what the log would; keep it out of the way.
	if c.common.log.Level != nil && c.common.log.Level.String() == "info" {
		_ = c.common.log.Level.Set("error")
	}
	if c.nvidiaSMITimeout <= 0 {
		return fmt.Errorf("--doctor.nvidia-smi-timeout=%s: must be positive", c.nvidiaSMITimeout)
	}
	logger := promslog.New(c.common.log)
	env := doctor.Env{
		Backend:       c.common.backend,
		RemoteHost:    c.common.smi.host,
		Collectors:    c.common.enabledCollectors(),
		DevRoot:       "/dev",
		SelfProc:      "/proc",
		CgroupRoot:    "/sys/fs/cgroup",
		ProcRoot:      c.common.attribution.procfs,
		Attribution:   c.common.attribution.enabled,
		WebConfigFile: *c.web.WebConfigFile,
		Runner:        slurm.ExecRunner{Timeout: c.common.attribution.timeout + 5*time.Second},
		Timeout:       c.common.attribution.timeout,

		NvidiaSMITimeout:  c.nvidiaSMITimeout,
		CollectionTimeout: c.common.timeout,
		AccountingDir:     c.common.serveRecordsDir(),
	}
	if c.nvidiaSMI != "" {
		env.NvidiaSMI = c.nvidiaSMI
	} else if path, err := exec.LookPath("nvidia-smi"); err == nil {
		env.NvidiaSMI = path
	}
	c.common.command = "doctor"
	// The dashboard check needs the profiling metrics, which take one GPM
	// window to measure.
	compat, compatErr := exporter.ParseCompat(c.common.compat)
	dcgm := compatErr == nil && compat.DCGM
	c.common.waitForGPM = dcgm
	st, err := c.common.buildStack(logger)
	if err != nil {
		env.SnapshotErr = err
		// What the flags ask for: procfs is still checked, the
		// sources that were not set up say so.
		env.Attribution = c.common.attribution.enabled && env.Collectors[snapshot.GroupProcesses]
		env.NotStarted = true
	} else {
		defer st.Close()
		env.Snapshot, env.SnapshotErr = st.settledSnapshot(c.common)
		if dcgm && env.Snapshot != nil {
			env.DCGMCompat = true
			for _, p := range exporter.DCGMDashboardCoverage(env.Snapshot) {
				env.DCGMPanels = append(env.DCGMPanels, doctor.DCGMPanel{Title: p.Title, Metric: p.Metric, Served: p.Served, Missing: p.Missing, Why: p.Why})
			}
		}
		src := st.sources
		env.Attribution = src.how != ""
		if src.procfs != "" {
			env.ProcRoot = src.procfs
		}
		env.DockerSocket, env.CRISocket, env.KubeletSocket = src.sockets["docker"], src.sockets["cri"], src.sockets["kubelet"]
		if s := src.slurm; s != nil {
			env.Slurm = &doctor.SlurmEnv{Scontrol: s.scontrol, Squeue: s.squeue, Node: s.nodeName, Runner: s.runner}
			if s.runner == nil {
				env.Slurm.Runner = slurm.ExecRunner{Timeout: s.timeout}
			}
		}
	}
	if c.checkFile != "" {
		env.DCGMFile = c.dcgmFile()
	}
	report := doctor.Run(env)
	if c.output == "json" {
		err = report.WriteJSON(os.Stdout)
	} else {
		err = report.WriteText(os.Stdout)
	}
	if err != nil {
		return err
	}
	if !report.Healthy {
		return errUnhealthy
	}
	return nil
}

// dcgmFile reads --compat.check-file and says, for each dcgm-exporter name
// it uses, which versions serve it and whether the flags do.
func (c *doctorCommand) dcgmFile() *doctor.DCGMFile {
	f := &doctor.DCGMFile{Path: c.checkFile, Version: c.common.dcgmVersion}
	compat, err := c.common.parseCompat()
	if err != nil {
		f.Err = err
		return f
	}
	f.DCGM = compat.DCGM
	names, err := doctor.DCGMNamesInFile(c.checkFile)
	if err != nil {
		f.Err = err
		return f
	}
	for _, n := range names {
		versions := exporter.DCGMNameVersions(n)
		u := doctor.DCGMFileName{Name: n, Versions: versions,
			Served: compat.DCGM && slices.Contains(versions, compat.DCGMVersion.String())}
		if !u.Served {
			if in := exporter.DCGMNameIn(n, compat.DCGMVersion); in != n {
				u.Instead = in
			}
		}
		f.Names = append(f.Names, u)
	}
	return f
}
