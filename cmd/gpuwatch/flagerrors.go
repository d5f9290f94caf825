package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/alecthomas/kingpin/v2"
)

// kingpin reports a value it cannot parse without naming the flag
// ("enum value must be one of nvml,sim, got 'bogus'", `time: invalid
// duration "abc"`, `strconv.ParseFloat: parsing "x": invalid syntax`,
// "path 'x' does not exist"). badValue finds the value in such an error.
var badValue = regexp.MustCompile(`got '([^']*)'$|invalid duration "([^"]*)"|parsing "([^"]*)"|^path '([^']*)' does not exist$`)

// kingpin's errors for a word it does not know: a flag, an enum value, and
// an argument where no command (or no more arguments) was expected.
var (
	unknownFlag   = regexp.MustCompile(`^unknown long flag '--([^']*)'$`)
	badEnum       = regexp.MustCompile(`^enum value must be one of (.*), got '([^']*)'$`)
	unexpectedArg = regexp.MustCompile(`^(?:unexpected|expected command but got) "?([^"\s]*)"?$`)
)

// explainParseError turns a kingpin parse error into one line that names
// the flag and, for a misspelt flag, value or command, the nearest right
// one.
func explainParseError(app *kingpin.Application, err error, args []string) error {
	msg := err.Error()
	if hint := suggestion(app, msg, args); hint != "" {
		err = fmt.Errorf("%w; %s", err, hint)
	}
	return nameTheFlag(err, args)
}

// suggestion is "did you mean ...?" for an error about a misspelt word,
// else "".
func suggestion(app *kingpin.Application, msg string, args []string) string {
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		return flagSuggestion(app, m[1], args)
	}
	if m := badEnum.FindStringSubmatch(msg); m != nil {
		if near := nearest(m[2], strings.Split(m[1], ",")); near != "" {
			return "did you mean " + near + "?"
		}
		return ""
	}
	if m := unexpectedArg.FindStringSubmatch(msg); m != nil && !strings.HasPrefix(m[1], "-") {
		var names []string
		for _, c := range app.Model().Commands {
			if !c.Hidden {
				names = append(names, c.Name)
			}
		}
		if near := nearest(m[1], names); near != "" {
			return "did you mean the command " + near + "?"
		}
	}
	return ""
}

// flagSuggestion names the flag nearest to name among those the command
// on the command line takes, or the commands that take name itself.
func flagSuggestion(app *kingpin.Application, name string, args []string) string {
	model := app.Model()
	flags := visible(model.Flags)
	// The command given before the bad flag, if any: kingpin stops there.
	if ctx, _ := app.ParseContext(args); ctx != nil && ctx.SelectedCommand != nil {
		for _, c := range model.Commands {
			if c.FullCommand == ctx.SelectedCommand.FullCommand() {
				flags = append(flags, visible(c.Flags)...)
			}
		}
	}
	var names []string
	for _, f := range flags {
		names = append(names, f.Name)
		if f.IsBoolFlag() {
			names = append(names, "no-"+f.Name)
		}
	}
	if near := nearest(name, names); near != "" {
		return "did you mean --" + near + "?"
	}
	var owners []string
	for _, c := range model.Commands {
		if slices.ContainsFunc(c.Flags, func(f *kingpin.FlagModel) bool { return f.Name == name }) {
			owners = append(owners, c.FullCommand)
		}
	}
	if len(owners) > 0 {
		return "--" + name + " is a flag of " + strings.Join(owners, ", ")
	}
	return ""
}

// nearest is the candidate closest to typed in edit distance, if it is
// close enough to be a slip of the keyboard (a third of the word's
// letters, at least one); "" when none is.
func nearest(typed string, candidates []string) string {
	best, bestDist := "", max(1, len(typed)/3)+1
	for _, c := range candidates {
		if d := editDistance(typed, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours ("nvlm" is one
// from "nvml") each cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// nameTheFlag prefixes a parse error with the flag that was given the
// value it complains about, so that the one line says which flag to fix.
func nameTheFlag(err error, args []string) error {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		// The suggestion follows "; ": the value is matched before it.
		first, _, _ := strings.Cut(err.Error(), "; ")
		if m = badValue.FindStringSubmatch(first); m == nil {
			return err
		}
	}
	value := strings.Join(m[1:], "")
	for i, arg := range args {
		if !strings.HasPrefix(arg, "-") || arg == "--" {
			continue
		}
		if _, v, hasValue := strings.Cut(arg, "="); hasValue && v == value {
			return fmt.Errorf("%s: %w", arg, err)
		}
		if i+1 < len(args) && args[i+1] == value && !strings.Contains(arg, "=") {
			return fmt.Errorf("%s %s: %w", arg, value, err)
		}
	}
	return err
}
