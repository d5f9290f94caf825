//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var (
	fakeSMIOnce sync.Once
	fakeSMIDir  string
	fakeSMIErr  error
)

// fakeSMIPath builds the project's fake nvidia-smi once per run into a
// directory of its own, to put on the PATH.
func fakeSMIPath(t *testing.T) string {
	t.Helper()
	fakeSMIOnce.Do(func() {
		fakeSMIDir, fakeSMIErr = os.MkdirTemp("", "e2e-fakesmi")
		if fakeSMIErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(fakeSMIDir, "nvidia-smi"), "../../internal/fakedriver/fakesmi").CombinedOutput()
		if err != nil {
			fakeSMIErr = err
			t.Logf("%s", out)
		}
	})
	if fakeSMIErr != nil {
		t.Fatalf("building the fake nvidia-smi: %v", fakeSMIErr)
	}
	return fakeSMIDir
}

// smiHost is a host whose nvidia-smi is the fake, answering from fixtures.
type smiHost struct {
	env      []string
	modeFile string
	pid      int // a process of this test the fake lists on GPU 0
}

func newSMIHost(t *testing.T, help, gpus, apps string) *smiHost {
	t.Helper()
	fixtures, err := filepath.Abs("../../internal/backend/smibackend/testdata")
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	h := &smiHost{modeFile: filepath.Join(t.TempDir(), "mode"), pid: sleeper.Process.Pid}
	h.env = append(os.Environ(),
		"PATH="+fakeSMIPath(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKESMI_HELP="+filepath.Join(fixtures, help),
		"FAKESMI_GPUS="+filepath.Join(fixtures, gpus),
		"FAKESMI_APPS="+filepath.Join(fixtures, apps),
		"FAKESMI_MODE_FILE="+h.modeFile,
		"FAKESMI_PID0="+strconv.Itoa(h.pid),
		"FAKESMI_PID1="+strconv.Itoa(os.Getpid()),
	)
	return h
}

func (h *smiHost) setMode(t *testing.T, mode string) {
	t.Helper()
	if mode == "" {
		if err := os.Remove(h.modeFile); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(h.modeFile, []byte(mode), 0o600); err != nil {
		t.Fatal(err)
	}
}

// serve starts gpuwatch serve with the host's environment.
func (h *smiHost) serve(t *testing.T, args ...string) (string, *testenv.Process) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	p := testenv.StartProcess(t, h.env, gpuwatchBin, append([]string{"--web.listen-address=" + addr, "--backend=nvidia-smi"}, args...)...)
	base := "http://" + addr
	testenv.WaitHealthy(t, p, base)
	return base, p
}

func smiPromtool(t *testing.T, page string) {
	t.Helper()
	promtoolCheck(t, testenv.RequireTool(t, "promtool", "prometheus"), page)
}

// gpuUp waits until both fixture GPUs' gpu_up is want.
func gpuUp(t *testing.T, base string, want float64) map[string]string {
	t.Helper()
	var page string
	testenv.WaitFor(t, 20*time.Second, "gpu_up of both GPUs to be "+strconv.FormatFloat(want, 'g', -1, 64), func() bool {
		var err error
		if page, err = httpGetNoFail(base + "/metrics"); err != nil {
			return false
		}
		fams := testenv.ParseMetrics(t, page)
		for _, gpu := range []string{"0", "1"} {
			if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": gpu}); !ok || v != want {
				return false
			}
		}
		return true
	})
	return map[string]string{"page": page}
}

// serve with --backend=nvidia-smi: the catalog's names from nvidia-smi's
// CSV, owners looked up on this host, absent what nvidia-smi cannot say,
// promtool-valid; a failing nvidia-smi leaves the GPUs down, not gone, and
// is logged once.
func TestNvidiaSMIServe(t *testing.T) {
	h := newSMIHost(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "apps-h100.csv")
	base, p := h.serve(t)
	page := gpuUp(t, base, 1)["page"]
	smiPromtool(t, page)
	fams := testenv.ParseMetrics(t, page)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpu_power_usage_watts", map[string]string{"gpu": "0"}, 498.2},
		{"gpu_memory_total_bytes", map[string]string{"gpu": "1"}, 81559 << 20},
		{"gpu_utilization_ratio", map[string]string{"gpu": "0"}, 0.87},
		{"gpu_clock_event_active", map[string]string{"gpu": "0", "reason": "sw_power_cap"}, 1},
		{"gpu_process_memory_used_bytes", map[string]string{"gpu": "0", "user": me.Username}, (20480 + 512) << 20},
		{"gpuwatch_driver_info", map[string]string{"library": "nvidia-smi", "version": "550.90.07", "branch": "R550"}, 1},
		{"gpuwatch_driver_limited_group", map[string]string{"group": "xid"}, 1},
	}
	for _, c := range checks {
		if v, ok := testenv.Sample(fams, c.name, c.labels); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	for _, absent := range []string{"gpu_energy_joules_total", "gpu_xid_errors_total", "gpu_fan_speed_ratio", "gpu_gpm_sm_active_ratio", "gpu_pcie_transmit_bytes_total"} {
		if _, ok := fams[absent]; ok {
			t.Errorf("%s is exported, but nvidia-smi cannot give it here", absent)
		}
	}

	h.setMode(t, "fail")
	page = gpuUp(t, base, 0)["page"]
	smiPromtool(t, page)
	for range 3 {
		httpGet(t, base+"/metrics")
	}
	if n := strings.Count(p.Output.String(), "nvidia-smi gave no reading"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, p.Output.String())
	}
	h.setMode(t, "")
	gpuUp(t, base, 1)
}

// ps and textfile read through the same backend.
func TestNvidiaSMIPsAndTextfile(t *testing.T) {
	h := newSMIHost(t, "help-query-gpu-r470.txt", "gpu-h100.csv", "apps-h100.csv")
	ps := exec.Command(gpuwatchBin, "ps", "--backend=nvidia-smi", "-o", "json")
	ps.Env = h.env
	out, err := ps.CombinedOutput()
	if err != nil {
		t.Fatalf("ps: %v\n%s", err, out)
	}
	var listed struct {
		Processes []struct {
			GPU     int    `json:"gpu"`
			PID     int    `json:"pid"`
			User    string `json:"user"`
			Command string `json:"command"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		t.Fatalf("ps -o json: %v\n%s", err, out)
	}
	found := false
	for _, p := range listed.Processes {
		found = found || (p.PID == h.pid && p.GPU == 0 && strings.Contains(p.Command, "sleep") && p.User != "")
	}
	if !found {
		t.Errorf("ps does not list the sleep process %d on GPU 0 with its owner:\n%s", h.pid, out)
	}

	file := filepath.Join(t.TempDir(), "gpu.prom")
	tf := exec.Command(gpuwatchBin, "textfile", "--backend=nvidia-smi", "--output="+file)
	tf.Env = h.env
	if out, err := tf.CombinedOutput(); err != nil {
		t.Fatalf("textfile: %v\n%s", err, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	smiPromtool(t, string(data))
	// The R470 nvidia-smi names the reasons clocks_throttle_reasons.*.
	if !strings.Contains(string(data), `gpu_clock_event_active{gpu="0",reason="sw_power_cap"`) {
		t.Errorf("textfile lacks the clock events read under their R470 names")
	}
}

// A remote host through ssh's forced command: --nvidia-smi.command runs a
// stand-in for ssh that, as sshd does with command= in authorized_keys,
// runs deploy/ssh/gpuwatch-smi-only with the request in
// SSH_ORIGINAL_COMMAND. The host names the GPUs; this host's processes are
// not taken for the remote ones'; ssh failing leaves the GPUs down with
// ssh's message, logged once.
func TestNvidiaSMIRemoteHost(t *testing.T) {
	h := newSMIHost(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "apps-h100.csv")
	only, err := filepath.Abs("../../deploy/ssh/gpuwatch-smi-only")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	refuse := filepath.Join(dir, "refuse")
	ssh := filepath.Join(dir, "ssh")
	script := `#!/bin/sh
# A stand-in for ssh: options, the host, then the remote command.
while [ $# -gt 0 ]; do
	case "$1" in
	-o|-i) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
host=$1; shift
if [ -e "` + refuse + `" ]; then
	echo "ssh: connect to host $host port 22: Connection refused" >&2
	exit 255
fi
SSH_ORIGINAL_COMMAND="$*" exec "` + only + `"
`
	if err := os.WriteFile(ssh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	command := `["` + ssh + `","-o","BatchMode=yes","-o","ConnectTimeout=3","gpuwatch@gpu-box","nvidia-smi"]`
	base, p := h.serve(t, "--nvidia-smi.command="+command, "--nvidia-smi.host=gpu-box")
	page := gpuUp(t, base, 1)["page"]
	smiPromtool(t, page)
	fams := testenv.ParseMetrics(t, page)
	if _, ok := testenv.Sample(fams, "gpuwatch_driver_info", map[string]string{"library": "nvidia-smi on gpu-box"}); !ok {
		t.Errorf("gpuwatch_driver_info does not name the host")
	}
	if v, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": "0", "user": ""}); !ok || v != (20480+512)<<20 {
		t.Errorf("remote processes: %v (present %v), want their memory without an owner from this host", v, ok)
	}

	if err := os.WriteFile(refuse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	page = gpuUp(t, base, 0)["page"]
	smiPromtool(t, page)
	logged := p.Output.String()
	if n := strings.Count(logged, "nvidia-smi gave no reading"); n != 1 || !strings.Contains(logged, "exit status 255: ssh: connect to host gpuwatch@gpu-box port 22: Connection refused") {
		t.Errorf("want one line with ssh's message; log:\n%s", logged)
	}
	if err := os.Remove(refuse); err != nil {
		t.Fatal(err)
	}
	gpuUp(t, base, 1)
}

// A hung nvidia-smi is killed at --collection.timeout: /metrics answers,
// saying the collection failed, and gpuwatch keeps serving.
func TestNvidiaSMIHung(t *testing.T) {
	h := newSMIHost(t, "help-query-gpu-r550.txt", "gpu-h100.csv", "apps-h100.csv")
	h.setMode(t, "hang")
	base, _ := h.serve(t, "--collection.timeout=1s")
	page := httpGet(t, base+"/metrics")
	smiPromtool(t, page)
	if v, ok := testenv.Sample(testenv.ParseMetrics(t, page), "gpuwatch_collector_success", map[string]string{"collector": "power"}); !ok || v != 0 {
		t.Errorf("gpuwatch_collector_success{collector=power} = %v (present %v), want 0", v, ok)
	}
	h.setMode(t, "")
	gpuUp(t, base, 1)
}
