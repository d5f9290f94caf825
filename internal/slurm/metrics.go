package slurm

import "github.com/prometheus/client_golang/prometheus"

// MetricSpec describes one metric the Slurm collector exports. The list is
// the single source of truth: the collector builds its descriptors from it,
// and `gpuwatch metrics` prints it.
type MetricSpec struct {
	Name   string
	Type   string // "gauge" or "counter"
	Labels []string
	Help   string
	// Source says which Slurm command (and field) the value comes from.
	Source string
}

// Metric names, so that code and tests do not repeat strings.
const (
	mJobs                 = "slurm_jobs"
	mJobsPending          = "slurm_jobs_pending"
	mGPUsAllocated        = "slurm_gpus_allocated"
	mGPUsPending          = "slurm_gpus_pending"
	mNodes                = "slurm_nodes"
	mNodeCPUs             = "slurm_node_cpus"
	mNodeGPUs             = "slurm_node_gpus"
	mPartitionCPUs        = "slurm_partition_cpus"
	mPartitionGPUs        = "slurm_partition_gpus"
	mSchedThreads         = "slurm_scheduler_threads"
	mSchedAgentQueue      = "slurm_scheduler_agent_queue_size"
	mSchedDBDAgentQueue   = "slurm_scheduler_dbd_agent_queue_size"
	mSchedQueue           = "slurm_scheduler_queue_size"
	mSchedLastCycle       = "slurm_scheduler_last_cycle_seconds"
	mSchedMeanCycle       = "slurm_scheduler_mean_cycle_seconds"
	mSchedMaxCycle        = "slurm_scheduler_max_cycle_seconds"
	mSchedBFLastCycle     = "slurm_scheduler_backfill_last_cycle_seconds"
	mSchedBFMeanCycle     = "slurm_scheduler_backfill_mean_cycle_seconds"
	mSchedBFQueue         = "slurm_scheduler_backfill_queue_size"
	mSchedBackfilledJobs  = "slurm_scheduler_backfilled_jobs_total"
	mCollectorSuccess     = "slurm_collector_success"
	mCollectorDuration    = "slurm_collector_duration_seconds"
	mCollectorErrors      = "slurm_collector_errors_total"
	mCollectorLastSuccess = "slurm_collector_last_success_timestamp_seconds"
)

// Metrics lists every metric of the Slurm collector.
var Metrics = []MetricSpec{
	{mJobs, "gauge", []string{"state", "partition", "user", "account"},
		"Jobs known to the controller, by state (lower case: pending, running, completed, ...), partition, user and account.",
		"squeue --json (job_state, partition, user_name, account)"},
	{mJobsPending, "gauge", []string{"reason", "partition"},
		"Pending jobs by the reason they wait (Resources, Priority, Dependency, ...) and partition.",
		"squeue --json (state_reason)"},
	{mGPUsAllocated, "gauge", []string{"user", "account", "partition", "type"},
		"GPUs held by running jobs, by user, account, partition and GPU type (\"\" when Slurm names none).",
		"squeue --json (gres_detail, else tres_alloc_str, else tres_per_node x node_count)"},
	{mGPUsPending, "gauge", []string{"partition", "type"},
		"GPUs requested by pending jobs, by partition and GPU type.",
		"squeue --json (tres_req_str, tres_per_node, tres_per_job)"},
	{mNodes, "gauge", []string{"state", "partition"},
		"Nodes by state (idle, mixed, allocated, drained, draining, down, ...) and partition; a node in two partitions counts in both.",
		"sinfo --json (state, state_flags, partitions)"},
	{mNodeCPUs, "gauge", []string{"node", "state"},
		"CPUs of a node: state is total, allocated, idle, or other (unallocated on a node that cannot run jobs).",
		"sinfo --json (cpus, alloc_cpus, idle_cpus)"},
	{mNodeGPUs, "gauge", []string{"node", "type", "state"},
		"GPUs of a node by type: state is total, allocated, idle, or other (unallocated on a node that cannot run jobs).",
		"sinfo --json (gres, gres_used)"},
	{mPartitionCPUs, "gauge", []string{"partition", "state"},
		"CPUs of the nodes of a partition: state is total, allocated, idle or other.",
		"sinfo --json"},
	{mPartitionGPUs, "gauge", []string{"partition", "type", "state"},
		"GPUs of the nodes of a partition by type: state is total, allocated, idle or other.",
		"sinfo --json (gres, gres_used)"},
	{mSchedThreads, "gauge", nil, "slurmctld server threads in use.", "sdiag (Server thread count)"},
	{mSchedAgentQueue, "gauge", nil, "Outgoing RPCs queued by slurmctld's agent.", "sdiag (Agent queue size)"},
	{mSchedDBDAgentQueue, "gauge", nil, "Messages queued for slurmdbd.", "sdiag (DBD Agent queue size)"},
	{mSchedQueue, "gauge", nil, "Jobs the main scheduler considered in its last cycle.", "sdiag (Main schedule: Last queue length)"},
	{mSchedLastCycle, "gauge", nil, "Duration of the main scheduler's last cycle.", "sdiag (Main schedule: Last cycle)"},
	{mSchedMeanCycle, "gauge", nil, "Mean duration of the main scheduler's cycles since the statistics reset.", "sdiag (Main schedule: Mean cycle)"},
	{mSchedMaxCycle, "gauge", nil, "Longest main scheduler cycle since the statistics reset.", "sdiag (Main schedule: Max cycle)"},
	{mSchedBFLastCycle, "gauge", nil, "Duration of the backfill scheduler's last cycle.", "sdiag (Backfilling stats: Last cycle)"},
	{mSchedBFMeanCycle, "gauge", nil, "Mean duration of backfill cycles since the statistics reset (absent before the first cycle).", "sdiag (Backfilling stats: Mean cycle)"},
	{mSchedBFQueue, "gauge", nil, "Jobs the backfill scheduler considered in its last cycle.", "sdiag (Backfilling stats: Last queue length)"},
	{mSchedBackfilledJobs, "counter", nil, "Jobs started by the backfill scheduler since slurmctld started.", "sdiag (Total backfilled jobs (since last slurm start))"},
	{mCollectorSuccess, "gauge", []string{"command"}, "1 when the latest invocation of the command succeeded and parsed, else 0.", "gpuwatch"},
	{mCollectorDuration, "gauge", []string{"command"}, "Wall time of the latest invocation of the command, parsing included.", "gpuwatch"},
	{mCollectorErrors, "counter", []string{"command"}, "Invocations of the command that failed, timed out or printed output that did not parse.", "gpuwatch"},
	{mCollectorLastSuccess, "gauge", []string{"command"}, "Unix time of the command's latest successful invocation (absent before the first).", "gpuwatch"},
}

// descs builds one descriptor per spec.
func descs() map[string]*prometheus.Desc {
	m := make(map[string]*prometheus.Desc, len(Metrics))
	for _, s := range Metrics {
		m[s.Name] = prometheus.NewDesc(s.Name, s.Help, s.Labels, nil)
	}
	return m
}
