// Command gensafetynet writes the simulator's safety net,
// internal/backend/sim/safetynet_gen.go. It is run by go generate in
// package sim:
//
//	go generate ./internal/backend/sim
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpuwatch/gpuwatch/internal/backend/sim/internal/gensafetynet"
)

func main() {
	out := flag.String("o", gensafetynet.FileName, "file to write")
	flag.Parse()
	src, err := gensafetynet.Source()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gensafetynet:", err)
		os.Exit(1)
	}
}
