package release

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The amd64 release binary serves the simulator on Debian 11 (glibc 2.31),
// as an unprivileged user, with the root's own C library mapped.
func TestReleaseBinaryServesSimulatorOnDebian11(t *testing.T) {
	r := findRelease(t)
	root := cleanRoot(t)
	port := testenv.FreePort(t)
	cmd := chrootCommand(context.Background(), root, t.TempDir(),
		[]string{"--bind", r.binary("amd64") + ":/usr/local/bin/gpuwatch", "--userspec", "65534:65534"},
		"/usr/local/bin/gpuwatch", "--backend=sim", "--sim.profile=h100",
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	page := serveSim(t, cmd, port, func(pid int) {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatal(err)
		}
		// Debian 11's glibc, not this machine's.
		if !strings.Contains(string(maps), "/libc-2.31.so") {
			t.Errorf("gpuwatch (pid %d) did not map Debian 11's libc-2.31.so:\n%s", pid, maps)
		}
	})
	checkSimPage(t, page, r.version)
}
