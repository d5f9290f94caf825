package main

import (
	"github.com/gpuwatch/gpuwatch/internal/pipeline"
	"github.com/gpuwatch/gpuwatch/internal/winowner"
)

// platformOwners gives Windows' GPU processes their owners from their
// access tokens: there is no procfs, cgroup or Slurm to read there.
func platformOwners(rep *sourceReport) pipeline.Enricher {
	rep.on = append(rep.on, "windows")
	rep.how = "the Windows API (each process's access token; absent where it cannot be opened)"
	return winowner.Enricher{}
}
