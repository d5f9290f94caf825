package testenv

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStaleSources(t *testing.T) {
	built := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	mtimes := map[string]time.Time{
		"/r/cmd/gpuwatch/main.go":     built.Add(-time.Hour),
		"/r/internal/report/q.go":     built.Add(time.Second),
		"/r/internal/report/ui.css":   built,
		"/r/internal/testenv/gone.go": {},
	}
	mtime := func(p string) (time.Time, bool) {
		at, ok := mtimes[p]
		return at, ok && !at.IsZero()
	}
	sources := []string{"/r/cmd/gpuwatch/main.go", "/r/internal/report/q.go", "/r/internal/report/ui.css", "/r/internal/testenv/gone.go", "/r/go.mod"}
	for _, c := range []struct {
		name       string
		changed    []string
		byRevision bool
		want       []string
	}{
		// A dirty build: what changed after it, not at the same instant.
		{"by time", nil, false, []string{"internal/report/q.go"}},
		// A clean build: what differs from its revision, whatever its
		// time; a change outside the binary's sources (docs) is none.
		{"by revision", []string{"cmd/gpuwatch/main.go", "docs/reports.md", "go.mod"}, true, []string{"cmd/gpuwatch/main.go", "go.mod"}},
		{"by revision, unchanged", []string{"docs/reports.md"}, true, nil},
	} {
		got := staleSources("/r/internal/testenv/../..", sources, c.changed, c.byRevision, built, mtime)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: stale %q, want %q", c.name, got, c.want)
		}
	}
}

// TestCheckFreshOfThisBuild: a binary built now from this checkout is
// fresh; where it is checked by time, the same binary dated before its
// sources is not, and the error names GPUWATCH_BIN.
func TestCheckFreshOfThisBuild(t *testing.T) {
	bin := t.TempDir() + "/gpuwatch"
	build := exec.Command("go", "build", "-o", bin, "./cmd/gpuwatch")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := checkFresh(bin); err != nil {
		t.Fatalf("a binary built just now: %v", err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	// A build from a clean checkout is checked by revision, which dating
	// it back does not change; any other (local changes, or no revision:
	// -buildvcs=false) by time: dated before its sources, it is stale.
	if slices.ContainsFunc(info.Settings, func(s debug.BuildSetting) bool { return s.Key == "vcs.modified" && s.Value == "false" }) {
		return
	}
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	if err := checkFresh(bin); err == nil || !strings.Contains(err.Error(), "GPUWATCH_BIN="+bin) {
		t.Errorf("a binary dated 2000 is fresh, or the error does not name GPUWATCH_BIN: %v", err)
	}
	t.Setenv("GPUWATCH_BIN_ANY_AGE", "1")
	if err := checkFresh(bin); err != nil {
		t.Errorf("with GPUWATCH_BIN_ANY_AGE=1: %v", err)
	}
}
