package doctor

import (
	"time"

	"github.com/gpuwatch/gpuwatch/internal/slurm"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Env is what the checks look at.
type Env struct {
	// Backend is "nvml", "nvidia-smi" or "sim"; Snapshot one reading
	// through it (with owners when attribution is on), or SnapshotErr.
	Backend string
	// RemoteHost names the host whose GPUs --backend=nvidia-smi reads
	// through --nvidia-smi.command; "" for this host's.
	RemoteHost  string
	Snapshot    *snapshot.Snapshot
	SnapshotErr error
	// Collectors are the enabled collector groups.
	Collectors map[string]bool

	DevRoot    string // where the device nodes are: "/dev"
	ProcRoot   string // --path.procfs
	SelfProc   string // this process's own procfs: "/proc"
	CgroupRoot string // "/sys/fs/cgroup"

	// Attribution: owners are looked up. The sockets are as resolved from
	// the flags ("" when off); Explicit names those the user gave (a
	// failure of an "auto" one that was found is still a failure).
	Attribution   bool
	DockerSocket  string
	CRISocket     string
	KubeletSocket string

	// Slurm is nil when Slurm job attribution is off.
	Slurm *SlurmEnv
	// NotStarted: gpuwatch stopped before it set the owner sources up
	// (the driver failed), so which of them are on is not known: their
	// checks say so rather than call them off.
	NotStarted bool

	WebConfigFile string

	// AccountingDir is --accounting.dir when serve would keep job records
	// with these flags; "" when it would not.
	AccountingDir string

	// NvidiaSMI is the nvidia-smi to compare readings with; "" when none is
	// on PATH. It runs with its own bounds (NvidiaSMITimeout, a cap on its
	// output) rather than through Runner.
	NvidiaSMI string
	// NvidiaSMITimeout bounds the nvidia-smi run; DefaultNvidiaSMITimeout
	// when zero. It is not Timeout: a healthy nvidia-smi on a node without
	// persistence mode takes seconds, far longer than a socket call.
	NvidiaSMITimeout time.Duration
	// Runner runs the Slurm commands.
	Runner slurm.CommandRunner

	// Timeout bounds each socket call and command.
	Timeout time.Duration

	// DCGMCompat: --compat includes dcgm; DCGMPanels is then what each
	// panel of dcgm-exporter's released dashboard shows on this host.
	DCGMCompat bool
	DCGMPanels []DCGMPanel
	// DCGMFile is what --compat.check-file found; nil without it.
	DCGMFile *DCGMFile
	// CollectionTimeout is --collection.timeout: a GPU whose reading is
	// older than this was read late (a slow driver).
	CollectionTimeout time.Duration
}

// SlurmEnv says how Slurm is reached.
type SlurmEnv struct {
	Scontrol, Squeue string
	Node             string // --slurm.node-name
	Runner           slurm.CommandRunner
	// GresConf is the gres.conf to compare with NVML's order; "" to find it
	// from `scontrol show config`.
	GresConf string
}

// Run runs every check.
func Run(env Env) Report {
	var results []Result
	results = append(results, checkDriver(env)...)
	results = append(results, checkDevices(env)...)
	results = append(results, checkProcfs(env)...)
	results = append(results, checkCgroup(env)...)
	results = append(results, checkSources(env)...)
	results = append(results, checkSlurm(env)...)
	results = append(results, checkWebConfig(env)...)
	results = append(results, checkJournal(env)...)
	results = append(results, checkNvidiaSMI(env)...)
	results = append(results, checkDCGMDashboard(env)...)
	results = append(results, checkDCGMFile(env)...)
	return NewReport(results)
}
