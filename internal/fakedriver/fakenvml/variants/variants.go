//go:build cgo

// Package variants builds the fake libnvidia-ml.so.1 (internal/fakedriver/fakenvml)
// once per variant: one per NVIDIA driver branch (nvmlbranch), "basic"
// with twenty basic functions, and "all" with every function of every
// branch. The Go code is compiled once (the build cache keeps it); each
// variant is a link with its own -X main.variant and a linker version
// script that exports only that variant's functions. Build checks the
// dynamic symbol table of every library it links.
package variants

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/fakenvml/genexports"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
)

// LibraryName is the file each variant's directory holds.
const LibraryName = "libnvidia-ml.so.1"

// Basic is the "basic" variant's functions: what the oldest drivers and
// the most minimal NVML stand-ins have: init, count, handles,
// UUID, name, temperature, power, memory v1, versions, PCI info.
var Basic = []string{
	"nvmlInit", "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString",
	"nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
	"nvmlDeviceGetCount", "nvmlDeviceGetCount_v2",
	"nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByUUID",
	"nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetIndex", "nvmlDeviceGetPciInfo_v3",
	"nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetMemoryInfo",
	"nvmlDeviceGetUtilizationRates",
}

// Variant is one library to build.
type Variant struct {
	Name    string   // "R535", "basic", "all"
	Symbols []string // exported functions, sorted
}

// All returns every variant: the branches oldest first, then basic, then all.
func All() ([]Variant, error) {
	var out []Variant
	for _, b := range nvmlbranch.Branches() {
		out = append(out, Variant{Name: b.Name, Symbols: b.Functions()})
	}
	out = append(out, Variant{Name: "basic", Symbols: slices.Sorted(slices.Values(Basic))})
	funcs, err := genexports.Functions()
	if err != nil {
		return nil, err
	}
	all := make([]string, len(funcs))
	for i, f := range funcs {
		all[i] = f.Name
	}
	return append(out, Variant{Name: "all", Symbols: all}), nil
}

// Default are the variants make fakenvml builds and the end-to-end
// tests drive: the oldest supported branch, the first with GPM (R525),
// the first with clock-event reasons (R535), R550, the newest, and basic.
// Each variant is a link of about ten CPU seconds; the others (R510, R570,
// R575, all) differ from these only in their function sets, and build
// with -variants=NAME or -variants='*'.
var Default = []string{"R470", "R525", "R535", "R550", "R580", "basic"}

// Select returns the named variants ("": Default; "*": all of them).
func Select(names string) ([]Variant, error) {
	vs, err := All()
	if err != nil || names == "*" {
		return vs, err
	}
	if names == "" {
		names = strings.Join(Default, ",")
	}
	var out []Variant
	for n := range strings.SplitSeq(names, ",") {
		i := slices.IndexFunc(vs, func(v Variant) bool { return strings.EqualFold(v.Name, strings.TrimSpace(n)) })
		if i < 0 {
			names := make([]string, len(vs))
			for j, v := range vs {
				names[j] = v.Name
			}
			return nil, fmt.Errorf("no fake NVML variant %q (variants: %s)", n, strings.Join(names, ", "))
		}
		out = append(out, vs[i])
	}
	return out, nil
}

// versionScript is a GNU ld version script exporting exactly symbols.
func versionScript(symbols []string) string {
	var b strings.Builder
	b.WriteString("{\n  global:\n")
	for _, s := range symbols {
		fmt.Fprintf(&b, "    %s;\n", s)
	}
	b.WriteString("  local: *;\n};\n")
	return b.String()
}

// Build links each variant into outDir/NAME/libnvidia-ml.so.1. repoRoot
// is the gpuwatch module's directory. Build output goes to log.
func Build(ctx context.Context, repoRoot, outDir string, vs []Variant, log func(string)) error {
	outDir, err := filepath.Abs(outDir) // the linker runs elsewhere
	if err != nil {
		return err
	}
	// The package is compiled once (go's build cache); the links run
	// side by side, one per CPU.
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	var logMu sync.Mutex
	for _, v := range vs {
		g.Go(func() error {
			msg, err := buildOne(ctx, repoRoot, outDir, v)
			if err == nil && log != nil {
				logMu.Lock()
				log(msg)
				logMu.Unlock()
			}
			return err
		})
	}
	return g.Wait()
}

func buildOne(ctx context.Context, repoRoot, outDir string, v Variant) (string, error) {
	{
		dir := filepath.Join(outDir, v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		script := filepath.Join(dir, "exports.map")
		if err := os.WriteFile(script, []byte(versionScript(v.Symbols)), 0o644); err != nil {
			return "", err
		}
		lib := filepath.Join(dir, LibraryName)
		tmp := lib + ".tmp"
		// -s -w: no Go symbol table or DWARF, which halves the link time;
		// the dynamic symbol table is what matters here.
		ldflags := fmt.Sprintf("-s -w -X main.variant=%s -extldflags=-Wl,--version-script=%s", v.Name, script)
		cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-ldflags", ldflags, "-o", tmp, "./internal/fakedriver/fakenvml")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building fake NVML %s: %v\n%s", v.Name, err, out)
		}
		os.Remove(strings.TrimSuffix(tmp, filepath.Ext(tmp)) + ".h") // cgo's header for C callers: not needed
		if err := checkExports(tmp, v.Symbols); err != nil {
			return "", fmt.Errorf("fake NVML %s: %w", v.Name, err)
		}
		if err := os.Rename(tmp, lib); err != nil {
			return "", err
		}
		return fmt.Sprintf("fake NVML %s: %s (%d functions)", v.Name, lib, len(v.Symbols)), nil
	}
}

// Exports lists the nvml* functions a shared library exports.
func Exports(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "nvml") && s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func checkExports(path string, want []string) error {
	have, err := Exports(path)
	if err != nil {
		return err
	}
	if !slices.Equal(have, want) {
		var extra, missing []string
		for _, s := range have {
			if !slices.Contains(want, s) {
				extra = append(extra, s)
			}
		}
		for _, s := range want {
			if !slices.Contains(have, s) {
				missing = append(missing, s)
			}
		}
		return fmt.Errorf("exports %d functions, want %d (extra %v, missing %v)", len(have), len(want), extra, missing)
	}
	return nil
}
