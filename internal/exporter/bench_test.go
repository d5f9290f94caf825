package exporter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// BenchmarkCollectAndEncode measures a whole render of /metrics from a
// ready snapshot, on both paths:
//   - registry: Registry.Gather (const metrics → dto) + expfmt text encoding,
//     what promhttp does;
//   - direct: renderText and writeAssembled, the exposition written
//     straight from the snapshot, as TextHandler renders a page.
//
// Run: go test ./internal/exporter -run '^$' -bench CollectAndEncode -benchmem
func BenchmarkCollectAndEncode(b *testing.B) {
	for _, host := range []struct {
		name          string
		gpus, nvlinks int
	}{{"dgx-h100-8gpu", 8, 18}, {"large-64gpu", 64, 18}} {
		snap := fullSnapshot(host.gpus, host.nvlinks)
		e, err := New(&fixedSource{snap: snap}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(e)
		var sample bytes.Buffer
		if err := e.WriteText(context.Background(), &sample); err != nil {
			b.Fatal(err)
		}
		nSeries := float64(countSeries(sample.Bytes()))

		b.Run(fmt.Sprintf("%s/registry", host.name), func(b *testing.B) {
			b.ReportAllocs()
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				mfs, err := reg.Gather()
				if err != nil {
					b.Fatal(err)
				}
				enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(nSeries, "series")
			b.ReportMetric(float64(buf.Len()), "bytes/scrape")
		})
		b.Run(fmt.Sprintf("%s/direct", host.name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				em := e.renderText(snap, nil)
				if err := em.writeAssembled(io.Discard); err != nil {
					b.Fatal(err)
				}
				e.releaseText(em)
			}
			b.ReportMetric(nSeries, "series")
		})
	}
}

// countSeries counts the sample lines of an exposition.
func countSeries(text []byte) int {
	n := 0
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		if len(line) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

// BenchmarkHandler measures a whole HTTP answer for the 8-GPU host: the
// promhttp handler over a registry against TextHandler, plain and gzipped
// (Prometheus asks for gzip).
func BenchmarkHandler(b *testing.B) {
	e, err := New(&fixedSource{snap: fullSnapshot(8, 18)}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	handlers := map[string]http.Handler{
		"promhttp": promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		"text":     e.TextHandler(nil),
	}
	for _, name := range []string{"promhttp", "text"} {
		for _, enc := range []string{"identity", "gzip"} {
			b.Run(name+"/"+enc, func(b *testing.B) {
				b.ReportAllocs()
				req := httptest.NewRequest("GET", "/metrics", nil)
				req.Header.Set("Accept-Encoding", enc)
				for b.Loop() {
					rec := httptest.NewRecorder()
					handlers[name].ServeHTTP(rec, req)
					if rec.Code != 200 {
						b.Fatal(rec.Code)
					}
				}
			})
		}
	}
}
