// Package chartenv renders the gpuwatch Helm chart's monitors in tests and
// turns them into the Prometheus scrape configuration prometheus-operator
// would generate (which cannot run here). It is apart from testenv so that
// only the tests that use it compile prometheus-operator's types.
package chartenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// HelmVersion is the helm scripts/helm.sh builds and caches in .tools/.
const HelmVersion = "v3.22.0"

// HelmBin is HELM_BIN, else the helm scripts/helm.sh cached (scripts/install-deps.sh
// builds it); building it inside a test would take minutes.
func HelmBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HELM_BIN"); p != "" {
		return p
	}
	p := filepath.Join(testenv.RepoRoot(), ".tools", "helm-"+HelmVersion, "helm")
	if _, err := os.Stat(p); err != nil {
		testenv.Missing(t, "helm "+HelmVersion+" is not built; run scripts/helm.sh (scripts/install-deps.sh does)")
	}
	return p
}

// ChartServiceMonitor renders the gpuwatch chart's ServiceMonitor with the
// given --set values (serviceMonitor.enabled=true is added) and decodes it
// strictly into prometheus-operator's type.
func ChartServiceMonitor(t testing.TB, set ...string) *monitoringv1.ServiceMonitor {
	t.Helper()
	args := []string{"template", "gpuwatch", filepath.Join(testenv.RepoRoot(), "deploy", "helm", "gpuwatch"), "--namespace", "gpuwatch",
		"--show-only", "templates/servicemonitor.yaml", "--set", "serviceMonitor.enabled=true"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(HelmBin(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var sm monitoringv1.ServiceMonitor
	if err := yaml.UnmarshalStrict(stdout.Bytes(), &sm); err != nil {
		t.Fatalf("the chart's ServiceMonitor: %v\n%s", err, stdout.String())
	}
	return &sm
}

// PromRelabel is one entry of a Prometheus relabel_configs or
// metric_relabel_configs list.
type PromRelabel struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// PromRelabels translates a monitor's relabelings into the Prometheus
// configuration prometheus-operator generates from them.
func PromRelabels(rcs []monitoringv1.RelabelConfig) []PromRelabel {
	out := make([]PromRelabel, 0, len(rcs))
	for _, rc := range rcs {
		p := PromRelabel{TargetLabel: rc.TargetLabel, Regex: rc.Regex, Modulus: rc.Modulus,
			Separator: rc.Separator, Replacement: rc.Replacement, Action: strings.ToLower(rc.Action)}
		for _, l := range rc.SourceLabels {
			p.SourceLabels = append(p.SourceLabels, string(l))
		}
		out = append(out, p)
	}
	return out
}

// OperatorTargetLabels are the labels prometheus-operator gives a
// ServiceMonitor target before the monitor's own relabelings run: the
// exporter pod's namespace, pod and container, its Service and port name,
// and the node the pod runs on (a meta label, gone after relabelling).
func OperatorTargetLabels(pod, node string) map[string]string {
	return map[string]string{
		"namespace": "gpuwatch", "pod": pod, "container": "gpuwatch",
		"service": "gpuwatch", "endpoint": "metrics", "__meta_kubernetes_pod_node_name": node,
	}
}

// ChartScrapeJob is the Prometheus scrape job prometheus-operator would
// generate from the chart's ServiceMonitor endpoint for the given targets
// (address → the exporter pod and its node), rendered with the chart values
// set.
func ChartScrapeJob(t testing.TB, name string, targets map[string][2]string, set ...string) map[string]any {
	t.Helper()
	sm := ChartServiceMonitor(t, set...)
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("the chart's ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	var static []any
	for addr, podNode := range targets {
		static = append(static, map[string]any{"targets": []string{addr}, "labels": OperatorTargetLabels(podNode[0], podNode[1])})
	}
	return map[string]any{
		"job_name":               name,
		"honor_labels":           ep.HonorLabels,
		"static_configs":         static,
		"relabel_configs":        PromRelabels(ep.RelabelConfigs),
		"metric_relabel_configs": PromRelabels(ep.MetricRelabelConfigs),
	}
}
