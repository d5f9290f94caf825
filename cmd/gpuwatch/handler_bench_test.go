package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/common/promslog"
)

// BenchmarkMetricsEndpoint measures one whole /metrics answer for the
// simulated dgx-h100 and large: backend read, snapshot, text rendering and
// the runtime families, exactly as `gpuwatch serve` wires them; plain, and
// gzipped as Prometheus asks for it.
func BenchmarkMetricsEndpoint(b *testing.B) {
	for _, profile := range []string{"dgx-h100", "large"} {
		for _, encoding := range []string{"identity", "gzip"} {
			b.Run(profile+"/"+encoding, func(b *testing.B) {
				f := &commonFlags{backend: "sim", simProfile: profile, collectors: map[string]*bool{}, log: &promslog.Config{}}
				for g, on := range defaultCollectorFlags() {
					v := on
					f.collectors[g] = &v
				}
				st, err := f.buildStack(slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				h := st.metricsHandler()
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Accept-Encoding", encoding)
				w := &discardResponse{header: http.Header{}}
				b.ReportAllocs()
				// b.Loop times only the loop: the stack's Close, which
				// waits for the XID watcher's pending wait, is left out.
				for b.Loop() {
					h.ServeHTTP(w, req)
					if w.status != 200 || w.bytes == 0 {
						b.Fatalf("status %d, %d bytes", w.status, w.bytes)
					}
					w.status, w.bytes = 200, 0
				}
			})
		}
	}
}

// discardResponse is a ResponseWriter that keeps nothing, so the benchmark
// measures the handler and not a recorder's growing buffer.
type discardResponse struct {
	header http.Header
	status int
	bytes  int
}

func (d *discardResponse) Header() http.Header  { return d.header }
func (d *discardResponse) WriteHeader(code int) { d.status = code }
func (d *discardResponse) Write(p []byte) (int, error) {
	if d.status == 0 {
		d.status = 200
	}
	d.bytes += len(p)
	return len(p), nil
}
