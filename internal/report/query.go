package report

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The PromQL of a report. Every figure is one instant query at the end of
// the range over a subquery [range:step], aggregated by the owner labels
// inside Prometheus: however large the fleet and the range, the answer is
// one number per owner, never the raw samples.
//
// "own" is a vector per (owner labels, instance, uuid) at each step where
// the owner holds the GPU, worth the owner's part of it (1 unless shared);
// the figures join the device series to it on (instance, uuid).

// queries are the PromQL texts of one report.
type queries struct {
	allocSteps    string // steps during which the owner held a GPU (its part of a shared one), summed over its GPUs
	measuredSteps string // the held steps with a utilization reading, summed over its GPUs
	usedSteps     string // the measured steps weighted by the GPU's utilization (or the owner's SM share)
	idleSteps     string // held steps with utilization below the idle threshold
	p95Util       string // 95th percentile over time of the owner's mean utilization per GPU
	memPeak       string // peak of the owner's GPU memory summed over its GPUs, bytes
	memMean       string // mean of the same while present, bytes
	wattSteps     string // power summed over held steps (× step = joules)
	jobSteps      string // --by=job: steps during which the job held any GPU

	fleetUnmeasured string // GPUs up in the range without any utilization reading
	fleetUtil       string
	fleetIdleSteps  string
	fleetWattSteps  string
}

func by(labels []string) string { return "by (" + strings.Join(labels, ", ") + ")" }

// promDuration writes d in PromQL's duration syntax.
func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
}

// window is the subquery range of a report: the steps in (From, To]. A
// PromQL range includes its start in Prometheus 2 (and not in
// VictoriaMetrics or Prometheus 3); a step that stands for the time before
// it would, at From, count a step before the range. One millisecond less
// excludes it on every engine.
func window(rng, step time.Duration) string {
	return "[" + promDuration(rng-time.Millisecond) + ":" + promDuration(step) + "]"
}

// ownership is, at one step, how much of each GPU each owner holds: a
// weight per (owner labels, instance, uuid) whose sum over a GPU's owners
// is at most 1, so that per-owner GPU-hours add up to the GPU's.
type ownershipExprs struct {
	own      string // the weight of each owner on each GPU it holds
	measured string // own, where the GPU has a utilization reading
	used     string // the utilization-weighted part of own (at most own)
}

func ownershipOf(dim dimension) ownershipExprs {
	ownerGPU := by(withGPU(dim.labels))
	gpuKey := "on(instance, uuid) group_left()"
	perGPU := "count by (instance, uuid) "
	var o ownershipExprs
	switch dim.kind {
	case byAllocation:
		// Allocations of the same GPU to several owners (time-slicing,
		// MIG instances of one GPU) share it equally.
		held := "group " + ownerGPU + " (" + dim.alloc + ")"
		o.own = "(" + held + " / " + gpuKey + " " + perGPU + "(" + held + "))"
		o.measured = "(" + o.own + " and on(instance, uuid) gpu_utilization_ratio)"
		o.used = "(" + o.measured + " * " + gpuKey + " gpu_utilization_ratio)"
	case byProcess:
		holders := processHolders(dim)
		sel := "{" + dim.ownerKey() + `!=""}`
		// The holders' own SM shares; holders with no process have none.
		sm := "(sum " + ownerGPU + " (gpu_process_sm_utilization_ratio" + sel + ") and " + holders + ")"
		smTotal := "(sum by (instance, uuid) (" + sm + ") > 0)"
		// A shared GPU is split by the owners' measured SM shares where any
		// is above 0, else equally.
		bySM := "((" + sm + " or " + holders + " * 0) / " + gpuKey + " " + smTotal + ")"
		equally := "(" + holders + " / " + gpuKey + " " + perGPU + "(" + holders + "))"
		o.own = "(" + bySM + " or " + equally + ")"
		o.measured = "(" + o.own + " and on(instance, uuid) gpu_utilization_ratio)"
		// What the owner's own processes used of the GPU, not the whole
		// GPU's utilization. NVML samples each process on its own, so the
		// sum over an owner's processes can pass 1; an owner uses at most
		// the part of the GPU it holds.
		raw := "((clamp_max(" + sm + ", 1) or " + o.measured + " * 0) and " + o.measured + ")"
		o.used = "((" + raw + " <= " + o.measured + ") or (" + o.measured + " and " + raw + "))"
	case byDevice:
		held := "group by (instance, gpu, uuid) (" + k8sAlloc + ") or group by (instance, gpu, uuid) (" + slurmAlloc +
			") or group by (instance, gpu, uuid) (gpu_process_memory_used_bytes)"
		o.own = "(group " + ownerGPU + " (" + held + "))"
		o.measured = "(" + o.own + " and on(instance, uuid) gpu_utilization_ratio)"
		o.used = "(" + o.measured + " * " + gpuKey + " gpu_utilization_ratio)"
	}
	return o
}

// processHolders is, for a process dimension, who holds each GPU at a step:
// the owners with a process on it; for --by=user, the user of the Slurm job
// that holds it (idle or not), and only on a GPU no job holds, the users
// with a process on it. Pods name no unix user: a pod's GPU goes to its
// processes' users.
func processHolders(dim dimension) string {
	sel := "{" + dim.ownerKey() + `!=""}`
	procs := "group " + by(withGPU(dim.labels)) + " (gpu_process_memory_used_bytes" + sel + ")"
	if dim.name != "user" {
		return "(" + procs + ")"
	}
	jobs := "group by (user, instance, uuid) (" + slurmAlloc + `{user!=""})`
	return "(" + jobs + " or (" + procs + " unless on(instance, uuid) " + slurmAlloc + "))"
}

func buildQueries(dim dimension, rng, step time.Duration, idle float64) queries {
	w := window(rng, step)
	owner := by(dim.labels)
	gpuKey := "on(instance, uuid) group_left()"
	idleFilter := fmt.Sprintf("(gpu_utilization_ratio < %g)", idle)
	o := ownershipOf(dim)

	var mem string
	switch dim.kind {
	case byAllocation:
		mem = "group " + by(withGPU(dim.labels)) + " (" + dim.alloc + ") * " + gpuKey + " gpu_memory_used_bytes"
	case byProcess:
		mem = "gpu_process_memory_used_bytes{" + dim.ownerKey() + `!=""}`
	case byDevice:
		mem = "gpu_memory_used_bytes"
	}
	// Each figure sums the owner's weights over the steps: a GPU that the
	// owner shares with another counts for its part only. A GPU without a
	// utilization reading (MIG mode) is in own, not in measured, used or
	// idle, so unknown never counts as 0 %.
	sumOver := func(expr string) string { return "sum " + owner + " (sum_over_time((" + expr + ")" + w + "))" }
	q := queries{
		allocSteps:    sumOver(o.own),
		measuredSteps: sumOver(o.measured),
		usedSteps:     sumOver(o.used),
		idleSteps:     sumOver(o.measured + " and on(instance, uuid) " + idleFilter),
		// Per GPU: the owner's used part over its measured part at each
		// step, so an owner of four busy GPUs is at 100 %, not 400 %.
		// A step where the owner measured nothing (its part was 0) has no
		// ratio, rather than 0/0.
		p95Util:   "quantile_over_time(0.95, (sum " + owner + " (" + o.used + ") / (sum " + owner + " (" + o.measured + ") > 0))" + w + ")",
		memPeak:   "max_over_time((sum " + owner + " (" + mem + "))" + w + ")",
		memMean:   "avg_over_time((sum " + owner + " (" + mem + "))" + w + ")",
		wattSteps: sumOver(o.own + " * " + gpuKey + " gpu_power_usage_watts"),

		fleetUnmeasured: "count(group by (instance, uuid) (max_over_time(gpu_up[" + promDuration(rng) + "])) unless on(instance, uuid) group by (instance, uuid) (max_over_time(gpu_utilization_ratio[" + promDuration(rng) + "])))",
		fleetUtil:       "avg_over_time((avg(gpu_utilization_ratio))" + w + ")",
		fleetIdleSteps:  "sum(count_over_time(" + idleFilter + w + "))",
		fleetWattSteps:  "sum(sum_over_time(gpu_power_usage_watts" + w + "))",
	}
	if dim.name == "job" {
		q.jobSteps = "count_over_time((group " + owner + " (" + slurmAlloc + "))" + w + ")"
	}
	return q
}

// withGPU is labels plus instance and uuid, each once.
func withGPU(labels []string) []string {
	out := append([]string(nil), labels...)
	for _, l := range []string{"instance", "uuid"} {
		if !contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}
