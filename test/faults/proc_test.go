//go:build linux

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Owners are read from a fixture /proc (--path.procfs): the attribution
// package's tree, copied and then damaged.

var fixtureProc = filepath.Join(testenv.RepoRoot(), "internal", "attribution", "testdata", "proc")

// procTree copies the fixture processes pids into a new /proc tree.
func procTree(t *testing.T, pids ...int) string {
	t.Helper()
	root := t.TempDir()
	for _, pid := range pids {
		testenv.CopyDir(t, filepath.Join(fixtureProc, strconv.Itoa(pid)), filepath.Join(root, strconv.Itoa(pid)))
	}
	return root
}

// ownedSim is a dgx-h100 whose GPU processes are the given PIDs, one per
// GPU from GPU 0, over GPUs 0-6 (GPU 7 is in MIG mode).
func ownedSim(t *testing.T, pids ...int) string {
	t.Helper()
	cfg := "profile: dgx-h100\nprocesses:\n"
	for i, pid := range pids {
		cfg += fmt.Sprintf("  - {gpu: %d, pid: %d, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n", i%7, pid)
	}
	return simConfig(t, cfg)
}

// attributionArgs are the flags of a case about owners: no runtime
// sockets and no Slurm, unless extra flags say otherwise.
func attributionArgs(procRoot, sim string, extra ...string) []string {
	base := []string{"--backend=sim", "--sim.config=" + sim, "--path.procfs=" + procRoot,
		"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=", "--slurm.jobs=false",
		"--attribution.timeout=500ms"}
	var out []string
	for _, b := range base {
		name, _, _ := strings.Cut(b, "=")
		overridden := false
		for _, e := range extra {
			overridden = overridden || strings.HasPrefix(e, name+"=")
		}
		if !overridden {
			out = append(out, b)
		}
	}
	return append(out, extra...)
}

// validExposition fails the test when the page does not parse.
func validExposition(t *testing.T, page string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(strings.NewReader(page)); err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
}

// A read of /proc/PID/cgroup stuck in the kernel (a FIFO here) must cost
// one goroutine, not one more at every revalidation.
func TestProcStuckRead(t *testing.T) {
	t.Parallel()
	record(t, "proc", "/proc/1001/cgroup blocks (FIFO), revalidation every 1s for 12s: scrapes bounded; the stuck read is never repeated; released, all is back to baseline")
	root := procTree(t, 1001, 1010)
	// cgroup, a file every owner lookup reads (cmdline is read only with
	// --attribution.full-command-lines).
	fifo := filepath.Join(root, "1001", "cgroup")
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	released := false
	// release ends the stuck read and reports whether there was one.
	release := func() bool {
		if released {
			return true
		}
		released = true
		// Non-blocking: with no reader stuck on the FIFO (a read that was
		// never started) a blocking open would never return.
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return false
		}
		f.Close()
		return true
	}
	t.Cleanup(func() { release() })
	h := start(t, attributionArgs(root, ownedSim(t, 1001, 1010), "--attribution.revalidate-interval=1s")...)
	h.baseGoroutines, h.baseFDs = h.goroutines(), h.fds() // before the first stuck read
	h.baseGoroutines += 2                                 // the stuck read and its job
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		h.scrape()
		time.Sleep(200 * time.Millisecond)
	}
	if g := h.goroutines(); g > h.baseGoroutines+slack {
		t.Errorf("goroutines grew from %d to %d while one read was stuck", h.baseGoroutines, g)
	}
	if !release() {
		t.Error("no read of the FIFO was ever stuck: the case tests nothing")
	}
	h.noLeak()
}

func TestProcHostileFiles(t *testing.T) {
	t.Parallel()
	record(t, "proc", "garbage stat and status, 1 MB cmdline of invalid UTF-8 and newlines, 1 MB cgroup line, huge environ: valid exposition, labels bounded")
	root := procTree(t, 1001, 1010, 1025)
	junk := strings.Repeat("\xff\x00\n\"\\{}", 150000)
	writeFile(t, filepath.Join(root, "1001", "stat"), "1001 (x) Z garbage "+junk)
	writeFile(t, filepath.Join(root, "1001", "status"), junk)
	writeFile(t, filepath.Join(root, "1010", "cmdline"), junk)
	writeFile(t, filepath.Join(root, "1010", "cgroup"), "0::/"+strings.Repeat("kubepods/", 120000)+"\n"+junk)
	writeFile(t, filepath.Join(root, "1025", "environ"), "SLURM_JOB_ID="+strings.Repeat("9", 1<<20)+"\x00"+junk)
	h := start(t, attributionArgs(root, ownedSim(t, 1001, 1010, 1025), "--collector.processes.pid-labels")...)
	h.baseline()
	page := h.scrape()
	validExposition(t, page)
	for line := range strings.SplitSeq(page, "\n") {
		if len(line) > 4096 {
			t.Fatalf("a %d-byte series line: %.200s...", len(line), line)
		}
	}
	h.noLeak()
}

func TestProcVanishedPIDs(t *testing.T) {
	t.Parallel()
	record(t, "proc", "the driver lists 16 PIDs that /proc does not have: served without owners, no leak")
	pids := make([]int, 16)
	for i := range pids {
		pids[i] = 40000 + i
	}
	h := start(t, attributionArgs(procTree(t, 1001), ownedSim(t, pids...))...)
	h.baseline()
	if v, ok := testenv.Sample(h.metrics(), "gpu_processes", map[string]string{"gpu": "0"}); !ok || v != 3 {
		t.Errorf("gpu_processes{gpu=0} = %v, want 3", v)
	}
	h.noLeak()
}

func TestProcNotAProcfs(t *testing.T) {
	t.Parallel()
	record(t, "proc", "--path.procfs is an empty directory: processes served without owners")
	h := start(t, attributionArgs(t.TempDir(), ownedSim(t, 1001, 1010))...)
	h.baseline()
	h.noLeak()
}
