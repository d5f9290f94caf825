//go:build cgo

// Package nvmlbackend reads NVIDIA GPUs through NVML into a snapshot.Snapshot.
//
// The reader talks only to the nvml.Interface of github.com/NVIDIA/go-nvml.
// In production that interface is nvml.New(), which dlopens
// libnvidia-ml.so.1; in tests and in the demo it is the simulator
// (internal/fakedriver/sim). The same code therefore runs on a real GPU and in
// every test.
//
// Rules the reader keeps, because outputs rely on them:
//   - A reading NVML reports as NOT_SUPPORTED stays an unset Opt; it is never
//     turned into a zero.
//   - Any other failed read also stays unset, and the first such error of a
//     collector group is reported in Snapshot.Groups[group].Err.
//   - A GPU that stops answering (GPU_IS_LOST, fallen off the bus) is reported
//     as Up=false with a DownReason; the other GPUs are read as usual.
//   - A disabled group makes no NVML call at all.
//   - No function the loaded library does not export is ever called: go-nvml
//     binds lazily, and such a call ends the process. Each is looked up
//     once after Init (capabilities.go); older calls stand in where NVML has
//     them, otherwise the reading is absent, and the limited groups are
//     logged at start and carried in Snapshot.Driver (driverlimits.go).
//   - Nothing on the scrape path blocks: XID events are collected by their own
//     goroutine, and PCIe traffic comes from counters, never from the
//     20 ms-blocking nvmlDeviceGetPcieThroughput.
package nvmlbackend
