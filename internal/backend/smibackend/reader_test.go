package smibackend

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// fakeSMI is the project's fake nvidia-smi, built once for these tests,
// or $FAKESMI_BIN where the tests run without a Go toolchain (under Wine:
// test/wine).
var fakeSMI string

func TestMain(m *testing.M) {
	if fakeSMI = os.Getenv("FAKESMI_BIN"); fakeSMI != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "fakesmi")
	if err != nil {
		panic(err)
	}
	fakeSMI = filepath.Join(dir, "nvidia-smi"+exeSuffix())
	build := exec.Command("go", "build", "-o", fakeSMI, "../../fakedriver/fakesmi")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building the fake nvidia-smi: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fakeEnv points the fake nvidia-smi at fixtures; the test's environment
// is restored after it.
func fakeEnv(t *testing.T, help, gpus, apps string) (log, modeFile string) {
	t.Helper()
	abs := func(name string) string {
		if name == "" {
			return ""
		}
		p, err := filepath.Abs(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	dir := tempDir(t)
	log, modeFile = filepath.Join(dir, "runs.log"), filepath.Join(dir, "mode")
	t.Setenv("FAKESMI_HELP", abs(help))
	t.Setenv("FAKESMI_GPUS", abs(gpus))
	t.Setenv("FAKESMI_APPS", abs(apps))
	t.Setenv("FAKESMI_LOG", log)
	t.Setenv("FAKESMI_MODE_FILE", modeFile)
	t.Setenv("FAKESMI_MODE", "")
	t.Setenv("FAKESMI_PID0", "4242")
	t.Setenv("FAKESMI_PID1", "4343")
	return log, modeFile
}

func newReader(t *testing.T, groups map[string]bool, command ...string) *Reader {
	t.Helper()
	if len(command) == 0 {
		command = []string{fakeSMI}
	}
	r, err := New(Options{Command: command, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func read(t *testing.T, r *Reader, timeout time.Duration) (*snapshot.Snapshot, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return r.Read(ctx)
}

func runs(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestReadDatacenterHost(t *testing.T) {
	log, _ := fakeEnv(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "apps-h100.csv")
	r := newReader(t, allGroups())
	for range 3 {
		snap, err := read(t, r, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Devices) != 2 || !snap.Devices[0].Up || snap.Devices[1].Power.Usage != snapshot.Some(70.88) {
			t.Fatalf("devices %+v", snap.Devices)
		}
		if snap.Driver.Version != "550.90.07" || snap.Driver.Branch != "R550" || snap.Driver.Library != "nvidia-smi" || snap.DriverVersion != "550.90.07" {
			t.Errorf("driver %+v", snap.Driver)
		}
		if len(snap.Processes) != 2 || snap.Processes[0].PID != 4242 || snap.Processes[0].UsedMemory != snapshot.Some(uint64(20480)<<20) {
			t.Errorf("processes %+v", snap.Processes)
		}
		for g, st := range snap.Groups {
			if st.Err != nil {
				t.Errorf("group %s: %v", g, st.Err)
			}
		}
	}
	// One help run, then per collection one run for the GPUs and one for
	// their processes.
	var help, gpus, apps int
	for _, line := range runs(t, log) {
		switch {
		case strings.Contains(line, "--help-query-gpu"):
			help++
		case strings.Contains(line, "--query-gpu="):
			gpus++
		case strings.Contains(line, "--query-compute-apps="):
			apps++
		}
	}
	if help != 1 || gpus != 3 || apps != 3 {
		t.Errorf("runs: %d help, %d GPU queries, %d process queries; want 1, 3, 3", help, gpus, apps)
	}
}

// The limits say what nvidia-smi never gives and what this driver lacks.
func TestLimitsOfAnOlderDriver(t *testing.T) {
	fakeEnv(t, "help-query-gpu-r470.txt", "gpu-a100-mig-r470.csv", "apps-mig.csv")
	snap, err := read(t, newReader(t, allGroups()), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]snapshot.DriverLimit{}
	for _, l := range snap.Driver.Limits {
		limits[l.Group] = l
	}
	if l := limits[snapshot.GroupXID]; !l.Unavailable || !strings.Contains(l.Reason, "XID events") {
		t.Errorf("xid limit %+v", l)
	}
	if l := limits[snapshot.GroupTemperature]; l.Unavailable || !strings.Contains(l.Reason, "temperature.memory") {
		t.Errorf("temperature limit %+v, want partial naming temperature.memory", l)
	}
	if _, limited := limits[snapshot.GroupClockEvents]; limited {
		t.Errorf("clock events limited on R470: %+v", limits[snapshot.GroupClockEvents])
	}
	if len(snap.Processes) != 1 || snap.Processes[0].UsedMemory.Valid {
		t.Errorf("processes %+v", snap.Processes)
	}
}

func TestReadErrorsAndGarbageAreCounted(t *testing.T) {
	fakeEnv(t, "help-query-gpu-r550.txt", "gpu-garbage.csv", "apps-garbage.csv")
	r := newReader(t, allGroups())
	var snap *snapshot.Snapshot
	for range 2 {
		var err error
		if snap, err = read(t, r, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for field, want := range map[string]uint64{"power.draw": 2, "temperature.gpu": 2, "pstate": 2, "nvidia_smi_row": 4, "utilization": 2, "nvidia_smi_process_row": 8} {
		if got := snap.ReadingsDropped[field]; got != want {
			t.Errorf("dropped[%s] = %d, want %d after two reads; all %v", field, got, want, snap.ReadingsDropped)
		}
	}
	if d := snap.Devices[0]; d.Utilization.GPU.Valid {
		t.Errorf("utilization 250%% kept: %+v", d.Utilization)
	}
	if err := snap.Groups[snapshot.GroupPower].Err; err == nil || !strings.Contains(err.Error(), "power.draw") {
		t.Errorf("power group error %v, want one naming power.draw", err)
	}
}

func TestReadGPUsInError(t *testing.T) {
	fakeEnv(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "")
	r := newReader(t, allGroups())
	if _, err := read(t, r, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKESMI_GPUS", mustAbs(t, "testdata/gpu-in-error.csv"))
	snap, err := read(t, r, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The unreachable GPU keeps the UUID it had at 00000000:2A:00.0.
	if d := snap.Devices[1]; d.Up || d.UUID != "GPU-8b1d9c02-3e4f-4a5b-8c6d-7e8f90a1b2c3" || d.DownReason != "unknown_error" {
		t.Errorf("unreachable GPU %+v", d)
	}
	if err := snap.Groups[snapshot.GroupTemperature].Err; err == nil || !strings.Contains(err.Error(), "Unknown Error") {
		t.Errorf("temperature group error %v", err)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A failing nvidia-smi (a remote host that stops answering) leaves its
// GPUs down with the reason, one line; when it answers again they are up.
func TestFailingNvidiaSMIDownsItsGPUs(t *testing.T) {
	_, modeFile := fakeEnv(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "apps-h100.csv")
	r := newReader(t, allGroups())
	if _, err := read(t, r, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(modeFile, []byte("fail"), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := read(t, r, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Devices) != 2 || snap.Devices[0].Up || snap.Devices[1].DownReason != "nvidia_smi_failed" || snap.Devices[1].UUID == "" {
		t.Fatalf("devices %+v, want both down and identified", snap.Devices)
	}
	msg := snap.Groups[snapshot.GroupInfo].Err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "exit status 9") || !strings.Contains(msg, "couldn't communicate with the NVIDIA driver") {
		t.Errorf("error %q, want one line with the exit status and nvidia-smi's message", msg)
	}
	if err := os.Remove(modeFile); err != nil {
		t.Fatal(err)
	}
	if snap, err = read(t, r, 10*time.Second); err != nil || !snap.Devices[0].Up {
		t.Fatalf("after recovery: %v, %+v", err, snap)
	}
}

func TestFirstReadFailureIsAnError(t *testing.T) {
	for _, mode := range []string{"fail", "garbage"} {
		t.Run(mode, func(t *testing.T) {
			fakeEnv(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "")
			t.Setenv("FAKESMI_MODE", mode)
			if snap, err := read(t, newReader(t, allGroups()), 10*time.Second); err == nil {
				t.Fatalf("snapshot %+v, want an error", snap)
			}
		})
	}
}

// tempDir is t.TempDir whose removal may fail: Wine's file deletion
// refuses the POSIX-semantics delete Go's os.RemoveAll asks of Windows
// (ERROR_INVALID_FUNCTION), which would fail every test under test/wine.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "smibackend")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

// A hung nvidia-smi is killed when the collection's deadline passes.
func TestHungNvidiaSMIIsKilled(t *testing.T) {
	fakeEnv(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "")
	t.Setenv("FAKESMI_MODE", "hang")
	_, err := read(t, newReader(t, allGroups()), 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "killed") || !strings.Contains(err.Error(), "--collection.timeout") {
		t.Fatalf("err = %v, want a timeout naming --collection.timeout", err)
	}
}

// A hung nvidia-smi, run through a wrapper that does not exec it, is
// killed with the wrapper when the collection's deadline passes.
func TestHungNvidiaSMIIsKilledWithItsWrapper(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups and /proc are Linux's; on Windows the command itself is killed (TestHungNvidiaSMIIsKilled)")
	}
	log, _ := fakeEnv(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "")
	t.Setenv("FAKESMI_MODE", "hang")
	wrapper := filepath.Join(tempDir(t), "wrapper")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\n\""+fakeSMI+"\" \"$@\"\necho wrapper done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := read(t, newReader(t, allGroups(), wrapper), 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "killed") || !strings.Contains(err.Error(), "--collection.timeout") {
		t.Fatalf("err = %v, want a timeout naming --collection.timeout", err)
	}
	pid, perr := strconv.Atoi(strings.Fields(runs(t, log)[0])[0])
	if perr != nil {
		t.Fatal(perr)
	}
	// Killed: gone, or a zombie waiting for its new parent to reap it.
	for range 100 {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the hung nvidia-smi (pid %d) outlived its read", pid)
}

func TestSlowNvidiaSMIWithinTheDeadline(t *testing.T) {
	fakeEnv(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "")
	t.Setenv("FAKESMI_MODE", "slow")
	t.Setenv("FAKESMI_DELAY", "300ms")
	if snap, err := read(t, newReader(t, allGroups()), 20*time.Second); err != nil || len(snap.Devices) != 2 {
		t.Fatalf("%v, %+v", err, snap)
	}
}

func TestNewNamesAMissingCommand(t *testing.T) {
	_, err := New(Options{Command: []string{"/nonexistent/ssh"}})
	if err == nil || !strings.Contains(err.Error(), "--nvidia-smi.command") {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("PATH", tempDir(t))
	t.Setenv("SystemRoot", tempDir(t))
	t.Setenv("ProgramFiles", tempDir(t))
	want := "nvidia-smi is not on the PATH"
	if runtime.GOOS == "windows" {
		want = "nvidia-smi.exe is neither on the PATH nor in"
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// On Windows nvidia-smi.exe is found where the driver installs it when it
// is not on the PATH.
func TestNvidiaSMIFoundInItsInstallLocation(t *testing.T) {
	if runtime.GOOS != "windows" {
		t.Skip("the install locations are Windows's")
	}
	fakeEnv(t, "help-query-gpu-r550.txt", "gpu-geforce.csv", "")
	programs := tempDir(t)
	dir := filepath.Join(programs, "NVIDIA Corporation", "NVSMI")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(fakeSMI)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi.exe"), exe, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", tempDir(t))
	t.Setenv("SystemRoot", tempDir(t))
	t.Setenv("ProgramFiles", programs)
	r, err := New(Options{Groups: allGroups()})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := read(t, r, 20*time.Second)
	if err != nil || len(snap.Devices) != 1 || snap.Devices[0].Info.Name != "NVIDIA GeForce RTX 4090" {
		t.Fatalf("%v, %+v", err, snap)
	}
}
