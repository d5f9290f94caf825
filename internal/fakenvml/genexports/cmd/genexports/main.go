// Command genexports writes internal/fakenvml/stubs_gen.go. It is run by
// go generate in package internal/fakenvml:
//
//	go generate ./internal/fakenvml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpuwatch/gpuwatch/internal/fakenvml/genexports"
)

func main() {
	out := flag.String("o", genexports.FileName, "file to write")
	flag.Parse()
	src, err := genexports.Source(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "genexports:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genexports:", err)
		os.Exit(1)
	}
}
