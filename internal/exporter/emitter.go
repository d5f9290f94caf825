package exporter

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"

	"github.com/gpuwatch/gpuwatch/internal/labelvalue"
)

// emitter is the per-scrape state the collectors write series into. It has
// two outputs that share every collector:
//   - ch != nil: const metrics for a prometheus.Registry (Collect);
//   - ch == nil: text exposition lines appended to one buffer per metric
//     (WriteText), which skips the client_golang/dto round trip.
//
// Emitters are pooled by the Exporter, so their buffers and scratch space are
// reused across scrapes: a steady-state text scrape allocates almost nothing.
type emitter struct {
	enabled []bool // by metricDef.id, fixed at New

	ch   chan<- prometheus.Metric
	bufs [][]byte // by metricDef.id; text output only

	// Label values of the device being rendered, and (text output) the
	// escaped `GPU",uuid="UUID` between them, built once per device: every
	// device series starts with it.
	gpu, uuid string
	devText   []byte
	// lv is scratch for a series' label values; no collector needs more.
	lv [20]string
	// sparseLV is scratch for the values of a series that leaves out
	// empty labels (emitSparse).
	sparseLV [20]string

	// Scratch of the processes collector, reused across scrapes.
	procIndex  map[ownerKey]int
	procAggs   []ownerAgg
	procCounts []int
	devByIndex []int32
	// Scratch for sorting map keys of the exporter collector.
	keys []string
}

func newEmitter(enabled []bool) *emitter {
	return &emitter{
		enabled:   enabled,
		bufs:      make([][]byte, len(catalog)),
		procIndex: make(map[ownerKey]int),
	}
}

// reset readies a pooled emitter for the next scrape.
func (em *emitter) reset() {
	em.ch = nil
	for i := range em.bufs {
		em.bufs[i] = em.bufs[i][:0]
	}
	em.gpu, em.uuid = "", ""
	em.devText = em.devText[:0]
	clear(em.lv[:])
}

// setDevice makes d the device that dev* series are about.
func (em *emitter) setDevice(d *snapshot.Device) {
	em.gpu, em.uuid = itoa(d.Index), d.UUID
	if em.ch == nil {
		b := appendLabelValue(em.devText[:0], em.gpu)
		b = append(b, `",uuid="`...)
		em.devText = appendLabelValue(b, em.uuid)
	}
}

// emit writes one series. lvs must be a slice of em.lv (or otherwise owned by
// the emitter); its length selects the plain or the opt-in label set.
func (em *emitter) emit(m *metricDef, v float64, lvs []string) {
	boundLabels(lvs)
	if m.omitEmpty != 0 && len(lvs) == len(m.Labels) {
		if present := m.presentLabels(lvs); present != allLabels(len(lvs)) {
			em.emitSparse(m, v, lvs, present)
			return
		}
	}
	if em.ch != nil {
		desc := m.desc
		if len(lvs) != len(m.Labels) {
			desc = m.descOptIn
		}
		// client_golang rejects invalid UTF-8 in label values; owner names
		// and commands come from the wild, so replace bad bytes first.
		for i, s := range lvs {
			if !utf8.ValidString(s) {
				lvs[i] = strings.ToValidUTF8(s, "\uFFFD")
			}
		}
		// The label count is fixed by the code and the values are valid
		// UTF-8, so NewConstMetric cannot fail here; the tests check that
		// every catalog metric comes out.
		if metric, err := prometheus.NewConstMetric(desc, m.valueType, v, lvs...); err == nil {
			em.ch <- metric
		}
		return
	}
	tf := &m.text
	if len(lvs) != len(m.Labels) {
		tf = &m.textOptIn
	}
	em.bufs[m.id] = tf.appendSeries(em.bufs[m.id], lvs, v)
}

// emitDev is emit for a series whose first two label values are em.gpu and
// em.uuid: the text output copies their escaped form from em.devText
// instead of escaping the UUID again for every series.
func (em *emitter) emitDev(m *metricDef, v float64, lvs []string) {
	if em.ch != nil {
		em.emit(m, v, lvs)
		return
	}
	tf := &m.text
	if len(lvs) != len(m.Labels) {
		tf = &m.textOptIn
	}
	boundLabels(lvs[2:])
	b := append(em.bufs[m.id], tf.parts[0]...)
	b = append(b, em.devText...)
	for i := 2; i < len(lvs); i++ {
		b = append(b, tf.parts[i]...)
		b = appendLabelValue(b, lvs[i])
	}
	b = append(b, `"} `...)
	b = appendFloat(b, v)
	em.bufs[m.id] = append(b, '\n')
}

// boundLabels shortens, in place, label values longer than
// labelvalue.MaxBytes: owner names come from the wild, and one value over
// Prometheus's label_value_length_limit would fail the whole scrape.
func boundLabels(lvs []string) {
	for i, s := range lvs {
		if len(s) > labelvalue.MaxBytes {
			lvs[i] = labelvalue.Bound(s)
		}
	}
}

// on reports whether the metric is enabled; collectors check it before
// doing any work for a metric.
func (em *emitter) on(m *metricDef) bool { return em.enabled[m.id] }

// dev emits a device series labelled {gpu, uuid}.
func (em *emitter) dev(m *metricDef, v float64) {
	if !em.enabled[m.id] {
		return
	}
	em.lv[0], em.lv[1] = em.gpu, em.uuid
	em.emitDev(m, v, em.lv[:2])
}

// dev1 emits a device series with one more label value.
func (em *emitter) dev1(m *metricDef, v float64, a string) {
	if !em.enabled[m.id] {
		return
	}
	em.lv[0], em.lv[1], em.lv[2] = em.gpu, em.uuid, a
	em.emitDev(m, v, em.lv[:3])
}

// dev2 emits a device series with two more label values.
func (em *emitter) dev2(m *metricDef, v float64, a, b string) {
	if !em.enabled[m.id] {
		return
	}
	em.lv[0], em.lv[1], em.lv[2], em.lv[3] = em.gpu, em.uuid, a, b
	em.emitDev(m, v, em.lv[:4])
}

// devN emits a device series with any number of extra label values.
func (em *emitter) devN(m *metricDef, v float64, extra ...string) {
	if !em.enabled[m.id] {
		return
	}
	em.lv[0], em.lv[1] = em.gpu, em.uuid
	n := 2 + copy(em.lv[2:], extra)
	em.emitDev(m, v, em.lv[:n])
}

// global emits a series that is not about one device.
func (em *emitter) global(m *metricDef, v float64, lvs ...string) {
	if !em.enabled[m.id] {
		return
	}
	n := copy(em.lv[:], lvs)
	em.emit(m, v, em.lv[:n])
}

type number interface {
	~int | ~uint64 | ~float64
}

// devOpt emits a device series when the reading is present.
func devOpt[T number](em *emitter, m *metricDef, o snapshot.Opt[T]) {
	if o.Valid {
		em.dev(m, float64(o.Value))
	}
}

// devOpt1 emits a device series with one more label when the reading is present.
func devOpt1[T number](em *emitter, m *metricDef, o snapshot.Opt[T], a string) {
	if o.Valid {
		em.dev1(m, float64(o.Value), a)
	}
}

// devOpt2 emits a device series with two more labels when the reading is present.
func devOpt2[T number](em *emitter, m *metricDef, o snapshot.Opt[T], a, b string) {
	if o.Valid {
		em.dev2(m, float64(o.Value), a, b)
	}
}

// devOptBool emits 1 or 0 when the reading is present.
func devOptBool(em *emitter, m *metricDef, o snapshot.Opt[bool]) {
	if o.Valid {
		em.dev(m, bool01(o.Value))
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// smallInts caches the decimal strings of the numbers used as label values
// (GPU index, NVLink link, instance IDs, XID codes) so that a scrape does
// not format them again.
var smallInts = func() [256]string {
	var s [256]string
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func itoa(i int) string {
	if i >= 0 && i < len(smallInts) {
		return smallInts[i]
	}
	return strconv.Itoa(i)
}

func utoa(u uint64) string {
	if u < uint64(len(smallInts)) {
		return smallInts[u]
	}
	return strconv.FormatUint(u, 10)
}
