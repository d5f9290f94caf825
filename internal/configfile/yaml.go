package configfile

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// yaml.v3 words its type errors in Go: "field X not found in type
// exporter.filterFile", "cannot unmarshal !!seq into struct { Fail
// []uint64 ... }". A user edits YAML, not Go, so YAMLError rewords them.
var (
	notFound    = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	wrongType   = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `([^`]*)`)? into (.+)$")
	yamlKindsOf = map[string]string{
		"seq": "a list", "map": "a mapping", "str": "a string", "int": "a number",
		"float": "a number", "bool": "true or false", "null": "empty", "timestamp": "a time",
	}
)

// YAMLError is a yaml.v3 decoding error on one line, in the file's terms:
// an unknown key is named with the valid ones (keys maps the Go type
// yaml.v3 names to its YAML keys; nil, or nil for a type, lists none), a
// value of the wrong kind says which kind was given and which is wanted.
// Every part keeps its line number.
func YAMLError(err error, keys func(goType string) []string) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: "), "\n", "; ")
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		msgs = append(msgs, rewordTypeError(e, keys))
	}
	return strings.Join(msgs, "; ")
}

func rewordTypeError(e string, keys func(string) []string) string {
	if m := notFound.FindStringSubmatch(e); m != nil {
		msg := fmt.Sprintf("line %s: unknown key %q", m[1], m[2])
		if keys != nil {
			if valid := keys(m[3]); len(valid) > 0 {
				msg += " (valid keys: " + strings.Join(valid, ", ") + ")"
			}
		}
		return msg
	}
	if m := wrongType.FindStringSubmatch(e); m != nil {
		given := yamlKindsOf[m[2]]
		if given == "" {
			given = "!!" + m[2]
		}
		if m[3] != "" {
			given = fmt.Sprintf("%q (%s)", m[3], given)
		}
		if want := wantedKind(m[4], keys); want != "" {
			return fmt.Sprintf("line %s: %s where %s is wanted", m[1], given, want)
		}
		return fmt.Sprintf("line %s: %s is not valid here", m[1], given)
	}
	return e
}

// wantedKind says in YAML terms what a Go type decodes from; "" when it
// cannot tell (a named type that is no section with keys).
func wantedKind(goType string, keys func(string) []string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct {"):
		return "a mapping"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "uint"):
		return "a whole number, 0 or more,"
	case strings.HasPrefix(goType, "int"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case keys != nil && len(keys(goType)) > 0:
		return "a mapping"
	}
	return ""
}
