//go:build cgo

// Package genbranch writes internal/fakedriver/nvmlbranch/tables_gen.go: which NVML
// functions and field IDs each driver branch has, and which C symbols each
// method of go-nvml's interfaces calls.
//
// # Method
//
// A driver branch ships with one CUDA version (NVIDIA's CUDA toolkit
// release notes list the minimum driver per CUDA version: 11.x R450-R520,
// 12.0 R525, 12.2 R535, 12.4 R550, 12.8 R570, 12.9 R575, 13.0 R580). Each
// go-nvml release carries the nvml.h of one CUDA version (its tag's commit
// says which: "Bump to NVML version 12.2"). The functions a branch's
// libnvidia-ml.so.1 exports are the ones that nvml.h declares, and the
// field IDs it knows are the NVML_FI_* it defines. Releases lists the
// mapping. For each release Source runs `go mod download -json
// github.com/NVIDIA/go-nvml@VERSION` (the module cache keeps the header;
// nothing is copied elsewhere) and reads pkg/nvml/nvml.h with package
// nvmlh.
//
// The method-to-symbol table comes from the source of the go-nvml that
// gpuwatch builds with (go.mod): each method of go-nvml's interfaces is
// followed through the package's calls down to its cgo C.nvml* calls; a
// versioned function variable (nvmlInit, which go-nvml points at
// nvmlInit_v2 when the library has it) becomes a set of alternatives.
//
// # A new branch
//
// Add the go-nvml release with that CUDA version's nvml.h to Releases, run
// `go generate ./internal/fakedriver/nvmlbranch`, and commit tables_gen.go.
package genbranch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch/nvmlh"
)

// FileName is the generated file, in package nvmlbranch.
const FileName = "tables_gen.go"

// Release maps one driver branch to the go-nvml release whose nvml.h
// stands for it.
type Release struct {
	Branch string // driver branch, "R535"
	GoNVML string // go-nvml version whose pkg/nvml/nvml.h is used
	CUDA   string // the CUDA version of that nvml.h
	Note   string // where the header and the branch differ
	// DriverVersion is one released driver of the branch, and
	// CUDADriverVersion the CUDA version it reports (cudaDriverGetVersion
	// encoding, 1000*major + 10*minor): what a simulated driver of the
	// branch answers.
	DriverVersion     string
	CUDADriverVersion int
}

// Releases, oldest first.
var Releases = []Release{
	{Branch: "R470", DriverVersion: "470.82.01", CUDADriverVersion: 11040, GoNVML: "v0.11.1-0", CUDA: "11.1",
		Note: "CUDA 11.1's header (R455): the module proxy's checksum database does not serve v0.11.4-0 (CUDA 11.4), " +
			"so this is a strict subset of R470 (it lacks the functions CUDA 11.2-11.4 added): the safe side for a test"},
	{Branch: "R510", DriverVersion: "510.47.03", CUDADriverVersion: 11060, GoNVML: "v0.11.6-0", CUDA: "11.6"},
	{Branch: "R525", DriverVersion: "525.60.13", CUDADriverVersion: 12000, GoNVML: "v0.12.0-1", CUDA: "12.0", Note: "GPM appears"},
	{Branch: "R535", DriverVersion: "535.54.03", CUDADriverVersion: 12020, GoNVML: "v0.12.2-0", CUDA: "12.2"},
	{Branch: "R550", DriverVersion: "550.90.07", CUDADriverVersion: 12040, GoNVML: "v0.12.4-1", CUDA: "12.4"},
	{Branch: "R570", DriverVersion: "570.86.15", CUDADriverVersion: 12080, GoNVML: "v0.12.8-0", CUDA: "12.8", Note: "PCIe byte counters (fields 197/198) from R570's header on"},
	{Branch: "R575", DriverVersion: "575.57.08", CUDADriverVersion: 12090, GoNVML: "v0.12.9-0", CUDA: "12.9"},
	{Branch: "R580", DriverVersion: "580.159.04", CUDADriverVersion: 13000, GoNVML: "v0.13.0-1", CUDA: "13.0"},
}

// ModuleDir returns where the module cache holds go-nvml at version,
// downloading it through the module proxy when needed.
func ModuleDir(version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/NVIDIA/go-nvml@"+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download go-nvml@%s: %s", version, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download go-nvml@%s: %v: %s", version, err, strings.TrimSpace(stderr.String()))
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download go-nvml@%s: no directory in %q", version, out)
	}
	return info.Dir, nil
}

// Header reads and parses the nvml.h of go-nvml at version.
func Header(version string) (*nvmlh.Header, error) {
	dir, err := ModuleDir(version)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "pkg", "nvml", "nvml.h")
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h, err := nvmlh.ParseHeader(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// BuildVersion is the go-nvml version in gpuwatch's go.mod.
func BuildVersion() (string, string, error) {
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/NVIDIA/go-nvml").Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m github.com/NVIDIA/go-nvml: %v", err)
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", err
	}
	if m.Dir == "" {
		if m.Dir, err = ModuleDir(m.Version); err != nil {
			return "", "", err
		}
	}
	return m.Version, m.Dir, nil
}

// Source returns the generated file.
func Source() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by genbranch from go-nvml's nvml.h files; DO NOT EDIT.\n")
	b.WriteString("// Regenerate with: go generate ./internal/fakedriver/nvmlbranch\n\npackage nvmlbranch\n\n")
	b.WriteString("var branches = []*Branch{\n")
	for _, r := range Releases {
		h, err := Header(r.GoNVML)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "{\nName: %q, GoNVML: %q, CUDA: %q,\n", r.Branch, r.GoNVML, r.CUDA)
		fmt.Fprintf(&b, "DriverVersion: %q, CUDADriverVersion: %d,\n", r.DriverVersion, r.CUDADriverVersion)
		if r.Note != "" {
			fmt.Fprintf(&b, "Note: %q,\n", r.Note)
		}
		b.WriteString("functions: []string{\n")
		for _, f := range h.Functions {
			fmt.Fprintf(&b, "%q,\n", f.Name)
		}
		b.WriteString("},\nfields: []uint32{")
		for i, f := range h.Fields {
			if i%16 == 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%d, ", f.ID)
		}
		fmt.Fprintf(&b, "\n},\nfieldMax: %d,\n},\n", h.FieldMax)
	}
	b.WriteString("}\n\n")

	version, dir, err := BuildVersion()
	if err != nil {
		return nil, err
	}
	methods, err := methodSymbols(filepath.Join(dir, "pkg", "nvml"))
	if err != nil {
		return nil, fmt.Errorf("go-nvml %s: %w", version, err)
	}
	fmt.Fprintf(&b, "// methodSymbols was read from go-nvml %s.\n//\n", version)
	b.WriteString("// methodSymbols: per method of go-nvml's interfaces, sorted by name, the C symbols\n")
	b.WriteString("// it calls; each inner list holds alternatives (go-nvml uses the newest one the\n")
	b.WriteString("// library has). A slice, not a map: the linker lays it out as data, where a map\n")
	b.WriteString("// literal would be 130 KB of code run at every start.\n")
	b.WriteString("var methodSymbols = []methodSymbol{\n")
	names := make([]string, 0, len(methods))
	for n := range methods {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "{%q, [][]string{", n)
		for _, req := range methods[n] {
			b.WriteString("{")
			for _, s := range req {
				fmt.Fprintf(&b, "%q, ", s)
			}
			b.WriteString("}, ")
		}
		b.WriteString("}},\n")
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated source does not format: %v", err)
	}
	return src, nil
}
