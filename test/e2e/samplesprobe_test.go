//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// bench/device/samplesprobe, the device check that tells how a real
// driver answers nvmlDeviceGetProcessUtilization (bench/device/
// accounting.sh), run against the fake library: the simulator's driver
// answers in a known way, and the probe must tell it. One process's
// utilization alternates between 20 % and 80 % every second, so that
// "the newest sample" and "the mean since lastSeenTimeStamp" differ.
func TestSamplesProbeTellsHowTheDriverAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the probe for 8 s")
	}
	probe := buildSamplesProbe(t)
	var schedule strings.Builder
	for s := 1; s <= 30; s++ {
		schedule.WriteString("      - {at: " + strconv.Itoa(s) + "s, sm_utilization: " + map[bool]string{true: "0.8", false: "0.2"}[s%2 == 1] + "}\n")
	}
	config := func(samples string) string {
		return "profile: h100\nprocess_samples: " + samples + "\nprocesses:\n" +
			"  - {gpu: 0, pid: 4242, used_memory_bytes: 1073741824, sm_utilization: 0.3}\n" +
			"  - gpu: 0\n    pid: 4343\n    used_memory_bytes: 1073741824\n    sm_utilization: 0.2\n    schedule:\n" + schedule.String()
	}
	for _, tc := range []struct {
		samples string
		perRead string // the most samples one read gives a process
	}{
		{"per_process", "at most 1 in the incremental reads, 1 in the depth reads"},
		{"every_period", "in the depth reads"},
	} {
		t.Run(tc.samples, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			cmd := exec.Command(probe, "-out", out, "-duration", "8s", "-poll", "50ms", "-depths", "1s,2s,3s", "-depth-every", "500ms")
			cmd.Env = fakeEnv(t, "R580", config(tc.samples))
			got, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("samplesprobe: %v\n%s", err, got)
			}
			summary := string(got)
			written, err := os.ReadFile(filepath.Join(out, "summary.txt"))
			if err != nil || string(written) != summary {
				t.Fatalf("summary.txt differs from what was printed (%v)", err)
			}
			for _, f := range []string{"incremental.csv", "depth.csv"} {
				data, err := os.ReadFile(filepath.Join(out, f))
				if err != nil || !strings.Contains(string(data), ",4343,") {
					t.Errorf("%s has no sample of pid 4343 (%v)", f, err)
				}
			}
			if !strings.Contains(summary, "processes sampled: 2") {
				t.Errorf("want both processes sampled:\n%s", summary)
			}
			// The simulator samples every 1/6 s.
			if !strings.Contains(summary, "median gap 167 ms") {
				t.Errorf("want the simulator's 1/6 s sample period:\n%s", summary)
			}
			if !strings.Contains(summary, tc.perRead) {
				t.Errorf("want %q:\n%s", tc.perRead, summary)
			}
			if tc.samples == "every_period" {
				if strings.Contains(summary, "1 in the depth reads") {
					t.Errorf("a driver giving every sample reads as one per process:\n%s", summary)
				}
				return
			}
			// One sample per process, the mean of the periods since
			// lastSeenTimeStamp: for 2 s windows over a load that changes
			// every second, the mean per period fits and the newest does
			// not. (A poll late past a period leaves one sample for two in
			// the history, so the fit is not exact on a busy machine.)
			newest, perPeriod := windowErrors(t, summary, "2s")
			if newest < 8 || perPeriod > newest/3 {
				t.Errorf("2 s windows: newest's error %.2f, mean per period's %.2f; want the mean per period to fit (under a third of the newest's) and the newest not (8 or more):\n%s", newest, perPeriod, summary)
			}
		})
	}
}

// A process that ends while probed: the probe sees it leave the process
// list and asks, at once and 1 s and 3 s later, for the samples from a
// second before its end. The simulator's driver answers for it while its
// last periods are in the buffer asked for, as the summary must say; a
// process that runs throughout is no ending.
func TestSamplesProbeTellsWhetherEndedProcessesAreAnswered(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: builds and runs the probe for 6 s")
	}
	probe := buildSamplesProbe(t)
	cmd := exec.Command(probe, "-out", t.TempDir(), "-duration", "6s", "-poll", "50ms", "-depths", "1s", "-depth-every", "1s")
	cmd.Env = fakeEnv(t, "R580", "profile: h100\nprocesses:\n"+
		"  - {gpu: 0, pid: 4242, used_memory_bytes: 1073741824, sm_utilization: 0.3}\n"+
		"  - {gpu: 0, pid: 4545, used_memory_bytes: 1073741824, sm_utilization: 0.6, end: 2s}\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("samplesprobe: %v\n%s", err, out)
	}
	ended := regexp.MustCompile(`(?m)^  pid (\d+), last listed at \+[0-9.]+ s: after 0s answered \(SM (\d+) %\); after 1s answered \(SM (\d+) %\); after 3s answered \(SM (\d+) %\);$`).FindAllStringSubmatch(string(out), -1)
	if len(ended) != 1 || ended[0][1] != "4545" {
		t.Fatalf("want pid 4545 (only) ended and answered at each check:\n%s", out)
	}
	// Asked from a second before its end, the mean falls as the window
	// grows past it: busy the first second of each window, idle after.
	first, _ := strconv.Atoi(ended[0][2])
	last, _ := strconv.Atoi(ended[0][4])
	if first < 50 || last >= first {
		t.Errorf("SM %d %% at once and %d %% 3 s later; want about 60 %%, then less:\n%s", first, last, out)
	}
}

// A driver that refuses the call (per-process utilization unsupported)
// leaves a summary that says so, and the probe exits 0: on a lent GPU a
// refused read must not cost the run.
func TestSamplesProbeReportsRefusedReads(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the probe")
	}
	probe := buildSamplesProbe(t)
	cmd := exec.Command(probe, "-out", t.TempDir(), "-duration", "1s", "-depths", "1s", "-depth-every", "500ms")
	cmd.Env = fakeEnv(t, "R580", "profile: h100\nprocesses:\n  - {gpu: 0, pid: 4242, used_memory_bytes: 1073741824, sm_utilization: 0.3}\n"+
		"faults:\n  - {gpu: 0, unsupported: [process_utilization]}\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("samplesprobe: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^  \d+ × nvmlDeviceGetProcessUtilization: ERROR_NOT_SUPPORTED$`).Match(out) || !strings.Contains(string(out), "processes sampled: 0") {
		t.Errorf("want the refused reads counted and no process sampled:\n%s", out)
	}
}

func buildSamplesProbe(t *testing.T) string {
	t.Helper()
	probe := filepath.Join(t.TempDir(), "samplesprobe")
	build := exec.Command("go", "build", "-ldflags=-extldflags=-Wl,-z,lazy", "-o", probe, "./bench/device/samplesprobe")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	return probe
}

// windowErrors reads the windows table's row for depth: the newest
// sample's and the per-period mean's mean absolute errors.
func windowErrors(t *testing.T, summary, depth string) (newest, perPeriod float64) {
	t.Helper()
	row := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(depth) + `\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+\d+%$`).FindStringSubmatch(summary)
	if row == nil {
		t.Fatalf("no windows row for %s:\n%s", depth, summary)
	}
	if n, _ := strconv.Atoi(row[1]); n < 4 {
		t.Fatalf("windows row for %s has %d answers; want several:\n%s", depth, n, summary)
	}
	newest, _ = strconv.ParseFloat(row[2], 64)
	perPeriod, _ = strconv.ParseFloat(row[4], 64)
	return newest, perPeriod
}
