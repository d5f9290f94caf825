//go:build cgo

// Command genguard writes the simulator's driver guard,
// internal/fakedriver/sim/guard_gen.go. It is run by go generate in package
// sim:
//
//	go generate ./internal/fakedriver/sim
package main

import (
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim/internal/genguard"
	"github.com/gpuwatch/gpuwatch/internal/gencmd"
)

func main() { gencmd.Main("genguard", genguard.FileName, genguard.Source) }
