package configfile

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type section struct {
	Count uint     `yaml:"count"`
	Names []string `yaml:"names"`
}

type document struct {
	Section section `yaml:"section"`
	Ratio   float64 `yaml:"ratio"`
}

// TestYAMLErrorSpeaksYAML: a decoding error names the line, the key or
// the kind of value, and never a Go type.
func TestYAMLErrorSpeaksYAML(t *testing.T) {
	keys := func(goType string) []string {
		if goType == "configfile.section" {
			return []string{"count", "names"}
		}
		return nil
	}
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{"section: {cuont: 1}\n", `line 1: unknown key "cuont" (valid keys: count, names)`},
		{"sectoin: 1\n", `line 1: unknown key "sectoin"`},
		{"section: {count: -1}\n", `line 1: "-1" (a number) where a whole number, 0 or more, is wanted`},
		{"section: {names: x}\n", `line 1: "x" (a string) where a list is wanted`},
		{"section: [1]\n", `line 1: a list where a mapping is wanted`},
		{"ratio: [1]\n", `line 1: a list where a number is wanted`},
		{"ratio: 1\nsection: {count: x, names: {}}\n", `line 2: "x" (a string) where a whole number, 0 or more, is wanted; line 2: a mapping where a list is wanted`},
		{"ratio: [\n", `line 1: did not find expected node content`},
	} {
		var d document
		dec := yaml.NewDecoder(strings.NewReader(tc.doc))
		dec.KnownFields(true)
		err := dec.Decode(&d)
		if err == nil {
			t.Fatalf("%q decoded", tc.doc)
		}
		got := YAMLError(err, keys)
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.doc, got, tc.want)
		}
		for _, goWord := range []string{"configfile.", "uint", "float64", "[]string", "yaml:", "\n"} {
			if strings.Contains(got, goWord) {
				t.Errorf("%q: %q says %q", tc.doc, got, goWord)
			}
		}
	}
}
