package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npdMonitor is node-problem-detector's custom-plugin-monitor file
// (pkg/custompluginmonitor/types/config.go of kubernetes/node-problem-detector):
// every field it reads, and no other, so that a misspelt key fails the
// strict decode instead of being ignored by NPD.
type npdMonitor struct {
	Plugin       string `json:"plugin"`
	PluginConfig struct {
		InvokeInterval    string `json:"invoke_interval"`
		Timeout           string `json:"timeout"`
		MaxOutputLength   *int   `json:"max_output_length"`
		Concurrency       *int   `json:"concurrency"`
		MessageChangeBase *bool  `json:"enable_message_change_based_condition_update"`
		SkipInitialStatus *bool  `json:"skip_initial_status"`
	} `json:"pluginConfig"`
	Source           string `json:"source"`
	MetricsReporting *bool  `json:"metricsReporting"`
	Conditions       []struct {
		Type    string `json:"type"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"conditions"`
	Rules []npdRule `json:"rules"`
}

type npdRule struct {
	Type      string   `json:"type"`
	Condition string   `json:"condition"`
	Reason    string   `json:"reason"`
	Path      string   `json:"path"`
	Args      []string `json:"args"`
	Timeout   string   `json:"timeout"`
}

const npdConfig = "deploy/kubernetes/node-problem-detector/gpuwatch-health-monitor.json"

// npdBinPath is where docs/health.md mounts the node's gpuwatch in the
// node-problem-detector pod.
const npdBinPath = "/opt/gpuwatch/bin/gpuwatch"

// loadNPDMonitor decodes the shipped monitor strictly and checks what NPD
// requires of it: a custom plugin, durations it parses, one condition that
// the one permanent rule sets, a rule timeout within the plugin's, and an
// interval longer than a run may take.
func loadNPDMonitor(t *testing.T) (npdMonitor, npdRule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, npdConfig))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m npdMonitor
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", npdConfig, err)
	}
	if m.Plugin != "custom" || m.Source == "" {
		t.Errorf("%s: plugin %q, source %q; want plugin custom and a source", npdConfig, m.Plugin, m.Source)
	}
	pc := m.PluginConfig
	interval, err1 := time.ParseDuration(pc.InvokeInterval)
	timeout, err2 := time.ParseDuration(pc.Timeout)
	if err := errors.Join(err1, err2); err != nil || interval <= timeout {
		t.Errorf("%s: invoke_interval %q, timeout %q (%v): want durations, the interval longer than the timeout", npdConfig, pc.InvokeInterval, pc.Timeout, err)
	}
	// gpuwatch health waits up to three --collection.timeout (5s by
	// default) for a slow GPU, and must be let finish to say unknown.
	if timeout < 20*time.Second {
		t.Errorf("%s: timeout %s is shorter than gpuwatch health may take (15s and its start)", npdConfig, timeout)
	}
	if pc.MaxOutputLength == nil || *pc.MaxOutputLength < 80 || pc.Concurrency == nil || *pc.Concurrency < 1 {
		t.Errorf("%s: max_output_length and concurrency must be set (max_output_length at least 80)", npdConfig)
	}
	if len(m.Conditions) != 1 || len(m.Rules) != 1 {
		t.Fatalf("%s: %d conditions and %d rules; want one of each", npdConfig, len(m.Conditions), len(m.Rules))
	}
	c, r := m.Conditions[0], m.Rules[0]
	if c.Type == "" || c.Reason == "" || c.Message == "" {
		t.Errorf("%s: condition %+v needs type, reason and message", npdConfig, c)
	}
	if r.Type != "permanent" || r.Condition != c.Type || r.Reason == "" || r.Reason == c.Reason {
		t.Errorf("%s: rule %+v: want a permanent rule on condition %q with its own reason", npdConfig, r, c.Type)
	}
	if rt, err := time.ParseDuration(r.Timeout); err != nil || rt > timeout || rt < 20*time.Second {
		t.Errorf("%s: rule timeout %q: want a duration of at least 20s, within the plugin's %s", npdConfig, r.Timeout, timeout)
	}
	if r.Path != npdBinPath {
		t.Errorf("%s: rule path %q; docs/health.md mounts gpuwatch at %s", npdConfig, r.Path, npdBinPath)
	}
	return m, r
}

// runPlugin runs the rule's command, the gpuwatch under test in place of
// its path, with extra flags after the rule's args, and returns its exit
// status and stdout (all NPD reads) as NPD keeps it: trimmed.
func runPlugin(t *testing.T, r npdRule, extra ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuwatchBin, append(append([]string{}, r.Args...), extra...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	return cmd.ProcessState.ExitCode(), strings.TrimSpace(stdout.String())
}

// TestNPDPluginConfig: the shipped node-problem-detector monitor is one
// NPD accepts, and the command it names follows NPD's custom-plugin
// protocol: exit 0 OK, 1 NonOK, 2 Unknown, with the reason on one line of
// stdout that fits max_output_length, for a healthy node, a GPU that
// raised XID 79, a lost GPU, a hung GPU and a node without the driver.
func TestNPDPluginConfig(t *testing.T) {
	m, r := loadNPDMonitor(t)
	dir := t.TempDir()
	xid := filepath.Join(dir, "xid79.yaml")
	lost := filepath.Join(dir, "lost.yaml")
	hung := filepath.Join(dir, "hung.yaml")
	for path, cfg := range map[string]string{
		// Pinned at the XID's instant: the event is due as the run
		// registers for events, as an XID raised while it runs.
		xid:  "profile: dgx-h100\npin_time: 1s\nfaults:\n  - {gpu: 2, xid: 79, at: 1s}\n",
		lost: "profile: dgx-h100\nfaults:\n  - {gpu: 4, lost_after: 0s}\n",
		hung: "profile: h100\nfaults:\n  - {gpu: 0, hang_after: 0s, hang_for: 60s}\n",
	} {
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		extra  []string
		code   int
		prefix string
		has    string
	}{
		{"healthy", []string{"--backend=sim", "--sim.profile=dgx-h100"}, 0, "OK", ""},
		{"XID 79", []string{"--backend=sim", "--sim.config=" + xid}, 1, "FAIL: GPU 2 (GPU-", "XID 79 (at 2026-01-01T00:00:01Z): GPU has fallen off the bus; drain the node and reboot it"},
		{"lost GPU", []string{"--backend=sim", "--sim.config=" + lost}, 1, "FAIL: GPU 4 ", "lost (gpu_is_lost)"},
		{"hung GPU", []string{"--backend=sim", "--sim.config=" + hung, "--collection.timeout=1s"}, 2, "UNKNOWN: GPU 0 ", "did not answer in time"},
		{"no driver", []string{"--backend=nvml"}, 2, "UNKNOWN: health unknown: no NVIDIA driver", ""},
	}
	for _, c := range cases {
		if _, err := os.Stat("/dev/nvidiactl"); err == nil && c.name == "no driver" {
			continue // an NVIDIA GPU is present on this machine
		}
		code, msg := runPlugin(t, r, c.extra...)
		if code != c.code || !strings.HasPrefix(msg, c.prefix) || !strings.Contains(msg, c.has) {
			t.Errorf("%s: exit %d, stdout %q; want exit %d and a message starting %q containing %q", c.name, code, msg, c.code, c.prefix, c.has)
		}
		if strings.ContainsAny(msg, "\n\r") || len(msg) > *m.PluginConfig.MaxOutputLength {
			t.Errorf("%s: stdout %q is not one line within max_output_length %d", c.name, msg, *m.PluginConfig.MaxOutputLength)
		}
	}
}
