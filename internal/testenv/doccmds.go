package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The commands of the documentation. Every command of a ```sh block of the
// README, CONTRIBUTING, docs/*.md and the READMEs under deploy/ is either run by a
// test or, where it cannot run here, checked by the validator of what it
// names. Each test package handles the kinds below that it can check, and
// docs/commands_test.go fails on a command of no kind, so a new command in
// the docs cannot go unchecked.

// DocKind says how a documented command is proven.
type DocKind int

const (
	// DocUnknown matches no rule: docs/commands_test.go fails on it.
	DocUnknown DocKind = iota
	// DocServe is a gpuwatch (or ./scripts/run.sh) that serves until
	// stopped: test/e2e starts it, waits for /healthz and stops it.
	DocServe
	// DocGpuwatch is a gpuwatch command that ends (ps, doctor, metrics...):
	// test/e2e runs it to completion.
	DocGpuwatch
	// DocReport is `gpuwatch report`: test/e2e runs it against a real
	// Prometheus that scraped the demo.
	DocReport
	// DocCurl asks a running gpuwatch (localhost:9410): test/e2e runs it
	// against one.
	DocCurl
	// DocHelm installs the chart: test/deploy renders it with helm template.
	DocHelm
	// DocKubectl acts on the chart's objects: test/deploy finds them in the
	// rendered chart, or decodes the manifest a -f names.
	DocKubectl
	// DocSystemd installs or drives a unit of deploy/systemd: test/deploy
	// runs systemd-analyze verify on the unit it names.
	DocSystemd
	// DocCompose is `docker compose`: deploy/compose loads the compose file
	// with compose-go under the command's environment and finds the
	// services it names.
	DocCompose
	// DocChecked cannot run here and has no validator: an allow-listed
	// program (DocAllowed) whose named repository paths, make targets and
	// scripts docs/commands_test.go checks.
	DocChecked
)

func (k DocKind) String() string {
	return [...]string{"unknown", "serve", "gpuwatch", "report", "curl", "helm", "kubectl", "systemd", "compose", "checked"}[k]
}

// DocCommand is one documented command: a line of a ```sh block with its
// continuation lines joined and its comment dropped, split at && ; and &.
// A pipeline stays one command.
type DocCommand struct {
	Page string // relative to the repository root
	Line int    // 1-based, where the command starts
	Text string
	// Env holds the command's leading VAR=value assignments; Words the
	// rest, split at blanks (quotes kept), with a leading sudo dropped.
	Env   []string
	Words []string
	Kind  DocKind
}

func (c DocCommand) String() string { return fmt.Sprintf("%s:%d: %s", c.Page, c.Line, c.Text) }

// Program is the command's first word after sudo and assignments.
func (c DocCommand) Program() string {
	if len(c.Words) == 0 {
		return ""
	}
	return c.Words[0]
}

// Subcommand is the first argument of a gpuwatch command that is not a flag
// ("" for the default, serve).
func (c DocCommand) Subcommand() string {
	for _, w := range c.Words[1:] {
		if !strings.HasPrefix(w, "-") {
			return w
		}
	}
	return ""
}

// HasFlag reports whether the command sets --name (as --name or --name=...).
func (c DocCommand) HasFlag(name string) bool {
	return slices.ContainsFunc(c.Words, func(w string) bool { return w == "--"+name || strings.HasPrefix(w, "--"+name+"=") })
}

// DocAllowed lists the programs whose documented commands cannot run here
// and have no validator beyond the existence of what they name. Each entry
// is reviewed: add one only with the reason it is safe to leave unrun.
var DocAllowed = map[string]string{
	"git":               "git clone of the project's repository: the test checks the URL is the module's",
	"cd":                "changes into a directory of the checkout: the test checks it exists",
	"make":              "builds or releases: the test checks each target is in the Makefile",
	"install":           "copies a built binary or a file of the repository into the system: the source must exist (bin/ is make build's output)",
	"useradd":           "creates the system user the units run as: the test checks the units' User=",
	"ls":                "inspects /dev/nvidiactl, the driver's device: nothing of the repository",
	"chgrp":             "gives the gpuwatch user an existing directory of the operator's host: nothing of the repository",
	"chmod":             "opens an existing directory of the operator's host to its group: nothing of the repository",
	"echo":              "feeds sudo tee -a into the environment file a unit reads: the test checks a unit names the file",
	"sha256sum":         "checks the downloaded release against the release's SHA256SUMS: the test checks the release writes it",
	"tar":               "unpacks the release archive: the test checks the release names it so",
	"dpkg":              "installs the release's .deb: needs root and a Debian host; test/release builds and inspects the package",
	"sudoedit":          "edits the packages' environment file: the test checks the packages ship it",
	"docker":            "docker build and run (docker compose is its own kind): no Docker engine here; the test checks the Dockerfile exists",
	"yes":               "a CPU hog for the flakiness recipe of CONTRIBUTING: runs nothing of the project",
	"kill":              "stops the CPU hogs of the flakiness recipe",
	"go":                "go test over packages of the repository: the test checks each package directory exists",
	"./scripts/test.sh": "installs Debian packages as root and runs every test (the test suite cannot run itself): the test checks the script is executable",
}

// DocPages lists the pages whose commands are checked, relative to root.
func DocPages(root string) ([]string, error) {
	pages := []string{"README.md", "CONTRIBUTING.md"}
	for _, pattern := range []string{"docs/*.md", "deploy/*/README.md", "deploy/*/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			pages = append(pages, rel)
		}
	}
	return pages, nil
}

// DocCommands returns every command of the sh blocks of DocPages, classified.
func DocCommands(root string) ([]DocCommand, error) {
	pages, err := DocPages(root)
	if err != nil {
		return nil, err
	}
	var out []DocCommand
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		out = append(out, pageCommands(page, string(data))...)
	}
	return out, nil
}

// shellFences open the blocks whose lines are commands.
var shellFences = []string{"```sh", "```bash", "```shell", "```console"}

func pageCommands(page, text string) []DocCommand {
	var out []DocCommand
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !slices.Contains(shellFences, strings.TrimSpace(lines[i])) {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), "```") {
			end++
		}
		out = append(out, blockCommands(page, start, lines[start:end])...)
		i = end
	}
	return out
}

// blockCommands reads one block whose first line is line start (0-based).
// A block with "$ " prompts is a console transcript: only the prompted
// lines are commands, the rest their output.
func blockCommands(page string, start int, block []string) []DocCommand {
	prompted := slices.ContainsFunc(block, func(l string) bool { return strings.HasPrefix(l, "$ ") })
	var out []DocCommand
	for i := 0; i < len(block); i++ {
		line := block[i]
		if prompted {
			var ok bool
			if line, ok = strings.CutPrefix(line, "$ "); !ok {
				continue
			}
		}
		first := i
		for {
			joined, cont := strings.CutSuffix(strings.TrimRight(stripComment(line), " \t"), "\\")
			if !cont || i+1 >= len(block) {
				line = joined
				break
			}
			i++
			line = strings.TrimRight(joined, " \t") + " " + strings.TrimSpace(block[i])
		}
		for _, text := range splitList(line) {
			out = append(out, newDocCommand(page, start+first+1, text))
		}
	}
	return out
}

// stripComment drops a # that starts a word outside quotes, and what
// follows it.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// splitList splits a command list at && ; and a lone & outside quotes.
func splitList(line string) []string {
	var out []string
	var quote byte
	last := 0
	add := func(end, next int) {
		if s := strings.TrimSpace(line[last:end]); s != "" {
			out = append(out, s)
		}
		last = next
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ';':
			add(i, i+1)
		case c == '&' && i+1 < len(line) && line[i+1] == '&':
			add(i, i+2)
			i++
		case c == '&' && (i == 0 || line[i-1] != '>') && (i+1 == len(line) || line[i+1] == ' '):
			add(i, i+1)
		}
	}
	add(len(line), len(line))
	return out
}

func newDocCommand(page string, line int, text string) DocCommand {
	c := DocCommand{Page: page, Line: line, Text: text}
	words := strings.Fields(text)
	for len(words) > 0 && isAssignment(words[0]) {
		c.Env = append(c.Env, words[0])
		words = words[1:]
	}
	if len(words) > 0 && words[0] == "sudo" {
		words = words[1:]
	}
	c.Words = words
	c.Kind = classify(c)
	return c
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" || strings.HasPrefix(name, "-") {
		return false
	}
	for _, r := range name {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// gpuwatchPrograms are the ways the docs run gpuwatch.
var gpuwatchPrograms = []string{"gpuwatch", "./bin/gpuwatch", "./scripts/run.sh"}

func classify(c DocCommand) DocKind {
	prog := c.Program()
	arg := func(i int) string {
		if i < len(c.Words) {
			return c.Words[i]
		}
		return ""
	}
	switch {
	case slices.Contains(gpuwatchPrograms, prog):
		switch c.Subcommand() {
		case "", "serve":
			return DocServe
		case "report":
			return DocReport
		default:
			return DocGpuwatch
		}
	case prog == "curl" && strings.Contains(c.Text, "localhost:9410"):
		return DocCurl
	case prog == "helm" && slices.Contains([]string{"install", "upgrade", "template"}, arg(1)):
		return DocHelm
	case prog == "kubectl":
		return DocKubectl
	case prog == "systemctl":
		return DocSystemd
	case prog == "install" && slices.ContainsFunc(c.Words, func(w string) bool { return strings.HasPrefix(w, "deploy/systemd/") }):
		return DocSystemd
	case prog == "docker" && arg(1) == "compose":
		return DocCompose
	case DocAllowed[prog] != "":
		return DocChecked
	}
	return DocUnknown
}
