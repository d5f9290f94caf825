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
	for _, c := range model.Commands {
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
	} {
		app, _ := newApp()
		_, err := app.Parse(tc.args)
		if err == nil {
			t.Fatalf("%v parsed", tc.args)
		}
		if got := nameTheFlag(err, tc.args).Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want it to start with %q", tc.args, got, tc.want)
		}
	}
}
