package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// scripts/release/podman.sh works from a checkout whose path is long, as
// a clone under an ordinary home directory gives: podman refuses a runroot
// longer than 50 characters, and the runroot once lived in the checkout.
// Two checkouts get two runroots, so their podmans never share state.
func TestPodmanFromADeepCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("podman is checked in the full run")
	}
	requireRoot(t)
	testenv.RequireTool(t, "podman", "podman")
	script, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "scripts", "release", "podman.sh"))
	if err != nil {
		t.Fatal(err)
	}
	runroot := func(checkout string) string {
		t.Helper()
		dir := filepath.Join(checkout, "scripts", "release")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "podman.sh"), script, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(dir, "podman.sh"), "info", "--format", "{{.Store.RunRoot}}").CombinedOutput()
		if err != nil {
			t.Fatalf("podman.sh info in %s (%d characters): %v\n%s", checkout, len(checkout), err, out)
		}
		got := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = os.RemoveAll(got) })
		return got
	}

	deep := filepath.Join(t.TempDir(), "home", "someone", "src", "github.com", "gpuwatch")
	first := runroot(filepath.Join(deep, "gpuwatch"))
	second := runroot(filepath.Join(deep, "gpuwatch-fork"))
	if len(first) > 50 || first == "" {
		t.Errorf("runroot %q: want 1 to 50 characters", first)
	}
	if first == second {
		t.Errorf("two checkouts share the runroot %q", first)
	}
}
