//go:build linux

package attribution

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// secretArg is an argument no output may show by default.
const secretArg = "--api-key=SECRET-TOKEN-123"

// TestCommandIsTheExecutableNameByDefault: the command is the base name of
// /proc/PID/exe (" (deleted)" dropped) unless whole command lines are asked
// for; the arguments, secret included, appear only then.
func TestCommandIsTheExecutableNameByDefault(t *testing.T) {
	root := tempProc(t, 1001)
	dir := filepath.Join(root, "1001")
	writeProcFile(t, filepath.Join(dir, "cmdline"), "python3\x00train.py\x00"+secretArg+"\x00")
	if err := os.Symlink("/opt/conda/bin/python3.11 (deleted)", filepath.Join(dir, "exe")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		full bool
		want string
	}{
		{false, "python3.11"},
		{true, "python3 train.py " + secretArg},
	} {
		a := newFixtureAttributor(t, Options{ProcRoot: root, FullCommandLines: tt.full})
		s := procs(1001)
		a.Enrich(context.Background(), s)
		if got := s.Processes[0].Owner.Command; got != tt.want {
			t.Errorf("FullCommandLines=%v: command %q, want %q", tt.full, got, tt.want)
		}
	}
}

// TestCommandLineIsNotReadByDefault: by default /proc/PID/cmdline is not
// even opened (here a FIFO that would block the read for good).
func TestCommandLineIsNotReadByDefault(t *testing.T) {
	root := tempProc(t, 1001)
	cmdline := filepath.Join(root, "1001", "cmdline")
	if err := os.Remove(cmdline); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(cmdline, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Releases a reader, if the code under test became one.
		if f, err := os.OpenFile(cmdline, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	a := newFixtureAttributor(t, Options{ProcRoot: root})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := procs(1001)
	a.Enrich(ctx, s)
	if got := s.Processes[0].Owner; got.Command != "python3" || got.Container.ID != fixtureDockerID {
		t.Errorf("owner %+v, want command python3 (comm) and container %s", got, fixtureDockerID)
	}
}

// TestLiveCommandHidesArguments runs real processes whose arguments carry
// a secret, one of them with argv[0] rewritten to a whole command line (as
// setproctitle does), and reads the real /proc.
func TestLiveCommandHidesArguments(t *testing.T) {
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	procs := []struct {
		what string
		path string
		argv []string
	}{
		{"shell with the secret in its arguments", "/bin/sh", []string{"sh", "-c", "sleep 300; :", "train.py", secretArg}},
		{"argv[0] rewritten to a command line", sleepPath, []string{"python3 train.py " + secretArg, "300"}},
	}
	for _, p := range procs {
		t.Run(p.what, func(t *testing.T) {
			c := startChild(t, p.path, p.argv)
			exe, err := filepath.EvalSymlinks(p.path)
			if err != nil {
				t.Fatal(err)
			}
			for _, full := range []bool{false, true} {
				a := newFixtureAttributor(t, Options{ProcRoot: "/proc", FullCommandLines: full})
				s := &snapshot.Snapshot{Processes: []snapshot.Process{{PID: uint32(c.pid)}}}
				a.Enrich(context.Background(), s)
				a.Close()
				got := s.Processes[0].Owner.Command
				if full {
					if want := strings.Join(p.argv, " "); got != want {
						t.Errorf("full command lines: command %q, want %q", got, want)
					}
				} else if got != filepath.Base(exe) {
					t.Errorf("default: command %q, want the executable's name %q", got, filepath.Base(exe))
				}
			}
		})
	}
}

// startChild starts argv and waits until its exec is complete: exe names
// the program and cmdline holds the arguments.
func startChild(t *testing.T, path string, argv []string) *child {
	t.Helper()
	// A process group of its own, so that the shell's sleep goes too.
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: []string{}, Sys: &syscall.SysProcAttr{Setpgid: true}})
	if err != nil {
		t.Fatal(err)
	}
	c := &child{pid: pid}
	t.Cleanup(func() { c.exitAndReap(t) })
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	exe, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(argv, "\x00") + "\x00"
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	testenv.Eventually(t, 10*time.Second, func() error {
		target, err := os.Readlink(filepath.Join(dir, "exe"))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			return err
		}
		if target != exe || string(b) != want {
			return fmt.Errorf("exe %q, cmdline %q: the exec is not complete", target, b)
		}
		return nil
	})
	return c
}

func writeProcFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
