package slurm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/internal/labelvalue"
)

// TestHostileSlurmNamesAreBoundedAndValid: account and partition names are
// chosen by users. A huge one must not become a huge label, and invalid
// UTF-8 in formatted output used to panic in MustNewConstMetric.
func TestHostileSlurmNamesAreBoundedAndValid(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "22.05")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	hostile := strings.Repeat("p", 900<<10) + "\xff\xfe"
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "squeue_formatted.txt" {
			b = []byte(strings.ReplaceAll(string(b), "|physics|", "|"+hostile+"|"))
			b = []byte(strings.ReplaceAll(string(b), "|chem|", "|ch\xffem|"))
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewCollector(Options{Runner: &fileRunner{dir: dir}, Format: "text"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if len(lp.GetValue()) > labelvalue.MaxBytes {
					t.Fatalf("%s{%s} is %d bytes", mf.GetName(), lp.GetName(), len(lp.GetValue()))
				}
				seen = seen || labelvalue.Truncated(lp.GetValue())
			}
		}
	}
	if !seen {
		t.Error("the hostile account never came out, truncated")
	}
}
