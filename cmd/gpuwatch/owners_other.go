//go:build !windows

package main

import "github.com/gpuwatch/gpuwatch/internal/pipeline"

// platformOwners is nil: the attribution package (procfs, cgroups,
// runtimes, Slurm) finds the owners.
func platformOwners(*sourceReport) pipeline.Enricher { return nil }
