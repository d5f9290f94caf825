package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// checkDeviceNodes: /dev/nvidiactl and /dev/nvidiaN can be opened for
// reading and writing by this user.
func checkDeviceNodes(env Env) []Result {
	if env.Backend == "sim" {
		return []Result{skip("device nodes", "simulated GPUs have no device nodes")}
	}
	if env.RemoteHost != "" {
		return []Result{skip("device nodes", "the GPUs are "+env.RemoteHost+"'s (--nvidia-smi.host)")}
	}
	paths := []string{filepath.Join(env.DevRoot, "nvidiactl")}
	for _, d := range env.Snapshot.Devices {
		if minor, known := d.Info.MinorNumber.Get(); known {
			paths = append(paths, filepath.Join(env.DevRoot, fmt.Sprint("nvidia", minor)))
		}
	}
	var bad []string
	for _, p := range paths {
		if err := unix.Access(p, unix.R_OK|unix.W_OK); err != nil {
			bad = append(bad, p+": "+err.Error())
		}
	}
	if len(bad) > 0 {
		group := "the group owning them"
		if fi, err := os.Stat(paths[0]); err == nil {
			if st, ok := fi.Sys().(*unix.Stat_t); ok {
				group = fmt.Sprintf("group %d", st.Gid)
			}
		}
		return []Result{fail("device nodes", strings.Join(bad, "; "),
			"run gpuwatch as a user in "+group+" (as nvidia-smi needs), or in a container pass the devices (--gpus all / the NVIDIA container toolkit)", true)}
	}
	return []Result{ok("device nodes", fmt.Sprintf("%d device nodes readable and writable by this user", len(paths)))}
}
