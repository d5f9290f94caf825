package attribution

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// These tests run real processes (sleep) and read the real /proc, where
// the exit watcher is used.

// child is a process started for a test. It is started with
// syscall.ForkExec rather than os/exec, whose os.Process holds a pidfd of
// its own, so that the pidfds the test process holds are the Attributor's.
type child struct {
	pid    int
	reaped bool
}

// sleeper starts a process that runs until the test kills it.
func sleeper(t *testing.T) *child {
	t.Helper()
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := syscall.ForkExec(path, []string{"sleep", "300"}, &syscall.ProcAttr{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	c := &child{pid: pid}
	t.Cleanup(func() { c.exitAndReap(t) })
	c.waitForExec(t)
	return c
}

// waitForExec waits until the child's new program has its arguments laid
// out. ForkExec returns when the exec has begun (the kernel closes the
// close-on-exec pipe ForkExec waits on), which is before it sets up the
// new program's argument area: in that window /proc/PID/cmdline reads
// empty, and the attributor rightly falls back to the command name
// ("sleep" instead of "sleep 300"). A GPU process listed by the driver is
// long past its exec, so only a test can look at a process this early.
func (c *child) waitForExec(t *testing.T) {
	t.Helper()
	path := filepath.Join("/proc", strconv.Itoa(c.pid), "cmdline")
	testenv.Eventually(t, 10*time.Second, func() error {
		b, err := os.ReadFile(path)
		if err == nil && string(b) != "sleep\x00300\x00" {
			err = fmt.Errorf("%s reads %q, before the exec", path, b)
		}
		return err
	})
}

// exitAndReap kills the process and waits for it, so its PID is free.
func (c *child) exitAndReap(t *testing.T) {
	t.Helper()
	if c.reaped {
		return
	}
	if err := syscall.Kill(c.pid, syscall.SIGKILL); err != nil {
		t.Error(err)
	}
	for {
		_, err := syscall.Wait4(c.pid, nil, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	c.reaped = true
}

func (c *child) PID() uint32 { return uint32(c.pid) }

// liveAttributor reads the real /proc, watching processes through pidfds,
// on a fake clock that the tests never move unless they say so: any
// change they see comes from the watcher, not from a periodic check.
func liveAttributor(t *testing.T) (*Attributor, *fakeClock) {
	t.Helper()
	a := newFixtureAttributor(t, Options{ProcRoot: "/proc", RevalidateInterval: time.Hour})
	t.Cleanup(func() { a.Close() })
	if a.watch == nil {
		testenv.Missing(t, fmt.Sprintf("pidfds unavailable on this machine (%v); the periodic checks are tested with fixtures", isOwnProcfs("/proc")))
	}
	clock := newFakeClock()
	a.now = clock.Now
	return a, clock
}

// countPidfds counts the pidfds this test process holds.
func countPidfds(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

func TestExitedProcessIsNoticedAtNextEnrich(t *testing.T) {
	a, _ := liveAttributor(t)
	before := countPidfds(t)
	first, second := sleeper(t), sleeper(t)

	s := procs(first.PID(), second.PID())
	a.Enrich(context.Background(), s)
	for i, p := range s.Processes {
		if p.Owner.Command != "sleep" || p.Owner.StartTime == 0 {
			t.Fatalf("process %d: owner %+v, want command \"sleep\" and a start time", i, p.Owner)
		}
		if e := a.pids[p.PID]; e == nil || e.pidfd < 0 {
			t.Fatalf("process %d has no pidfd: %+v", i, e)
		}
	}
	if got := countPidfds(t) - before; got != 2 {
		t.Fatalf("%d pidfds open, want 2", got)
	}
	owner := s.Processes[0].Owner

	first.exitAndReap(t)
	// The driver may still list the exited process.
	s = procs(first.PID(), second.PID())
	a.Enrich(context.Background(), s)
	e := a.pids[first.PID()]
	if e == nil || !e.exited || e.pidfd != -1 {
		t.Fatalf("exited process's entry: %+v, want marked exited, pidfd closed", e)
	}
	if got := s.Processes[0].Owner; got != owner {
		t.Errorf("exited process still listed: owner %+v, want the last known %+v", got, owner)
	}
	if a.revalidation != nil {
		t.Error("a periodic check was started; the exit should have been noticed without one")
	}
	if got := s.AttributionErrors[SourceProcfs]; got != 0 {
		t.Errorf("procfs errors = %d, want 0: an exited process's /proc being gone is expected", got)
	}
	if got := countPidfds(t) - before; got != 1 {
		t.Errorf("%d pidfds open, want 1", got)
	}

	// No longer listed: evicted. A new process gets an entry of its own.
	third := sleeper(t)
	s = procs(second.PID(), third.PID())
	a.Enrich(context.Background(), s)
	if e := a.pids[first.PID()]; e != nil && first.PID() != third.PID() {
		t.Errorf("exited process not evicted: %+v", e)
	}
	if e := a.pids[third.PID()]; e == nil || e.exited || e.pidfd < 0 || e.owner.Command != "sleep" {
		t.Errorf("new process's entry: %+v", e)
	}
	if got := countPidfds(t) - before; got != 2 {
		t.Errorf("%d pidfds open, want 2", got)
	}
}

// TestZombieKeepsItsOwner: a process that exited but was not reaped still
// has a /proc entry, with no command line and no cgroup. It is the same
// process (same start time), so its owner as read while it ran is kept.
func TestZombieKeepsItsOwner(t *testing.T) {
	a, _ := liveAttributor(t)
	cmd := sleeper(t)
	pid := cmd.PID()
	s := procs(pid)
	a.Enrich(context.Background(), s)
	owner := s.Processes[0].Owner

	if err := syscall.Kill(cmd.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForZombie(t, int(pid))
	for range 2 {
		s = procs(pid)
		a.Enrich(context.Background(), s)
		if got := s.Processes[0].Owner; got != owner {
			t.Errorf("zombie: owner %+v, want %+v", got, owner)
		}
		if e := a.pids[pid]; e == nil || !e.exited {
			t.Errorf("zombie's entry: %+v, want marked exited", e)
		}
	}
}

func waitForZombie(t *testing.T, pid int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			return nil
		}
		return fmt.Errorf("process %d is not a zombie: %s", pid, stat)
	})
}

// TestReusedPIDIsRereadAtOnce cannot make the kernel reuse a PID, so it
// pairs a fixture process with the pidfd of a real one: when the real one
// exits, the fixture's PID is "reused" by a process of another user, and
// the very next Enrich reports the new owner.
func TestReusedPIDIsRereadAtOnce(t *testing.T) {
	root := tempProc(t, 1001)
	a := newFixtureAttributor(t, Options{ProcRoot: root, RevalidateInterval: 10 * time.Second})
	defer a.Close()
	if a.watch != nil {
		t.Fatal("a fixture tree is not this PID namespace's procfs, yet pidfds are used")
	}
	clock := newFakeClock()
	a.now = clock.Now
	real := sleeper(t)
	watch, err := newEpollWatcher(func(int) (int, error) { return unix.PidfdOpen(real.pid, 0) })
	if err != nil {
		t.Fatal(err)
	}
	a.watch = watch

	s := procs(1001)
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner; got.User != "alice" || got.StartTime != 101001 {
		t.Fatalf("setup: %+v", got)
	}
	// A watched process is not checked periodically.
	clock.Advance(time.Hour)
	a.Enrich(context.Background(), procs(1001))
	if a.revalidation != nil {
		t.Error("a watched process was checked periodically")
	}

	reuse1001(t, root)
	real.exitAndReap(t)
	s = procs(1001)
	a.Enrich(context.Background(), s)
	got := s.Processes[0].Owner
	if got.StartTime != 555555 || got.User != "bob" || got.Container.ID != "" {
		t.Errorf("next Enrich after the exit: got %+v, want start 555555, user bob, no container", got)
	}
}

// TestNoPidfdFallsBackToPeriodicChecks: where pidfd_open fails (an old
// kernel, a seccomp profile, too many open files), a process is checked
// every RevalidateInterval as before.
func TestNoPidfdFallsBackToPeriodicChecks(t *testing.T) {
	a, clock := liveAttributor(t)
	a.watch.open = func(int) (int, error) { return -1, unix.ENOSYS }
	cmd := sleeper(t)
	pid := cmd.PID()
	a.Enrich(context.Background(), procs(pid))
	if e := a.pids[pid]; e == nil || e.pidfd != -1 || e.owner.Command != "sleep" {
		t.Fatalf("entry %+v, want one without a pidfd", e)
	}
	a.Enrich(context.Background(), procs(pid))
	if a.revalidation != nil {
		t.Fatal("checked before the interval")
	}
	clock.Advance(time.Hour + time.Second)
	a.Enrich(context.Background(), procs(pid))
	finishRevalidation(t, a)
}

func TestIsOwnProcfs(t *testing.T) {
	if err := isOwnProcfs("/proc"); err != nil {
		t.Errorf("/proc: %v", err)
	}
	for _, dir := range []string{"testdata/proc", t.TempDir(), "/nonexistent"} {
		if err := isOwnProcfs(dir); err == nil {
			t.Errorf("%s taken for this PID namespace's procfs", dir)
		}
	}
}

func TestCloseReleasesPidfds(t *testing.T) {
	a, _ := liveAttributor(t)
	before := countPidfds(t)
	cmds := []*child{sleeper(t), sleeper(t), sleeper(t)}
	s := procs(cmds[0].PID(), cmds[1].PID(), cmds[2].PID())
	a.Enrich(context.Background(), s)
	if got := countPidfds(t) - before; got != 3 {
		t.Fatalf("%d pidfds open, want 3", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := countPidfds(t) - before; got != 0 {
		t.Errorf("after Close: %d pidfds open, want 0", got)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// Still usable, without pidfds.
	s = procs(cmds[0].PID())
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner.Command; got != "sleep" {
		t.Errorf("Enrich after Close: command %q", got)
	}
	if got := countPidfds(t) - before; got != 0 {
		t.Errorf("Enrich after Close opened %d pidfds", got)
	}
}

// TestAbandonedJobClosesItsPidfds: a procfs read abandoned as stuck
// closes the pidfds it opened once it returns, since nobody merges it.
func TestAbandonedJobClosesItsPidfds(t *testing.T) {
	r, err := newProcReader("/proc")
	if err != nil {
		t.Fatal(err)
	}
	before := countPidfds(t)
	cmd := sleeper(t)
	release := make(chan struct{})
	open := func(pid int) (int, error) {
		<-release // stuck, as a read of a process hung in the kernel is
		return unix.PidfdOpen(pid, 0)
	}
	job := startProcJob(r, open, newErrorCounts(SourceProcfs), slog.New(slog.DiscardHandler), []procRequest{{pid: cmd.PID()}}, 1, time.Now())
	if !job.giveUp() {
		t.Fatal("giveUp on a running job failed")
	}
	close(release)
	<-job.done
	if got := countPidfds(t) - before; got != 0 {
		t.Errorf("abandoned job left %d pidfds open", got)
	}
	if job.giveUp() {
		t.Error("giveUp succeeded twice")
	}
}

func TestStringSaysHowPIDReuseIsCaught(t *testing.T) {
	a := newFixtureAttributor(t, Options{RevalidateInterval: 20 * time.Second})
	if got := a.String(); !strings.Contains(got, "PID reuse checked every 20s") {
		t.Errorf("fixture tree: %q", got)
	}
	live, _ := liveAttributor(t)
	if got := live.String(); !strings.Contains(got, "watched for exit through pidfds") {
		t.Errorf("live /proc: %q", got)
	}
}

// TestStuckRereadOfExitedPID: when re-reading the PID of an exited process
// hangs, the read is abandoned as for any process, and the PID is left to
// the periodic check rather than retried (and waited for) every scrape.
func TestStuckRereadOfExitedPID(t *testing.T) {
	root := tempProc(t, 1001)
	a := newFixtureAttributor(t, Options{ProcRoot: root, RevalidateInterval: time.Minute})
	defer a.Close()
	clock := newFakeClock()
	a.now = clock.Now
	real := sleeper(t)
	watch, err := newEpollWatcher(func(int) (int, error) { return unix.PidfdOpen(real.pid, 0) })
	if err != nil {
		t.Fatal(err)
	}
	a.watch = watch
	a.Enrich(context.Background(), procs(1001))

	// The PID is reused by a process whose command line cannot be read.
	reuse1001(t, root)
	stuckProc(t, root, 1001)
	real.exitAndReap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a.Enrich(ctx, procs(1001))
	if a.job == nil {
		t.Fatal("the re-read did not get stuck")
	}
	clock.Advance(a.stuckAfter + time.Second)
	a.Enrich(context.Background(), procs(1001)) // abandons it
	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.Enrich(ctx, procs(1001))
	if a.job != nil || time.Since(start) > time.Second {
		t.Errorf("the stuck PID is being read again (Enrich took %v) instead of being left to the periodic check", time.Since(start))
	}
	if e := a.pids[1001]; e == nil || e.exited || e.checkAt.Before(clock.Now()) {
		t.Errorf("entry after abandoning: %+v", e)
	}
}

// New that fails on a bad --docker.socket leaves no descriptor behind: the
// exit watcher's epoll instance used to be opened first and leaked.
func TestNewFailingLeavesNoDescriptor(t *testing.T) {
	liveAttributor(t) // skips (CI: fails) where pidfds are unavailable
	count := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	before := count()
	for range 5 {
		if _, err := New(Options{ProcRoot: "/proc", DockerSocket: "tcp://no-port-here"}); err == nil {
			t.Fatal("New accepted a Docker address without a port")
		}
	}
	if after := count(); after > before {
		t.Errorf("%d descriptors before 5 failed New calls, %d after", before, after)
	}
}
