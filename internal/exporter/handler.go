package exporter

import (
	"bytes"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TextContentType is the media type WriteText produces.
const TextContentType = "text/plain; version=0.0.4; charset=utf-8"

// TextHandler serves /metrics: the GPU series written straight from the
// snapshot, followed by the families of extra (the integrator's registry:
// Go runtime, process, build_info, Slurm); extra may be nil. It always
// answers in the text format, which every Prometheus version accepts, and
// gzips when the client asks for it. A failing extra gatherer still lets its
// good families through, and the scrape stays 200: a missing go_* family
// must not hide the GPUs.
//
// Scrapes that share a snapshot (the pipeline gives concurrent scrapes the
// same one) share its rendered page, plain and gzipped: sixteen scrapers
// cost one rendering and one compression, not sixteen.
func (e *Exporter) TextHandler(extra prometheus.Gatherer) http.Handler {
	h := &textHandler{e: e, extra: extra}
	h.pages.New = func() any { return new(page) }
	h.bufs.New = func() any { return new(bytes.Buffer) }
	h.flates.New = func() any { return newFlateWriter() }
	return h
}

type textHandler struct {
	e      *Exporter
	extra  prometheus.Gatherer
	pages  sync.Pool // of *page
	bufs   sync.Pool // of *bytes.Buffer: the extra families of one scrape
	flates sync.Pool // of *flate.Writer

	mu      sync.Mutex
	current *page // the page of the latest snapshot
}

// page is the rendered GPU part of /metrics for one snapshot. refs counts
// the scrapes writing it plus one while it is current; at zero its emitter
// goes back to the exporter and the page to the pool.
type page struct {
	snap   *snapshot.Snapshot
	refs   int
	render sync.Once
	text   *emitter // the rendered series, from Exporter.renderText
	gzip   sync.Once
	gz     deflatedPart // the rendered series, deflated (gzip_member.go)
}

func (h *textHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	snap, err := h.e.src.Snapshot(r.Context())
	var p *page
	if err == nil && snap != nil {
		p = h.acquire(snap)
		defer h.release(p)
	} else {
		// A failed collection is rendered for this scrape alone.
		p = &page{text: h.e.renderText(nil, err)}
		defer h.e.releaseText(p.text)
		p.render.Do(func() {})
	}
	gzipped := acceptsGzip(r.Header.Get("Accept-Encoding"))
	p.render.Do(func() { p.text = h.e.renderText(p.snap, nil) })

	tail := h.bufs.Get().(*bytes.Buffer)
	tail.Reset()
	defer h.bufs.Put(tail)
	h.writeExtra(tail)

	w.Header().Set("Content-Type", TextContentType)
	if !gzipped {
		_ = p.text.writeAssembled(w)
		_, _ = w.Write(tail.Bytes())
		return
	}
	// One gzip member: the shared page's deflate, then this scrape's
	// extra families' (gzip_member.go).
	p.gzip.Do(func() { h.deflatePart(&p.gz, p.text.writeAssembled) })
	w.Header().Set("Content-Encoding", "gzip")
	h.writeMember(w, &p.gz, tail.Bytes())
}

// acquire returns the page of snap, making it current if it is newer.
func (h *textHandler) acquire(snap *snapshot.Snapshot) *page {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == nil || h.current.snap != snap {
		if old := h.current; old != nil {
			h.unref(old)
		}
		p := h.pages.Get().(*page)
		gz := p.gz.deflate
		*p = page{snap: snap, refs: 1}
		p.gz.deflate = gz // its memory, for this page's compression
		p.gz.reset()
		h.current = p
	}
	h.current.refs++
	return h.current
}

func (h *textHandler) release(p *page) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unref(p)
}

// unref drops one reference; h.mu is held.
func (h *textHandler) unref(p *page) {
	p.refs--
	if p.refs == 0 {
		p.snap = nil // let the snapshot go
		if p.text != nil {
			h.e.releaseText(p.text)
			p.text = nil
		}
		h.pages.Put(p)
	}
}

// writeExtra appends the extra gatherer's families. Partial results on
// error, by the Gatherer contract.
func (h *textHandler) writeExtra(buf *bytes.Buffer) {
	if h.extra == nil {
		return
	}
	mfs, _ := h.extra.Gather()
	for _, mf := range mfs {
		// Not through expfmt's Encoder: it copies every family to escape
		// names for the legacy format, a copy per scrape that the names
		// here (go_*, process_*, gpuwatch_*, slurm_*) never need.
		if !model.LegacyValidation.IsValidMetricName(mf.GetName()) {
			mf = model.EscapeMetricFamily(mf, model.UnderscoreEscaping)
		}
		_, _ = expfmt.MetricFamilyToText(buf, mf) // writes to a bytes.Buffer cannot fail
	}
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}
