package doctor

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// checkCgroup: the cgroup version and driver, which decide the container
// and job paths gpuwatch parses (it parses all of them; this is for the
// operator's picture).
func checkCgroup(env Env) []Result {
	var st unix.Statfs_t
	if err := unix.Statfs(env.CgroupRoot, &st); err != nil {
		return []Result{skip("cgroups", env.CgroupRoot+": "+err.Error())}
	}
	version := "v1"
	switch {
	case st.Type == unix.CGROUP2_SUPER_MAGIC:
		version = "v2 (unified)"
	case exists(filepath.Join(env.CgroupRoot, "unified")):
		version = "hybrid (v1 controllers, v2 at unified/)"
	}
	driver := "cgroupfs"
	if exists(filepath.Join(env.CgroupRoot, "system.slice")) || exists(filepath.Join(env.CgroupRoot, "systemd", "system.slice")) {
		driver = "systemd"
	}
	if b, err := os.ReadFile(filepath.Join(env.SelfProc, "self", "cgroup")); err == nil && strings.Contains(string(b), ".slice") {
		driver = "systemd"
	}
	return []Result{ok("cgroups", version+", "+driver+" driver; gpuwatch reads container and job ids from both layouts")}
}
