package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mapBlock returns the folders listed in the first code block of
// CONTRIBUTING.md's "The map" section, each without its trailing slash.
func mapBlock(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## The map\n")
	if !ok {
		t.Fatal(`CONTRIBUTING.md has no "## The map" section`)
	}
	_, block, ok := strings.Cut(section, "```\n")
	if !ok {
		t.Fatal("CONTRIBUTING.md's map has no code block")
	}
	block, _, _ = strings.Cut(block, "```")
	var dirs []string
	for line := range strings.Lines(block) {
		if fields := strings.Fields(line); len(fields) > 0 {
			dirs = append(dirs, strings.TrimSuffix(fields[0], "/"))
		}
	}
	return dirs
}

// TestContributingMapListsEveryPackage keeps the map honest both ways: every
// package of cmd/ and internal/ has its own line (a newcomer looks a package
// up by its folder), every other package sits under a listed folder, and
// every listed folder exists.
func TestContributingMapListsEveryPackage(t *testing.T) {
	listed := map[string]bool{}
	for _, dir := range mapBlock(t) {
		listed[dir] = true
		if _, err := os.Stat(filepath.Join("..", dir)); err != nil {
			t.Errorf("CONTRIBUTING.md's map lists %s/, which does not exist", dir)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// From docs/, ./... would list only this package: ask from the root.
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dir := range strings.Lines(string(out)) {
		rel, err := filepath.Rel(root, strings.TrimSpace(dir))
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if ownLineNeeded(rel) {
			if !listed[rel] {
				t.Errorf("package %s/ is missing from CONTRIBUTING.md's map: add one line saying what it is", rel)
			}
			continue
		}
		if !underListed(rel, listed) {
			t.Errorf("package %s/ is under no folder of CONTRIBUTING.md's map", rel)
		}
	}
}

// ownLineNeeded says whether a package must have its own line: the code's
// packages do; a code generator's go-generate entry point (GENERATOR/cmd/NAME)
// shares its generator's line; bench, deploy, docs and test packages may
// share their folder's.
func ownLineNeeded(rel string) bool {
	if strings.HasPrefix(rel, "internal/") && strings.Contains(rel, "/cmd/") {
		return false
	}
	return strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "cmd/")
}

func underListed(rel string, listed map[string]bool) bool {
	for dir := rel; dir != "." && dir != "/"; dir = filepath.ToSlash(filepath.Dir(dir)) {
		if listed[dir] {
			return true
		}
	}
	return false
}
