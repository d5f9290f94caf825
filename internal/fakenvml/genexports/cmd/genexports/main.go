// Command genexports writes internal/fakenvml/stubs_gen.go. It is run by
// go generate in package internal/fakenvml:
//
//	go generate ./internal/fakenvml
package main

import (
	"github.com/gpuwatch/gpuwatch/internal/fakenvml/genexports"
	"github.com/gpuwatch/gpuwatch/internal/gencmd"
)

func main() {
	gencmd.Main("genexports", genexports.FileName, func() ([]byte, error) { return genexports.Source(".") })
}
