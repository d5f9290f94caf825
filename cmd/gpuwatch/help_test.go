package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// helpOf renders what `gpuwatch ARGS --help` (or --help-long) prints.
func helpOf(t *testing.T, app *kingpin.Application, long bool, args ...string) string {
	t.Helper()
	var buf bytes.Buffer
	app.UsageWriter(&buf)
	if !long {
		// As the binary does, but without exiting; what Parse says
		// after the help (a required flag missing) is not the help.
		app.Terminate(func(int) {})
		_, _ = app.Parse(append(args, "--help"))
		return buf.String()
	}
	// --help-long writes to os.Stdout itself: render its template here.
	ctx, err := app.ParseContext(args)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if err := app.UsageForContextWithTemplate(ctx, 2, longHelpTemplate); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return buf.String()
}

// mentions reports whether help names flag f (a bool one as --[no-]NAME).
func mentions(help string, f *kingpin.FlagModel) bool {
	return strings.Contains(help, "--"+f.Name) || strings.Contains(help, "--[no-]"+f.Name)
}

// TestCommandHelpShowsItsOwnFlagsFirst: every command's --help describes
// its own flags before anything shared, and lists the shared flags it
// reads by name only, one group to a line; --help-long describes them.
func TestCommandHelpShowsItsOwnFlagsFirst(t *testing.T) {
	app, _ := newApp()
	model := app.Model()
	for _, cmd := range model.Commands {
		if cmd.Default || cmd.Hidden {
			continue
		}
		out := helpOf(t, app, false, cmd.FullCommand)
		own, shared, hasShared := strings.Cut(out, "\nShared flags")
		for _, f := range visible(cmd.Flags) {
			if !mentions(own, f) {
				t.Errorf("%s --help: own flag --%s is not before the shared ones", cmd.FullCommand, f.Name)
			}
		}
		want := sharedFlags(model, cmd)
		if hasShared != (len(want) > 0) {
			t.Errorf("%s --help: shared section %v, want %v:\n%s", cmd.FullCommand, hasShared, len(want) > 0, out)
		}
		if !hasShared {
			continue
		}
		_, names, _ := strings.Cut(shared, ":\n")
		var listed []string
		for tok := range strings.FieldsSeq(names) {
			if !strings.HasPrefix(tok, "--") {
				t.Errorf("%s --help: the shared section holds %q, not only flag names:\n%s", cmd.FullCommand, tok, shared)
				break
			}
			listed = append(listed, strings.TrimPrefix(tok, "--"))
		}
		for _, f := range want {
			if !slices.Contains(listed, f.Name) {
				t.Errorf("%s --help: shared flag --%s not listed", cmd.FullCommand, f.Name)
			}
		}
		long := helpOf(t, app, true, cmd.FullCommand)
		for _, f := range want {
			if first, _, _ := strings.Cut(f.Help, " "); !mentions(long, f) || !strings.Contains(long, first) {
				t.Errorf("%s --help-long does not describe --%s", cmd.FullCommand, f.Name)
			}
		}
	}
}

// TestHelpListsWhatEachCommandReads: report reads no GPU, so no shared
// flag is listed; ps lists the backend's and owners' flags, not serve's.
func TestHelpListsWhatEachCommandReads(t *testing.T) {
	app, _ := newApp()
	report := helpOf(t, app, false, "report")
	if strings.Contains(report, "Shared flags") || strings.Contains(report, "--backend") || !strings.Contains(report, "--prometheus.url") {
		t.Errorf("report --help:\n%s", report)
	}
	ps := helpOf(t, app, false, "ps")
	for _, want := range []string{"--backend", "--sim.profile", "--path.procfs", "--attribution.timeout", "--log.level"} {
		if !strings.Contains(ps, want+" ") && !strings.Contains(ps, want+"\n") {
			t.Errorf("ps --help lacks %s", want)
		}
	}
	for _, unwanted := range []string{"--web.listen-address", "--collector.gpm", "--metrics.config"} {
		if strings.Contains(ps, unwanted) {
			t.Errorf("ps --help lists %s, which ps does not read", unwanted)
		}
	}
}

// TestHelpPlacesANewSharedFlag: a shared flag declared anywhere shows up,
// by name, in the help of the commands that read every shared flag, and
// in full in serve's, with no list to update.
func TestHelpPlacesANewSharedFlag(t *testing.T) {
	app, _ := newApp()
	app.Flag("zz.added-later", "A flag another change adds.").String()
	if out := helpOf(t, app, false, "textfile"); !strings.Contains(out, "\n  --zz.added-later") {
		t.Errorf("textfile --help lacks the new shared flag:\n%s", out)
	}
	if out := helpOf(t, app, false, "serve"); !strings.Contains(out, "A flag another change adds.") {
		t.Errorf("serve --help does not describe the new flag")
	}
}

// TestTopLevelHelpListsCommandsFirst: `gpuwatch --help` names the commands
// before the default command's long flag list.
func TestTopLevelHelpListsCommandsFirst(t *testing.T) {
	app, _ := newApp()
	out := helpOf(t, app, false)
	cmds, flags := strings.Index(out, "\nCommands"), strings.Index(out, "\nFlags")
	if cmds < 0 || flags < 0 || cmds > flags || !strings.Contains(out[flags:], "--web.listen-address") {
		t.Errorf("gpuwatch --help:\n%s", out)
	}
}
