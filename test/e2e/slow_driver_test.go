//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// A driver in trouble, through the unmodified --backend=nvml
// path against the fake libnvidia-ml.so.1 (internal/fakedriver/fakenvml) taught
// each behaviour by its simulator config.

// doctorWithEnv runs gpuwatch doctor -o json with env and decodes its report.
func doctorWithEnv(t *testing.T, env []string, args ...string) (doctorReport, string, int) {
	t.Helper()
	out, code := runWithEnv(t, env, append([]string{"doctor", "-o", "json", "--backend=nvml"}, args...)...)
	var r doctorReport
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	return r, out, code
}

// TestSickDriverDoctor: for a library that does not match the loaded
// kernel module, doctor says to reload the module or reboot, and does not
// claim that attribution or Slurm were turned off; a driver version with
// control characters is printed without them.
func TestSickDriverDoctor(t *testing.T) {
	t.Run("rm_version_mismatch", func(t *testing.T) {
		env := fakeEnv(t, "R580", "profile: h100\ninit_error: lib_rm_version_mismatch\n")
		r, out, code := doctorWithEnv(t, env, "--path.procfs=/proc")
		if code == 0 || r.Healthy {
			t.Errorf("doctor exit %d, healthy %v on a failed driver:\n%s", code, r.Healthy, out)
		}
		st, why := r.status("driver")
		if st != "fail" || !strings.Contains(strings.ToLower(why), "rm_version_mismatch") || !strings.Contains(why, "reload") || !strings.Contains(why, "reboot") {
			t.Errorf("driver: %s %s", st, why)
		}
		if strings.Contains(why, "install the NVIDIA driver") || strings.Contains(why, "--backend=sim") {
			t.Errorf("driver advice names the wrong fix: %s", why)
		}
		if strings.Contains(out, "--no-attribution") || strings.Contains(out, "Slurm job attribution is off") {
			t.Errorf("doctor claims attribution or Slurm were turned off:\n%s", out)
		}
	})
	t.Run("slow_driver", func(t *testing.T) {
		// Every call of GPU 0 answers 250ms late: with the temperature
		// collector alone a read makes about six calls, longer than the
		// 1s timeout and well within the three timeouts doctor waits.
		env := fakeEnv(t, "R580", "profile: h100\nfaults:\n  - {gpu: 0, slow_calls: 250ms}\n")
		args := append([]string{"doctor", "--backend=nvml", "--collection.timeout=1s"}, isolated(t)...)
		for _, g := range []string{"info", "utilization", "memory", "fan", "clocks", "clock_events", "power", "pcie", "ecc", "nvlink", "xid", "gpm", "mig", "processes"} {
			args = append(args, "--no-collector."+g)
		}
		text, _ := runWithEnv(t, env, args...)
		if !strings.Contains(text, "NVML calls are slow (") || !strings.Contains(text, "raise --collection.timeout; check the driver's health") {
			t.Errorf("doctor does not name the slow driver:\n%s", text)
		}
		if strings.Contains(text, "lost GPU") || strings.Contains(text, "down:") {
			t.Errorf("doctor calls a slow GPU down or lost:\n%s", text)
		}
	})
	t.Run("hostile_version", func(t *testing.T) {
		env := fakeEnv(t, "R580", "profile: h100\npin_time: 1h\ndriver_version: \"580.65.06\\n\\e[2J✘ fake\\r\"\n")
		text, _ := runWithEnv(t, env, append([]string{"doctor", "--backend=nvml"}, isolated(t)...)...)
		var line string
		for l := range strings.SplitSeq(text, "\n") {
			if strings.Contains(l, "driver ") && strings.Contains(l, "library") {
				line = l
			}
		}
		if line == "" || !strings.Contains(line, "580.65.06?") {
			t.Fatalf("no driver line with the version:\n%q", text)
		}
		if strings.ContainsAny(text, "\x1b\r") || strings.Contains(text, "\n? fake") || strings.Contains(text, "\n✘ fake") {
			t.Errorf("doctor printed the driver's control characters:\n%q", text)
		}
	})
}

// slowDriverCase is one driver behaviour of the matrix, run through serve, ps
// and textfile against the fake library.
type slowDriverCase struct {
	name string
	// config is the simulator config (the profile, the owned processes
	// and the faults).
	config string
	// timeout is --collection.timeout.
	timeout time.Duration
	// healthy are the GPUs that must be up, with their processes' owners,
	// in every output from the first.
	healthy []int
	// late are the GPUs whose reads complete after the timeout: the
	// commands that read once (textfile, ps) wait for their late
	// reading and show them up, with their processes' owners.
	late []int
	// page checks what is particular to the case on a served page;
	// first says whether it is the first scrape.
	page func(t *testing.T, fams map[string]*dto.MetricFamily, first bool)
	// eventually, when set, must come true on a later page (within 30s).
	eventually func(fams map[string]*dto.MetricFamily) error
}

// slowOwnedProcesses puts the attribution fixture's processes (owners alice,
// alice, carol) on GPUs 0-2 of a dgx-h100, and pid 1002 (alice) on GPU 3.
const slowOwnedProcesses = "profile: dgx-h100\nprocesses:\n" +
	"  - {gpu: 0, pid: 1001, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n" +
	"  - {gpu: 1, pid: 1010, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n" +
	"  - {gpu: 2, pid: 1025, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n" +
	"  - {gpu: 3, pid: 1002, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n"

// slowOwnerOf is the user each fixture process belongs to.
var slowOwnerOf = map[int]struct{ pid, user string }{0: {"1001", "alice"}, 1: {"1010", "alice"}, 2: {"1025", "carol"}, 3: {"1002", "alice"}}

func slowDriverArgs(c slowDriverCase) []string {
	return []string{"--backend=nvml", "--collection.timeout=" + c.timeout.String(),
		"--path.procfs=" + fixtureProc, "--path.rootfs=" + fixtureRootFS,
		"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=", "--slurm.jobs=false"}
}

// checkHealthyOwned: each healthy GPU is up, and its fixture process is
// attributed to its user.
func checkHealthyOwned(t *testing.T, fams map[string]*dto.MetricFamily, healthy []int) {
	t.Helper()
	for _, gpu := range healthy {
		g := strconv.Itoa(gpu)
		if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": g}); !ok || v != 1 {
			t.Errorf("healthy GPU %d: gpu_up %v (present %v)", gpu, v, ok)
		}
		if o, has := slowOwnerOf[gpu]; has {
			if _, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": g, "user": o.user}); !ok {
				t.Errorf("healthy GPU %d: no gpu_process_memory_used_bytes with user %q (its owner was stripped)", gpu, o.user)
			}
		}
	}
}

func checkExposition(t *testing.T, promtool, page string) {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestSlowAndBogusDriverMatrix runs each sick-driver behaviour through
// gpuwatch serve, ps and textfile on the fake libnvidia-ml.so.1 (the real
// cgo path): no crash, bounded time, an exposition promtool accepts, and
// the healthy GPUs up with their owners.
func TestSlowAndBogusDriverMatrix(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	gpu := func(i int) map[string]string { return map[string]string{"gpu": strconv.Itoa(i)} }
	cases := []slowDriverCase{{
		// One slow GPU: a read of GPU 3 makes over a hundred calls of
		// 30ms, longer than the 3s timeout; the others stay up on time.
		name:    "slow_gpu",
		config:  slowOwnedProcesses + "faults:\n  - {gpu: 3, slow_calls: 30ms}\n",
		timeout: 3 * time.Second,
		healthy: []int{0, 1, 2, 4, 5, 6, 7},
		late:    []int{3},
		eventually: func(fams map[string]*dto.MetricFamily) error {
			if v, _ := testenv.Sample(fams, "gpu_up", gpu(3)); v != 1 {
				return errors.New("the slow GPU 3 is still down")
			}
			if age, ok := testenv.Sample(fams, "gpu_reading_age_seconds", gpu(3)); !ok || age < 3 {
				return fmt.Errorf("GPU 3's reading age %v (present %v), want its late reading, over 3s old", age, ok)
			}
			if _, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": "3", "user": "alice"}); !ok {
				return errors.New("the slow GPU's late reading has no owned process")
			}
			return nil
		},
	}, {
		// A slow driver: every GPU slow; they must come up, and /readyz
		// with them.
		name: "slow_driver",
		config: "profile: h100\nprocesses:\n  - {gpu: 0, pid: 1001, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n" +
			"faults:\n  - {gpu: 0, slow_calls: 30ms}\n",
		timeout: 3 * time.Second,
		late:    []int{0},
		eventually: func(fams map[string]*dto.MetricFamily) error {
			if v, _ := testenv.Sample(fams, "gpu_up", gpu(0)); v != 1 {
				return errors.New("the only GPU, slow, is still down")
			}
			return nil
		},
	}, {
		// Sentinels and impossible values on GPU 1.
		name:    "bogus_values",
		config:  slowOwnedProcesses + "faults:\n  - {gpu: 1, bogus_values: [temperature, power, clocks, utilization, memory, pstate, process_memory]}\n",
		timeout: 3 * time.Second,
		healthy: []int{0, 2, 3},
		page: func(t *testing.T, fams map[string]*dto.MetricFamily, _ bool) {
			for _, m := range []string{"gpu_temperature_celsius", "gpu_power_usage_watts", "gpu_utilization_ratio", "gpu_memory_used_bytes", "gpu_memory_free_bytes", "gpu_performance_state"} {
				if v, ok := testenv.Sample(fams, m, gpu(1)); ok {
					t.Errorf("%s{gpu=1} = %g exported from a sentinel or impossible value", m, v)
				}
				if _, ok := testenv.Sample(fams, m, gpu(0)); !ok {
					t.Errorf("%s{gpu=0} missing on the healthy GPU", m)
				}
			}
			if v, ok := testenv.Sample(fams, "gpu_clock_hertz", map[string]string{"gpu": "1", "clock": "sm"}); ok {
				t.Errorf("gpu_clock_hertz{gpu=1,clock=sm} = %g", v)
			}
			if v, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", gpu(1)); ok {
				t.Errorf("gpu_process_memory_used_bytes{gpu=1} = %g from 2^63 bytes a process", v)
			}
			for _, field := range []string{"temperature", "power", "clock", "utilization", "memory", "performance_state", "process_memory"} {
				if v, _ := testenv.Sample(fams, "gpuwatch_readings_dropped_total", map[string]string{"field": field}); v < 1 {
					t.Errorf("gpuwatch_readings_dropped_total{field=%q} = %v, want counted", field, v)
				}
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The cases mostly wait on the slow library's sleeps; each has
			// its own processes, ports and files, and its time bounds have
			// margins of seconds.
			t.Parallel()
			env := fakeEnv(t, "R580", c.config)
			budget := c.timeout + time.Second /* attribution */ + 4*time.Second /* a loaded machine */

			t.Run("serve", func(t *testing.T) {
				base, p, up := startWithEnv(t, env, slowDriverArgs(c)...)
				if !up {
					t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
				}
				scrape := func() (string, map[string]*dto.MetricFamily) {
					t.Helper()
					start := time.Now()
					page := httpGet(t, base+"/metrics")
					if took := time.Since(start); took > budget {
						t.Errorf("a scrape took %v, over the %v budget", took, budget)
					}
					return page, testenv.ParseMetrics(t, page)
				}
				page, fams := scrape()
				checkExposition(t, promtool, page)
				checkHealthyOwned(t, fams, c.healthy)
				if c.page != nil {
					c.page(t, fams, true)
				}
				if c.eventually != nil {
					var last error
					testenv.WaitFor(t, 30*time.Second, "the case's late state", func() bool {
						_, fams := scrape()
						checkHealthyOwned(t, fams, c.healthy)
						last = c.eventually(fams)
						return last == nil
					})
					if _, err := httpGetNoFail(base + "/readyz"); err != nil {
						t.Errorf("/readyz: %v", err)
					}
				}
				page, fams = scrape()
				checkExposition(t, promtool, page)
				if c.page != nil {
					c.page(t, fams, false)
				}
				if p.Exited() {
					t.Fatalf("gpuwatch died:\n%s", p.Output.String())
				}
			})

			t.Run("textfile", func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "gpu.prom")
				start := time.Now()
				output, code := runWithEnv(t, env, append([]string{"textfile", "--output=" + out}, slowDriverArgs(c)...)...)
				if code != 0 {
					t.Fatalf("textfile exited %d:\n%s", code, output)
				}
				// A start that waits a GPM window and at most one timeout for
				// the GPUs' start-up calls, then at most three timeouts for
				// a late GPU's reading.
				if took := time.Since(start); took > 5*budget {
					t.Errorf("textfile took %v", took)
				}
				data, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				checkExposition(t, promtool, string(data))
				fams := testenv.ParseMetrics(t, string(data))
				checkHealthyOwned(t, fams, append(slices.Clone(c.healthy), c.late...))
				if c.page != nil {
					c.page(t, fams, true)
				}
			})

			t.Run("ps", func(t *testing.T) {
				start := time.Now()
				output, code := runWithEnv(t, env, append([]string{"ps", "--output=json"}, slowDriverArgs(c)...)...)
				if code != 0 {
					t.Fatalf("ps exited %d:\n%s", code, output)
				}
				if took := time.Since(start); took > 5*budget {
					t.Errorf("ps took %v", took)
				}
				var doc struct {
					Processes []struct {
						GPU  int    `json:"gpu"`
						PID  int    `json:"pid"`
						User string `json:"user"`
					} `json:"processes"`
				}
				if err := json.Unmarshal([]byte(output), &doc); err != nil {
					t.Fatalf("ps JSON: %v\n%s", err, output)
				}
				for _, gpu := range append(slices.Clone(c.healthy), c.late...) {
					o, has := slowOwnerOf[gpu]
					if !has {
						continue
					}
					found := false
					for _, p := range doc.Processes {
						if p.GPU == gpu && strconv.Itoa(p.PID) == o.pid {
							found = true
							if p.User != o.user {
								t.Errorf("ps: pid %s on healthy GPU %d has user %q, want %q", o.pid, gpu, p.User, o.user)
							}
						}
					}
					if !found {
						t.Errorf("ps does not list pid %s of healthy GPU %d:\n%s", o.pid, gpu, output)
					}
				}
			})
		})
	}
}

// TestSickDriverEnergyReset: the driver's energy counter starts again (a
// driver reload, 4s after start); gpu_energy_joules_total never goes down.
func TestSickDriverEnergyReset(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, "R580", "profile: h100\nfaults:\n  - {gpu: 0, energy_reset_at: 4s}\n")
	base, p, up := startWithEnv(t, env, append([]string{"--backend=nvml"}, isolated(t)...)...)
	if !up {
		t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
	}
	energy := func() float64 {
		t.Helper()
		v, ok := testenv.Sample(testenv.ParseMetrics(t, httpGet(t, base+"/metrics")), "gpu_energy_joules_total", map[string]string{"gpu": "0"})
		if !ok {
			t.Fatal("no gpu_energy_joules_total")
		}
		return v
	}
	last, start := energy(), time.Now()
	for time.Since(start) < 8*time.Second {
		v := energy()
		if v < last {
			t.Fatalf("gpu_energy_joules_total went down across the driver's reset: %v J after %v J", v, last)
		}
		last = v
		time.Sleep(200 * time.Millisecond)
	}
}
