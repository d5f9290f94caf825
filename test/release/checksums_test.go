package release

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// SHA256SUMS (`sha256sum -c` format) covers every tarball, zip and
// package in dist/, each with its current digest.
func TestChecksumsCoverEveryArtifact(t *testing.T) {
	r := findRelease(t)
	data, err := os.ReadFile(filepath.Join(r.dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not `DIGEST  NAME`", line)
		}
		listed = append(listed, name)
		if got := sha256File(t, filepath.Join(r.dist, name)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, sum)
		}
	}
	var want []string
	for _, arch := range arches {
		want = append(want, filepath.Base(r.deb(arch)), filepath.Base(r.rpm(arch)),
			"gpuwatch-"+r.version+".linux-"+arch+".tar.gz")
	}
	want = append(want, "gpuwatch-"+r.version+".windows-amd64.zip")
	slices.Sort(want)
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Errorf("SHA256SUMS lists %q, want %q", listed, want)
	}
}
