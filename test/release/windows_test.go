package release

import (
	"archive/zip"
	"bytes"
	"debug/pe"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The Windows zip holds one folder named as the zip: gpuwatch.exe, a
// console program for amd64 that imports only Windows' own DLLs (no cgo
// runtime, no NVML), and LICENSE, README.md and README-windows.txt as
// they are in the repository.
func TestWindowsZip(t *testing.T) {
	r := findRelease(t)
	name := "gpuwatch-" + r.version + ".windows-amd64"
	zr, err := zip.OpenReader(filepath.Join(r.dist, name+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	files := map[string][]byte{}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc) // checks the entry's CRC too
		rc.Close()
		if err != nil {
			t.Fatalf("%s in the zip: %v", f.Name, err)
		}
		files[strings.TrimPrefix(f.Name, name+"/")] = b
	}
	want := []string{name + "/", name + "/LICENSE", name + "/README-windows.txt", name + "/README.md", name + "/gpuwatch.exe"}
	if !slices.Equal(names, want) {
		t.Errorf("the zip holds %q, want %q", names, want)
	}
	for entry, src := range map[string]string{"LICENSE": "LICENSE", "README.md": "README.md", "README-windows.txt": "packaging/windows/README-windows.txt"} {
		repo, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), src))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files[entry], repo) {
			t.Errorf("%s in the zip differs from the repository's %s", entry, src)
		}
	}

	exe, err := pe.NewFile(bytes.NewReader(files["gpuwatch.exe"]))
	if err != nil {
		t.Fatalf("gpuwatch.exe is not a PE file: %v", err)
	}
	defer exe.Close()
	if exe.Machine != pe.IMAGE_FILE_MACHINE_AMD64 || exe.Characteristics&pe.IMAGE_FILE_EXECUTABLE_IMAGE == 0 {
		t.Errorf("gpuwatch.exe: machine %#x, characteristics %#x; want an amd64 executable", exe.Machine, exe.Characteristics)
	}
	if oh, ok := exe.OptionalHeader.(*pe.OptionalHeader64); !ok || oh.Subsystem != pe.IMAGE_SUBSYSTEM_WINDOWS_CUI {
		t.Errorf("gpuwatch.exe: optional header %T, want PE32+ for the console subsystem", exe.OptionalHeader)
	}
	// debug/pe's ImportedLibraries is not implemented: the DLLs are read
	// from the imported symbols (NAME:DLL).
	syms, err := exe.ImportedSymbols()
	if err != nil || len(syms) == 0 {
		t.Fatalf("gpuwatch.exe's imports: %d symbols, %v", len(syms), err)
	}
	for _, s := range syms {
		// Go's Windows runtime imports kernel32 at link time and loads
		// the rest of the system's DLLs itself.
		if _, dll, _ := strings.Cut(s, ":"); !strings.EqualFold(dll, "kernel32.dll") {
			t.Errorf("gpuwatch.exe imports %s: a Windows build must need nothing but Windows", s)
		}
	}
}
