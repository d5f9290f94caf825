//go:build cgo

// Command gensafetynet writes the simulator's safety net,
// internal/fakedriver/sim/safetynet_gen.go. It is run by go generate in
// package sim:
//
//	go generate ./internal/fakedriver/sim
package main

import (
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim/internal/gensafetynet"
	"github.com/gpuwatch/gpuwatch/internal/gencmd"
)

func main() { gencmd.Main("gensafetynet", gensafetynet.FileName, gensafetynet.Source) }
