// Package gencmd is the command line the repository's code generators
// share. go generate runs each as `go run ./PATH/cmd/NAME -o FILE`; the
// generator's package makes the source, and its test checks that the
// committed file is what it makes.
package gencmd

import (
	"flag"
	"fmt"
	"os"
)

// Main writes what source makes to the file -o names (file by default),
// and exits 1 with a message prefixed by name when it cannot.
func Main(name, file string, source func() ([]byte, error)) {
	out := flag.String("o", file, "file to write")
	flag.Parse()
	src, err := source()
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
