//go:build cgo

package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// writeProcfs writes /proc/PID/{stat,status,cmdline,comm,cgroup,environ}
// for every process of the workloads under dir, as the kernel would show
// them on a node running those workloads.
func writeProcfs(dir string, workloads []Workload) error {
	for _, w := range workloads {
		for _, p := range w.Processes {
			pdir := filepath.Join(dir, strconv.FormatUint(uint64(p.PID), 10))
			if _, err := os.Stat(pdir); err == nil {
				continue // a process on several GPUs is listed once per GPU
			}
			if err := os.MkdirAll(pdir, 0o755); err != nil {
				return err
			}
			comm := filepath.Base(w.Command[0])
			files := map[string]string{
				"stat":    procStat(p.PID, comm),
				"status":  procStatus(p.PID, comm, w.User.UID),
				"cmdline": strings.Join(w.Command, "\x00") + "\x00",
				"comm":    comm + "\n",
				"cgroup":  cgroup(w),
				"environ": environ(w, p),
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(pdir, name), []byte(content), 0o444); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// procStat is /proc/PID/stat: 52 fields; field 22 (the start time, which the
// attribution cache keys on) is derived from the PID.
func procStat(pid uint32, comm string) string {
	start := 1_000_000 + uint64(pid)
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 12345 0 3 0 150 42 0 0 20 0 12 0 %d 35684352000 123456 "+
		"18446744073709551615 94467072000000 94467072100000 140735000000000 0 0 0 0 4096 17926 0 0 0 17 1 0 0 0 0 0 "+
		"94467072200000 94467072300000 94467090000000 140735000001000 140735000001100 140735000001100 140735000002000 0\n",
		pid, comm, pid, pid, start)
}

func procStatus(pid uint32, comm string, uid int) string {
	return fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t1\nTracerPid:\t0\n"+
		"Uid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nFDSize:\t256\nGroups:\t%d\nVmRSS:\t4194304 kB\nThreads:\t12\n",
		comm, pid, pid, uid, uid, uid, uid, uid, uid, uid, uid, uid)
}

// cgroup is /proc/PID/cgroup on a cgroup v2 host with the systemd driver.
func cgroup(w Workload) string {
	switch w.Kind {
	case KindSlurm:
		return fmt.Sprintf("0::/system.slice/slurmstepd.scope/job_%s/step_0/user/task_0\n", w.JobID)
	case KindCompose:
		return fmt.Sprintf("0::/system.slice/docker-%s.scope\n", w.ContainerID)
	case KindKubernetes:
		uid := strings.ReplaceAll(w.PodUID, "-", "_")
		return fmt.Sprintf("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope\n", uid, w.ContainerID)
	default:
		return fmt.Sprintf("0::/user.slice/user-%d.slice/session-3.scope\n", w.User.UID)
	}
}

func environ(w Workload, p Process) string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/" + w.User.Name, "USER=" + w.User.Name}
	if w.Kind == KindSlurm {
		env = append(env, "SLURM_JOB_ID="+w.JobID, "SLURM_STEP_ID=0", "SLURM_JOB_ACCOUNT="+w.Account,
			"SLURM_JOB_PARTITION="+w.Partition, "SLURM_JOB_GPUS="+joinInts(w.GPUs), "CUDA_VISIBLE_DEVICES="+strconv.Itoa(p.GPU))
	}
	return strings.Join(env, "\x00") + "\x00"
}

// writePasswd writes rootfs/etc/passwd with the demo's users.
func writePasswd(rootfs string) error {
	var b strings.Builder
	b.WriteString("root:x:0:0:root:/root:/bin/bash\n")
	for _, u := range users {
		fmt.Fprintf(&b, "%s:x:%d:%d::/home/%s:/bin/bash\n", u.Name, u.UID, u.UID, u.Name)
	}
	if err := os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(rootfs, "etc", "passwd"), []byte(b.String()), 0o444)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
