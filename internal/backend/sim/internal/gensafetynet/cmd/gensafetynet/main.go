// Command gensafetynet writes the simulator's safety net,
// internal/backend/sim/safetynet_gen.go. It is run by go generate in
// package sim:
//
//	go generate ./internal/backend/sim
package main

import (
	"github.com/gpuwatch/gpuwatch/internal/backend/sim/internal/gensafetynet"
	"github.com/gpuwatch/gpuwatch/internal/gencmd"
)

func main() { gencmd.Main("gensafetynet", gensafetynet.FileName, gensafetynet.Source) }
