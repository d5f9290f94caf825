package report

import (
	"fmt"
	"sort"
	"strings"
)

// A dimension is what --by names: the owner labels a report row carries and
// how ownership of a GPU is read from gpuwatch's series.
type dimension struct {
	name   string
	labels []string // the owner's labels, in display order
	kind   ownership
	// alloc is the allocation info metric (kubernetes or slurm dimensions).
	alloc string
	// hours says in one line what a GPU-hour of this view is.
	hours string
}

// ownership is how a dimension decides that an owner holds a GPU at a step.
type ownership int

const (
	// byAllocation: the GPU (or a MIG instance of it) is allocated to the
	// owner by the kubelet or by Slurm, busy or not.
	byAllocation ownership = iota
	// byProcess: the owner has a process on the GPU (unix user, container,
	// compose service): gpuwatch's gpu_process_* series.
	byProcess
	// byDevice: the row is the GPU or the node itself; it counts as held
	// while any pod, job or process holds it.
	byDevice
)

const (
	k8sAlloc   = "gpu_kubernetes_allocation_info"
	slurmAlloc = "gpu_slurm_job_info"
)

const (
	podHours = "Hours: a GPU is the pod's while the kubelet allocates it to the pod, busy or idle; " +
		"a GPU allocated to several pods at once is split equally between them."
	jobHours = "Hours: a GPU is the job's while Slurm allocates it to the job, busy or idle; " +
		"a GPU allocated to several jobs at once is split equally between them."
	processHours = "Hours: a GPU is the owner's while its processes run on it; " +
		"a GPU several owners use at once is split between them by their SM share (equally where none is measured)."
	deviceHours = "Hours: a GPU counts while any pod, Slurm job or process holds it."
)

var dimensions = map[string]dimension{
	"pod":       {name: "pod", labels: []string{"namespace", "pod"}, kind: byAllocation, alloc: k8sAlloc, hours: podHours},
	"namespace": {name: "namespace", labels: []string{"namespace"}, kind: byAllocation, alloc: k8sAlloc, hours: podHours},
	"job":       {name: "job", labels: []string{"job_id", "user", "account", "partition"}, kind: byAllocation, alloc: slurmAlloc, hours: jobHours},
	"account":   {name: "account", labels: []string{"account"}, kind: byAllocation, alloc: slurmAlloc, hours: jobHours},
	"partition": {name: "partition", labels: []string{"partition"}, kind: byAllocation, alloc: slurmAlloc, hours: jobHours},
	"user": {name: "user", labels: []string{"user"}, kind: byProcess, hours: "Hours: a GPU is the user's while a Slurm job of theirs holds it, busy or idle, " +
		"or, on a GPU no job holds, while their processes run on it (a pod names no unix user: its GPU goes to its processes' users); " +
		"a GPU several users hold at once is split between them by their SM share (equally where none is measured)."},
	"container":       {name: "container", labels: []string{"instance", "container"}, kind: byProcess, hours: processHours},
	"compose_service": {name: "compose_service", labels: []string{"compose_project", "compose_service"}, kind: byProcess, hours: processHours},
	"node":            {name: "node", labels: []string{"instance"}, kind: byDevice, hours: deviceHours},
	"gpu":             {name: "gpu", labels: []string{"instance", "gpu", "uuid"}, kind: byDevice, hours: deviceHours},
}

// Dimensions lists the --by values, for help texts and errors.
func Dimensions() []string {
	out := make([]string, 0, len(dimensions))
	for k := range dimensions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lookupDimension(name string) (dimension, error) {
	d, ok := dimensions[name]
	if !ok {
		return dimension{}, fmt.Errorf("unknown --by %q (one of: %s)", name, strings.Join(Dimensions(), ", "))
	}
	return d, nil
}

// ownerKey is the owner's label (the one that must be non-empty on the
// process series for the process to count as the owner's).
func (d dimension) ownerKey() string { return d.labels[len(d.labels)-1] }
