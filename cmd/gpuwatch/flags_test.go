package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func TestEveryCollectorHasHelp(t *testing.T) {
	for _, g := range snapshot.AllGroups {
		if collectorHelp[g] == "" {
			t.Errorf("collector %q has no help text for --collector.%s", g, g)
		}
	}
}

// TestDocsDocumentEveryFlag keeps the flag reference (docs/flags.md, which
// the README links) complete: every flag of every command must be named there.
func TestDocsDocumentEveryFlag(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	app, _ := newApp()
	model := app.Model()
	flags := model.Flags
	cmds := model.Commands
	for len(cmds) > 0 {
		c := cmds[0]
		cmds = append(cmds[1:], c.Commands...)
		flags = append(flags, c.Flags...)
	}
	builtin := map[string]bool{"help": true, "help-long": true, "help-man": true, "version": true}
	for _, f := range flags {
		if builtin[f.Name] || f.Hidden {
			continue
		}
		if !strings.Contains(string(readme), "--"+f.Name) {
			t.Errorf("docs/flags.md does not document --%s", f.Name)
		}
	}
}

// TestValueErrorsNameTheFlag: a value kingpin cannot parse is reported
// with the flag it was given to.
func TestValueErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend=bogus"}, "--backend=bogus: enum value must be one of nvml,nvidia-smi,sim,none, got 'bogus'"},
		{[]string{"--collection.timeout", "abc"}, `--collection.timeout abc: time: invalid duration "abc"`},
		{[]string{"ps", "-o", "yaml"}, "-o yaml: enum value must be one of table,json, got 'yaml'"},
		{[]string{"--web.max-requests=x1"}, `--web.max-requests=x1: strconv.`},
		{[]string{"--backend=sim", "--sim.config=/no/such/sim.yaml"}, "--sim.config=/no/such/sim.yaml: path '/no/such/sim.yaml' does not exist"},
		{[]string{"--metrics.config", "/no/such.yaml"}, "--metrics.config /no/such.yaml: path"},
	} {
		app, _ := newApp()
		_, err := app.Parse(tc.args)
		if err == nil {
			t.Fatalf("%v parsed", tc.args)
		}
		if got := explainParseError(app, err, tc.args).Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want it to start with %q", tc.args, got, tc.want)
		}
	}
}

// TestMisspeltWordsGetASuggestion: a flag, an enum value or a command one
// slip of the keyboard away from a real one is named in the error; a word
// near nothing gets no guess.
func TestMisspeltWordsGetASuggestion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--colector.gpm"}, "did you mean --collector.gpm?"},
		{[]string{"--no-colector.gpm"}, "did you mean --no-collector.gpm?"},
		{[]string{"--backend=nvlm"}, "--backend=nvlm: enum value must be one of nvml,nvidia-smi,sim,none, got 'nvlm'; did you mean nvml?"},
		{[]string{"ps", "--outptu=json"}, "did you mean --output?"},
		{[]string{"ps", "-o", "jsn"}, "-o jsn: enum value must be one of table,json, got 'jsn'; did you mean json?"},
		{[]string{"report", "--prometheus.ulr=http://x"}, "did you mean --prometheus.url?"},
		{[]string{"repot"}, "did you mean the command report?"},
		{[]string{"report", "--gpu=3"}, "--gpu is a flag of ps"},
		{[]string{"--zzzzzz"}, ""},
		{[]string{"--backend=quantum"}, ""},
	} {
		app, _ := newApp()
		_, err := app.Parse(tc.args)
		if err == nil {
			t.Fatalf("%v parsed", tc.args)
		}
		got := explainParseError(app, err, tc.args).Error()
		if tc.want == "" && strings.Contains(got, "did you mean") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: %q, want %q in it", tc.args, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"nvml", "nvml", 0}, {"nvlm", "nvml", 1}, {"colector", "collector", 1},
		{"sim", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"ca", "abc", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}
