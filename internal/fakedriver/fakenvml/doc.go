// Command fakenvml is gpuwatch's simulator built as a C shared library,
// libnvidia-ml.so.1, with the C ABI of NVIDIA's nvml.h. It lets the
// unmodified NVML path of gpuwatch (go-nvml's nvml.New(), dlopen, cgo)
// run without a GPU, exactly as on a GPU node:
//
//	make fakenvml
//	LD_LIBRARY_PATH=$PWD/build/fakenvml/R580 ./bin/gpuwatch --backend=nvml
//
// # Variants
//
// One Go source, linked once per NVIDIA driver branch (nvmlbranch:
// R470 R510 R525 R535 R550 R570 R575 R580) with a linker version script
// that exports only that branch's functions, plus "basic", a library with
// only twenty basic functions (init, count, handles, UUID, name,
// temperature, power, memory v1, versions). A program that calls a function
// the variant does not export dies the way it would on that driver
// ("symbol lookup error: undefined symbol"). The build (make fakenvml,
// which runs ./internal/fakedriver/fakenvml/build) puts each variant in
// build/fakenvml/VARIANT/libnvidia-ml.so.1.
//
// # What it answers
//
// Every function of every branch's nvml.h is exported. The ones the
// simulator models (the readings, processes, events, MIG and GPM calls
// gpuwatch makes) are bridged to it by hand in bridge_*.go; every other
// one is generated (stubs_gen.go, by genexports from the headers) and
// answers NVML_ERROR_NOT_SUPPORTED (NVML_ERROR_UNINITIALIZED before
// nvmlInit). With a branch variant the simulator also answers field IDs
// and versions as that branch (see the simulator's driver: key).
//
// # Environment
//
//	GPUWATCH_SIM_CONFIG   a --sim.config file (YAML, see package sim)
//	GPUWATCH_SIM_PROFILE  a profile; overrides the config's; default h100
//
// A config that cannot be loaded makes nvmlInit fail with
// NVML_ERROR_UNKNOWN, and the reason is written once to standard error.
package main
