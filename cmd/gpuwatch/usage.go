package main

import (
	"strings"
	"text/template"

	"github.com/alecthomas/kingpin/v2"
)

// commandFlagPrefixes lists, per command, the application flags it uses;
// its --help shows only those (and its own). A command not listed shows
// every flag: serve and textfile use them all.
var commandFlagPrefixes = map[string][]string{
	"ps": {
		"help", "version", "backend", "sim.", "collection.timeout",
		"attribution", "attribution.", "path.", "docker.", "cri.", "kubelet.",
		"slurm.jobs", "slurm.node-name", "slurm.scontrol-path", "slurm.squeue-path", "slurm.timeout",
		"log.",
	},
}

// useCommandUsage makes `gpuwatch COMMAND --help` list only the flags the
// command uses.
func useCommandUsage(app *kingpin.Application) {
	const all = "{{.Context.Flags|FlagsToTwoColumns|FormatTwoColumns}}"
	tmpl := strings.Replace(kingpin.DefaultUsageTemplate, all,
		"{{commandFlags .Context.SelectedCommand .Context.Flags|FlagsToTwoColumns|FormatTwoColumns}}", 1)
	if tmpl == kingpin.DefaultUsageTemplate {
		return // kingpin's template changed; show every flag rather than fail
	}
	app.UsageFuncs(template.FuncMap{"commandFlags": commandFlags})
	app.UsageTemplate(tmpl)
}

func commandFlags(cmd *kingpin.CmdModel, flags []*kingpin.FlagModel) []*kingpin.FlagModel {
	if cmd == nil {
		return flags
	}
	prefixes, filtered := commandFlagPrefixes[cmd.FullCommand]
	if !filtered {
		return flags
	}
	var out []*kingpin.FlagModel
	for _, f := range flags {
		if cmdOwns(cmd, f) || hasAnyPrefix(f.Name, prefixes) {
			out = append(out, f)
		}
	}
	return out
}

func cmdOwns(cmd *kingpin.CmdModel, f *kingpin.FlagModel) bool {
	for _, own := range cmd.Flags {
		if own == f || own.Name == f.Name {
			return true
		}
	}
	return false
}

func hasAnyPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if name == p || strings.HasPrefix(name, p) && strings.HasSuffix(p, ".") {
			return true
		}
	}
	return false
}
