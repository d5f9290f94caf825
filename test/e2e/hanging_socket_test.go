//go:build linux

package e2e

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestHangingRuntimeSocket points gpuwatch at container-runtime sockets
// that accept connections and never answer. Scrapes must still return
// within the attribution timeout, name the owners procfs alone can give,
// and count the failures.
func TestHangingRuntimeSocket(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	silent := func(name string) string {
		socket := filepath.Join(dir, name)
		l, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			var held []net.Conn // hold connections open, say nothing
			for {
				c, err := l.Accept()
				if err != nil {
					for _, c := range held {
						c.Close()
					}
					return
				}
				held = append(held, c)
			}
		}()
		return socket
	}
	docker, cri := silent("docker.sock"), silent("cri.sock")
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+attributionSimConfig(t),
		"--path.procfs="+fixtureProc, "--path.rootfs="+fixtureRootFS, "--slurm.jobs=false",
		"--docker.socket=unix://"+docker, "--cri.socket="+cri, "--kubelet.pod-resources-socket=",
		"--attribution.timeout=500ms")

	for i := range 3 {
		start := time.Now()
		fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("scrape %d took %v with a 500ms attribution timeout", i, took)
		}
		// procfs still names the user and the container id.
		if _, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": "0", "user": "alice", "container": "f4f0b3caffa8"}); !ok {
			t.Errorf("scrape %d: the owner procfs gives is missing", i)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "docker errors counted", func() bool {
		v, ok := testenv.Sample(testenv.ParseMetrics(t, httpGet(t, base+"/metrics")), "gpuwatch_attribution_errors_total", map[string]string{"source": "docker"})
		return ok && v > 0
	})
}
