// Package smibackend reads NVIDIA GPUs by running nvidia-smi and parsing its
// CSV output into a snapshot.Snapshot, the same snapshot the NVML backend
// fills. It is pure Go (no cgo, no dlopen), so it runs where NVML cannot be
// linked: on Windows, and against a host gpuwatch is not installed on, by
// running nvidia-smi through a command such as ssh.
//
// Rules the reader keeps, because outputs rely on them:
//   - The fields asked for are those the driver's own nvidia-smi lists in
//     --help-query-gpu, discovered once: nvidia-smi refuses a whole query
//     when one field is unknown to it, and field names changed between
//     driver branches (clocks_throttle_reasons became clocks_event_reasons).
//   - A value nvidia-smi cannot give ([N/A], [Not Supported]) is absent,
//     never 0; one it failed to read ([Unknown Error]) is absent and fails
//     its collector group; one that does not parse (garbage, a unit where
//     none was asked for) is absent and counted in
//     Snapshot.ReadingsDropped under the nvidia-smi field's name. Decimal
//     commas of a localized nvidia-smi are read as decimal points.
//   - What nvidia-smi has no field for (GPM, NVLink counters, XID events,
//     MIG instances, the energy counter, PCIe traffic) is absent, and
//     listed in Snapshot.Driver.Limits, so the exporter says so in
//     gpuwatch_driver_limited_group.
//   - Each collection runs nvidia-smi at most twice, concurrently: once for
//     the GPUs (--query-gpu) and, with the processes collector on, once
//     for their processes (--query-compute-apps); nvidia-smi answers one
//     query per run. Each run is bounded by the collection's deadline and
//     killed when it passes it; its output is bounded too.
//   - A failed run (nvidia-smi missing, ssh refused, a timeout) reports
//     every GPU seen before as down, with the reason, rather than dropping
//     them: a remote host that stops answering is a host whose GPUs are
//     down, not one without GPUs.
package smibackend
