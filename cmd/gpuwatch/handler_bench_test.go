package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/common/promslog"
)

// BenchmarkMetricsEndpoint measures one whole /metrics answer for the
// simulated dgx-h100: backend read, snapshot, text rendering and the runtime
// families, exactly as `gpuwatch serve` wires them.
func BenchmarkMetricsEndpoint(b *testing.B) {
	for _, profile := range []string{"dgx-h100", "large"} {
		b.Run(profile, func(b *testing.B) {
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
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				_, _ = io.Copy(io.Discard, rec.Body)
			}
		})
	}
}
