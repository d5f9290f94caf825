package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// docCommands returns every command of the documentation's sh blocks.
func docCommands(t *testing.T) []testenv.DocCommand {
	t.Helper()
	cmds, err := testenv.DocCommands("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 40 {
		t.Fatalf("only %d commands in the docs' sh blocks: is the extraction broken?", len(cmds))
	}
	return cmds
}

// TestEveryDocumentedCommandHasARule: each command of a ```sh block of the
// README, CONTRIBUTING, docs/ and deploy/*/README.md is run by test/e2e
// (gpuwatch, ./scripts/run.sh, curl to gpuwatch, report), checked by the
// validator CI has for what it names (helm template, kubectl's objects,
// systemd-analyze verify, compose-go), or allow-listed in
// testenv.DocAllowed with its reason. A command of none of these fails
// here with its page and line: write a rule for it, don't leave it unchecked.
func TestEveryDocumentedCommandHasARule(t *testing.T) {
	kinds := map[testenv.DocKind]int{}
	for _, c := range docCommands(t) {
		kinds[c.Kind]++
		if c.Kind == testenv.DocUnknown {
			t.Errorf("%s: no test runs or checks this command; add a rule in internal/testenv/doccmds.go", c)
		}
	}
	// Every kind is in use: a rule that stopped matching is a sign of a
	// broken extraction, not of fewer commands.
	for k := testenv.DocServe; k <= testenv.DocChecked; k++ {
		if kinds[k] == 0 {
			t.Errorf("no documented command of kind %s", k)
		}
	}
}

// TestDocCommandExtraction pins the extraction on a page with the shapes
// the docs use: continuation lines, comments, lists, prompts, quotes.
func TestDocCommandExtraction(t *testing.T) {
	page := "text `not a command`\n```sh\n# a comment\n" +
		"FOO=1 sudo gpuwatch ps --backend=sim \\\n  -o json   # the table\n" +
		"make build && ./bin/gpuwatch; curl -s localhost:9410/metrics | grep '^a # b'\n" +
		"yes > /dev/null 2>&1 & kill %1\n```\n```yaml\nnot: a command\n```\n" +
		"```console\n$ gpuwatch metrics\noutput # line\n```\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"CONTRIBUTING.md"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmds, err := testenv.DocCommands(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, c.String()+" ["+c.Kind.String()+"]")
	}
	want := []string{
		"README.md:4: FOO=1 sudo gpuwatch ps --backend=sim -o json [gpuwatch]",
		"README.md:6: make build [checked]",
		"README.md:6: ./bin/gpuwatch [serve]",
		"README.md:6: curl -s localhost:9410/metrics | grep '^a # b' [curl]",
		"README.md:7: yes > /dev/null 2>&1 [checked]",
		"README.md:7: kill %1 [checked]",
		"README.md:13: gpuwatch metrics [gpuwatch]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("extracted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if cmds[0].Program() != "gpuwatch" || strings.Join(cmds[0].Env, " ") != "FOO=1" {
		t.Errorf("program %q env %q, want gpuwatch and FOO=1", cmds[0].Program(), cmds[0].Env)
	}
}

// TestAllowedDocCommandsNameWhatExists checks the commands that cannot run
// here for what they name: repository paths exist (bin/ is make build's
// output), make targets are in the Makefile, scripts are executable, the
// clone URL is the module's, files a unit or a package reads are the ones
// it reads.
func TestAllowedDocCommandsNameWhatExists(t *testing.T) {
	read := func(path string) string {
		data, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	makefile := read("Makefile")
	units := read("deploy/systemd/gpuwatch.service") + read("deploy/systemd/gpuwatch-slurm.service") + read("deploy/systemd/gpuwatch-textfile.service")
	module := strings.Fields(read("go.mod"))[1]
	release := read("scripts/release/build.sh")
	used := map[string]bool{}
	for _, c := range docCommands(t) {
		if c.Kind != testenv.DocChecked {
			continue
		}
		used[c.Program()] = true
		args := c.Words[1:]
		last := ""
		if len(args) > 0 {
			last = args[len(args)-1]
		}
		fail := func(format string, a ...any) {
			t.Helper()
			t.Errorf("%s: "+format, append([]any{c}, a...)...)
		}
		for _, w := range args {
			if p, ok := repoPath(w); ok {
				if _, err := os.Stat(filepath.Join("..", p)); err != nil && !strings.HasPrefix(p, "bin/") {
					fail("%s: not in the repository", w)
				}
			}
		}
		switch c.Program() {
		case "git":
			if len(args) < 2 || args[0] != "clone" || args[1] != "https://"+module {
				fail("want git clone https://%s", module)
			}
		case "cd":
			dir := strings.TrimPrefix(strings.TrimPrefix(last, "gpuwatch"), "/")
			if st, err := os.Stat(filepath.Join("..", dir)); err != nil || !st.IsDir() {
				fail("%s is no directory of the checkout", last)
			}
		case "make":
			for _, target := range args {
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).MatchString(makefile) {
					fail("the Makefile has no target %s", target)
				}
			}
		case "install":
			if strings.Contains(c.Text, "bin/gpuwatch ") && !strings.Contains(makefile, "-o bin/gpuwatch") {
				fail("make build does not write bin/gpuwatch")
			}
		case "useradd":
			if !strings.Contains(units, "User="+last+"\n") {
				fail("no unit runs as User=%s", last)
			}
		case "echo":
			if _, tee, ok := strings.Cut(c.Text, "| sudo tee -a "); !ok || tee != last {
				fail("echo only feeds sudo tee -a FILE")
			}
			if !strings.Contains(units, "EnvironmentFile=-"+last+"\n") {
				fail("no unit reads EnvironmentFile=-%s", last)
			}
		case "sudoedit":
			if !strings.Contains(read("packaging/nfpm.yaml"), "dst: "+last+"\n") {
				fail("the packages do not ship %s", last)
			}
		case "sha256sum", "tar", "dpkg":
			ext := map[string]string{"sha256sum": "SHA256SUMS", "tar": ".tar.gz", "dpkg": ".deb"}[c.Program()]
			if !strings.Contains(last, ext) || !strings.Contains(release, ext) {
				fail("make release (scripts/release/build.sh) writes no %s", ext)
			}
		case "docker":
			if _, err := os.Stat(filepath.Join("..", "Dockerfile")); err != nil {
				fail("no Dockerfile")
			}
		case "./scripts/test.sh":
			if st, err := os.Stat(filepath.Join("..", c.Program())); err != nil || st.Mode()&0o111 == 0 {
				fail("not an executable script")
			}
		case "go":
			if len(args) == 0 || args[0] != "test" {
				fail("only go test is allowed")
			}
		}
	}
	// The allow-list is what the docs need, no more.
	for program := range testenv.DocAllowed {
		if !used[program] {
			t.Errorf("testenv.DocAllowed allows %s, which no documented command runs: drop it", program)
		}
	}
}

// repoPath returns a word that names a path of the repository, cleaned.
func repoPath(w string) (string, bool) {
	if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "/") || strings.HasPrefix(w, "$") ||
		strings.Contains(w, "://") || strings.Contains(w, "=") || strings.Contains(w, "VERSION") || !strings.Contains(w, "/") {
		return "", false
	}
	// A path into the checkout starts with one of its top directories (a
	// stray file at the top, such as a binary that go build left, is none).
	top, _, _ := strings.Cut(strings.TrimPrefix(w, "./"), "/")
	if st, err := os.Stat(filepath.Join("..", top)); (err != nil || !st.IsDir()) && top != "bin" {
		return "", false
	}
	return filepath.Clean(w), true
}
