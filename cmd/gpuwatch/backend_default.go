//go:build !windows

package main

// defaultBackend reads the driver's library directly.
const defaultBackend = "nvml"
