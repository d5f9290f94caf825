// Command genbranch writes internal/nvmlbranch/tables_gen.go. It is run
// by go generate in package nvmlbranch:
//
//	go generate ./internal/nvmlbranch
package main

import (
	"github.com/gpuwatch/gpuwatch/internal/gencmd"
	"github.com/gpuwatch/gpuwatch/internal/nvmlbranch/genbranch"
)

func main() { gencmd.Main("genbranch", genbranch.FileName, genbranch.Source) }
