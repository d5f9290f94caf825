// Command genguard writes the simulator's driver guard,
// internal/backend/sim/guard_gen.go. It is run by go generate in package
// sim:
//
//	go generate ./internal/backend/sim
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpuwatch/gpuwatch/internal/backend/sim/internal/genguard"
)

func main() {
	out := flag.String("o", genguard.FileName, "file to write")
	flag.Parse()
	src, err := genguard.Source()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genguard:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genguard:", err)
		os.Exit(1)
	}
}
