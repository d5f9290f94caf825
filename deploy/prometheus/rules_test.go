// Package prometheus holds the shipped alert and recording rules
// (alerts.yml, recording.yml) and their promtool unit tests (tests/); it
// has no Go code of its own.
package prometheus

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/deploycheck"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin := testenv.RequireTool(t, "promtool", "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "." // rule_files in the tests are relative to them
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml", "recording.yml")
}

func testFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("tests", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests in tests/: %v", err)
	}
	return files
}

func TestPromtoolTestRules(t *testing.T) {
	promtool(t, append([]string{"test", "rules"}, testFiles(t)...)...)
}

// TestEveryRuleHasAUnitTest: each alert is expected to fire in some
// alert_rule_test, and each recording rule is evaluated by some
// promql_expr_test with an expected sample.
func TestEveryRuleHasAUnitTest(t *testing.T) {
	fired, evaluated := map[string]bool{}, map[string]bool{}
	for _, f := range testFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests []struct {
				Alerts []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
				Exprs []struct {
					Expr       string `yaml:"expr"`
					ExpSamples []any  `yaml:"exp_samples"`
				} `yaml:"promql_expr_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range doc.Tests {
			for _, a := range tc.Alerts {
				if len(a.ExpAlerts) > 0 {
					fired[a.Alertname] = true
				}
			}
			for _, e := range tc.Exprs {
				if len(e.ExpSamples) == 0 {
					continue
				}
				sels, err := deploycheck.Parse(e.Expr)
				if err != nil {
					t.Errorf("%s: %q: %v", f, e.Expr, err)
				}
				for _, s := range sels {
					evaluated[s.Metric] = true
				}
			}
		}
	}
	for _, file := range []string{"alerts.yml", "recording.yml"} {
		rules, err := deploycheck.LoadRules(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			switch {
			case r.Alert != "" && !fired[r.Alert]:
				t.Errorf("%s: alert %s is never expected to fire in tests/", file, r.Alert)
			case r.Record != "" && !evaluated[r.Record]:
				t.Errorf("%s: recording rule %s has no promql_expr_test with samples in tests/", file, r.Record)
			}
		}
	}
}

// TestRulesNameOnlyExistingMetrics parses every rule expression with
// Prometheus' parser and checks each metric it names exists.
func TestRulesNameOnlyExistingMetrics(t *testing.T) {
	c, err := deploycheck.Load("recording.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"alerts.yml", "recording.yml"} {
		rules, err := deploycheck.LoadRules(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			_, errs := c.CheckNames(r.Expr)
			for _, err := range errs {
				t.Errorf("%s: %s%s: %v", file, r.Alert, r.Record, err)
			}
		}
	}
}
