package exporter

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// Series whose empty labels are left out. dcgm-exporter writes GPU_I_PROFILE,
// GPU_I_ID, pod, namespace, container and hpc_job only when they have a
// value, so one metric family holds series with different label sets; a
// selector such as {pod=""} matches either way, but label_values(), `by
// (pod)` and exported_* relabelling see the difference. The catalog keeps
// the full label list; a series leaves out those of its omitEmpty labels
// that are empty.

// sparseDescs caches a metric's descriptors by the set of labels present,
// for the client_golang output (the text output needs none).
type sparseDescs struct {
	mu    sync.Mutex
	byset map[uint32]*prometheus.Desc
}

// omitWhenEmpty marks labels (by name) to be left out of a series when
// empty. The first label must stay: the text output's first part carries
// the metric name.
func (m *metricDef) omitWhenEmpty(labels ...string) *metricDef {
	for i, l := range m.Labels {
		for _, o := range labels {
			if l == o {
				if i == 0 {
					panic("exporter: the first label of " + m.Name + " cannot be omitted")
				}
				m.omitEmpty |= 1 << i
			}
		}
	}
	return m
}

func allLabels(n int) uint32 { return 1<<n - 1 }

// presentLabels is the set of labels a series writes: every label but the
// omitEmpty ones whose value is empty.
func (m *metricDef) presentLabels(lvs []string) uint32 {
	present := allLabels(len(lvs))
	for i, v := range lvs {
		if v == "" && m.omitEmpty&(1<<i) != 0 {
			present &^= 1 << i
		}
	}
	return present
}

// sparseDesc returns the descriptor of the metric with only the labels in
// present, built once per set.
func (m *metricDef) sparseDesc(present uint32) *prometheus.Desc {
	m.sparse.mu.Lock()
	defer m.sparse.mu.Unlock()
	if d, ok := m.sparse.byset[present]; ok {
		return d
	}
	var names []string
	for i, l := range m.Labels {
		if present&(1<<i) != 0 {
			names = append(names, l)
		}
	}
	d := prometheus.NewDesc(m.Name, m.Help, names, nil)
	if m.sparse.byset == nil {
		m.sparse.byset = map[uint32]*prometheus.Desc{}
	}
	m.sparse.byset[present] = d
	return d
}

// emitSparse writes a series with the labels in present only.
func (em *emitter) emitSparse(m *metricDef, v float64, lvs []string, present uint32) {
	if em.ch != nil {
		vals := em.sparseLV[:0]
		for i, s := range lvs {
			if present&(1<<i) != 0 {
				if !utf8.ValidString(s) {
					s = strings.ToValidUTF8(s, "\uFFFD")
				}
				vals = append(vals, s)
			}
		}
		// As in emit: the label count matches the descriptor and the
		// values are valid UTF-8, so this cannot fail.
		if metric, err := prometheus.NewConstMetric(m.sparseDesc(present), m.valueType, v, vals...); err == nil {
			em.ch <- metric
		}
		clear(em.sparseLV[:])
		return
	}
	b := em.bufs[m.id]
	for i, s := range lvs {
		if present&(1<<i) != 0 {
			b = append(b, m.text.parts[i]...)
			b = appendLabelValue(b, s)
		}
	}
	b = append(b, `"} `...)
	b = appendFloat(b, v)
	em.bufs[m.id] = append(b, '\n')
}
