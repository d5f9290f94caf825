// Command genbranch writes internal/nvmlbranch/tables_gen.go. It is run
// by go generate in package nvmlbranch:
//
//	go generate ./internal/nvmlbranch
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpuwatch/gpuwatch/internal/nvmlbranch/genbranch"
)

func main() {
	out := flag.String("o", genbranch.FileName, "file to write")
	flag.Parse()
	src, err := genbranch.Source()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genbranch:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genbranch:", err)
		os.Exit(1)
	}
}
