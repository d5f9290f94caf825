//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

const secretToken = "SECRET-TOKEN-123"

// startSecretProcess runs a real process whose arguments carry a secret,
// as `python3 train.py --api-key=...` would: a shell that stays (its
// command is not the last), in a process group of its own so its sleep is
// killed with it. It returns the PID and the executable's base name.
func startSecretProcess(t *testing.T) (pid int, exe string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300; :", "train.py", "--api-key="+secretToken)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	pid = cmd.Process.Pid
	real, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	testenv.WaitFor(t, 10*time.Second, "the shell's exec to complete", func() bool {
		target, _ := os.Readlink(filepath.Join(dir, "exe"))
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		return target == real && strings.Contains(string(cmdline), secretToken)
	})
	return pid, filepath.Base(real)
}

// TestCommandLinesArePrivateByDefault: a GPU process started with a secret
// in its arguments. By default no output shows the secret (the JSON API,
// the live page as Chromium renders it, /metrics with per-process labels,
// a textfile); the command is the executable's name. With
// --attribution.full-command-lines every one of them shows the whole line.
// `gpuwatch ps` always does, as ps(1) does.
func TestCommandLinesArePrivateByDefault(t *testing.T) {
	t.Parallel()
	pid, exe := startSecretProcess(t)
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: h100\nprocesses:\n  - {gpu: 0, pid: "+itoa(pid)+", used_memory_bytes: 1073741824, sm_utilization: 0.5}\n")
	common := []string{"--backend=sim", "--sim.config=" + cfg, "--path.procfs=/proc",
		"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=", "--slurm.jobs=false",
		"--collector.processes.pid-labels", "--log.level=warn"}

	b := newBrowser(t)
	for _, full := range []bool{false, true} {
		args := common
		if full {
			args = append(slices.Clone(common), "--attribution.full-command-lines")
		}
		name := "default"
		if full {
			name = "full-command-lines"
		}
		t.Run(name, func(t *testing.T) {
			base, _ := startGpuwatch(t, append(args, "--ui.interval=1s")...)
			outputs := map[string]string{}
			for _, path := range []string{"/metrics", "/api/v1/snapshot", "/api/v1/history", "/"} {
				outputs[path] = httpGet(t, base+path)
			}
			processes := httpGet(t, base+"/api/v1/processes")
			outputs["/api/v1/processes"] = processes

			var page string
			b.run(t,
				chromedp.Navigate(base+"/"),
				chromedp.WaitVisible(`#processes tbody tr`),
				visibleText(`#processes tbody`, &page),
			)
			outputs["the live page"] = page

			prom := filepath.Join(t.TempDir(), "gpu.prom")
			if out, code := runGpuwatch(t, append([]string{"textfile", "--output=" + prom}, args...)...); code != 0 {
				t.Fatalf("gpuwatch textfile: %s", out)
			}
			text, err := os.ReadFile(prom)
			if err != nil {
				t.Fatal(err)
			}
			outputs["textfile"] = string(text)

			var doc struct {
				Processes []struct {
					PID     int    `json:"pid"`
					Command string `json:"command"`
				} `json:"processes"`
			}
			if err := json.Unmarshal([]byte(processes), &doc); err != nil || len(doc.Processes) != 1 || doc.Processes[0].PID != pid {
				t.Fatalf("/api/v1/processes: %v\n%s", err, processes)
			}
			got := doc.Processes[0].Command
			fams := testenv.ParseMetrics(t, outputs["/metrics"])
			if full {
				want := "/bin/sh -c sleep 300; : train.py --api-key=" + secretToken
				if got != want {
					t.Errorf("API command %q, want %q", got, want)
				}
				if _, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"pid": itoa(pid), "command": want}); !ok {
					t.Errorf("no gpu_process_memory_used_bytes with command=%q", want)
				}
				for where, out := range outputs {
					if where != "/" && where != "/api/v1/snapshot" && where != "/api/v1/history" && !strings.Contains(out, secretToken) {
						t.Errorf("%s lacks the whole command line with --attribution.full-command-lines:\n%s", where, out)
					}
				}
				return
			}
			if got != exe {
				t.Errorf("API command %q, want the executable's name %q", got, exe)
			}
			if _, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"pid": itoa(pid), "command": exe}); !ok {
				t.Errorf("no gpu_process_memory_used_bytes with command=%q:\n%s", exe, outputs["/metrics"])
			}
			if !strings.Contains(page, exe) {
				t.Errorf("the live page does not name the command %q:\n%s", exe, page)
			}
			for where, out := range outputs {
				if strings.Contains(out, secretToken) || strings.Contains(out, "train.py") {
					t.Errorf("%s shows the process's arguments by default:\n%s", where, out)
				}
			}
		})
	}

	out, code := runGpuwatch(t, append([]string{"ps"}, common...)...)
	if code != 0 || !strings.Contains(out, "train.py --api-key="+secretToken) {
		t.Errorf("gpuwatch ps (exit %d) does not show the whole command line:\n%s", code, out)
	}
}
