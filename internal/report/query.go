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
// "own" is a vector worth 1 per (owner labels, instance, uuid) at each step
// where the owner holds the GPU; the figures join the device series to it on
// (instance, uuid).

// queries are the PromQL texts of one report.
type queries struct {
	allocSteps    string // steps during which the owner held a GPU, summed over its GPUs
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

func buildQueries(dim dimension, rng, step time.Duration, idle float64) queries {
	window := "[" + promDuration(rng) + ":" + promDuration(step) + "]"
	owner := by(dim.labels)
	ownerGPU := by(withGPU(dim.labels))
	gpuKey := "on(instance, uuid) group_left()"
	idleFilter := fmt.Sprintf("(gpu_utilization_ratio < %g)", idle)

	var own, used, mem, watts string
	switch dim.kind {
	case byAllocation:
		own = "group " + ownerGPU + " (" + dim.alloc + ")"
		used = own + " * " + gpuKey + " gpu_utilization_ratio"
		mem = own + " * " + gpuKey + " gpu_memory_used_bytes"
		watts = own + " * " + gpuKey + " gpu_power_usage_watts"
	case byProcess:
		sel := "{" + dim.ownerKey() + `!=""}`
		own = "group " + ownerGPU + " (gpu_process_memory_used_bytes" + sel + ")"
		// What the owner's own processes used of the GPU, not the whole
		// GPU's utilization: owners that share a GPU do not each get all of
		// it. NVML samples each process on its own, so the sum over an
		// owner's processes can pass 1; one GPU is at most all of it.
		used = "clamp_max(sum " + ownerGPU + " (gpu_process_sm_utilization_ratio" + sel + "), 1)"
		mem = "gpu_process_memory_used_bytes" + sel
		// The GPU's power is shared equally by the owners on it at each step.
		watts = own + " * " + gpuKey + " (gpu_power_usage_watts / on(instance, uuid) group_left() count by (instance, uuid) (" + own + "))"
	case byDevice:
		held := "group by (instance, gpu, uuid) (" + k8sAlloc + ") or group by (instance, gpu, uuid) (" + slurmAlloc +
			") or group by (instance, gpu, uuid) (gpu_process_memory_used_bytes)"
		own = "group " + ownerGPU + " (" + held + ")"
		used = own + " * " + gpuKey + " gpu_utilization_ratio"
		mem = "gpu_memory_used_bytes"
		watts = own + " * " + gpuKey + " gpu_power_usage_watts"
	}
	idleHeld := own + " * " + gpuKey + " " + idleFilter

	// A GPU without a utilization reading (MIG mode) has no "used" series
	// at that step: it counts in allocSteps, not in measuredSteps, usedSteps,
	// idleSteps or the percentile, so unknown never counts as 0 %.
	q := queries{
		allocSteps:    "sum " + owner + " (count_over_time((" + own + ")" + window + "))",
		measuredSteps: "sum " + owner + " (count_over_time((" + used + ")" + window + "))",
		usedSteps:     "sum " + owner + " (sum_over_time((" + used + ")" + window + "))",
		idleSteps:     "sum " + owner + " (count_over_time((" + idleHeld + ")" + window + "))",
		// Per GPU: the mean over the owner's GPUs at each step, so an owner
		// of four busy GPUs is at 100 %, not 400 %.
		p95Util:   "quantile_over_time(0.95, (avg " + owner + " (" + used + "))" + window + ")",
		memPeak:   "max_over_time((sum " + owner + " (" + mem + "))" + window + ")",
		memMean:   "avg_over_time((sum " + owner + " (" + mem + "))" + window + ")",
		wattSteps: "sum " + owner + " (sum_over_time((" + watts + ")" + window + "))",

		fleetUnmeasured: "count(group by (instance, uuid) (max_over_time(gpu_up[" + promDuration(rng) + "])) unless on(instance, uuid) group by (instance, uuid) (max_over_time(gpu_utilization_ratio[" + promDuration(rng) + "])))",
		fleetUtil:       "avg_over_time((avg(gpu_utilization_ratio))" + window + ")",
		fleetIdleSteps:  "sum(count_over_time(" + idleFilter + window + "))",
		fleetWattSteps:  "sum(sum_over_time(gpu_power_usage_watts" + window + "))",
	}
	if dim.name == "job" {
		q.jobSteps = "count_over_time((group " + owner + " (" + slurmAlloc + "))" + window + ")"
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
