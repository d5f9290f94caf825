package attribution

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// tempProc copies fixture processes into a writable procfs tree, so a test
// can make them exit or be replaced.
func tempProc(t testing.TB, pids ...int) string {
	t.Helper()
	root := t.TempDir()
	for _, pid := range pids {
		copyDir(t, filepath.Join("testdata/proc", strconv.Itoa(pid)), filepath.Join(root, strconv.Itoa(pid)))
	}
	return root
}

func copyDir(t testing.TB, src, dst string) { testenv.CopyDir(t, src, dst) }

func procs(pids ...uint32) *snapshot.Snapshot {
	s := &snapshot.Snapshot{}
	for _, pid := range pids {
		s.Processes = append(s.Processes, snapshot.Process{PID: pid})
	}
	return s
}

func TestMissingPIDIsCountedOnce(t *testing.T) {
	a := newFixtureAttributor(t, Options{})
	s := procs(99999)
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner; got != (snapshot.Owner{}) {
		t.Errorf("owner of a missing pid = %+v, want empty", got)
	}
	if got := s.AttributionErrors[SourceProcfs]; got != 1 {
		t.Errorf("procfs errors = %d, want 1", got)
	}
	// Not re-read, so not re-counted, on every scrape.
	s = procs(99999)
	a.Enrich(context.Background(), s)
	if got := s.AttributionErrors[SourceProcfs]; got != 1 {
		t.Errorf("procfs errors after a second scrape = %d, want 1", got)
	}
}

func TestPIDExitedMidRead(t *testing.T) {
	// Fixture 1034 lost cmdline, cgroup and environ after stat and status
	// were read.
	a := newFixtureAttributor(t, Options{})
	s := procs(1034)
	a.Enrich(context.Background(), s)
	// The command falls back to comm, which came with stat.
	want := snapshot.Owner{StartTime: 101034, UID: "1000", User: "alice", Command: "python3"}
	if got := s.Processes[0].Owner; got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got := s.AttributionErrors[SourceProcfs]; got != 1 {
		t.Errorf("procfs errors = %d, want 1", got)
	}
}

func TestVanishedPIDKeepsItsOwner(t *testing.T) {
	root := tempProc(t, 1001)
	a := newFixtureAttributor(t, Options{ProcRoot: root, RevalidateInterval: 10 * time.Second})
	clock := newFakeClock()
	a.now = clock.Now
	s := procs(1001)
	a.Enrich(context.Background(), s)
	before := s.Processes[0].Owner
	if before.Container.ID != fixtureDockerID {
		t.Fatalf("setup: %+v", before)
	}
	// The process exits; the driver still lists it for a while.
	if err := os.RemoveAll(filepath.Join(root, "1001")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(11 * time.Second)
	a.Enrich(context.Background(), procs(1001)) // starts the check
	finishRevalidation(t, a)
	s = procs(1001)
	a.Enrich(context.Background(), s) // merges it
	if got := s.Processes[0].Owner; got != before {
		t.Errorf("after exit: got %+v\nwant the last known owner %+v", got, before)
	}
	if got := s.AttributionErrors[SourceProcfs]; got != 1 {
		t.Errorf("procfs errors = %d, want 1", got)
	}
}

func TestPIDReuseIsDetected(t *testing.T) {
	root := tempProc(t, 1001)
	a := newFixtureAttributor(t, Options{ProcRoot: root, RevalidateInterval: 10 * time.Second})
	clock := newFakeClock()
	a.now = clock.Now
	a.Enrich(context.Background(), procs(1001))

	// PID 1001 is reused by a process of another user, outside any
	// container, started later.
	reuse1001(t, root)

	clock.Advance(11 * time.Second)
	s := procs(1001)
	a.Enrich(context.Background(), s) // starts the check in the background
	if got := s.Processes[0].Owner.User; got != "alice" {
		t.Errorf("the check's answer came early: user %q", got)
	}
	finishRevalidation(t, a)
	s = procs(1001)
	a.Enrich(context.Background(), s) // merges it
	got := s.Processes[0].Owner
	if got.StartTime != 555555 || got.User != "bob" || got.Container.ID != "" {
		t.Errorf("after PID reuse: got %+v, want start 555555, user bob, no container", got)
	}
}

func TestPIDsNoLongerReportedAreEvicted(t *testing.T) {
	a := newFixtureAttributor(t, Options{})
	a.Enrich(context.Background(), procs(1001, 1002, 1003))
	a.Enrich(context.Background(), procs(1002))
	if _, ok := a.pids[1001]; ok || len(a.pids) != 1 {
		t.Errorf("cache holds %d pids after only 1002 was reported", len(a.pids))
	}
}

// The accounting's reader lists a GPU's processes only every few ticks: a
// snapshot in which some GPU's processes were not listed evicts nothing
// (the scrapes share the cache, and would read every process again).
func TestPIDsKeptWhenAGPUWasNotListed(t *testing.T) {
	a := newFixtureAttributor(t, Options{})
	a.Enrich(context.Background(), procs(1001, 1002, 1003))
	s := procs(1002)
	s.Devices = []snapshot.Device{{Index: 0, UUID: "GPU-0"}, {Index: 1, UUID: "GPU-1", ProcessesNotListed: true}}
	a.Enrich(context.Background(), s)
	if len(a.pids) != 3 {
		t.Errorf("cache holds %d pids after a snapshot that did not list GPU 1, want all 3", len(a.pids))
	}
	s.Devices[1].ProcessesNotListed = false
	a.Enrich(context.Background(), s)
	if _, ok := a.pids[1001]; ok || len(a.pids) != 1 {
		t.Errorf("cache holds %d pids after a whole list with only 1002, want 1", len(a.pids))
	}
}

func TestMalformedProcFilesAreErrorsNotPanics(t *testing.T) {
	root := tempProc(t, 1001, 1002, 1003)
	write := func(pid, name, content string) {
		if err := os.WriteFile(filepath.Join(root, pid, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1001", "stat", "1001 (x)")                            // procfs indexes past the end of this
	write("1002", "status", "Uid:\t1\t2\t3\t4\t5\t6\n")          // and of this
	write("1003", "stat", "1003 (x) S 1 2 3 not numbers at all") // parse error
	a := newFixtureAttributor(t, Options{ProcRoot: root})
	s := procs(1001, 1002, 1003)
	a.Enrich(context.Background(), s)
	if got := s.AttributionErrors[SourceProcfs]; got != 3 {
		t.Errorf("procfs errors = %d, want 3", got)
	}
	if got := s.Processes[1].Owner.StartTime; got != 101002 {
		t.Errorf("pid 1002: start time %d, want 101002 read before status failed", got)
	}
}

func TestNewRejectsMissingProcRoot(t *testing.T) {
	if _, err := New(Options{ProcRoot: filepath.Join(t.TempDir(), "nope")}); err == nil {
		t.Error("New with a missing --path.procfs: no error")
	}
}

func TestPasswdReloadsWhenChanged(t *testing.T) {
	rootfs := t.TempDir()
	passwd := filepath.Join(rootfs, "etc", "passwd")
	if err := os.MkdirAll(filepath.Dir(passwd), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(passwd, []byte("alice:x:1000:1000::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newFixtureAttributor(t, Options{RootFS: rootfs})
	s := procs(1001)
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner.User; got != "alice" {
		t.Fatalf("user = %q, want alice", got)
	}
	if err := os.WriteFile(passwd, []byte("alicia:x:1000:1000::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(passwd, future, future); err != nil {
		t.Fatal(err)
	}
	s = procs(1002) // a new process is named from the new file
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner.User; got != "alicia" {
		t.Errorf("user after the passwd change = %q, want alicia", got)
	}
}

func TestMissingPasswdLeavesUIDs(t *testing.T) {
	a := newFixtureAttributor(t, Options{RootFS: t.TempDir()})
	s := procs(1001)
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner; got.UID != "1000" || got.User != "" {
		t.Errorf("got uid %q user %q, want uid 1000 and no name", got.UID, got.User)
	}
}

func TestParsePasswd(t *testing.T) {
	got := parsePasswd([]byte("root:x:0:0:root:/root:/bin/bash\n#c\n+nis::::::\n:x:5:5::/:/\nbad\nnum:x:abc:1::/:/\nalice:x:1000:1000::/h:/s\r\ndup:x:1000:1000::/h:/s\nlast:x:7:7::/:/"))
	want := map[string]string{"0": "root", "1000": "alice", "7": "last"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("uid %s: got %q, want %q", k, got[k], v)
		}
	}
}

func TestCommandLineBounds(t *testing.T) {
	long := strings.Repeat("ab\x00", 200)
	if got := commandLine([]byte(long)); len(got) != maxCommandBytes || strings.ContainsRune(got, 0) {
		t.Errorf("len %d, NULs %v", len(got), strings.ContainsRune(got, 0))
	}
	// Cut on a character boundary, invalid bytes replaced.
	got := commandLine([]byte(strings.Repeat("€", 100)))
	if !utf8.ValidString(got) || len(got) > maxCommandBytes || len(got) < maxCommandBytes-3 {
		t.Errorf("got %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := commandLine([]byte("a\xffb\x00c\x00")); got != "a\uFFFDb c" {
		t.Errorf("got %q", got)
	}
}

func TestSlurmFromEnviron(t *testing.T) {
	tests := []struct{ env, job, step string }{
		{"A=1\x00SLURM_JOB_ID=42\x00SLURM_STEP_ID=3\x00", "42", "3"},
		{"SLURM_JOB_ID=42\x00SLURM_STEP_ID=4294967292\x00", "42", "extern"},
		{"SLURM_STEP_ID=3\x00", "", ""},
		{"SLURM_JOB_ID=4x2\x00", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		job, step := slurmFromEnviron([]byte(tt.env))
		if job != tt.job || step != tt.step {
			t.Errorf("slurmFromEnviron(%q) = %q, %q; want %q, %q", tt.env, job, step, tt.job, tt.step)
		}
	}
}

// unstuckContainerID is the container that a stuck process's cgroup file
// names once stuckProc's release is called.
var unstuckContainerID = strings.Repeat("e", 64)

// stuckProc makes pid's cgroup file (read for every process) a FIFO:
// reading it blocks, as reading a process stuck in the kernel can, until
// release is called; the file then names the container unstuckContainerID.
func stuckProc(t *testing.T, root string, pid int) (release func()) {
	t.Helper()
	fifo := filepath.Join(root, strconv.Itoa(pid), "cgroup")
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	release = sync.OnceFunc(func() {
		// Opening for writing releases the blocked reader; closing gives it EOF.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Write([]byte("0::/docker/" + unstuckContainerID + "\n"))
			f.Close()
		}
	})
	t.Cleanup(release)
	return release
}

func TestStuckProcfsReadDoesNotHoldEnrich(t *testing.T) {
	root := tempProc(t, 1001, 1002)
	release := stuckProc(t, root, 1002)
	a := newFixtureAttributor(t, Options{ProcRoot: root})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	s := procs(1001, 1002)
	a.Enrich(ctx, s)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Enrich took %v with a 100ms budget and a stuck read", took)
	}
	// A second scrape while the read is still stuck starts no second job
	// and returns at once.
	job := a.job
	s = procs(1001, 1002)
	a.Enrich(context.Background(), s)
	if job == nil || a.job != job {
		t.Fatal("the stuck job was not kept")
	}

	release()
	select {
	case <-job.done:
	case <-time.After(5 * time.Second):
		t.Fatal("job did not finish after the read was released")
	}
	s = procs(1001, 1002)
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner.Container.ID; got != fixtureDockerID {
		t.Errorf("pid 1001 container = %q after the job finished", got)
	}
	if got := s.Processes[1].Owner.Container.ID; got != unstuckContainerID {
		t.Errorf("pid 1002 container = %q, want the late answer %q", got, unstuckContainerID)
	}
}

func TestStuckProcfsJobIsAbandoned(t *testing.T) {
	root := tempProc(t, 1001, 1002)
	stuckProc(t, root, 1002)
	a := newFixtureAttributor(t, Options{ProcRoot: root})
	clock := newFakeClock()
	a.now = clock.Now
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a.Enrich(ctx, procs(1002))

	// Long after, a new process appears while 1002 is still stuck.
	clock.Advance(a.stuckAfter + time.Second)
	s := procs(1001, 1002)
	a.Enrich(context.Background(), s)
	if got := s.Processes[0].Owner.Container.ID; got != fixtureDockerID {
		t.Errorf("new pid 1001 not read while 1002 is stuck: container %q", got)
	}
	if got := s.Processes[1].Owner; got != (snapshot.Owner{}) {
		t.Errorf("stuck pid 1002: owner %+v, want empty", got)
	}
	if got := s.AttributionErrors[SourceProcfs]; got != 1 {
		t.Errorf("procfs errors = %d, want 1 for the stuck process", got)
	}
}

func TestParseStartTime(t *testing.T) {
	for _, pid := range []int{1001, 1035} {
		b, err := os.ReadFile(filepath.Join("testdata/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseStartTime(b)
		if want := uint64(100000 + pid); err != nil || got != want {
			t.Errorf("pid %d: got %d, %v; want %d", pid, got, err, want)
		}
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20"} {
		if _, err := parseStartTime([]byte(bad)); err == nil {
			t.Errorf("parseStartTime(%q): no error", bad)
		}
	}
}

func TestEnrichWithoutDeadlineIsBoundedByTimeout(t *testing.T) {
	root := tempProc(t, 1002)
	stuckProc(t, root, 1002)
	a := newFixtureAttributor(t, Options{ProcRoot: root, Timeout: 200 * time.Millisecond})
	start := time.Now()
	a.Enrich(context.Background(), procs(1002))
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Enrich without a deadline took %v with a stuck read and a 200ms timeout", took)
	}
}

// TestStuckProcessIsNotReadAgainWhileStuck: every revalidation of a process
// stuck in the kernel used to start one more read, stranding one more
// goroutine and OS thread each time. A PID with a read in flight is not
// read again.
func TestStuckProcessIsNotReadAgainWhileStuck(t *testing.T) {
	root := tempProc(t, 1001, 1002)
	release := stuckProc(t, root, 1002)
	a := newFixtureAttributor(t, Options{ProcRoot: root, RevalidateInterval: time.Minute})
	clock := newFakeClock()
	a.now = clock.Now
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a.Enrich(ctx, procs(1002))
	before := runtime.NumGoroutine()
	for range 10 {
		// Long enough for the stuck job to be abandoned and the process
		// to fall due for its check.
		clock.Advance(a.stuckAfter + a.revalidate + time.Second)
		a.Enrich(ctx, procs(1001, 1002))
	}
	// Jobs that found the PID busy end at once; stranded reads never do.
	settled := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine()-before > 3 && time.Now().Before(settled) {
		time.Sleep(10 * time.Millisecond)
	}
	if grown := runtime.NumGoroutine() - before; grown > 3 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d more goroutines after 10 checks of a stuck process; reads of it are being started again\n%s", grown, buf[:runtime.Stack(buf, true)])
	}
	if n := a.procs.inFlight.count(); n != 1 {
		t.Errorf("%d PIDs with reads in flight, want 1 (the stuck one)", n)
	}
	release()
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := a.procs.inFlight.count(); n != 0 {
			return fmt.Errorf("%d reads still in flight after the stuck one's release", n)
		}
		return nil
	})
}

// TestReadsInFlightAreBounded: however many processes hang, at most
// maxReadsInFlight reads are stranded.
func TestReadsInFlightAreBounded(t *testing.T) {
	var f readsInFlight
	for pid := range uint32(maxReadsInFlight) {
		if !f.begin(pid + 1) {
			t.Fatalf("read %d refused below the bound", pid+1)
		}
	}
	if f.begin(maxReadsInFlight + 1) {
		t.Error("a read past the bound was started")
	}
	f.end(1)
	if !f.begin(maxReadsInFlight + 1) {
		t.Error("a read was refused after one ended")
	}
	if f.begin(2) {
		t.Error("a second read of a PID in flight was started")
	}
}

// reuse1001 makes fixture process 1001 a process of bob, outside any
// container, started at 555555.
func reuse1001(t *testing.T, root string) {
	t.Helper()
	dir := filepath.Join(root, "1001")
	replace := func(name, old, new string) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", name, old)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(string(b), old, new)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replace("stat", " 101001 ", " 555555 ")
	replace("status", "Uid:\t1000\t1000\t1000\t1000", "Uid:\t1001\t1001\t1001\t1001")
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte("0::/user.slice/user-1001.slice/session-4.scope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
