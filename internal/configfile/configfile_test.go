package configfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadsARegularFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ok.yml")
	if err := os.WriteFile(p, []byte("profile: h100\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Read(p)
	if err != nil || string(b) != "profile: h100\n" {
		t.Fatalf("Read = %q, %v", b, err)
	}
}
