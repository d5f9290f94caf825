package deploy

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestChartShipsTheNPDMonitor: with nodeProblemDetector.enabled the chart
// renders one ConfigMap, named and placed as the values say, holding the
// shipped monitor byte for byte; by default it renders none.
func TestChartShipsTheNPDMonitor(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(repoRoot, npdConfig))
	if err != nil {
		t.Fatal(err)
	}
	monitor := func(r rendered) *corev1.ConfigMap {
		for _, cm := range all[corev1.ConfigMap](r) {
			if _, ok := cm.Data["gpuwatch-health-monitor.json"]; ok {
				return cm
			}
		}
		return nil
	}
	if cm := monitor(renderDecoded(t, valuesCase{name: "default"})); cm != nil {
		t.Errorf("the default values render the NPD monitor %s", cm.Name)
	}
	r := renderDecoded(t, valuesCase{name: "npd", set: []string{
		"nodeProblemDetector.enabled=true", "nodeProblemDetector.namespace=kube-system", "nodeProblemDetector.labels.team=gpu",
	}})
	cm := monitor(r)
	switch {
	case cm == nil:
		t.Fatal("nodeProblemDetector.enabled=true renders no ConfigMap with gpuwatch-health-monitor.json")
	case cm.Name != "gpuwatch-health-monitor" || cm.Namespace != "kube-system" || cm.Labels["team"] != "gpu":
		t.Errorf("ConfigMap %s/%s, labels %v", cm.Namespace, cm.Name, cm.Labels)
	case cm.Data["gpuwatch-health-monitor.json"] != string(want):
		t.Errorf("the ConfigMap's monitor differs from %s:\n%s", npdConfig, cm.Data["gpuwatch-health-monitor.json"])
	}
	r = renderDecoded(t, valuesCase{name: "npd-name", set: []string{"nodeProblemDetector.enabled=true", "nodeProblemDetector.configMapName=npd-gpu"}})
	if cm := monitor(r); cm == nil || cm.Name != "npd-gpu" || cm.Namespace != "gpuwatch" {
		t.Errorf("configMapName npd-gpu: %+v", cm)
	}
}
