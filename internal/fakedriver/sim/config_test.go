//go:build cgo

package sim

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestExampleConfigParses(t *testing.T) {
	cfg, err := LoadConfig("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Profile != "dgx-h100" {
		t.Errorf("profile = %q", cfg.Profile)
	}
	if len(cfg.Processes) != 1 {
		t.Fatalf("processes = %+v", cfg.Processes)
	}
	p := cfg.Processes[0]
	if p.GPU != 0 || p.PID != 4242 || p.UsedMemoryBytes != 2147483648 || p.SMUtilization != 0.6 {
		t.Errorf("process = %+v", p)
	}
	if len(cfg.Faults) != 3 {
		t.Fatalf("faults = %+v", cfg.Faults)
	}
	if f := cfg.Faults[0]; f.GPU != 3 || f.LostAfter == nil || f.LostAfter.D() != 30*time.Second {
		t.Errorf("fault 0 = %+v", f)
	}
	if f := cfg.Faults[1]; f.GPU != 1 || strings.Join(f.Unsupported, ",") != "power,fan_speed" {
		t.Errorf("fault 1 = %+v", f)
	}
	if f := cfg.Faults[2]; f.GPU != 2 || f.XID != 79 || f.At == nil || f.At.D() != 10*time.Second {
		t.Errorf("fault 2 = %+v", f)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.devices) != 8 || len(s.devices[0].processes) != 1 || len(s.devices[1].processes) != 0 {
		t.Errorf("config processes should replace the profile's defaults")
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown top-level key", "profile: h100\nprofiel: x\n",
			[]string{"cfg.yaml", "line 2", `unknown key "profiel"`, "valid keys: profile, processes, faults, pin_time"}},
		{"unknown key in a fault", "profile: h100\nfaults:\n  - gpu: 0\n    lost_afte: 3s\n",
			[]string{"cfg.yaml", "line 4", `"lost_afte"`, "lost_after"}},
		{"unknown key in a process", "profile: h100\nprocesses:\n  - {gpu: 0, pid: 1, sm_util: 0.5}\n",
			[]string{"line 3", `"sm_util"`, "sm_utilization"}},
		{"bad duration", "profile: h100\nfaults:\n  - {gpu: 0, lost_after: 30 seconds}\n",
			[]string{"cfg.yaml", "line 3", `invalid duration "30 seconds"`}},
		{"negative duration", "profile: h100\npin_time: -5s\n", []string{"line 2", "negative"}},
		{"unknown unsupported name", "profile: h100\nfaults:\n  - {gpu: 0, unsupported: [powr]}\n",
			[]string{"cfg.yaml line 3 (faults[0])", `"powr"`, "valid: utilization, encoder"}},
		{"empty fault", "profile: h100\nfaults:\n  - {gpu: 0}\n", []string{"line 3", "needs lost_after, unsupported, xid, hang_after, mig_mode_pending, fabric_degraded, process_list_size, retired_pages_size, ecc_uncorrectable, row_remap, reset_at, slow_calls, bogus_values or energy_reset_at"}},
		{"bad retired_pages_size", "profile: v100\nfaults:\n  - {gpu: 0, retired_pages_size: triple}\n",
			[]string{"line 3", `retired_pages_size "triple"`, `"doubling" or "one_more"`}},
		{"at without xid", "profile: h100\nfaults:\n  - {gpu: 0, at: 5s}\n", []string{"needs an 'xid'"}},
		{"pid missing", "profile: h100\nprocesses:\n  - {gpu: 0, used_memory_bytes: 5}\n", []string{"line 3", "pid"}},
		{"utilization as percent", "profile: h100\nprocesses:\n  - {gpu: 0, pid: 9, sm_utilization: 60}\n", []string{"sm_utilization 60", "0 and 1"}},
		{"utilization NaN", "profile: h100\nprocesses:\n  - {gpu: 0, pid: 9, sm_utilization: .nan}\n", []string{"sm_utilization NaN", "0 and 1"}},
		{"memory utilization NaN", "profile: h100\nprocesses:\n  - {gpu: 0, pid: 9, memory_utilization: .nan}\n", []string{"memory_utilization NaN", "0 and 1"}},
		{"bad type", "profile: h100\nprocesses:\n  - {gpu: 0, pid: 9, type: video}\n", []string{`type "video"`}},
		{"not yaml", "profile: [h100\n", []string{"cfg.yaml"}},
		{"two documents", "profile: h100\n---\nprofile: h100\n", []string{"one YAML document"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml), "cfg.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// Errors that need the profile come from New, still naming file and line.
func TestNewErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown profile", "profile: dgx-b200\n", []string{`unknown simulator profile "dgx-b200"`, "dgx-a100-mig, dgx-h100, h100, large, rtx4090, v100"}},
		{"no profile", "faults: []\n", []string{"no simulator profile", "dgx-h100"}},
		{"fault gpu out of range", "profile: dgx-h100\nfaults:\n  - {gpu: 1, xid: 79}\n  - {gpu: 8, lost_after: 1s}\n",
			[]string{"cfg.yaml line 4 (faults[1])", "gpu 8 out of range", "GPUs 0-7"}},
		{"process gpu out of range", "profile: h100\nprocesses:\n  - {gpu: 1, pid: 7}\n", []string{"line 3", "gpu 1 out of range", "GPUs 0-0"}},
		{"process too big", "profile: rtx4090\nprocesses:\n  - {gpu: 0, pid: 7, used_memory_bytes: 99999999999}\n", []string{"does not fit"}},
		{"duplicate pid", "profile: h100\nprocesses:\n  - {gpu: 0, pid: 7}\n  - {gpu: 0, pid: 7}\n", []string{"line 4", "pid 7 is already listed"}},
		{"MIG GPU needs an instance", "profile: dgx-a100-mig\nprocesses:\n  - {gpu: 0, pid: 7}\n",
			[]string{"gpu 0 is in MIG mode: set gpu_instance", "gpu_instance=7 compute_instance=0 (1g.10gb)"}},
		{"MIG instance full", "profile: dgx-a100-mig\nprocesses:\n  - {gpu: 1, pid: 7, gpu_instance: 1, used_memory_bytes: 30000000000}\n" +
			"  - {gpu: 1, pid: 8, gpu_instance: 1, used_memory_bytes: 30000000000}\n",
			[]string{"line 4", "used_memory_bytes 30000000000 does not fit", "bytes free on gpu 1"}},
		{"unknown MIG instance", "profile: dgx-a100-mig\nprocesses:\n  - {gpu: 1, pid: 7, gpu_instance: 9}\n",
			[]string{"gpu 1 has no MIG instance gpu_instance=9", "gpu_instance=1 compute_instance=0 (3g.40gb)"}},
		{"instance on a non-MIG GPU", "profile: dgx-a100-mig\nprocesses:\n  - {gpu: 5, pid: 7, gpu_instance: 1}\n",
			[]string{"gpu 5 is not in MIG mode: remove gpu_instance"}},
		{"retired pages on a GPU that remaps rows", "profile: dgx-h100\nfaults:\n  - {gpu: 2, retired_pages_size: doubling}\n",
			[]string{"cfg.yaml line 3 (faults[0])", "retired_pages_size", "gpu 2", "no page retirement", "v100"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.yaml), "cfg.yaml")
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			_, err = New(cfg)
			if err == nil {
				t.Fatal("New: no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestEmptyProcessesClearsDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte("profile: h100\nprocesses: []\n"), "cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, cfg)
	procs, _ := handle(t, s, 0).GetComputeRunningProcesses()
	if len(procs) != 0 {
		t.Errorf("processes: [] should clear the defaults, got %+v", procs)
	}
	// Without the key, the profile's defaults stay.
	s = newSim(t, Config{Profile: "h100"})
	if procs, _ := handle(t, s, 0).GetComputeRunningProcesses(); len(procs) == 0 {
		t.Error("profile h100 should have default processes")
	}
}

func TestEmptyFileIsEmptyConfig(t *testing.T) {
	cfg, err := ParseConfig(nil, "empty.yaml")
	if err != nil || cfg.Profile != "" {
		t.Fatalf("got %+v, %v", cfg, err)
	}
}

func TestProfilesListed(t *testing.T) {
	var names []string
	for _, p := range Profiles() {
		if p.Description == "" {
			t.Errorf("profile %s has no description", p.Name)
		}
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "dgx-a100-mig,dgx-h100,h100,large,rtx4090,v100" {
		t.Errorf("profiles = %s", got)
	}
}

// doc.go documents the config schema and the unsupported names; keep it in
// step with the code.
func TestDocCoversSchema(t *testing.T) {
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, name := range UnsupportedNames() {
		if !strings.Contains(doc, "//\t"+name+" ") {
			t.Errorf("doc.go does not list unsupported name %q", name)
		}
	}
	for _, typ := range []string{"sim.Config", "sim.ProcessSpec", "sim.Fault"} {
		for _, key := range keysOfType(typ) {
			if !strings.Contains(doc, key+":") {
				t.Errorf("doc.go does not show config key %q", key)
			}
		}
	}
	for _, p := range Profiles() {
		if !strings.Contains(doc, "//\t"+p.Name+" ") {
			t.Errorf("doc.go does not describe profile %q", p.Name)
		}
	}
}
