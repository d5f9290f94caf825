//go:build cgo

package genexports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stubs_gen.go must be what the generator writes: after a new branch in
// nvmlbranch or a new hand-written bridge this fails until
// go generate ./internal/fakedriver/fakenvml is run.
func TestStubsAreCurrent(t *testing.T) {
	want, err := Source("..")
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join("..", FileName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		n := 0
		for n < len(have) && n < len(want) && have[n] == want[n] {
			n++
		}
		t.Fatalf("%s is stale (first difference at line %d): run go generate ./internal/fakedriver/fakenvml",
			FileName, 1+bytes.Count(have[:n], []byte("\n")))
	}
}

// Every function of every branch is exported exactly once: by a bridge or
// by a stub.
func TestEveryFunctionExportedOnce(t *testing.T) {
	funcs, err := Functions()
	if err != nil {
		t.Fatal(err)
	}
	bridged, err := Bridged("..")
	if err != nil {
		t.Fatal(err)
	}
	stubs, err := os.ReadFile(filepath.Join("..", FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range funcs {
		stubbed := strings.Contains(string(stubs), "//export "+f.Name+"\n")
		if stubbed == bridged[f.Name] {
			t.Errorf("%s: bridged=%v stubbed=%v, want exactly one", f.Name, bridged[f.Name], stubbed)
		}
	}
	if len(bridged) < 90 {
		t.Errorf("only %d bridged functions; the simulator models more", len(bridged))
	}
}

func TestGoType(t *testing.T) {
	for c, goT := range map[string]string{
		"nvmlDevice_t":             "C.uintptr_t",
		"nvmlDevice_t *":           "unsafe.Pointer",
		"const char *":             "unsafe.Pointer",
		"unsigned long long":       "C.ulonglong",
		"int":                      "C.int",
		"nvmlTemperatureSensors_t": "C.uint",
		"unsigned int":             "C.uint",
	} {
		if got := goType(c); got != goT {
			t.Errorf("goType(%q) = %s, want %s", c, got, goT)
		}
	}
}
