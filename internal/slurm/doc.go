// Package slurm reads Slurm's state for gpuwatch.
//
// On the controller or a login node, Collector (--collector.slurm) exports
// cluster metrics — jobs by state, pending reasons, nodes, CPUs and GPUs per
// node and partition, GPUs held per user and account, scheduler health —
// from `squeue --json`, `sinfo --json` and `sdiag`, with a fallback to
// formatted text for Slurm versions without --json. Each command runs once
// per poll interval however many scrapers ask, with a timeout that kills its
// process group, and a bounded output.
//
// On compute nodes, JobLookup tells which job a process's SLURM_JOB_ID
// names and which job holds which GPU index (GRES IDX), so that
// gpu_slurm_job_info exists even while a job's processes are idle.
//
// The JSON parsers read both the openapi v0.0.38 shape of Slurm 22.05 and
// the data_parser v0.0.40+ shape of 23.11 and later, in which numbers became
// {"set","infinite","number"} objects and job_state became a list.
package slurm
