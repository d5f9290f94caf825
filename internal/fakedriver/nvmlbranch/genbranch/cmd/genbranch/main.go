//go:build cgo

// Command genbranch writes internal/fakedriver/nvmlbranch/tables_gen.go. It is run
// by go generate in package nvmlbranch:
//
//	go generate ./internal/fakedriver/nvmlbranch
package main

import (
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch/genbranch"
	"github.com/gpuwatch/gpuwatch/internal/gencmd"
)

func main() { gencmd.Main("genbranch", genbranch.FileName, genbranch.Source) }
