// Package accounting keeps running totals of who used each GPU: per owner
// (the labels of the gpu_process_* series) on each GPU or MIG instance,
// the time held, SM time used, memory held over time and a share of the
// GPU's energy; per Kubernetes or Slurm allocation, the time held and the
// time held idle; per GPU, the energy nobody used.
//
// It is a stage after attribution, not an output: on its own ticker
// (Run) it takes an enriched snapshot from its own pipeline (a backend
// reader that hands it every per-process utilization sample once, and the
// same attribution as the scrapes) and integrates it (Observe). The
// totals go back into every snapshot the outputs render through Enrich,
// so outputs render counters as they render gauges. It never calls NVML
// or a socket itself.
//
// What is measured and what is modelled, per sharing mode, is in
// docs/accounting.md; the integration rules are in integrate.go and the
// energy split in energy.go.
//
// The totals are plain values (snapshot.Accounting): a later stage can
// checkpoint them (Totals) and turn an ended owner's total into a
// record.
package accounting
