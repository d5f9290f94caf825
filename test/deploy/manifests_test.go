package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestPlainManifestsUpToDate: deploy/kubernetes is what `make manifests`
// renders from the chart today, and every object in it decodes strictly.
func TestPlainManifestsUpToDate(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(repoRoot, "scripts", "render-manifests.sh"), dir)
	cmd.Env = append(os.Environ(), "HELM_BIN="+helmBin(t))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/render-manifests.sh: %v\n%s", err, out)
	}
	fresh, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(fresh) == 0 {
		t.Fatalf("render-manifests.sh wrote nothing (%v)", err)
	}
	for _, f := range fresh {
		name := filepath.Base(f)
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("deploy/kubernetes/%s is stale or missing (%v): run make manifests", name, err)
			continue
		}
		if _, err := decodeStrict("deploy/kubernetes/"+name, got); err != nil {
			t.Error(err)
		}
	}
}

// shippedFiles lists the files the chart must carry copies of: the
// dashboards, and the rule files without their promtool unit tests
// (scripts/chart-files.sh applies the same rule).
func shippedFiles(t *testing.T, dir, glob string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, dir, glob))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		if !strings.Contains(filepath.Base(p), "test") {
			out = append(out, p)
		}
	}
	return out
}

// TestChartFilesMatchShipped: the chart's copies of the dashboards, rule
// files and NPD monitor equal deploy/grafana/dashboards, deploy/prometheus
// and deploy/kubernetes/node-problem-detector, file for file.
func TestChartFilesMatchShipped(t *testing.T) {
	for _, c := range []struct{ src, glob, copies string }{
		{"deploy/grafana/dashboards", "*.json", "files/grafana"},
		{"deploy/prometheus", "*.yml", "files/prometheus"},
		{"deploy/kubernetes/node-problem-detector", "*.json", "files/node-problem-detector"},
	} {
		var want, got []string
		for _, p := range shippedFiles(t, c.src, c.glob) {
			want = append(want, filepath.Base(p))
			orig, _ := os.ReadFile(p)
			cp, err := os.ReadFile(filepath.Join(chartDir, c.copies, filepath.Base(p)))
			if err != nil || !bytes.Equal(orig, cp) {
				t.Errorf("%s/%s: the chart's copy is stale or missing (%v): run make chart-files", c.copies, filepath.Base(p), err)
			}
		}
		copies, _ := filepath.Glob(filepath.Join(chartDir, c.copies, c.glob))
		for _, p := range copies {
			got = append(got, filepath.Base(p))
		}
		if !slices.Equal(want, got) {
			t.Errorf("chart %s holds %v, %s holds %v: run make chart-files", c.copies, got, c.src, want)
		}
	}
}

// TestChartCarriesShippedRulesAndDashboards: the PrometheusRule holds exactly
// the rule groups of deploy/prometheus, and there is one sidecar-labelled
// ConfigMap per dashboard holding that dashboard, small enough for kubectl apply.
func TestChartCarriesShippedRulesAndDashboards(t *testing.T) {
	r := renderDecoded(t, valuesCase{name: "monitoring", set: []string{"prometheusRule.enabled=true"}})

	var wantGroups []any
	for _, p := range shippedFiles(t, "deploy/prometheus", "*.yml") {
		data, _ := os.ReadFile(p)
		var file struct {
			Groups []any `json:"groups"`
		}
		if err := yaml.UnmarshalStrict(data, &file); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		wantGroups = append(wantGroups, file.Groups...)
	}
	rules := all[monitoringv1.PrometheusRule](r)
	switch {
	case len(wantGroups) == 0 && len(rules) != 0:
		t.Errorf("deploy/prometheus has no rules, but a PrometheusRule was rendered")
	case len(wantGroups) > 0 && len(rules) != 1:
		t.Errorf("%d PrometheusRules, want 1 carrying deploy/prometheus", len(rules))
	case len(wantGroups) > 0:
		if got := normalize(t, rules[0].Spec.Groups); !reflect.DeepEqual(got, normalize(t, wantGroups)) {
			gj, _ := json.MarshalIndent(got, "", " ")
			wj, _ := json.MarshalIndent(normalize(t, wantGroups), "", " ")
			t.Errorf("PrometheusRule groups differ from deploy/prometheus:\ngot  %s\nwant %s", gj, wj)
		}
	}

	maps := map[string]*corev1.ConfigMap{}
	for _, cm := range all[corev1.ConfigMap](r) {
		for key := range cm.Data {
			maps[key] = cm
		}
	}
	dashboards := shippedFiles(t, "deploy/grafana/dashboards", "*.json")
	if len(dashboards) == 0 || len(maps) != len(dashboards) {
		t.Errorf("%d dashboard ConfigMap keys for %d dashboards", len(maps), len(dashboards))
	}
	for _, p := range dashboards {
		name := filepath.Base(p)
		cm, ok := maps[name]
		if !ok {
			t.Errorf("no ConfigMap carries %s", name)
			continue
		}
		want, _ := os.ReadFile(p)
		if strings.TrimRight(cm.Data[name], "\n") != strings.TrimRight(string(want), "\n") {
			t.Errorf("ConfigMap %s: %s differs from %s", cm.Name, name, p)
		}
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap %s lacks the Grafana sidecar label grafana_dashboard=1: %v", cm.Name, cm.Labels)
		}
		// kubectl apply (client side) keeps the whole object in an annotation of at most 256 KiB.
		if js, _ := json.Marshal(cm); len(js) > 256<<10-4096 {
			t.Errorf("ConfigMap %s is %d bytes as JSON: too big for kubectl apply's annotation", cm.Name, len(js))
		}
	}
}

// normalize round-trips a value through JSON so that typed rule groups and
// groups read from a rule file compare field by field.
func normalize(t *testing.T, v any) any {
	t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
