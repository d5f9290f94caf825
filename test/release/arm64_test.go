package release

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The arm64 release binary serves the simulator under qemu's user-mode
// emulation, with Debian 11's aarch64 glibc (the cross toolchain's, from
// the build root) as its only C library: there is no arm64 machine here.
func TestArm64BinaryServesSimulatorUnderQemu(t *testing.T) {
	r := findRelease(t)
	qemu := testenv.RequireTool(t, "qemu-aarch64", "qemu-user")
	dir := os.Getenv("ROOTFS_DIR")
	if dir == "" {
		dir = filepath.Join(testenv.RepoRoot(), ".cache", "rootfs")
	}
	sysroot := filepath.Join(dir, "bullseye-build", "usr", "aarch64-linux-gnu")
	if _, err := os.Stat(filepath.Join(sysroot, "lib", "libc-2.31.so")); err != nil {
		testenv.Missing(t, "no Debian 11 aarch64 glibc at "+sysroot+"; run scripts/release/rootfs.sh (make release does)")
	}
	port := testenv.FreePort(t)
	// -L: the binary's /lib/ld-linux-aarch64.so.1 and libc.so.6 are
	// looked up in the sysroot first.
	cmd := exec.Command(qemu, "-L", sysroot, r.binary("arm64"),
		"--backend=sim", "--sim.profile=h100", "--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	page := serveSim(t, cmd, port, func(pid int) {
		// qemu maps the guest's libraries from their files.
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(sysroot, "lib", "libc-2.31.so"); !strings.Contains(string(maps), want) {
			t.Errorf("qemu (pid %d) did not map %s:\n%s", pid, want, maps)
		}
	})
	checkSimPage(t, page, r.version)
}
