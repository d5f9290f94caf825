package release

import (
	"debug/elf"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// oldestGlibc is the glibc the release binaries promise to run on: RHEL and
// CentOS 7. It is also the first glibc with an aarch64 port, so arm64
// symbols are never older.
var oldestGlibc = glibcVersion{2, 17}

type glibcVersion []int

// parseGlibcVersion reads a symbol version such as GLIBC_2.3.3.
func parseGlibcVersion(s string) (glibcVersion, error) {
	rest, ok := strings.CutPrefix(s, "GLIBC_")
	if !ok {
		return nil, fmt.Errorf("%q is not a GLIBC_ symbol version", s)
	}
	var v glibcVersion
	for part := range strings.SplitSeq(rest, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a GLIBC_ symbol version", s)
		}
		v = append(v, n)
	}
	return v, nil
}

// newerThan compares component by component; 2.17 is newer than 2.3.3.
func (v glibcVersion) newerThan(w glibcVersion) bool {
	for i := 0; i < len(v) || i < len(w); i++ {
		a, b := 0, 0
		if i < len(v) {
			a = v[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return a > b
		}
	}
	return false
}

func (v glibcVersion) String() string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return "GLIBC_" + strings.Join(parts, ".")
}

// newestGlibc is the newest GLIBC_ version any imported symbol of the ELF
// file needs (what `objdump -T | grep GLIBC_ | sort -V | tail -1` shows),
// and the symbol that needs it.
func newestGlibc(f *elf.File) (glibcVersion, string, error) {
	syms, err := f.ImportedSymbols()
	if err != nil {
		return nil, "", err
	}
	var newest glibcVersion
	var which string
	for _, s := range syms {
		if s.Version == "GLIBC_PRIVATE" {
			return nil, "", fmt.Errorf("%s needs GLIBC_PRIVATE, which no other glibc build provides", s.Name)
		}
		if !strings.HasPrefix(s.Version, "GLIBC_") {
			continue
		}
		v, err := parseGlibcVersion(s.Version)
		if err != nil {
			return nil, "", err
		}
		if newest == nil || v.newerThan(newest) {
			newest, which = v, s.Name
		}
	}
	return newest, which, nil
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// The program interpreter every glibc distribution has at this path.
var interpreter = map[string]string{"amd64": "/lib64/ld-linux-x86-64.so.2", "arm64": "/lib/ld-linux-aarch64.so.1"}

func TestReleaseBinariesNeedGlibc217AtMost(t *testing.T) {
	r := findRelease(t)
	for _, arch := range arches {
		t.Run(arch, func(t *testing.T) {
			f, err := elf.Open(r.binary(arch))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != elfMachine[arch] {
				t.Fatalf("%s is for %v, want %v", r.binary(arch), f.Machine, elfMachine[arch])
			}
			newest, symbol, err := newestGlibc(f)
			if err != nil {
				t.Fatal(err)
			}
			if newest == nil {
				t.Fatal("no GLIBC_ symbol at all: not the cgo build go-nvml needs")
			}
			t.Logf("newest glibc symbol: %s (%s)", newest, symbol)
			if newest.newerThan(oldestGlibc) {
				t.Errorf("%s needs %s (for %s); the release promises %s", r.binary(arch), newest, symbol, oldestGlibc)
			}

			for _, p := range f.Progs {
				if p.Type != elf.PT_INTERP {
					continue
				}
				b, err := io.ReadAll(p.Open())
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.TrimRight(string(b), "\x00"); got != interpreter[arch] {
					t.Errorf("interpreter %s, want %s", got, interpreter[arch])
				}
			}
			// NVML is opened with dlopen when the nvml backend starts: a
			// link-time dependency would stop the binary from starting on a
			// machine without the driver (--backend=sim, `gpuwatch metrics`).
			libs, err := f.ImportedLibraries()
			if err != nil {
				t.Fatal(err)
			}
			for _, lib := range libs {
				if strings.Contains(lib, "nvidia") {
					t.Errorf("%s is linked against %s; NVML must be loaded at run time", r.binary(arch), lib)
				}
			}
		})
	}
}

func TestNewestGlibc(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		newer bool
	}{
		{"GLIBC_2.17", "GLIBC_2.3.3", true},
		{"GLIBC_2.3.3", "GLIBC_2.17", false},
		{"GLIBC_2.34", "GLIBC_2.17", true},
		{"GLIBC_2.17", "GLIBC_2.17", false},
		{"GLIBC_2.2.5", "GLIBC_2.2", true},
	} {
		a, err := parseGlibcVersion(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := parseGlibcVersion(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.newerThan(b); got != c.newer {
			t.Errorf("%s newer than %s = %v, want %v", c.a, c.b, got, c.newer)
		}
	}
	for _, bad := range []string{"GCC_3.0", "GLIBC_2.x", "GLIBC_"} {
		if _, err := parseGlibcVersion(bad); err == nil {
			t.Errorf("parseGlibcVersion(%q) accepted it", bad)
		}
	}
}
