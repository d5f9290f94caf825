//go:build linux

package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// writeScript writes an executable shell script into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeSlurm returns paths of a working sinfo and sdiag that print the
// 22.05 fixtures, for tests where only squeue misbehaves.
func fakeSlurm(t *testing.T, dir string) (sinfo, sdiag string) {
	fix, err := filepath.Abs(filepath.Join("testdata", "22.05"))
	if err != nil {
		t.Fatal(err)
	}
	sinfo = writeScript(t, dir, "sinfo", "exec cat '"+fix+"/sinfo.json'\n")
	sdiag = writeScript(t, dir, "sdiag", "exec cat '"+fix+"/sdiag.txt'\n")
	return sinfo, sdiag
}

// pidAlive says whether pid runs; a zombie (killed, not yet reaped by its
// new parent) does not count.
func pidAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A squeue that hangs, and whose child hangs too: the scrape returns in
// about the timeout, squeue's series report the failure, the other
// commands' metrics are still there, and the whole process group is gone.
func TestCollectorHangingSqueue(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	squeue := writeScript(t, dir, "squeue", "sleep 600 &\necho $$ $! > '"+pids+"'\nwait\n")
	sinfo, sdiag := fakeSlurm(t, dir)
	// The timeout applies to every command: it must leave the working
	// sinfo and sdiag (a shell and cat) time to run on a loaded 2-core
	// machine, where much shorter ones were seen not to suffice.
	c, err := NewCollector(Options{SqueuePath: squeue, SinfoPath: sinfo, SdiagPath: sdiag, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := scrape(t, c)
	took := time.Since(start)
	if took > 10*time.Second {
		t.Errorf("scrape took %v with a 3s timeout", took)
	}
	for _, want := range []string{
		`slurm_collector_success{command="squeue"} 0`,
		`slurm_collector_errors_total{command="squeue"} 1`,
		`slurm_collector_success{command="sinfo"} 1`,
		`slurm_node_cpus{node="vm",state="total"} 2`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "slurm_jobs{") {
		t.Errorf("job series exported although squeue failed")
	}
	data, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	// The group was sent SIGKILL; each process dies once the kernel runs
	// it, which a loaded machine may put off.
	var alive []int
	defer func() {
		for _, pid := range alive {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	testenv.Eventually(t, 10*time.Second, func() error {
		alive = alive[:0]
		for f := range strings.FieldsSeq(string(data)) {
			if pid, _ := strconv.Atoi(f); pid > 0 && pidAlive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) > 0 {
			return fmt.Errorf("processes %v of the hung squeue still run", alive)
		}
		return nil
	})
}

func TestCollectorGarbageSqueue(t *testing.T) {
	for name, body := range map[string]string{
		"text":      "echo 'this is not json'\n",
		"binary":    "head -c 4096 /dev/urandom\n",
		"truncated": "printf '{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUN'\n",
		"wrongtype": "echo '{\"jobs\": {\"job_id\": 1}}'\n",
		"empty":     "true\n",
		"exit1":     "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			squeue := writeScript(t, dir, "squeue", body)
			sinfo, sdiag := fakeSlurm(t, dir)
			c, err := NewCollector(Options{SqueuePath: squeue, SinfoPath: sinfo, SdiagPath: sdiag, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			out := scrape(t, c)
			for _, want := range []string{`slurm_collector_success{command="squeue"} 0`, `slurm_collector_errors_total{command="squeue"} 1`} {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("missing %q in:\n%s", want, out)
				}
			}
		})
	}
}

// A squeue and sinfo without --json (Slurm < 21.08) are read through the
// formatted fallback, and the switch is remembered.
func TestCollectorFallsBackToText(t *testing.T) {
	dir := t.TempDir()
	fix, _ := filepath.Abs(filepath.Join("testdata", "22.05"))
	count := filepath.Join(dir, "json-tries")
	old := `case "$1" in --json) echo x >> '` + count + `'; echo "$0: unrecognized option '--json'" >&2; exit 1;; esac` + "\n"
	squeue := writeScript(t, dir, "squeue", old+"exec cat '"+fix+"/squeue_formatted.txt'\n")
	sinfo := writeScript(t, dir, "sinfo", old+"exec cat '"+fix+"/sinfo_formatted.txt'\n")
	sdiag := writeScript(t, dir, "sdiag", "exec cat '"+fix+"/sdiag.txt'\n")
	c, err := NewCollector(Options{SqueuePath: squeue, SinfoPath: sinfo, SdiagPath: sdiag, PollInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	scrape(t, c)
	got := scrape(t, c)
	want, err := os.ReadFile(filepath.Join(fix, "metrics_text.prom"))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("text fallback differs from metrics_text.prom:\n%s", lineDiff(string(want), got))
	}
	tries, _ := os.ReadFile(count)
	if n := strings.Count(string(tries), "x"); n != 2 {
		t.Errorf("--json tried %d times over two scrapes, want 2 (once per command)", n)
	}
}

func TestExecRunner(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	big := writeScript(t, dir, "big", "head -c 3000000 /dev/zero\n")
	_, err := ExecRunner{MaxOutput: 1 << 20}.Run(ctx, big)
	if err == nil || !strings.Contains(err.Error(), "output exceeds 1048576 bytes") {
		t.Errorf("big output: %v", err)
	}

	fail := writeScript(t, dir, "fail", "echo 'first line' >&2; echo 'second' >&2; exit 3\n")
	_, err = ExecRunner{}.Run(ctx, fail, "--json")
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Stderr != "first line" || !strings.Contains(err.Error(), fail+" --json: exit status 3: first line") {
		t.Errorf("failing command: %v", err)
	}

	hang := writeScript(t, dir, "hang", "sleep 600\n")
	start := time.Now()
	_, err = ExecRunner{Timeout: 200 * time.Millisecond}.Run(ctx, hang)
	if !errors.As(err, &ce) || !ce.TimedOut || time.Since(start) > 2*time.Second {
		t.Errorf("hanging command: %v after %v", err, time.Since(start))
	}

	// Arguments are passed as they are, never through a shell.
	echo := writeScript(t, dir, "echo", `for a in "$@"; do printf '[%s]' "$a"; done`+"\n")
	out, err := ExecRunner{}.Run(ctx, echo, "a b", "$(id)", ";rm")
	if err != nil || string(out) != "[a b][$(id)][;rm]" {
		t.Errorf("arguments: %q, %v", out, err)
	}

	if _, err := (ExecRunner{}).Run(ctx, filepath.Join(dir, "missing")); err == nil {
		t.Error("missing command: no error")
	}
}
