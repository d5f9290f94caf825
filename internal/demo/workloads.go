//go:build cgo

package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Process is one simulated GPU process.
type Process struct {
	GPU     int
	GPUUUID string
	PID     uint32
}

// GPU is one simulated GPU.
type GPU struct {
	Index int
	UUID  string
}

// GPUInstance is an idle MIG GPU instance, named as NVIDIA's Kubernetes DRA
// driver names it: parent minor number, profile, profile ID, placement.
type GPUInstance struct {
	GPU, Minor     int
	Profile        string // "2g.20gb"
	ProfileID      int
	PlacementStart int
}

// draDeviceName is the instance's device name in the DRA driver's
// ResourceSlice (the v25.12+ form): "gpu-7-mig-2g20gb-14-0".
func (g GPUInstance) draDeviceName() string {
	profile := strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(g.Profile), ".", ""), "+", "-")
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", g.Minor, profile, g.ProfileID, g.PlacementStart)
}

// Kind is the sort of owner a workload has.
type Kind string

// The kinds of owner, in the order workloads take them.
const (
	KindSlurm      Kind = "slurm"
	KindCompose    Kind = "compose"
	KindKubernetes Kind = "kubernetes"
	KindUser       Kind = "user"
)

var kindOrder = []Kind{KindSlurm, KindCompose, KindKubernetes, KindUser}

// User is a demo account, in the demo's /etc/passwd.
type User struct {
	Name string
	UID  int
}

var users = []User{{"alice", 1000}, {"bob", 1001}, {"carol", 1002}, {"dave", 1003}, {"erin", 1004}}

// Workload is one owner and the processes it runs.
type Workload struct {
	Kind      Kind
	User      User
	Command   []string // argv of its processes
	Processes []Process
	GPUs      []int // GPU indexes it holds, ascending

	// Slurm
	JobID, Account, Partition, JobName string
	// Docker Compose
	ContainerID, ContainerName, Image, ComposeProject, ComposeService string
	// Kubernetes (ContainerID is the containerd id)
	PodName, PodNamespace, PodUID, PodContainer string
	// DRADevice, when set, is the device the pod holds through a resource
	// claim of NVIDIA's DRA driver (gpu.nvidia.com) rather than through
	// the device plugin; DRAPool is the driver's pool, the node's name.
	DRADevice, DRAPool string
}

// pidGap is how far apart two PIDs may be and still be ranks of one job
// (torchrun starts its ranks one after the other).
const pidGap = 16

// plan groups processes into workloads and gives each an owner. gpus are
// every GPU of the host: those without a process go to one idle
// interactive Slurm job.
func plan(procs []Process, gpus []GPU) []Workload {
	sorted := slices.Clone(procs)
	slices.SortStableFunc(sorted, func(a, b Process) int { return int(int64(a.PID) - int64(b.PID)) })
	var groups [][]Process
	for i, p := range sorted {
		if i == 0 || p.PID-sorted[i-1].PID > pidGap {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], p)
	}
	var out []Workload
	seen := map[Kind]int{}
	for i, g := range groups {
		kind := kindOrder[i%len(kindOrder)]
		w := newWorkload(kind, seen[kind], i)
		seen[kind]++
		w.Processes = g
		for _, p := range g {
			if !slices.Contains(w.GPUs, p.GPU) {
				w.GPUs = append(w.GPUs, p.GPU)
			}
		}
		slices.Sort(w.GPUs)
		out = append(out, w)
	}
	busy := map[int]bool{}
	for _, p := range procs {
		busy[p.GPU] = true
	}
	var idle []int
	for _, g := range gpus {
		if !busy[g.Index] {
			idle = append(idle, g.Index)
		}
	}
	if len(idle) > 0 {
		w := newWorkload(KindSlurm, seen[KindSlurm], len(groups))
		w.JobName, w.Command = "interactive", []string{"/bin/bash"}
		w.GPUs = idle
		out = append(out, w)
	}
	return out
}

// withDRAPod adds, when the host has an idle MIG GPU instance, a
// Kubernetes pod that holds the first one through a DRA resource claim and
// runs nothing on it yet: an idle allocation that only the claim shows.
func withDRAPod(workloads []Workload, idle []GPUInstance, node string) []Workload {
	if len(idle) == 0 {
		return workloads
	}
	g := idle[0]
	n := 0
	for _, w := range workloads {
		if w.Kind == KindKubernetes {
			n++
		}
	}
	w := newWorkload(KindKubernetes, n, len(workloads))
	w.PodName, w.PodContainer = "embedder-0", "server"
	uid := hexID("pod", w.PodName)
	w.PodUID = uid[0:8] + "-" + uid[8:12] + "-" + uid[12:16] + "-" + uid[16:20] + "-" + uid[20:32]
	w.ContainerID = hexID("containerd", w.PodName)
	w.Command = []string{"python3", "-m", "embedder.serve"}
	w.GPUs = []int{g.GPU}
	w.DRADevice, w.DRAPool = g.draDeviceName(), node
	return append(workloads, w)
}

// newWorkload fills in the owner of the n-th workload of its kind, the
// i-th of all.
func newWorkload(kind Kind, n, i int) Workload {
	w := Workload{Kind: kind, User: users[i%len(users)]}
	suffix := func(every int) string {
		if n < every {
			return ""
		}
		return fmt.Sprint("-", n/every+1)
	}
	switch kind {
	case KindSlurm:
		names := []string{"llama-pretrain", "embed-eval", "sweep"}
		w.JobID = fmt.Sprint(4211 + 7*n)
		w.JobName = names[n%len(names)] + suffix(len(names))
		w.Account = []string{"ml-research", "vision", "nlp"}[n%3]
		w.Partition = "gpu"
		w.Command = []string{"/usr/bin/python3", "-u", "train.py", "--config", "configs/" + w.JobName + ".yaml"}
	case KindCompose:
		w.ComposeProject = "finetune" + suffix(1)
		w.ComposeService = "trainer"
		w.ContainerName = w.ComposeProject + "-trainer-1"
		w.ContainerID = hexID("docker", w.ContainerName)
		w.Image = "nvcr.io/nvidia/pytorch:24.08-py3"
		w.Command = []string{"python", "finetune.py", "--lora"}
	case KindKubernetes:
		w.PodNamespace = "inference"
		w.PodName = fmt.Sprint("vllm-", n)
		w.PodContainer = "vllm"
		uid := hexID("pod", w.PodName)
		w.PodUID = uid[0:8] + "-" + uid[8:12] + "-" + uid[12:16] + "-" + uid[16:20] + "-" + uid[20:32]
		w.ContainerID = hexID("containerd", w.PodName)
		w.Image = "docker.io/vllm/vllm-openai:v0.6.3"
		w.Command = []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "meta-llama/Llama-3.1-8B-Instruct"}
	case KindUser:
		w.Command = []string{"/usr/bin/python3", "/home/" + w.User.Name + "/notebook.py"}
	}
	return w
}

// hexID is a 64-hex-digit id, as runtimes give containers.
func hexID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ended says whether every process of the workload has ended for good
// (false for one without processes: an idle allocation stays).
func (w *Workload) ended(ended func(pid uint32) bool) bool {
	if ended == nil || len(w.Processes) == 0 {
		return false
	}
	for _, p := range w.Processes {
		if !ended(p.PID) {
			return false
		}
	}
	return true
}
