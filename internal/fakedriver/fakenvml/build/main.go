//go:build cgo

// Command build links the fake libnvidia-ml.so.1 variants (package
// variants) into a directory, one subdirectory per variant:
//
//	go run ./internal/fakedriver/fakenvml/build -o build/fakenvml [-variants R470,R580,basic]
//
// make fakenvml runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/fakenvml/variants"
)

func main() {
	out := flag.String("o", "build/fakenvml", "output directory")
	names := flag.String("variants", "", "comma-separated variants to build (default: variants.Default; * for every variant)")
	flag.Parse()
	vs, err := variants.Select(*names)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakenvml build:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakenvml build:", err)
		os.Exit(1)
	}
	if err := variants.Build(ctx, root, *out, vs, func(s string) { fmt.Println(s) }); err != nil {
		fmt.Fprintln(os.Stderr, "fakenvml build:", err)
		os.Exit(1)
	}
}
