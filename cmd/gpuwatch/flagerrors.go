package main

import (
	"fmt"
	"regexp"
	"strings"
)

// kingpin reports a value it cannot parse without naming the flag
// ("enum value must be one of nvml,sim, got 'bogus'", `time: invalid
// duration "abc"`, `strconv.ParseFloat: parsing "x": invalid syntax`).
// badValue finds the value in such an error.
var badValue = regexp.MustCompile(`got '([^']*)'$|invalid duration "([^"]*)"|parsing "([^"]*)"`)

// nameTheFlag prefixes a parse error with the flag that was given the
// value it complains about, so that the one line says which flag to fix.
func nameTheFlag(err error, args []string) error {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	value := m[1] + m[2] + m[3]
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
