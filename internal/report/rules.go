package report

// The recording rules shipped in deploy/prometheus/recording.yml already
// hold, per owner and per evaluation, the owner's GPU memory. Where they
// exist over the range, the report reads those few series instead of
// joining the raw ones again: the same figures, cheaper for the server.
// Where they do not (rules not loaded, or loaded after the range began),
// the raw series are used.
//
// Utilization is never read from the rules: the mean and the p95 of a row
// come from one basis (the counters or the gauges, each weighting a shared
// GPU by the owner's part of it), and the rules' per-GPU averages weight
// every GPU alike, so a p95 from them could fall below a mean from another
// source with nothing to say why.

// shippedMemoryRules are the recorded series that stand in for a
// dimension's raw memory expression.
var shippedMemoryRules = map[string]string{
	"pod":             "namespace_pod:gpu_memory_used_bytes:sum",
	"namespace":       "namespace:gpu_memory_used_bytes:sum",
	"job":             "slurm_job:gpu_memory_used_bytes:sum",
	"account":         "slurm_account:gpu_memory_used_bytes:sum",
	"user":            "user:gpu_process_memory_used_bytes:sum",
	"container":       "instance_container:gpu_process_memory_used_bytes:sum",
	"compose_service": "compose_service:gpu_process_memory_used_bytes:sum",
}

// useRules replaces the memory figures with the recorded series and returns
// what the report says of its sources. The rules aggregate by cluster too;
// summing by the owner labels folds clusters into one row, as the raw
// queries do.
func (q *queries) useRules(dim dimension, mem, window string) string {
	owner := by(dim.labels)
	q.memPeak = "max_over_time((sum " + owner + " (" + mem + "))" + window + ")"
	q.memMean = "avg_over_time((sum " + owner + " (" + mem + "))" + window + ")"
	return "recording rule " + mem + " (deploy/prometheus/recording.yml)"
}

// rulesPresentQuery asks whether the recorded series has samples in the range.
func rulesPresentQuery(mem, rng string) string {
	return "count(count_over_time(" + mem + "[" + rng + "]))"
}
