// Package docs holds the user documentation (markdown) and the test that
// keeps its links working; it has no Go code of its own.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pages are the markdown files a user reads: the README, CONTRIBUTING and
// every page in docs/.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	return append([]string{filepath.Join("..", "README.md"), filepath.Join("..", "CONTRIBUTING.md")}, docs...)
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fenceRE   = regexp.MustCompile("(?s)```.*?```")
)

// anchor is GitHub's id for a heading: lower case, punctuation dropped,
// spaces as dashes.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(string(data), ""), -1) {
		out[anchor(strings.ReplaceAll(m[1], "`", ""))] = true
	}
	return out
}

// TestLinksResolve: every relative link in the README, CONTRIBUTING and
// docs/ names a file of the repository, and every #fragment a heading of
// the page it points at, so that moving a section never leaves a dead link.
func TestLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(data), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			resolved := page
			if file != "" {
				resolved = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %s: no such file", page, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(resolved, ".md") && !anchors(t, resolved)[frag] {
				t.Errorf("%s: link %s: no heading #%s in %s", page, target, frag, resolved)
			}
		}
	}
}
