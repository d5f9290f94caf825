package main

import (
	"os"
	"slices"
	"strings"
	"text/template"

	"github.com/alecthomas/kingpin/v2"
)

// How help reads: `gpuwatch COMMAND --help` shows the command's own flags
// in full, then the shared flags it reads by name only (a few lines where
// describing them takes hundreds); `--help-long` describes those too.
// `gpuwatch --help` lists the commands, then the flags of serve, the
// default command, which are the shared ones. Help goes to standard output
// (`gpuwatch --help | less`); errors stay on standard error.

// commandSharedFlags lists, per command, the shared (application) flags it
// reads: a name, or a prefix ending in "." for a whole group. A command not
// listed reads them all (serve, textfile and doctor build the whole stack),
// so a new shared flag shows up there without being listed here.
var commandSharedFlags = map[string][]string{
	"ps":      backendAndOwnerFlags,
	"health":  slices.Concat(backendAndOwnerFlags, []string{"health."}),
	"job":     {"accounting.dir", "slurm.scontrol-path"},
	"metrics": {"metrics.config"},
	"report":  {},
	"help":    {},
	// service install stores every shared flag for serve; the other
	// verbs read none.
	"service":           {},
	"service uninstall": {},
	"service start":     {},
	"service stop":      {},
	"service status":    {},
}

// backendAndOwnerFlags are the shared flags of a command that reads the
// GPUs and their processes' owners once and prints them.
var backendAndOwnerFlags = []string{
	"backend", "nvidia-smi.", "sim.", "collection.timeout",
	"attribution", "attribution.", "path.", "docker.", "cri.", "kubelet.",
	"slurm.jobs", "slurm.node-name", "slurm.scontrol-path", "slurm.squeue-path", "slurm.timeout",
	"log.",
}

// kingpinFlags are kingpin's own application flags: every command's help
// shows them beside the command's flags.
var kingpinFlags = map[string]bool{"help": true, "version": true}

// helpTemplate is kingpin's default usage template with the flags split
// into the command's own and the shared ones. $long is replaced to make
// the --help-long variant.
const helpTemplate = `{{$long := LONG -}}
{{define "FormatCommand" -}}
{{if .FlagSummary}} {{.FlagSummary}}{{end -}}
{{range .Args}}{{if not .Hidden}} {{if not .Required}}[{{end}}{{if .PlaceHolder}}{{.PlaceHolder}}{{else}}<{{.Name}}>{{end}}{{if .Value|IsCumulative}}...{{end}}{{if not .Required}}]{{end}}{{end}}{{end -}}
{{end -}}

{{define "FormatCommands" -}}
{{range .FlattenedCommands -}}
{{if not .Hidden -}}
  {{.FullCommand}}{{if .Default}}*{{end}}{{template "FormatCommand" .}}
{{.Help|Wrap 4}}
{{end -}}
{{end -}}
{{end -}}

{{define "FormatCommandsLong" -}}
{{range .FlattenedCommands -}}
{{if not .Hidden -}}
  {{.FullCommand}}{{if .Default}}*{{end}}{{template "FormatCommand" .}}
{{.Help|Wrap 4}}
{{with .Flags|FlagsToTwoColumns}}{{FormatTwoColumnsWithIndent . 4 2}}{{end}}
{{end -}}
{{end -}}
{{end -}}

{{define "FormatUsage" -}}
{{template "FormatCommand" .}}{{if .Commands}} <command> [<args> ...]{{end}}
{{if .Help}}
{{.Help|Wrap 0 -}}
{{end -}}

{{end -}}

{{$cmd := .Context.SelectedCommand -}}
{{if and $cmd (not (and $long $cmd.Default)) -}}
{{with $cmd -}}
usage: {{$.App.Name}} {{.}}{{template "FormatUsage" .}}
{{with ownFlags $.App . -}}
Flags:
{{.|FlagsToTwoColumns|FormatTwoColumns}}
{{end -}}
{{if .Args -}}
Args:
{{.Args|ArgsToTwoColumns|FormatTwoColumns}}
{{end -}}
{{with sharedFlags $.App . -}}
{{if $long -}}
Shared flags:
{{.|FlagsToTwoColumns|FormatTwoColumns}}
{{else -}}
Shared flags ({{$.App.Name}} {{$.Context.SelectedCommand.FullCommand}} --help-long describes each):
{{flagNames . $.Width}}
{{end -}}
{{end -}}
{{end -}}
{{else -}}
usage: {{.App.Name}}{{template "FormatUsage" .App}}
{{if .App.Commands -}}
Commands ({{.App.Name}} COMMAND --help shows a command's flags):
{{if $long}}{{template "FormatCommandsLong" .App}}{{else}}{{template "FormatCommands" .App}}{{end}}
{{end -}}
{{if .App.Flags -}}
Flags (of serve, the default command; every command reads the ones it needs):
{{.App.Flags|FlagsToTwoColumns|FormatTwoColumns}}
{{end -}}
{{end -}}
`

var (
	shortHelpTemplate = strings.Replace(helpTemplate, "LONG", "false", 1)
	longHelpTemplate  = strings.Replace(helpTemplate, "LONG", "true", 1)
)

func init() {
	// kingpin's --help-long renders this package-level template (it has no
	// per-application one); set once, before any application parses.
	kingpin.LongHelpTemplate = longHelpTemplate
}

// useCommandHelp installs the help layout and sends help to stdout.
func useCommandHelp(app *kingpin.Application) {
	app.UsageWriter(os.Stdout)
	app.UsageFuncs(template.FuncMap{
		"ownFlags":    ownFlags,
		"sharedFlags": sharedFlags,
		"flagNames":   flagNames,
	})
	app.UsageTemplate(shortHelpTemplate)
}

// ownFlags are the flags a command's help describes first: its own and
// kingpin's; for the default command (serve) also every shared flag, as
// they are its own.
func ownFlags(app *kingpin.ApplicationModel, cmd *kingpin.CmdModel) []*kingpin.FlagModel {
	out := visible(cmd.Flags)
	for _, f := range visible(app.Flags) {
		if kingpinFlags[f.Name] || cmd.Default {
			out = append(out, f)
		}
	}
	return out
}

// sharedFlags are the application's flags that cmd reads, kingpin's own
// left out; none for the default command, whose own they are.
func sharedFlags(app *kingpin.ApplicationModel, cmd *kingpin.CmdModel) []*kingpin.FlagModel {
	if cmd.Default {
		return nil
	}
	prefixes, listed := commandSharedFlags[cmd.FullCommand]
	var out []*kingpin.FlagModel
	for _, f := range visible(app.Flags) {
		if kingpinFlags[f.Name] || listed && !matchesAny(f.Name, prefixes) {
			continue
		}
		out = append(out, f)
	}
	return out
}

func visible(flags []*kingpin.FlagModel) []*kingpin.FlagModel {
	var out []*kingpin.FlagModel
	for _, f := range flags {
		if !f.Hidden {
			out = append(out, f)
		}
	}
	return out
}

func matchesAny(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if name == p || strings.HasSuffix(p, ".") && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// flagNames lists flags by name, one group (the name up to its first dot)
// to a line, wrapped to width.
func flagNames(flags []*kingpin.FlagModel, width int) string {
	const indent, continued = "  ", "    "
	var groups []string
	lines := map[string][]string{}
	for _, f := range flags {
		g, _, _ := strings.Cut(f.Name, ".")
		if _, seen := lines[g]; !seen {
			groups = append(groups, g)
		}
		lines[g] = append(lines[g], "--"+f.Name)
	}
	var b strings.Builder
	for _, g := range groups {
		line := indent
		for i, name := range lines[g] {
			if i > 0 && len(line)+1+len(name) > width {
				b.WriteString(line + "\n")
				line = continued + name
				continue
			}
			if i > 0 {
				line += " "
			}
			line += name
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
