package testenv

import (
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a parsed text exposition: metric families by name.
type Metrics = map[string]*dto.MetricFamily

// ParseMetrics parses a text exposition (a /metrics page, a .prom file),
// failing the test when it is not valid.
func ParseMetrics(t testing.TB, text string) Metrics {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing exposition: %v\n%s", err, text)
	}
	return families
}

// Sample returns the value of the first series of family name whose labels
// include all of want, and whether there is one: absent is not 0.
func Sample(families Metrics, name string, want map[string]string) (float64, bool) {
	mf, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := make(map[string]string, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		have[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Near reports whether got is within rel of want, relative to want's
// magnitude, or absolutely when |want| < 1 (so that 0 has a tolerance).
func Near(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Max(1, math.Abs(want))
}
