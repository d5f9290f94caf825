//go:build linux

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Sick drivers and correlated failures, through the unmodified
// NVML backend (--backend=nvml: dlopen, cgo) against the fake
// libnvidia-ml.so.1: a process list that never fits, a retired-page
// count that never fits, process lists not supported, a GPU whose very
// handle is lost, XIDs at the instant another GPU falls off the bus. Each case runs through serve, ps and textfile and
// asserts: no crash, bounded time, an exposition promtool accepts, and the
// healthy GPUs up with their owners.

// sickProcesses puts fixture PIDs (internal/attribution/testdata/proc) on
// GPUs 0-2, so that each healthy GPU's owner is known.
const sickProcesses = `processes:
  - {gpu: 0, pid: 1001, used_memory_bytes: 1073741824, sm_utilization: 0.5}
  - {gpu: 1, pid: 1010, used_memory_bytes: 1073741824, sm_utilization: 0.5}
  - {gpu: 2, pid: 1025, used_memory_bytes: 1073741824, sm_utilization: 0.5}
`

// sickOwners are the owners of the healthy GPUs' processes.
var sickOwners = map[int]string{0: "alice", 1: "alice", 2: "carol"}

// sickTimeout is --collection.timeout; a scrape may take it plus margin.
const (
	sickTimeout = 2 * time.Second
	sickMargin  = 3 * time.Second
	// sickCommandLimit bounds a one-shot command (ps, textfile, doctor):
	// start-up, one GPM window and one read, on a busy machine.
	sickCommandLimit = 30 * time.Second
)

type sickCase struct {
	name     string
	variants []string // fake library variants to run it through
	// profile is the simulated host (default dgx-h100), processes its
	// processes: list (default sickProcesses).
	profile, processes string
	faults             string // the faults: list
	// healthy are the GPUs that must be up with their owners.
	healthy []int
	// serve waits for the case's outcome on a live server (the clock
	// runs) and checks it; nil when there is nothing to wait for.
	serve func(fams map[string]*dto.MetricFamily) error
	// pinAt pins the clock for the one-shot commands after every fault
	// has happened.
	pinAt string
	// oneShot checks a one-shot exposition (textfile).
	oneShot func(fams map[string]*dto.MetricFamily) error
	// psStderr is what `gpuwatch ps` must say on stderr (and exit 1);
	// "" means it exits 0.
	psStderr string
	// doctorProcessList is the process list check doctor must not pass.
	doctorFails bool
}

func TestSickDriverMatrix(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	processesAbsentOnGPU1 := func(fams map[string]*dto.MetricFamily) error {
		if v, ok := testenv.Sample(fams, "gpu_processes", map[string]string{"gpu": "1"}); ok {
			return fmt.Errorf("gpu_processes{gpu=1} = %v; its process list could not be read, so it must be absent", v)
		}
		if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": "1"}); !ok || v != 1 {
			return fmt.Errorf("gpu_up{gpu=1} = %v (present %v): the rest of the GPU must still be served", v, ok)
		}
		if _, ok := testenv.Sample(fams, "gpu_temperature_celsius", map[string]string{"gpu": "1"}); !ok {
			return errors.New("gpu_temperature_celsius{gpu=1} absent: the rest of the GPU must still be served")
		}
		if v, ok := testenv.Sample(fams, "gpu_processes", map[string]string{"gpu": "0"}); !ok || v != 1 {
			return fmt.Errorf("gpu_processes{gpu=0} = %v (present %v), want 1", v, ok)
		}
		return nil
	}
	// retiredPagesUnknownOnGPU0: the v100's count of retired pages never
	// fit; the rest of its ECC readings and of the GPU are served.
	retiredPagesUnknownOnGPU0 := func(fams map[string]*dto.MetricFamily) error {
		for _, cause := range []string{"multiple_single_bit", "double_bit"} {
			if v, ok := testenv.Sample(fams, "gpu_retired_pages", map[string]string{"gpu": "0", "cause": cause}); ok {
				return fmt.Errorf("gpu_retired_pages{gpu=0,cause=%s} = %v; the driver never let the count fit, so it must be absent", cause, v)
			}
		}
		for _, name := range []string{"gpu_retired_pages_pending", "gpu_temperature_celsius", "gpu_power_usage_watts"} {
			if _, ok := testenv.Sample(fams, name, map[string]string{"gpu": "0"}); !ok {
				return fmt.Errorf("%s{gpu=0} absent: the rest of the GPU must still be served", name)
			}
		}
		if _, ok := testenv.Sample(fams, "gpu_ecc_errors_total", map[string]string{"gpu": "0", "type": "corrected", "counter": "volatile"}); !ok {
			return errors.New("gpu_ecc_errors_total{gpu=0} absent: the rest of the GPU's ECC readings must still be served")
		}
		if v, ok := testenv.Sample(fams, "gpuwatch_collector_success", map[string]string{"collector": "ecc"}); !ok || v != 0 {
			return fmt.Errorf("gpuwatch_collector_success{collector=ecc} = %v (present %v), want 0", v, ok)
		}
		if v, ok := testenv.Sample(fams, "gpuwatch_collector_success", map[string]string{"collector": "processes"}); !ok || v != 1 {
			return fmt.Errorf("gpuwatch_collector_success{collector=processes} = %v (present %v), want 1", v, ok)
		}
		return nil
	}
	// v100Processes: the v100 profile has one GPU.
	const v100Processes = "processes:\n  - {gpu: 0, pid: 1001, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n"
	var uuid1 string // GPU 1's UUID as first served, for the lost-handle case
	cases := []sickCase{
		{
			name:     "process list doubling",
			variants: []string{"R580", "R470"},
			faults:   "  - {gpu: 1, process_list_size: doubling}\n",
			healthy:  []int{0, 2},
			serve:    processesAbsentOnGPU1, oneShot: processesAbsentOnGPU1,
			psStderr:    "GPU 1: its process list could not be read (insufficient_size); its processes are unknown",
			doctorFails: true,
		},
		{
			name:     "process list one more",
			variants: []string{"R580"},
			faults:   "  - {gpu: 1, process_list_size: one_more}\n",
			healthy:  []int{0, 2},
			serve:    processesAbsentOnGPU1, oneShot: processesAbsentOnGPU1,
			psStderr:    "GPU 1: its process list could not be read (insufficient_size); its processes are unknown",
			doctorFails: true,
		},
		{
			// Page retirement is Volta's (Ampere and later remap rows):
			// the v100 profile, whose one GPU is the sick one.
			name:      "retired pages doubling",
			variants:  []string{"R580", "R470"},
			profile:   "v100",
			processes: v100Processes,
			faults:    "  - {gpu: 0, retired_pages_size: doubling}\n",
			healthy:   []int{0},
			serve:     retiredPagesUnknownOnGPU0, oneShot: retiredPagesUnknownOnGPU0,
		},
		{
			name:      "retired pages one more",
			variants:  []string{"R580"},
			profile:   "v100",
			processes: v100Processes,
			faults:    "  - {gpu: 0, retired_pages_size: one_more}\n",
			healthy:   []int{0},
			serve:     retiredPagesUnknownOnGPU0, oneShot: retiredPagesUnknownOnGPU0,
		},
		{
			name:     "process lists not supported",
			variants: []string{"R580"},
			faults:   "  - {gpu: 1, unsupported: [processes]}\n",
			healthy:  []int{0, 2},
			serve:    processesAbsentOnGPU1, oneShot: processesAbsentOnGPU1,
			psStderr:    "GPU 1: the driver does not list its processes (not_supported); its processes are unknown",
			doctorFails: true,
		},
		{
			// nvml.h: the handle call answers GPU_IS_LOST for a GPU that
			// fell off the bus. Its UUID and its XID 79 stay.
			name:     "handle lost after XID 79",
			variants: []string{"R580"},
			faults:   "  - {gpu: 1, xid: 79, at: 6s, lost_after: 7s, lost_handle: true}\n",
			healthy:  []int{0, 2},
			serve: func(fams map[string]*dto.MetricFamily) error {
				if uuid1 == "" {
					return errors.New("gpu 1's uuid was not seen before the loss")
				}
				if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": "1", "uuid": uuid1}); !ok || v != 0 {
					return fmt.Errorf("gpu_up{gpu=1,uuid=%s} = %v (present %v), want 0: down, with its last known uuid", uuid1, v, ok)
				}
				if v, ok := testenv.Sample(fams, "gpu_xid_errors_total", map[string]string{"gpu": "1", "uuid": uuid1, "xid": "79"}); !ok || v != 1 {
					return fmt.Errorf("gpu_xid_errors_total{gpu=1,xid=79} = %v (present %v), want 1 after the loss", v, ok)
				}
				return nil
			},
			pinAt: "10s",
			oneShot: func(fams map[string]*dto.MetricFamily) error {
				if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": "1"}); !ok || v != 0 {
					return fmt.Errorf("gpu_up{gpu=1} = %v (present %v), want 0", v, ok)
				}
				return nil
			},
			psStderr: "GPU 1: down (gpu_is_lost); its processes are unknown",
		},
		{
			// Correlated failures: GPU 3 falls off the bus while GPUs 0
			// and 2 raise XIDs at the same instant (test/faults' case with
			// 6s for 1s: the XIDs must fall after the watcher registered
			// the GPUs, on a busy machine too; NVML drops earlier ones).
			name:     "XIDs at the instant of a loss",
			variants: []string{"R580"},
			faults:   "  - {gpu: 3, lost_after: 6s}\n  - {gpu: 2, xid: 79, at: 6s}\n  - {gpu: 0, xid: 48, at: 6s}\n",
			healthy:  []int{0, 1, 2},
			serve: func(fams map[string]*dto.MetricFamily) error {
				if v, _ := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": "3"}); v != 0 {
					return errors.New("gpu 3 not down yet")
				}
				for gpu, xid := range map[string]string{"2": "79", "0": "48"} {
					if v, ok := testenv.Sample(fams, "gpu_xid_errors_total", map[string]string{"gpu": gpu, "xid": xid}); !ok || v != 1 {
						return fmt.Errorf("gpu_xid_errors_total{gpu=%s,xid=%s} = %v (present %v), want 1", gpu, xid, v, ok)
					}
				}
				return nil
			},
			pinAt: "10s",
			oneShot: func(fams map[string]*dto.MetricFamily) error {
				if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": "3"}); !ok || v != 0 {
					return fmt.Errorf("gpu_up{gpu=3} = %v (present %v), want 0", v, ok)
				}
				return nil
			},
			psStderr: "GPU 3: down (gpu_is_lost); its processes are unknown",
		},
	}
	for _, c := range cases {
		for _, variant := range c.variants {
			t.Run(strings.ReplaceAll(c.name, " ", "_")+"/"+variant, func(t *testing.T) {
				// The cases mostly wait (for a fault's time, a GPM window,
				// a process's exit); each has its own processes, ports and
				// files, and its time bounds have margins of seconds.
				t.Parallel()
				profile, processes := cmp.Or(c.profile, "dgx-h100"), cmp.Or(c.processes, sickProcesses)
				config := "profile: " + profile + "\nseed: sick\n" + processes + "faults:\n" + c.faults
				t.Run("serve", func(t *testing.T) {
					env := fakeEnv(t, variant, config)
					base, p, up := startWithEnv(t, env, sickArgs("--backend=nvml", "--collection.timeout="+sickTimeout.String())...)
					if !up {
						t.Fatalf("gpuwatch exited at start:\n%s", p.Output.String())
					}
					scrape := func() map[string]*dto.MetricFamily {
						start := time.Now()
						page := httpGet(t, base+"/metrics")
						if took := time.Since(start); took > sickTimeout+sickMargin {
							t.Errorf("a scrape took %v, over --collection.timeout plus %v", took.Round(time.Millisecond), sickMargin)
						}
						return testenv.ParseMetrics(t, page)
					}
					first := scrape()
					if c.name == "handle lost after XID 79" {
						uuid1 = labelOf(first, "gpu_up", map[string]string{"gpu": "1"}, "uuid")
					}
					if c.serve != nil {
						testenv.Eventually(t, 40*time.Second, func() error { return c.serve(scrape()) })
					}
					text := httpGet(t, base+"/metrics")
					promtoolCheck(t, promtool, text)
					healthyWithOwners(t, testenv.ParseMetrics(t, text), c.healthy)
					if p.Exited() {
						t.Fatalf("gpuwatch died:\n%s", p.Output.String())
					}
				})

				pinned := config
				if c.pinAt != "" {
					pinned = "pin_time: " + c.pinAt + "\n" + config
				}
				t.Run("textfile", func(t *testing.T) {
					env := fakeEnv(t, variant, pinned)
					out := filepath.Join(t.TempDir(), "gpu.prom")
					_, stderr, code := runBounded(t, env, sickArgs("textfile", "--backend=nvml", "--output="+out)...)
					if code != 0 {
						t.Fatalf("textfile exited %d:\n%s", code, stderr)
					}
					data, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					promtoolCheck(t, promtool, string(data))
					fams := testenv.ParseMetrics(t, string(data))
					healthyWithOwners(t, fams, c.healthy)
					if err := c.oneShot(fams); err != nil {
						t.Error(err)
					}
				})

				t.Run("ps", func(t *testing.T) {
					env := fakeEnv(t, variant, pinned)
					stdout, stderr, code := runBounded(t, env, sickArgs("ps", "--backend=nvml")...)
					if c.psStderr == "" && code != 0 || c.psStderr != "" && (code != 1 || !strings.Contains(stderr, c.psStderr)) {
						t.Errorf("ps: exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr, c.psStderr)
					}
					for _, gpu := range c.healthy {
						if !psLists(stdout, gpu, sickOwners[gpu]) {
							t.Errorf("ps does not list gpu %d's process of %s:\n%s", gpu, sickOwners[gpu], stdout)
						}
					}
					if c.psStderr != "" {
						// Asked for the GPU it could not read, ps says so
						// rather than print an empty table as if it were idle.
						gpu, _, _ := strings.Cut(strings.TrimPrefix(c.psStderr, "GPU "), ":")
						_, stderr, code := runBounded(t, env, sickArgs("ps", "--backend=nvml", "--gpu="+gpu)...)
						if code != 1 || !strings.Contains(stderr, c.psStderr) {
							t.Errorf("ps --gpu=%s: exit %d, stderr:\n%s\nwant exit 1 and %q", gpu, code, stderr, c.psStderr)
						}
					}
					// Asked only for a healthy GPU, ps answers in full.
					stdout, stderr, code = runBounded(t, env, sickArgs("ps", "--backend=nvml", "--gpu=0")...)
					if code != 0 || strings.Contains(stderr, "unknown") || !psLists(stdout, 0, "alice") {
						t.Errorf("ps --gpu=0: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
					}
				})

				if c.doctorFails {
					t.Run("doctor", func(t *testing.T) {
						env := fakeEnv(t, variant, pinned)
						stdout, _, _ := runBounded(t, env, sickArgs("doctor", "--backend=nvml")...)
						if strings.Contains(stdout, "✔ process list") || !strings.Contains(stdout, "process list") {
							t.Errorf("doctor passes the process list:\n%s", stdout)
						}
					})
				}
			})
		}
	}
}

// sickArgs are the command's arguments with this host's containers and
// Slurm left out and the fixture /proc as the processes' owners.
func sickArgs(args ...string) []string {
	return append(args, "--path.procfs="+fixtureProc, "--path.rootfs="+fixtureRootFS,
		"--slurm.jobs=false", "--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=",
		"--no-accounting.records")
}

// runBounded runs a one-shot gpuwatch command and fails the test when it
// takes longer than sickCommandLimit or dies of a signal or a panic.
func runBounded(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sickCommandLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuwatchBin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gpuwatch %s did not end within %v:\n%s", args[0], sickCommandLimit, errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if code < 0 {
			t.Fatalf("gpuwatch %s was killed: %v\n%s", args[0], err, errOut.String())
		}
	case err != nil:
		t.Fatalf("running gpuwatch %s: %v", args[0], err)
	}
	if strings.Contains(errOut.String(), "panic:") || strings.Contains(errOut.String(), "fatal error:") {
		t.Fatalf("gpuwatch %s crashed:\n%s", args[0], errOut.String())
	}
	return out.String(), errOut.String(), code
}

func promtoolCheck(t *testing.T, promtool, page string) {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// healthyWithOwners: each of the GPUs is up and its process is attributed
// to its owner.
func healthyWithOwners(t *testing.T, fams map[string]*dto.MetricFamily, gpus []int) {
	t.Helper()
	for _, gpu := range gpus {
		g := fmt.Sprint(gpu)
		if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": g}); !ok || v != 1 {
			t.Errorf("healthy gpu_up{gpu=%s} = %v (present %v), want 1", g, v, ok)
		}
		if v, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": g, "user": sickOwners[gpu]}); !ok || v != 1<<30 {
			t.Errorf("gpu_process_memory_used_bytes{gpu=%s,user=%s} = %v (present %v), want 1 GiB", g, sickOwners[gpu], v, ok)
		}
	}
}

// psLists says whether the ps table has a row for gpu owned by user.
func psLists(table string, gpu int, user string) bool {
	for line := range strings.SplitSeq(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == fmt.Sprint(gpu) && f[3] == user {
			return true
		}
	}
	return false
}

// labelOf is the value of label on the first series of name whose labels
// include want, or "".
func labelOf(fams map[string]*dto.MetricFamily, name string, want map[string]string, label string) string {
	mf, ok := fams[name]
	if !ok {
		return ""
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return have[label]
	}
	return ""
}
