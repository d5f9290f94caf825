// Package deploycheck validates the shipped Grafana dashboards and
// Prometheus rules against what gpuwatch really exports: every PromQL
// expression parses with Prometheus' own parser and names only metrics that
// exist, and dashboard filters reach every panel. Tests import it; the
// gpuwatch binary does not.
package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

// Origin says where a metric comes from.
type Origin string

const (
	FromGpuwatch     Origin = "gpuwatch catalog"
	FromPending      Origin = "pending (NAMES.md, not yet in the catalog)"
	FromNodeExporter Origin = "node_exporter"
	FromPrometheus   Origin = "Prometheus itself"
	FromRecording    Origin = "recording rule"
)

// MetricInfo is what a query may rely on about a metric.
type MetricInfo struct {
	Origin Origin
	// Labels the series carry, target labels (job, instance, cluster)
	// included for scraped metrics.
	Labels []string
}

// HasLabel reports whether the metric's series carry label l.
func (m MetricInfo) HasLabel(l string) bool {
	return slices.Contains(m.Labels, l)
}

// Catalog maps a metric name to what is known about it.
type Catalog map[string]MetricInfo

// targetLabels are added by Prometheus to every scraped series; cluster
// where the setup adds one (a target or external label).
var targetLabels = []string{"job", "instance", "cluster"}

// NodeExporterMetrics are the node_exporter metrics the dashboards use, with
// their own labels. The end-to-end test scrapes a real node_exporter and
// asserts each returns data, so a name here that node_exporter does not
// export fails there.
var NodeExporterMetrics = map[string][]string{
	"node_cpu_seconds_total":         {"cpu", "mode"},
	"node_memory_MemAvailable_bytes": nil,
	"node_memory_MemTotal_bytes":     nil,
	"node_load1":                     nil,
}

// prometheusMetrics are written by Prometheus, not scraped from an exporter.
var prometheusMetrics = map[string][]string{
	"up":     nil,
	"ALERTS": {"alertname", "alertstate", "severity"},
}

// Load builds the catalog: gpuwatch's own metrics (the same list `gpuwatch
// metrics` prints, so it follows the code), the pending names, node_exporter's
// and Prometheus' own, and the recording rules in recordingRules.
func Load(recordingRules string) (Catalog, error) {
	c := Catalog{}
	scraped := func(labels []string) []string {
		return append(append([]string(nil), labels...), targetLabels...)
	}
	for _, m := range exporter.Catalog() {
		c[m.Name] = MetricInfo{FromGpuwatch, scraped(append(m.Labels, m.OptInLabels...))}
	}
	for _, m := range slurm.Metrics {
		c[m.Name] = MetricInfo{FromGpuwatch, scraped(m.Labels)}
	}
	for name, labels := range PendingMetrics {
		if m, ok := c[name]; ok {
			return nil, fmt.Errorf("%s is in gpuwatch's catalog now (%s): remove it from deploycheck.PendingMetrics", name, m.Origin)
		}
		c[name] = MetricInfo{FromPending, scraped(labels)}
	}
	for name, labels := range NodeExporterMetrics {
		c[name] = MetricInfo{FromNodeExporter, scraped(labels)}
	}
	for name, labels := range prometheusMetrics {
		c[name] = MetricInfo{FromPrometheus, scraped(labels)}
	}
	rules, err := LoadRules(recordingRules)
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if r.Record == "" {
			continue
		}
		labels, err := outputLabels(r.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: record %s: %v", recordingRules, r.Record, err)
		}
		c[r.Record] = MetricInfo{FromRecording, labels}
	}
	return c, nil
}

// Names lists the catalog's metric names of one origin, sorted.
func (c Catalog) Names(o Origin) []string {
	var out []string
	for n, m := range c {
		if m.Origin == o {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Rule is one alerting or recording rule of a rule file.
type Rule struct {
	Group  string
	Alert  string `yaml:"alert"`
	Record string `yaml:"record"`
	Expr   string `yaml:"expr"`
}

// LoadRules reads the rules of a Prometheus rule file.
func LoadRules(path string) ([]Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []Rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var out []Rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			r.Group = g.Name
			out = append(out, r)
		}
	}
	return out, nil
}

// RuleFiles are the shipped rule files, relative to the repository root.
var RuleFiles = []string{"deploy/prometheus/alerts.yml", "deploy/prometheus/recording.yml"}

// RecordingRules is the shipped recording rule file under root.
func RecordingRules(root string) string { return filepath.Join(root, RuleFiles[1]) }
