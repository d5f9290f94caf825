// Package nvmlbranch says which NVML functions and field IDs each NVIDIA
// driver branch has, so that gpuwatch and its tests can know, before
// calling, what a given libnvidia-ml.so.1 would do.
//
// The tables are generated (tables_gen.go) from the nvml.h that go-nvml
// ships for each CUDA version; genbranch documents the method, the
// branch-to-release mapping and how to add a branch. A test fails when the
// generated file is stale.
//
// # API
//
//	nvmlbranch.Branches()              every branch, oldest first
//	nvmlbranch.Lookup("R535")          one branch by name (case-insensitive)
//	nvmlbranch.Newest()                the newest branch
//	b.HasFunction("nvmlGpmSampleGet")  does that branch's library export the C symbol?
//	b.KnowsField(197)                  does that branch know field ID 197?
//	b.MissingSymbol("Device.GetName")  "" or the first C symbol it lacks
//	nvmlbranch.MethodSymbols(method)   the C symbols a go-nvml method calls
//
// Method names are those of go-nvml's interfaces: "DeviceGetCount" for
// nvml.Interface, "Device.GetName" for nvml.Device, likewise
// "GpuInstance.", "ComputeInstance.", "EventSet.", "GpmSample.", "Unit.",
// "VgpuInstance.", "VgpuTypeId.".
//
// A branch's function set is exactly what its nvml.h declares. Checked
// against a real R580 library (bench/device/r580-h100, driver 580.159.04):
// every function the R580 table lists is exported; the real library
// exports a few more (functions declared only in later headers, two
// deprecated blacklist calls, and the private nvmlInternalGetExportTable).
// So a branch's table is a subset of what its drivers export: a program
// that runs against the table runs against the driver.
package nvmlbranch

//go:generate go run ./genbranch/cmd/genbranch -o tables_gen.go

import (
	"slices"
	"strings"
)

// Branch is one driver branch: what its libnvidia-ml.so.1 exports and
// which field IDs it knows.
type Branch struct {
	Name   string // "R535"
	GoNVML string // the go-nvml release whose nvml.h the tables come from
	CUDA   string // that header's CUDA version
	Note   string // where the header and the branch differ, if anywhere
	// DriverVersion is one released driver of the branch ("535.54.03"),
	// CUDADriverVersion the CUDA version it reports (12020 = 12.2).
	DriverVersion     string
	CUDADriverVersion int

	functions []string // sorted
	fields    []uint32 // sorted
	fieldMax  uint32   // NVML_FI_MAX
}

// Branches returns every branch, oldest first.
func Branches() []*Branch { return slices.Clone(branches) }

// Newest returns the newest branch.
func Newest() *Branch { return branches[len(branches)-1] }

// Lookup finds a branch by name ("R535", "r535" or "535").
func Lookup(name string) (*Branch, bool) {
	want := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(want, "R") {
		want = "R" + want
	}
	for _, b := range branches {
		if b.Name == want {
			return b, true
		}
	}
	return nil, false
}

// Names lists the branch names, oldest first.
func Names() []string {
	out := make([]string, len(branches))
	for i, b := range branches {
		out[i] = b.Name
	}
	return out
}

// HasFunction says whether the branch's library exports the C symbol.
func (b *Branch) HasFunction(symbol string) bool {
	_, ok := slices.BinarySearch(b.functions, symbol)
	return ok
}

// Functions lists the C symbols the branch exports, sorted.
func (b *Branch) Functions() []string { return slices.Clone(b.functions) }

// KnowsField says whether the branch defines the field ID (NVML_FI_*).
// A driver answers a field ID it does not know with a per-field
// ERROR_INVALID_ARGUMENT.
func (b *Branch) KnowsField(id uint32) bool {
	_, ok := slices.BinarySearch(b.fields, id)
	return ok
}

// FieldMax is the branch's NVML_FI_MAX, one more than its largest field ID.
func (b *Branch) FieldMax() uint32 { return b.fieldMax }

// MethodSymbols lists the C symbols a method of go-nvml's interfaces calls.
// Each inner list holds alternatives: go-nvml uses the newest of them the
// library exports. ok is false for a name that is not such a method.
func MethodSymbols(method string) (symbols [][]string, ok bool) {
	i, ok := slices.BinarySearchFunc(methodSymbols, method, func(m methodSymbol, name string) int { return strings.Compare(m.method, name) })
	if !ok {
		return nil, false
	}
	return methodSymbols[i].symbols, true
}

// methodSymbol is one row of the generated table.
type methodSymbol struct {
	method  string
	symbols [][]string
}

// MissingSymbol returns the first C symbol that go-nvml's method needs and
// the branch lacks ("" when the method can run on the branch). For a
// method with alternatives it names the oldest one. An unknown method name
// is reported as missing under its own name.
func (b *Branch) MissingSymbol(method string) string {
	reqs, ok := MethodSymbols(method)
	if !ok {
		return method
	}
	for _, alts := range reqs {
		if !slices.ContainsFunc(alts, b.HasFunction) {
			return alts[0]
		}
	}
	return ""
}
