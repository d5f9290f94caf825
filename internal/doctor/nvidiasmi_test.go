//go:build cgo

package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// smiRow prints what nvidia-smi would for d, from gpuwatch's own reading
// (so the two agree), with overrides by query name.
func smiRow(d *snapshot.Device, override map[string]string) string {
	cols := []string{d.UUID}
	for _, f := range smiFields {
		v, ok := f.ours(d)
		s := "[N/A]"
		if ok {
			s = fmt.Sprintf("%.2f", v)
			if f.query == "pstate" {
				s = fmt.Sprintf("P%d", int(v))
			}
		}
		if o, found := override[f.query]; found {
			s = o
		}
		cols = append(cols, s)
	}
	return strings.Join(cols, ", ")
}

// fakeNvidiaSMI writes an executable that prints out, and checks that it is
// asked for the fields the doctor compares.
func fakeNvidiaSMI(t *testing.T, out string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(data, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "nvidia-smi")
	body := "#!/bin/sh\ncase \"$1\" in --query-gpu=uuid,temperature.gpu,*) ;; *) echo \"unexpected $1\" >&2; exit 2;; esac\n" +
		"[ \"$2\" = --format=csv,noheader,nounits ] || exit 3\nexec cat " + data + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestNvidiaSMIComparison(t *testing.T) {
	env := baseEnv(t)
	env.Snapshot = simSnapshot(t, "dgx-h100")
	var agree, disagree []string
	for i := range env.Snapshot.Devices {
		d := &env.Snapshot.Devices[i]
		agree = append(agree, smiRow(d, map[string]string{"utilization.memory": "[Not Supported]"}))
		o := map[string]string{}
		if i == 2 {
			got, _ := d.Temperature.GPU.Get()
			o["temperature.gpu"] = fmt.Sprint(got + 9)
		}
		disagree = append(disagree, smiRow(d, o))
	}

	env.NvidiaSMI = fakeNvidiaSMI(t, strings.Join(agree, "\n")+"\n")
	r := Run(env)
	if !r.Healthy {
		t.Errorf("agreeing nvidia-smi: %+v", r.Results)
	}
	res := find(t, r, "nvidia-smi GPU 0")
	if res.Status != OK || !strings.Contains(res.Found, "temperature.gpu") || !strings.Contains(res.Found, "power.draw") ||
		strings.Contains(res.Found, "utilization.memory") {
		t.Errorf("GPU 0 = %+v", res)
	}

	env.NvidiaSMI = fakeNvidiaSMI(t, strings.Join(disagree, "\n")+"\n")
	r = Run(env)
	res = find(t, r, "nvidia-smi GPU 2")
	if res.Status != Fail || !res.Needed || !strings.Contains(res.Found, "temperature.gpu gpuwatch") || !strings.Contains(res.Found, "(tolerance 3 °C)") {
		t.Errorf("GPU 2 = %+v", res)
	}
	if find(t, r, "nvidia-smi GPU 1").Status != OK || r.Healthy {
		t.Errorf("one disagreement: %+v", r.Results)
	}

	// A GPU nvidia-smi does not list, and an nvidia-smi that fails.
	env.NvidiaSMI = fakeNvidiaSMI(t, strings.Join(agree[1:], "\n")+"\n")
	if res := find(t, Run(env), "nvidia-smi GPU 0"); res.Status != Fail || !strings.Contains(res.Found, "does not list") {
		t.Errorf("unlisted GPU = %+v", res)
	}
	env.NvidiaSMI = filepath.Join(t.TempDir(), "nonexistent")
	if res := find(t, Run(env), "nvidia-smi"); res.Status != Fail || res.Needed {
		t.Errorf("failing nvidia-smi = %+v", res)
	}
}

// smiScript writes an executable nvidia-smi that runs body (sh) and
// returns its path. agreeingSMI is output that agrees with env's snapshot.
func smiScript(t *testing.T, body string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func agreeingSMI(t *testing.T, env Env) string {
	t.Helper()
	var rows []string
	for i := range env.Snapshot.Devices {
		rows = append(rows, smiRow(&env.Snapshot.Devices[i], nil))
	}
	data := filepath.Join(t.TempDir(), "out.csv")
	if err := os.WriteFile(data, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSlowNvidiaSMIIsHealthy: an nvidia-smi that takes 1.3 s (an 8-GPU
// node without persistence mode) is compared, not called a driver in
// trouble, although the doctor's socket timeout is 1 s.
func TestSlowNvidiaSMIIsHealthy(t *testing.T) {
	env := baseEnv(t)
	env.Snapshot = simSnapshot(t, "dgx-h100")
	env.Timeout = time.Second
	env.NvidiaSMI = smiScript(t, "sleep 1.3; exec cat "+agreeingSMI(t, env))
	r := Run(env)
	for i := range env.Snapshot.Devices {
		if res := find(t, r, fmt.Sprintf("nvidia-smi GPU %d", i)); res.Status != OK {
			t.Errorf("GPU %d with a slow nvidia-smi: %+v", i, res)
		}
	}
}

// deadOrGone says whether pid has exited: gone, or a zombie nobody reaped
// yet (in a container without an init, orphans may stay zombies).
func deadOrGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// pidsIn reads the PIDs a script wrote, one a line.
func pidsIn(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

func waitDead(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		testenv.Eventually(t, 10*time.Second, func() error {
			if !deadOrGone(pid) {
				return fmt.Errorf("pid %d still runs", pid)
			}
			return nil
		})
	}
}

// TestHungNvidiaSMITimesOut: an nvidia-smi that never answers is given up
// on after --doctor.nvidia-smi-timeout, which the result names, and it is
// killed with the child it started.
func TestHungNvidiaSMITimesOut(t *testing.T) {
	env := baseEnv(t)
	pids := filepath.Join(t.TempDir(), "pids")
	env.NvidiaSMI = smiScript(t, "sleep 300 & echo $! > "+pids+"; echo $$ >> "+pids+"; sleep 300")
	env.NvidiaSMITimeout = 2 * time.Second
	start := time.Now()
	res := find(t, Run(env), "nvidia-smi")
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the doctor took %v with a 2s nvidia-smi timeout", took)
	}
	if res.Status != Fail || res.Needed || res.Found != "no answer within 2s" ||
		strings.Contains(res.Fix, "is in trouble") || !strings.Contains(res.Fix, "--doctor.nvidia-smi-timeout") {
		t.Errorf("hung nvidia-smi = %+v", res)
	}
	waitDead(t, pidsIn(t, pids))
}

// TestNvidiaSMIChildrenDoNotSurvive: a wrapper that answers and exits
// leaves no child behind.
func TestNvidiaSMIChildrenDoNotSurvive(t *testing.T) {
	env := baseEnv(t)
	pids := filepath.Join(t.TempDir(), "pids")
	env.NvidiaSMI = smiScript(t, "sleep 300 >/dev/null 2>&1 & echo $! > "+pids+"\nexec cat "+agreeingSMI(t, env))
	if res := find(t, Run(env), "nvidia-smi GPU 0"); res.Status != OK {
		t.Errorf("GPU 0 = %+v", res)
	}
	waitDead(t, pidsIn(t, pids))
}

// TestNvidiaSMIOutputIsCapped: 200 MB of output is cut off at the cap and
// is a failure that says so; the doctor does not hold it in memory.
func TestNvidiaSMIOutputIsCapped(t *testing.T) {
	env := baseEnv(t)
	env.NvidiaSMI = smiScript(t, "yes 'GPU-0, 1, 2, 3' | head -c 200000000")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := find(t, Run(env), "nvidia-smi")
	runtime.ReadMemStats(&after)
	if res.Status != Fail || res.Found != fmt.Sprintf("printed more than %d bytes; stopped reading", maxNvidiaSMIOutput) {
		t.Errorf("huge nvidia-smi output = %+v", res)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("the doctor allocated %d MiB reading nvidia-smi, want under 64 MiB", alloc>>20)
	}
}
