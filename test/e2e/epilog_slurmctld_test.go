//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The shipped EpilogSlurmctld gives up at once on nodes that run no
// gpuwatch (the connection is refused), instead of asking them for its
// whole GPUWATCH_WAIT at every job's end.
func TestEpilogSlurmctldStopsOnNodesWithoutGpuwatch(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	script := filepath.Join(testenv.RepoRoot(), "deploy", "slurm", "gpuwatch-epilog-slurmctld.sh")
	// Were a refused node asked again, the script would run for the hour.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script)
	cmd.Env = append(os.Environ(), "GPUWATCH="+gpuwatchBin, fmt.Sprintf("GPUWATCH_NODE_URL=http://{node}:%d", port),
		"GPUWATCH_WAIT=1h", "SLURM_JOB_ID=4211", "SLURM_JOB_NODELIST=localhost,127.0.0.1", "GPUWATCH_SCONTROL=/bin/false")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the epilog still asked nodes with no gpuwatch after 2 minutes:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "no GPU summary for job 4211") {
		t.Errorf("exit %v, output %q: want exit 0 and a line for slurmctld's log", err, out)
	}
}
