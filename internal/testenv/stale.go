package testenv

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// sourcesTemplate lists, for go list -deps, the files of the main module's
// packages that go into a binary, one absolute path a line.
const sourcesTemplate = `{{if and .Module .Module.Main}}{{$d := .Dir}}` +
	`{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
	`{{range .CFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .HFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}` +
	`{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`

// checkFresh returns an error naming $GPUWATCH_BIN where the binary is
// older than the sources of ./cmd/gpuwatch in this checkout: a suite run
// against a binary built before a rebase tests the new tests against the
// old code, and fails (or passes) for a reason that is not in the tree.
// Where the binary was built from a clean checkout (its vcs.revision, not
// vcs.modified), a source is stale when git says it differs from that
// revision; otherwise when it was modified after the binary. Outside a git
// checkout (a copy of the tree without .git) there is nothing to compare
// with, and nothing is checked; nor with GPUWATCH_BIN_ANY_AGE=1, for
// today's tests against an old binary on purpose (a regression's proof).
func checkFresh(bin string) error {
	if os.Getenv("GPUWATCH_BIN_ANY_AGE") == "1" {
		return nil
	}
	root := RepoRoot()
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		return nil
	}
	st, err := os.Stat(bin)
	if err != nil {
		return fmt.Errorf("GPUWATCH_BIN=%s: %w", bin, err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("GPUWATCH_BIN=%s: reading its build information: %w", bin, err)
	}
	var rev string
	modified := true
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	list := exec.Command("go", "list", "-deps", "-f", sourcesTemplate, "./cmd/gpuwatch")
	list.Dir = root
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		return fmt.Errorf("listing the sources of ./cmd/gpuwatch to compare with GPUWATCH_BIN=%s: %w: %s", bin, err, stderr.String())
	}
	sources := append(strings.Fields(string(out)), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	var changed []string
	if rev != "" && !modified {
		diff := exec.Command("git", "-C", root, "diff", "--name-only", rev)
		names, err := diff.Output()
		if err != nil {
			return fmt.Errorf("GPUWATCH_BIN=%s: comparing the checkout with its revision %s: %w", bin, rev, err)
		}
		changed = strings.Fields(string(names))
	}
	stale := staleSources(root, sources, changed, rev != "" && !modified, st.ModTime(), func(path string) (time.Time, bool) {
		fi, err := os.Stat(path)
		if err != nil {
			return time.Time{}, false
		}
		return fi.ModTime(), true
	})
	if len(stale) == 0 {
		return nil
	}
	if len(stale) > 3 {
		stale = append(stale[:3], fmt.Sprintf("and %d more", len(stale)-3))
	}
	return fmt.Errorf("GPUWATCH_BIN=%s is older than its sources (%s): rebuild it (make build), or set GPUWATCH_BIN_ANY_AGE=1 to test that binary on purpose", bin, strings.Join(stale, ", "))
}

// staleSources are the sources (absolute paths) the binary does not
// reflect, relative to root: with byRevision, those among changed (paths
// relative to root, as git diff --name-only prints them); otherwise those
// modified after built. A source whose time cannot be read is skipped: go list
// named it, so it is gone only where the tree changes under the check.
func staleSources(root string, sources, changed []string, byRevision bool, built time.Time, mtime func(string) (time.Time, bool)) []string {
	var stale []string
	for _, src := range sources {
		rel, err := filepath.Rel(root, src)
		if err != nil {
			continue
		}
		rel = filepath.ToSlash(rel)
		if byRevision {
			if slices.Contains(changed, rel) {
				stale = append(stale, rel)
			}
			continue
		}
		if at, ok := mtime(src); ok && at.After(built) {
			stale = append(stale, rel)
		}
	}
	slices.Sort(stale)
	return slices.Compact(stale)
}
