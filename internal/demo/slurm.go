//go:build cgo

package demo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// SlurmCommands answers the two Slurm commands a compute node's job lookups
// run, printing what Slurm 22.05 prints, so that the real parsers read it:
//
//	squeue -h -w NODE -t RUNNING -o %i
//	scontrol show job -d -o JOBID
//	scontrol ping, scontrol show node -o NODE (gpuwatch doctor)
//
// It is a slurm.CommandRunner; anything else fails as an unknown command.
type SlurmCommands struct {
	node string
	jobs []Workload
	// ended says whether a process has ended for good (Options.Ended).
	ended func(pid uint32) bool
	// clockStart is the simulated clock's zero (Options.ClockStart).
	clockStart time.Time
}

var _ slurm.CommandRunner = (*SlurmCommands)(nil)

// NewSlurmCommands runs the Slurm workloads on node.
func NewSlurmCommands(workloads []Workload, node string) *SlurmCommands {
	s := &SlurmCommands{node: node, clockStart: sim.Epoch}
	for _, w := range workloads {
		if w.Kind == KindSlurm {
			s.jobs = append(s.jobs, w)
		}
	}
	return s
}

// slurmCommand is one command line the demo answers: the program's base
// name, its arguments (anyArg where the caller names a node or job) and
// what Slurm prints for it.
type slurmCommand struct {
	program string
	args    []string
	answer  func(s *SlurmCommands, line string, args []string) ([]byte, error)
}

// anyArg in slurmCommand.args matches whatever the caller passes there.
const anyArg = ""

// slurmCommands are the command lines a node's job lookups and gpuwatch
// doctor run; the arguments must match in number and order.
var slurmCommands = []slurmCommand{
	{"squeue", []string{"-h", "-w", anyArg, "-t", "RUNNING", "-o", "%i"}, (*SlurmCommands).runningJobs},
	{"scontrol", []string{"ping"}, (*SlurmCommands).ping},
	{"scontrol", []string{"show", "node", "-o", anyArg}, (*SlurmCommands).showNode},
	{"scontrol", []string{"show", "job", "-d", "-o", anyArg}, (*SlurmCommands).showJobCommand},
}

// matches says whether program and args are this command line.
func (c slurmCommand) matches(program string, args []string) bool {
	if program != c.program || len(args) != len(c.args) {
		return false
	}
	for i, want := range c.args {
		if want != anyArg && args[i] != want {
			return false
		}
	}
	return true
}

// Run implements slurm.CommandRunner.
func (s *SlurmCommands) Run(_ context.Context, path string, args ...string) ([]byte, error) {
	line := path + " " + strings.Join(args, " ")
	for _, c := range slurmCommands {
		if c.matches(filepath.Base(path), args) {
			return c.answer(s, line, args)
		}
	}
	return nil, commandFailed(line, "the demo answers only squeue -w and scontrol show job")
}

// commandFailed is a Slurm command that exited 1 after printing stderr.
func commandFailed(line, stderr string) error {
	return &slurm.CommandError{Command: line, Err: errors.New("exit status 1"), Stderr: stderr}
}

// runningJobs is `squeue -h -w NODE -t RUNNING -o %i`: the IDs of the jobs
// still running on NODE, none for another node.
func (s *SlurmCommands) runningJobs(_ string, args []string) ([]byte, error) {
	var b strings.Builder
	if args[2] == s.node {
		for _, j := range s.jobs {
			if !j.ended(s.ended) {
				b.WriteString(j.JobID + "\n")
			}
		}
	}
	return []byte(b.String()), nil
}

// ping is `scontrol ping`: the controller is up.
func (s *SlurmCommands) ping(string, []string) ([]byte, error) {
	return []byte("Slurmctld(primary) at demo-controller is UP\n"), nil
}

// showNode is `scontrol show node -o NODE`; only the demo's node exists.
func (s *SlurmCommands) showNode(line string, args []string) ([]byte, error) {
	if args[3] != s.node {
		return nil, commandFailed(line, "Node "+args[3]+" not found")
	}
	return []byte(fmt.Sprintf("NodeName=%s Arch=x86_64 CPUTot=224 State=MIXED Gres=gpu:8 Partitions=gpu\n", s.node)), nil
}

// showJobCommand is `scontrol show job -d -o JOBID`; a job that has ended
// is unknown, as it is to Slurm once it leaves the controller's memory.
func (s *SlurmCommands) showJobCommand(line string, args []string) ([]byte, error) {
	for _, j := range s.jobs {
		if j.JobID == args[4] && !j.ended(s.ended) {
			return []byte(s.showJob(j)), nil
		}
	}
	return nil, commandFailed(line, "slurm_load_jobs error: Invalid job id specified")
}

// Demo marks the demo's Slurm: its commands need not be on PATH.
func (s *SlurmCommands) Demo() {}

// demoJobRunTime is how long every demo job has run when the simulated
// clock starts: its StartTime is that long before Options.ClockStart.
const demoJobRunTime = 2*time.Hour + 13*time.Minute + 7*time.Second

// showJob is one job as `scontrol show job -d -o` prints it (StartTime in
// local time, as scontrol prints it).
func (s *SlurmCommands) showJob(j Workload) string {
	n := len(j.GPUs)
	cpus := 8 * n
	return fmt.Sprintf("JobId=%s JobName=%s UserId=%s(%d) GroupId=%s(%d) MCS_label=N/A Priority=4294901700 Nice=0 Account=%s QOS=normal "+
		"JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=02:13:07 StartTime=%s "+
		"TimeLimit=1-00:00:00 Partition=%s NodeList=%s BatchHost=%s NumNodes=1 NumCPUs=%d NumTasks=%d CPUs/Task=8 "+
		"TRES=cpu=%d,mem=%dG,node=1,billing=%d,gres/gpu=%d Socks/Node=* JOB_GRES=gpu:%d "+
		"Nodes=%s CPU_IDs=0-%d Mem=%d GRES=gpu:%d(IDX:%s) MinCPUsNode=8 Features=(null) "+
		"Command=/home/%s/jobs/%s.sbatch WorkDir=/home/%s\n",
		j.JobID, j.JobName, j.User.Name, j.User.UID, j.User.Name, j.User.UID, j.Account,
		s.clockStart.Add(-demoJobRunTime).Local().Format("2006-01-02T15:04:05"), j.Partition, s.node, s.node, cpus, n, cpus, 64*n, cpus, n, n,
		s.node, cpus-1, 65536*n, n, joinInts(j.GPUs),
		j.User.Name, j.JobName, j.User.Name)
}
