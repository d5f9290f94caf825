//go:build cgo

// Command genexports writes internal/fakedriver/fakenvml/stubs_gen.go. It is run by
// go generate in package internal/fakedriver/fakenvml:
//
//	go generate ./internal/fakedriver/fakenvml
package main

import (
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/fakenvml/genexports"
	"github.com/gpuwatch/gpuwatch/internal/gencmd"
)

func main() {
	gencmd.Main("genexports", genexports.FileName, func() ([]byte, error) { return genexports.Source(".") })
}
