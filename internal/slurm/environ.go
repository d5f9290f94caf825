package slurm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// JobEnv is what a process's environment says about the Slurm job it runs
// in. Fields are empty when the variable is not set.
type JobEnv struct {
	JobID     string // SLURM_JOB_ID (or the older SLURM_JOBID)
	StepID    string // SLURM_STEP_ID
	User      string // SLURM_JOB_USER
	Account   string // SLURM_JOB_ACCOUNT
	Partition string // SLURM_JOB_PARTITION
	JobName   string // SLURM_JOB_NAME
	// JobGPUs is SLURM_JOB_GPUS ("0,1"): the node's GPU indexes allocated
	// to the job. CUDAVisibleDevices may be renumbered by cgroups.
	JobGPUs            string
	CUDAVisibleDevices string
}

// maxEnvironBytes bounds how much of /proc/PID/environ is read.
const maxEnvironBytes = 1 << 20

// ReadJobEnv reads /proc/PID/environ under procRoot (e.g. "/proc", or
// "/host/proc" in a container) and returns the Slurm variables. A process
// outside any job gives a zero JobEnv and no error; an unreadable environ
// (gone, or not permitted) is an error naming the file.
func ReadJobEnv(procRoot string, pid uint32) (JobEnv, error) {
	path := filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "environ")
	f, err := os.Open(path)
	if err != nil {
		return JobEnv{}, fmt.Errorf("slurm environ: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEnvironBytes))
	if err != nil {
		return JobEnv{}, fmt.Errorf("slurm environ: %s: %w", path, err)
	}
	return ParseJobEnv(data), nil
}

// ParseJobEnv reads NUL-separated KEY=VALUE pairs.
func ParseJobEnv(data []byte) JobEnv {
	var e JobEnv
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok {
			continue
		}
		val := string(v)
		switch string(k) {
		case "SLURM_JOB_ID":
			e.JobID = val
		case "SLURM_JOBID":
			if e.JobID == "" {
				e.JobID = val
			}
		case "SLURM_STEP_ID":
			e.StepID = val
		case "SLURM_JOB_USER":
			e.User = val
		case "SLURM_JOB_ACCOUNT":
			e.Account = val
		case "SLURM_JOB_PARTITION":
			e.Partition = val
		case "SLURM_JOB_NAME":
			e.JobName = val
		case "SLURM_JOB_GPUS":
			e.JobGPUs = val
		case "CUDA_VISIBLE_DEVICES":
			e.CUDAVisibleDevices = val
		}
	}
	if !ValidJobID(e.JobID) {
		e.JobID = ""
	}
	return e
}
