package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Source is where the API's snapshots come from (the pipeline).
type Source interface {
	Snapshot(ctx context.Context) (*snapshot.Snapshot, error)
}

// Handler serves /api/v1/health: the verdicts of a collection made now or
// shared with one in flight, as a Report in JSON. It answers within
// timeout: a collection that does not finish by then is a 503 with the
// reason, never a wait on a hung GPU.
func Handler(src Source, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		snap, err := src.Snapshot(ctx)
		if err != nil {
			http.Error(w, "no GPU collection: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		report := NewReport(snap)
		report.Source = SourceServe
		_ = enc.Encode(report)
	})
}
