//go:build cgo

package compose

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/deploycheck"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestDocumentedComposeCommands checks every documented `docker compose`
// command (testenv.DocCommands) where Docker cannot run: its page changes
// into deploy/compose first; every variable it sets is one the compose file
// reads; the page says the file needs Docker Compose v2; compose-go loads the file under those variables as Docker Compose
// v2 would; the profiles it selects start a gpuwatch; the services it
// names exist; its flags are ones Compose v2 has; a simulator profile it
// names is one gpuwatch has.
func TestDocumentedComposeCommands(t *testing.T) {
	root := testenv.RepoRoot()
	for _, v := range []string{"COMPOSE_PROFILES", "BIND_ADDRESS", "GPUWATCH_SIM_PROFILE"} {
		t.Setenv(v, "") // the shell's own must not leak in
		os.Unsetenv(v)
	}
	file, err := os.ReadFile(filepath.Join(root, deploycheck.ComposeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := testenv.DocCommands(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, c := range cmds {
		if c.Kind != testenv.DocCompose {
			continue
		}
		n++
		t.Run(fmt.Sprintf("%s:%d", c.Page, c.Line), func(t *testing.T) {
			t.Logf("%s", c.Text)
			page, err := os.ReadFile(filepath.Join(root, c.Page))
			if err != nil {
				t.Fatal(err)
			}
			// docker-compose 1.x fails on the top-level name, podman-compose
			// 1.0.3 on the network alias: the page must say which Compose.
			if !strings.Contains(strings.Join(strings.Fields(string(page)), " "), "Docker Compose v2") {
				t.Errorf("%s: the page never says the file needs Docker Compose v2", c)
			}
			if !changesIntoCompose(cmds[:i], c.Page) {
				t.Errorf("%s: the page does not cd into deploy/compose before this command", c)
			}
			for _, e := range c.Env {
				name, _, _ := strings.Cut(e, "=")
				if name != "COMPOSE_PROFILES" && !strings.Contains(string(file), "${"+name) {
					t.Errorf("%s: compose.yaml does not read %s", c, name)
				}
			}
			p, err := deploycheck.LoadCompose(root, c.Env...)
			if err != nil {
				t.Fatalf("%s: compose-go: %v", c, err)
			}
			if !slices.ContainsFunc(p.ServiceNames(), func(s string) bool { return strings.HasPrefix(s, "gpuwatch") }) {
				t.Errorf("%s: starts no gpuwatch: services %v", c, p.ServiceNames())
			}
			for _, e := range c.Env {
				if v, ok := strings.CutPrefix(e, "GPUWATCH_SIM_PROFILE="); ok {
					if !slices.ContainsFunc(sim.Profiles(), func(pi sim.ProfileInfo) bool { return pi.Name == v }) {
						t.Errorf("%s: gpuwatch has no simulator profile %s", c, v)
					}
					s := service(t, p, "gpuwatch-sim")
					if !slices.Contains(s.Command, "--sim.profile="+v) {
						t.Errorf("%s: gpuwatch-sim runs %q, not profile %s", c, s.Command, v)
					}
				}
			}
			args := c.Words[2:]
			switch {
			case len(args) >= 1 && args[0] == "up":
				for _, a := range args[1:] {
					if !slices.Contains([]string{"-d", "--detach", "--build", "--wait"}, a) {
						t.Errorf("%s: up %s: not a flag the test knows docker compose up has", c, a)
					}
				}
			case len(args) >= 2 && slices.Contains([]string{"run", "exec", "restart", "logs"}, args[0]):
				svc := args[len(args)-1]
				if args[0] == "exec" || args[0] == "run" {
					svc = firstNonFlag(args[1:])
				}
				if !slices.Contains(p.ServiceNames(), svc) {
					t.Errorf("%s: no service %s in %v", c, svc, p.ServiceNames())
				}
			default:
				t.Fatalf("%s: no rule checks this docker compose command; add one", c)
			}
		})
	}
	if n == 0 {
		t.Error("no documented docker compose command: is the extraction broken?")
	}
}

// changesIntoCompose reports whether the commands before, on page, cd into
// the compose directory (of a fresh clone or of the checkout).
func changesIntoCompose(before []testenv.DocCommand, page string) bool {
	return slices.ContainsFunc(before, func(o testenv.DocCommand) bool {
		return o.Page == page && o.Program() == "cd" && len(o.Words) == 2 &&
			strings.TrimPrefix(o.Words[1], "gpuwatch/") == deploycheck.ComposeDir
	})
}

func firstNonFlag(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
