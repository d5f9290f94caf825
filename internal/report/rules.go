package report

// The recording rules shipped in deploy/prometheus/recording.yml already
// hold, per owner and per evaluation, the owner's utilization and memory.
// Where they exist over the range, the report reads those few series instead
// of joining the raw ones again: the same figures, cheaper for the server.
// Where they do not (rules not loaded, or loaded after the range began),
// the raw series are used.

// ruleSeries are the recorded series that stand in for a dimension's raw
// utilization and memory expressions.
type ruleSeries struct {
	util, mem string
}

var shippedRules = map[string]ruleSeries{
	"pod":             {util: "namespace_pod:gpu_utilization_ratio:avg", mem: "namespace_pod:gpu_memory_used_bytes:sum"},
	"namespace":       {util: "namespace:gpu_utilization_ratio:avg", mem: "namespace:gpu_memory_used_bytes:sum"},
	"job":             {util: "slurm_job:gpu_utilization_ratio:avg", mem: "slurm_job:gpu_memory_used_bytes:sum"},
	"account":         {util: "slurm_account:gpu_utilization_ratio:avg", mem: "slurm_account:gpu_memory_used_bytes:sum"},
	"user":            {util: "user:gpu_process_sm_utilization_ratio:sum", mem: "user:gpu_process_memory_used_bytes:sum"},
	"container":       {util: "instance_container:gpu_process_sm_utilization_ratio:sum", mem: "instance_container:gpu_process_memory_used_bytes:sum"},
	"compose_service": {util: "compose_service:gpu_process_sm_utilization_ratio:sum", mem: "compose_service:gpu_process_memory_used_bytes:sum"},
}

// useRules replaces the utilization percentile and the memory figures with
// the recorded series and returns what the report says of its sources. The
// rules aggregate by cluster too; summing (or averaging) by the owner labels
// folds clusters into one row, as the raw queries do. The process rules sum
// the SM share over an owner's GPUs; the percentile is per GPU, which needs
// the raw series, so for process owners only memory comes from the rules.
func (q *queries) useRules(dim dimension, r ruleSeries, window string) string {
	owner := by(dim.labels)
	q.memPeak = "max_over_time((sum " + owner + " (" + r.mem + "))" + window + ")"
	q.memMean = "avg_over_time((sum " + owner + " (" + r.mem + "))" + window + ")"
	if dim.kind == byProcess {
		return "recording rule " + r.mem + " (memory; deploy/prometheus/recording.yml), raw series (utilization per GPU)"
	}
	q.p95Util = "quantile_over_time(0.95, (avg " + owner + " (" + r.util + "))" + window + ")"
	return "recording rules " + r.util + ", " + r.mem + " (deploy/prometheus/recording.yml)"
}

// rulesPresentQuery asks whether both recorded series have samples in the range.
func rulesPresentQuery(r ruleSeries, rng string) string {
	return "count(count_over_time(" + r.util + "[" + rng + "])) and count(count_over_time(" + r.mem + "[" + rng + "]))"
}
