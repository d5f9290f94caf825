package exporter

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// TextContentType is the media type WriteText produces.
const TextContentType = "text/plain; version=0.0.4; charset=utf-8"

// TextHandler serves /metrics from WriteText, followed by the families of
// extra (the integrator's registry: Go runtime, process, build_info); extra
// may be nil. It always answers in the text format, which every Prometheus
// version accepts, and gzips when the client asks for it. A failing extra
// gatherer still lets its good families through, and the scrape stays 200:
// a missing go_* family must not hide the GPUs.
func (e *Exporter) TextHandler(extra prometheus.Gatherer) http.Handler {
	return &textHandler{e: e, extra: extra, bufs: newFreeList(retainedBuffers, func() *bytes.Buffer { return new(bytes.Buffer) })}
}

type textHandler struct {
	e     *Exporter
	extra prometheus.Gatherer
	bufs  *freeList[*bytes.Buffer]
	gzips sync.Pool // *gzip.Writer
}

func (h *textHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := h.bufs.get()
	buf.Reset()
	defer h.bufs.put(buf)

	if err := h.e.WriteText(r.Context(), buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if h.extra != nil {
		mfs, _ := h.extra.Gather() // partial results on error, by contract
		enc := expfmt.NewEncoder(buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			_ = enc.Encode(mf) // writes to a bytes.Buffer cannot fail
		}
	}

	w.Header().Set("Content-Type", TextContentType)
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		_, _ = w.Write(buf.Bytes())
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	gz, _ := h.gzips.Get().(*gzip.Writer)
	if gz == nil {
		// BestSpeed: on loopback or a LAN the CPU is dearer than the bytes.
		gz, _ = gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	}
	gz.Reset(w)
	_, _ = gz.Write(buf.Bytes())
	_ = gz.Close()
	h.gzips.Put(gz)
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}
