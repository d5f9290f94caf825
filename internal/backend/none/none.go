// Package none is the backend of a host without GPUs: every reading is an
// empty snapshot. It lets gpuwatch serve what needs no GPU, the Slurm
// cluster collector on a controller, without loading libnvidia-ml.so.1.
package none

import (
	"context"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Reader reads no GPU. The zero value is ready to use.
type Reader struct{}

// Read returns a snapshot with no devices, which is a successful reading:
// /readyz is 200 and nothing reports a GPU down.
func (Reader) Read(ctx context.Context) (*snapshot.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &snapshot.Snapshot{Time: time.Now(), Groups: map[string]snapshot.GroupStatus{}}, nil
}
