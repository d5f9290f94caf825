package gencmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain runs Main instead of the tests when the test binary is started
// as a generator by TestGenerator.
func TestMain(m *testing.M) {
	switch os.Getenv("GENCMD_SOURCE") {
	case "ok":
		Main("gentest", "default_gen.go", func() ([]byte, error) { return []byte("package x\n"), nil })
		os.Exit(0)
	case "fail":
		Main("gentest", "default_gen.go", func() ([]byte, error) { return nil, errors.New("no source") })
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestGenerator: the file -o names gets the source; a source error is exit
// status 1, a message naming the generator, and no file.
func TestGenerator(t *testing.T) {
	dir := t.TempDir()
	generate := func(source, out string) (string, error) {
		cmd := exec.Command(os.Args[0], "-o", out)
		cmd.Env = append(os.Environ(), "GENCMD_SOURCE="+source)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	out := filepath.Join(dir, "x_gen.go")
	if msg, err := generate("ok", out); err != nil {
		t.Fatalf("generator: %v\n%s", err, msg)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "package x\n" {
		t.Errorf("generated file = %q, %v", b, err)
	}

	failed := filepath.Join(dir, "y_gen.go")
	msg, err := generate("fail", failed)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(msg, "gentest: no source") {
		t.Errorf("failing source: %v, output %q; want exit status 1 and \"gentest: no source\"", err, msg)
	}
	if _, err := os.Stat(failed); !os.IsNotExist(err) {
		t.Errorf("a failing source left a file: %v", err)
	}
}
