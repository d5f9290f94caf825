package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`
checks:
  hw_slowdown: fail
  nvlink_down: off
xid:
  fail: [13]
  warn: [79]
  ignore: [63]
hw_slowdown_window: 10m
unresponsive_window: 1m
expect_gpus: 8
`), "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]Level{CheckHWSlowdown: LevelFail, CheckNVLinkDown: LevelOff, CheckXID: LevelFail, CheckGPULost: LevelFail}
	for name, want := range checks {
		if got := p.Level(name); got != want {
			t.Errorf("Level(%s) = %s, want %s", name, got, want)
		}
	}
	xids := map[uint64]Level{13: LevelFail, 79: LevelWarn, 63: LevelOff, 48: LevelFail, 31: LevelOff, 500: LevelWarn}
	for code, want := range xids {
		if got := p.XIDLevel(code); got != want {
			t.Errorf("XIDLevel(%d) = %s, want %s", code, got, want)
		}
	}
	if p.SlowdownWindow != 10*time.Minute || p.UnresponsiveWindow != time.Minute || p.ExpectGPUs != 8 {
		t.Errorf("windows/expect = %s %s %d", p.SlowdownWindow, p.UnresponsiveWindow, p.ExpectGPUs)
	}
	// The xid check at warn caps every code at warn.
	p, err = ParsePolicy([]byte("checks: {xid: warn}\n"), "p")
	if err != nil {
		t.Fatal(err)
	}
	if p.XIDLevel(79) != LevelWarn || p.XIDLevel(13) != LevelOff {
		t.Errorf("xid: warn: 79 = %s, 13 = %s", p.XIDLevel(79), p.XIDLevel(13))
	}
	// An empty file is the default policy.
	if _, err := ParsePolicy(nil, "p"); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"unknown key":      {"xids: {fail: [1]}\n", `p.yaml: line 1: unknown key "xids" (valid keys: checks, xid`},
		"unknown check":    {"checks:\n  ecc: fail\n", `p.yaml: line 2: checks.ecc: no such check (checks: gpu_lost, xid,`},
		"responding":       {"checks: {responding: off}\n", `checks.responding: no such check`},
		"bad level":        {"checks:\n  xid: critical\n", `p.yaml: line 2: checks.xid: "critical" is not a level (off, warn or fail)`},
		"checks not a map": {"checks: [xid]\n", `line 1: checks: expected a map`},
		"xid zero":         {"xid: {fail: [0]}\n", `p.yaml: xid.fail: 0 is not an XID code (1 to 1000)`},
		"xid huge":         {"xid: {ignore: [4000]}\n", `xid.ignore: 4000 is not an XID code`},
		"xid negative":     {"xid: {warn: [-1]}\n", `p.yaml: line 1: "-1" (a number) where a whole number, 0 or more, is wanted`},
		"xid twice":        {"xid: {fail: [79], ignore: [79]}\n", `xid.ignore: XID 79 is already in xid.fail; name each code once`},
		"window syntax":    {"hw_slowdown_window: 5\n", `hw_slowdown_window: "5" is not a duration`},
		"window zero":      {"unresponsive_window: 0s\n", `unresponsive_window: 0s must be above 0`},
		"window huge":      {"hw_slowdown_window: 200h\n", `hw_slowdown_window: 200h0m0s must be above 0 and at most 168h0m0s`},
		"expect zero":      {"expect_gpus: 0\n", `expect_gpus: 0 must be 1 to 1024`},
		"not yaml":         {"checks: [\n", `p.yaml: `},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(c.yaml), "p.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte("checks: {hw_slowdown: off}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil || p.Level(CheckHWSlowdown) != LevelOff {
		t.Fatalf("LoadPolicy = %v, %v", p.Level(CheckHWSlowdown), err)
	}
	if _, err := LoadPolicy(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadPolicy(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory: %v", err)
	}
}

func TestWithExpectGPUs(t *testing.T) {
	p, err := DefaultPolicy().WithExpectGPUs(4)
	if err != nil || p.ExpectGPUs != 4 {
		t.Fatalf("WithExpectGPUs(4) = %d, %v", p.ExpectGPUs, err)
	}
	if _, err := DefaultPolicy().WithExpectGPUs(-1); err == nil || !strings.Contains(err.Error(), "--health.expect-gpus=-1") {
		t.Errorf("WithExpectGPUs(-1) = %v", err)
	}
}
