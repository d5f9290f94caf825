//go:build linux

package faults

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Slurm commands replaced by scripts that hang or print garbage. Process
// 1025 of the fixture /proc belongs to Slurm job 125, so job lookups run;
// --collector.slurm runs squeue, sinfo and sdiag.

// slurmScripts writes squeue, sinfo, sdiag and scontrol, each running body.
func slurmScripts(t *testing.T, body string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	for _, name := range []string{"squeue", "sinfo", "sdiag", "scontrol"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

func slurmArgs(p map[string]string) []string {
	return []string{"--slurm.squeue-path=" + p["squeue"], "--slurm.sinfo-path=" + p["sinfo"],
		"--slurm.sdiag-path=" + p["sdiag"], "--slurm.scontrol-path=" + p["scontrol"],
		"--slurm.timeout=1s", "--slurm.poll-interval=1s", "--attribution.cache-ttl=1s"}
}

// children counts gpuwatch's child processes (Slurm commands still running).
func (h *instance) children() int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(h.Cmd.Process.Pid) {
			n++
		}
	}
	return n
}

// slurmCase runs gpuwatch with Slurm job lookups and the cluster collector
// on the scripts, scrapes for 4s (several poll intervals and timeouts),
// and checks that no command outlives its timeout.
func slurmCase(t *testing.T, body string) {
	t.Helper()
	args := attributionArgs(procTree(t, 1001, 1025), ownedSim(t, 1001, 1025),
		append(slurmArgs(slurmScripts(t, body)), "--slurm.jobs=true", "--collector.slurm")...)
	h := start(t, args...)
	h.baseline()
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		validExposition(t, h.scrape())
		time.Sleep(200 * time.Millisecond)
	}
	h.noLeak()
	// Commands are started again at every poll; each must be gone within
	// its timeout.
	testenv.WaitFor(t, 10*time.Second, "no Slurm command running past its timeout", func() bool {
		return h.children() <= 4
	})
}

func TestSlurmCommandsHang(t *testing.T) {
	t.Parallel()
	record(t, "slurm", "squeue, sinfo, sdiag and scontrol hang (and leave a grandchild): scrapes bounded, each killed with its process group at --slurm.timeout")
	slurmCase(t, "sleep 600 &\nsleep 600")
}

func TestSlurmCommandsPrintGarbage(t *testing.T) {
	t.Parallel()
	record(t, "slurm", "every Slurm command prints binary garbage and exits 0")
	slurmCase(t, `head -c 200000 /dev/urandom`)
}

func TestSlurmCommandsFail(t *testing.T) {
	t.Parallel()
	record(t, "slurm", "every Slurm command prints an error and exits 1")
	slurmCase(t, `echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1`)
}

func TestSlurmCommandsHugeOutput(t *testing.T) {
	t.Parallel()
	record(t, "slurm", "every Slurm command prints 8 MB of one JSON-looking line")
	slurmCase(t, `printf '{"jobs":["'; head -c 8000000 /dev/zero | tr '\0' 'x'; printf '"]}'`)
}
