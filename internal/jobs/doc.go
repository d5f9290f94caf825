// Package jobs keeps a record of every Slurm job and Kubernetes pod that
// used a GPU on this node, after it ended: who it was, when, and per GPU
// what it held and used. It is the accounting stage's second half: after
// each accounting tick it folds the tick's enriched snapshot and the
// accountant's running totals into per-job figures (Tracker), appends a
// record to an fsync'd journal when a job ends (Journal), and checkpoints
// the figures of running jobs so that a restart loses at most one
// checkpoint interval of them (Recorder). The record format and the
// journal's rotation are documented in docs/jobs.md.
//
// Records never hold command lines: the identity of a job is its Slurm
// job ID, user, account, partition and name, or its pod's namespace, name
// and UID.
package jobs
