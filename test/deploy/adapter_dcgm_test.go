package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestPrometheusAdapterDCGMExamples: the adapter rules for dcgm-exporter's
// names, one file per generation, serve the metric hpa-gpu-utilization.yaml
// asks for from a name gpuwatch --compat=dcgm serves under those versions,
// and give each pod the average utilization of its GPUs as a 0-1 ratio in
// a real PromQL engine (promtool test rules), on series labelled as the
// chart's scrape labels them (exported_pod, exported_namespace), across
// nodes whose GPU indexes collide and pods of the same name in another
// namespace.
func TestPrometheusAdapterDCGMExamples(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	dir := filepath.Join(repoRoot, "deploy", "kubernetes", "examples")
	hpaYAML, err := os.ReadFile(filepath.Join(dir, "hpa-gpu-utilization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict("hpa-gpu-utilization.yaml", hpaYAML)
	if err != nil {
		t.Fatal(err)
	}
	hpa, ok := objs[0].value.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok || len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Pods == nil {
		t.Fatalf("want one HorizontalPodAutoscaler on one Pods metric, got %+v", objs)
	}
	for _, c := range []struct {
		file     string
		versions []string
		host     string
		scale    float64 // served value per unit of ratio
	}{
		{"prometheus-adapter-dcgm-4.8-values.yaml", []string{"4.8"}, "Hostname", 100},
		{"prometheus-adapter-dcgm-4.9-values.yaml", []string{"4.9", "4.10"}, "hostname", 1},
	} {
		t.Run(c.file, func(t *testing.T) {
			valuesYAML, err := os.ReadFile(filepath.Join(dir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			var values adapterValues
			if err := yaml.UnmarshalStrict(valuesYAML, &values); err != nil {
				t.Fatalf("%s: %v", c.file, err)
			}
			if len(values.Rules.Custom) != 1 {
				t.Fatalf("%d custom rules, want 1", len(values.Rules.Custom))
			}
			rule := values.Rules.Custom[0]
			if got := hpa.Spec.Metrics[0].Pods.Metric.Name; got != rule.Name.As {
				t.Fatalf("the HPA asks for %q, the adapter serves %q", got, rule.Name.As)
			}
			metric, _, _ := strings.Cut(rule.SeriesQuery, "{")
			if !regexp.MustCompile(rule.Name.Matches).MatchString(metric) {
				t.Fatalf("name.matches %q does not match the series %s", rule.Name.Matches, metric)
			}
			for _, v := range c.versions {
				if !servedAsDCGM(metric, v) {
					t.Errorf("--compat.dcgm-version=%s does not serve %s", v, metric)
				}
			}
			tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(rule.MetricsQuery)
			if err != nil {
				t.Fatal(err)
			}
			var query strings.Builder
			err = tmpl.Execute(&query, map[string]string{
				"Series":        metric,
				"LabelMatchers": `exported_namespace="default",exported_pod=~"worker-0|worker-1"`,
				"GroupBy":       "exported_pod",
			})
			if err != nil {
				t.Fatal(err)
			}
			series := func(node, gpu, ns, pod string, ratio float64) string {
				return `      - series: '` + metric + `{instance="` + node + `",gpu="` + gpu + `",UUID="GPU-` + node + gpu + `",` + c.host + `="` + node +
					`",exported_namespace="` + ns + `",exported_pod="` + pod + `",exported_container="train",namespace="gpuwatch",pod="gpuwatch-x"}'` +
					"\n        values: '" + strconv.FormatFloat(ratio*c.scale, 'g', -1, 64) + "x10'\n"
			}
			tests := "rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
				series("node-a", "0", "default", "worker-0", 0.2) + series("node-a", "1", "default", "worker-0", 0.6) +
				series("node-b", "0", "default", "worker-1", 0.9) + series("node-b", "1", "other", "worker-0", 0.1) +
				"    promql_expr_test:\n      - expr: '" + strings.ReplaceAll(query.String(), "'", "''") + "'\n" +
				"        eval_time: 5m\n        exp_samples:\n" +
				"          - labels: '{exported_pod=\"worker-0\"}'\n            value: 0.4\n" +
				"          - labels: '{exported_pod=\"worker-1\"}'\n            value: 0.9\n"
			file := filepath.Join(t.TempDir(), "adapter_test.yml")
			if err := os.WriteFile(file, []byte(tests), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
				t.Fatalf("promtool test rules: %v\n%s\nquery: %s", err, out, query.String())
			}
		})
	}
}

// servedAsDCGM says whether gpuwatch --compat=dcgm --compat.dcgm-version=v
// serves a metric of that name.
func servedAsDCGM(name, v string) bool {
	if v == "4.8" {
		return slices.ContainsFunc(exporter.CompatCatalog("dcgm"), func(m exporter.Metric) bool { return m.Name == name })
	}
	return slices.ContainsFunc(exporter.CompatCatalog("dcgm-4.9"), func(m exporter.Metric) bool {
		return m.Name == name && slices.Contains(m.DCGMVersions, v)
	})
}
