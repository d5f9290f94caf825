package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// checkProcfs: --path.procfs is readable; the PID namespace; environ of
// other users' processes (the Slurm job id of proctrack/linuxproc jobs).
func checkProcfs(env Env) []Result {
	if !env.Attribution {
		return []Result{skip("procfs", "attribution is off (--no-attribution)")}
	}
	entries, err := os.ReadDir(env.ProcRoot)
	if err != nil {
		return []Result{fail("procfs", err.Error(), "point --path.procfs at a mounted procfs (in a container: the host's /proc, read-only)", true)}
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return []Result{fail("procfs", env.ProcRoot+" holds no process directories", "point --path.procfs at a mounted procfs", true)}
	}
	out := []Result{ok("procfs", fmt.Sprintf("%s readable, %d processes", env.ProcRoot, len(pids)))}
	out = append(out, checkPIDNamespace(env))
	out = append(out, checkEnviron(env, pids))
	return out
}

// checkPIDNamespace compares this process's PID namespace with that of PID
// 1 under --path.procfs. The driver reports host PIDs: they match
// --path.procfs only when it is the host's procfs.
func checkPIDNamespace(env Env) Result {
	self, errSelf := os.Readlink(filepath.Join(env.SelfProc, "self", "ns", "pid"))
	init, errInit := os.Readlink(filepath.Join(env.ProcRoot, "1", "ns", "pid"))
	switch {
	case errInit != nil && errors.Is(errInit, fs.ErrPermission):
		return skip("PID namespace", "cannot read PID 1's namespace under "+env.ProcRoot+" ("+namespacePermission()+"); assuming the host's")
	case errInit != nil || errSelf != nil:
		return skip("PID namespace", fmt.Sprintf("%s is not a live procfs (no ns/pid link): cannot tell", env.ProcRoot))
	case self == init:
		found := fmt.Sprintf("gpuwatch runs in the PID namespace of %s's PID 1 (%s)", env.ProcRoot, self)
		if comm, err := os.ReadFile(filepath.Join(env.ProcRoot, "1", "comm")); err == nil {
			c := strings.TrimSpace(string(comm))
			if c != "systemd" && c != "init" {
				return fail("PID namespace", found+", whose PID 1 is "+c+": a container's own namespace, not the host's",
					"share the host PID namespace (docker --pid=host, Kubernetes hostPID: true): the driver reports host PIDs", true)
			}
		}
		return ok("PID namespace", found+": host PIDs resolve, exits are watched through pidfds")
	default:
		return ok("PID namespace", fmt.Sprintf("%s is another PID namespace's procfs (%s, gpuwatch in %s): host PIDs resolve through it; reused PIDs are caught by periodic checks", env.ProcRoot, init, self))
	}
}

// checkEnviron tries /proc/PID/environ of a process of another user. The
// Slurm job id of jobs without a job cgroup (proctrack/linuxproc) is only
// there, and the kernel shows it to root or the process's owner only.
func checkEnviron(env Env, pids []int) Result {
	me := os.Getuid()
	for _, pid := range pids {
		dir := filepath.Join(env.ProcRoot, strconv.Itoa(pid))
		fi, err := os.Stat(filepath.Join(dir, "environ"))
		if err != nil {
			continue
		}
		uid, known := ownerUID(fi)
		if !known || uid == me {
			continue
		}
		f, err := os.Open(filepath.Join(dir, "environ"))
		if err == nil {
			f.Close()
			return ok("environ", fmt.Sprintf("readable for other users' processes (tried PID %d of uid %d)", pid, uid))
		}
		if errors.Is(err, fs.ErrPermission) {
			return fail("environ", fmt.Sprintf("PID %d's environ (uid %d): permission denied", pid, uid),
				"run as root or grant CAP_SYS_PTRACE to read SLURM_JOB_ID of other users' jobs; needed only for Slurm jobs without job cgroups (proctrack/linuxproc)", false)
		}
	}
	return skip("environ", "no other user's process to try")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// namespacePermission says what reading another process's namespace link
// needs. Root is refused it too where the process lacks CAP_SYS_PTRACE
// (a container's default) or runs in a user namespace, so telling root
// that it "needs root" would be wrong.
func namespacePermission() string {
	if os.Geteuid() == 0 {
		return "refused to root here: it needs CAP_SYS_PTRACE in the host's user namespace"
	}
	return "needs root"
}
