// Package exporter renders a snapshot.Snapshot as Prometheus metrics.
//
// Every metric is declared once in the catalog (catalog.go); one collector
// per concern (collect_*.go, node_exporter style) turns a device's readings
// into series. The package never calls NVML: it only reads the snapshot its
// Source returns.
//
// Two outputs share the collectors: Exporter is a prometheus.Collector of
// const metrics (register it in a Registry), and WriteText / TextHandler
// write the text exposition straight from the snapshot, several times
// faster than a Registry's Gather plus expfmt (see BenchmarkCollectAndEncode).
package exporter

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Source returns the snapshot to render. It is called once per scrape; it is
// the place to share one collection between concurrent scrapes and to bound
// its time.
type Source interface {
	Snapshot(ctx context.Context) (*snapshot.Snapshot, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context) (*snapshot.Snapshot, error)

// Snapshot calls f.
func (f SourceFunc) Snapshot(ctx context.Context) (*snapshot.Snapshot, error) { return f(ctx) }

// Options configure an Exporter.
type Options struct {
	// Collectors turns collector groups (snapshot.Group*) on or off. Groups
	// not in the map keep their default (DefaultCollectors); nil means all
	// defaults. A disabled group produces no series, not even its
	// gpuwatch_collector_* series.
	Collectors map[string]bool
	// Metrics turns single metrics on or off (--metrics.config); nil means
	// the catalog defaults.
	Metrics *MetricFilter
	// PIDLabels adds pid and command labels to the gpu_process_* series,
	// one series per process instead of per owner. It multiplies
	// cardinality by the number of processes: opt in only where processes
	// are few and long-lived.
	PIDLabels bool
	// Compat selects the naming schemes: gpuwatch's own names, dcgm-exporter's
	// DCGM_FI_* names, or both. The zero value means NativeOnly.
	Compat Compat
	// Hostname is the Hostname label of the dcgm-exporter series.
	Hostname string
	// HostnameLowerCase names that label hostname, as dcgm-exporter
	// 4.8.3 and later do (upstream #655), instead of Hostname.
	HostnameLowerCase bool
}

// collector renders one group. device runs for every device that is up;
// snapshot runs once per scrape. Either may be nil.
type collector struct {
	device   func(em *emitter, s *snapshot.Snapshot, d *snapshot.Device)
	snapshot func(em *emitter, s *snapshot.Snapshot, pidLabels bool)
	// whileDown: the device collector also runs for a device that is
	// down, because its values are not read from the device but kept
	// beside it (XID counts). A GPU that fell off the bus keeps the
	// XID 79 that announced it, so alerts can still see it.
	whileDown bool
}

// collectors by group, filled by the init functions of collect_*.go.
var collectors = map[string]collector{}

func registerCollector(group string, c collector) {
	if _, dup := collectors[group]; dup {
		panic("exporter: collector registered twice: " + group)
	}
	collectors[group] = c
}

// DefaultCollectors returns every collector group with its default state.
// All groups are on: each one costs a few NVML calls per device and yields
// nothing where the device does not support it, so there is no group whose
// cost outweighs its value by default. Single expensive or noisy metrics
// are off in the catalog instead (see `gpuwatch metrics`).
func DefaultCollectors() map[string]bool {
	m := make(map[string]bool, len(snapshot.AllGroups))
	for _, g := range snapshot.AllGroups {
		m[g] = true
	}
	return m
}

// Exporter renders snapshots from a Source. It is a prometheus.Collector and
// safe for concurrent scrapes.
type Exporter struct {
	src       Source
	pidLabels bool
	groups    []string    // enabled groups, in snapshot.AllGroups order
	device    []collector // enabled collectors with a device function
	snapshot  []collector // enabled collectors with a snapshot function
	enabled   []bool      // by metricDef.id
	emitters  sync.Pool   // of *emitter
	dcgm      bool        // render dcgm-exporter's names too (Options.Compat)
	dcgmGen   *dcgmGen    // the generation of those names
	hostname  string      // their Hostname label
	// hostLabel is the position in dcgmLabels that carries hostname:
	// Hostname, or hostname with Options.HostnameLowerCase.
	hostLabel int
}

// New builds an Exporter. It fails on an unknown collector name.
func New(src Source, opts Options) (*Exporter, error) {
	if src == nil {
		return nil, fmt.Errorf("exporter: nil Source")
	}
	on := DefaultCollectors()
	for g, v := range opts.Collectors {
		if _, known := on[g]; !known {
			return nil, fmt.Errorf("unknown collector %q (known: %v)", g, snapshot.AllGroups)
		}
		on[g] = v
	}
	compat := opts.Compat
	if compat == (Compat{}) {
		compat = NativeOnly
	}
	e := &Exporter{src: src, pidLabels: opts.PIDLabels, enabled: make([]bool, len(catalog)),
		dcgm: compat.DCGM, dcgmGen: dcgmGenOf(compat.DCGMVersion), hostname: opts.Hostname, hostLabel: dcgmLabelHostname}
	if opts.HostnameLowerCase {
		e.hostLabel = dcgmLabelHostnameLower
	}
	for _, g := range snapshot.AllGroups {
		if !on[g] {
			continue
		}
		e.groups = append(e.groups, g)
		c := collectors[g]
		if c.device != nil {
			e.device = append(e.device, c)
		}
		if c.snapshot != nil {
			e.snapshot = append(e.snapshot, c)
		}
	}
	for _, m := range catalog {
		e.enabled[m.id] = compat.selects(m) && (m.Collector == CollectorExporter || on[m.Collector]) && opts.Metrics.enabled(m)
	}
	e.emitters.New = func() any { return newEmitter(e.enabled) }
	return e, nil
}

// Describe sends the descriptor of every enabled metric.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range catalog {
		if !e.enabled[m.id] {
			continue
		}
		if e.pidLabels && m.descOptIn != nil {
			ch <- m.descOptIn
		} else {
			ch <- m.desc
		}
	}
}

// Collect takes one snapshot and sends its series as const metrics.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	em := e.emitters.Get().(*emitter)
	em.ch = ch
	snap, err := e.src.Snapshot(context.Background())
	e.render(em, snap, err)
	em.reset()
	e.emitters.Put(em)
}

// WriteText takes one snapshot and writes its series in the Prometheus text
// format (version 0.0.4) to w.
func (e *Exporter) WriteText(ctx context.Context, w io.Writer) error {
	snap, err := e.src.Snapshot(ctx)
	em := e.renderText(snap, err)
	defer e.releaseText(em)
	return em.writeAssembled(w)
}

// renderText renders snap (or the failure to get one, err) in the text
// format into an emitter from the pool; writeAssembled writes it out,
// and releaseText gives it back. Rendering depends on nothing but the
// snapshot, so scrapes that share a snapshot can share the emitter, and
// the page exists once in memory: in the emitter's per-metric buffers.
func (e *Exporter) renderText(snap *snapshot.Snapshot, err error) *emitter {
	em := e.emitters.Get().(*emitter)
	e.render(em, snap, err)
	return em
}

// releaseText returns an emitter from renderText to the pool.
func (e *Exporter) releaseText(em *emitter) {
	em.reset()
	e.emitters.Put(em)
}

// render runs every enabled collector over the snapshot; when there is no
// snapshot (err), it says so through gpuwatch_collector_success alone.
func (e *Exporter) render(em *emitter, snap *snapshot.Snapshot, err error) {
	if err != nil || snap == nil {
		// Keep /metrics answering: say every collector failed, emit
		// nothing about the devices.
		for _, g := range e.groups {
			em.global(mCollectorSuccess, 0, g)
		}
		return
	}
	for i := range snap.Devices {
		d := &snap.Devices[i]
		em.setDevice(d)
		em.dev(mUp, bool01(d.Up))
		if d.Up {
			em.dev(mReadingAge, d.ReadingAge.Seconds())
		}
		collectHealth(em, snap.Health, d, i)
		for _, c := range e.device {
			if d.Up || c.whileDown {
				c.device(em, snap, d)
			}
		}
		if e.dcgm {
			e.collectDCGM(em, snap, d)
		}
	}
	for _, c := range e.snapshot {
		c.snapshot(em, snap, e.pidLabels)
	}
	e.collectExporter(em, snap)
	em.global(mSnapshotDuration, snap.Duration.Seconds())
}

// collectExporter emits the exporter's own series.
func (e *Exporter) collectExporter(em *emitter, snap *snapshot.Snapshot) {
	for _, g := range e.groups {
		st, ok := snap.Groups[g]
		if !ok {
			// The backend did not read an enabled group: that is a
			// failure to collect it, not a success with no data.
			em.global(mCollectorSuccess, 0, g)
			continue
		}
		em.global(mCollectorDuration, st.Duration.Seconds(), g)
		em.global(mCollectorSuccess, bool01(st.Err == nil), g)
	}
	collectDriver(em, &snap.Driver)
	collectHealthNode(em, snap.Health)
	if acc := snap.Accounting; acc != nil {
		em.global(mAcctTicks, float64(acc.Ticks))
		if v, ok := acc.TickCPUSeconds.Get(); ok {
			em.global(mAcctCPU, v)
		}
	}
	if len(snap.AttributionErrors) > 0 && em.on(mAttributionErrors) {
		keys := em.keys[:0]
		for k := range snap.AttributionErrors {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			em.global(mAttributionErrors, float64(snap.AttributionErrors[k]), k)
		}
		em.keys = keys
	}
	if len(snap.ReadingsDropped) > 0 && em.on(mReadingsDropped) {
		keys := em.keys[:0]
		for k := range snap.ReadingsDropped {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			em.global(mReadingsDropped, float64(snap.ReadingsDropped[k]), k)
		}
		em.keys = keys
	}
}
