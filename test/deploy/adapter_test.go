package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// adapterValues mirrors the part of the prometheus-adapter chart's values
// that the example sets: its rules.custom entries are the adapter's
// DiscoveryRule (sigs.k8s.io/prometheus-adapter pkg/config), whose module is
// the whole adapter, so the few fields are restated here and decoded strictly.
type adapterValues struct {
	Rules struct {
		Default bool `json:"default"`
		Custom  []struct {
			SeriesQuery string `json:"seriesQuery"`
			Resources   struct {
				Overrides map[string]struct {
					Group    string `json:"group,omitempty"`
					Resource string `json:"resource"`
				} `json:"overrides"`
			} `json:"resources"`
			Name struct {
				Matches string `json:"matches"`
				As      string `json:"as"`
			} `json:"name"`
			MetricsQuery string `json:"metricsQuery"`
		} `json:"custom"`
	} `json:"rules"`
}

// TestPrometheusAdapterExample: the HPA decodes strictly and asks for the
// metric the adapter rule serves, and the rule's query, expanded by Go's
// text/template as the adapter expands it, gives each pod the average
// utilization of its own GPUs in a real PromQL engine (promtool test rules),
// across nodes whose GPU indexes collide and pods of the same name in
// another namespace.
func TestPrometheusAdapterExample(t *testing.T) {
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
	if !ok || len(objs) != 1 || len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Pods == nil {
		t.Fatalf("want one HorizontalPodAutoscaler on one Pods metric, got %+v", objs)
	}

	valuesYAML, err := os.ReadFile(filepath.Join(dir, "prometheus-adapter-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values adapterValues
	if err := yaml.UnmarshalStrict(valuesYAML, &values); err != nil {
		t.Fatalf("prometheus-adapter-values.yaml: %v", err)
	}
	if len(values.Rules.Custom) != 1 {
		t.Fatalf("%d custom rules, want 1", len(values.Rules.Custom))
	}
	rule := values.Rules.Custom[0]
	if got := hpa.Spec.Metrics[0].Pods.Metric.Name; got != rule.Name.As {
		t.Fatalf("the HPA asks for %q, the adapter serves %q", got, rule.Name.As)
	}

	tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Parse(rule.MetricsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var query strings.Builder
	err = tmpl.Execute(&query, map[string]string{
		"Series":        "gpu_kubernetes_allocation_info",
		"LabelMatchers": `namespace="default",pod=~"worker-0|worker-1"`,
		"GroupBy":       "pod",
	})
	if err != nil {
		t.Fatal(err)
	}

	alloc := func(node, gpu, uuid, ns, pod string) string {
		return `      - series: 'gpu_kubernetes_allocation_info{instance="` + node + `",node="` + node + `",gpu="` + gpu + `",uuid="` + uuid +
			`",mig_uuid="",namespace="` + ns + `",pod="` + pod + `",container="train"}'` + "\n        values: '1x10'\n"
	}
	util := func(node, gpu, uuid, v string) string {
		return `      - series: 'gpu_utilization_ratio{instance="` + node + `",node="` + node + `",gpu="` + gpu + `",uuid="` + uuid + `"}'` +
			"\n        values: '" + v + "x10'\n"
	}
	tests := "rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
		alloc("node-a", "0", "GPU-a0", "default", "worker-0") + alloc("node-a", "1", "GPU-a1", "default", "worker-0") +
		alloc("node-b", "0", "GPU-b0", "default", "worker-1") + alloc("node-b", "1", "GPU-b1", "other", "worker-0") +
		util("node-a", "0", "GPU-a0", "0.2") + util("node-a", "1", "GPU-a1", "0.6") +
		util("node-b", "0", "GPU-b0", "0.9") + util("node-b", "1", "GPU-b1", "0.1") +
		"    promql_expr_test:\n      - expr: '" + strings.ReplaceAll(query.String(), "'", "''") + "'\n" +
		"        eval_time: 5m\n        exp_samples:\n" +
		"          - labels: '{pod=\"worker-0\"}'\n            value: 0.4\n" +
		"          - labels: '{pod=\"worker-1\"}'\n            value: 0.9\n"
	file := filepath.Join(t.TempDir(), "adapter_test.yml")
	if err := os.WriteFile(file, []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\nquery: %s", err, out, query.String())
	}
}
