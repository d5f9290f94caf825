package jobs

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ListDoc is /api/v1/jobs: the journal's records, oldest first, then the
// running jobs'. ?pod=NAMESPACE/NAME keeps one pod's, ?kind=slurm|pod one
// kind's.
type ListDoc struct {
	Records []Record `json:"records"`
}

// JobDoc is /api/v1/jobs/ID: every record of that ID on this node (a
// requeued Slurm job keeps its ID), the running one last.
type JobDoc struct {
	ID      string   `json:"id"`
	Records []Record `json:"records"`
}

// Handler serves /api/v1/jobs and /api/v1/jobs/ID from rec. It sits
// behind the same TLS and authentication as every other path.
func Handler(rec *Recorder) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		all, err := rec.Records()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		pod, kind := r.URL.Query().Get("pod"), r.URL.Query().Get("kind")
		out := make([]Record, 0, len(all))
		for _, x := range all {
			if (pod == "" || MatchesPod(x, pod)) && (kind == "" || x.Kind == kind) {
				out = append(out, x)
			}
		}
		writeJSON(w, http.StatusOK, ListDoc{Records: out})
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		all, err := rec.Records()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		doc := JobDoc{ID: id, Records: []Record{}}
		for _, x := range all {
			if x.ID == id {
				doc.Records = append(doc.Records, x)
			}
		}
		if len(doc.Records) == 0 {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no record of job " + id + " on this node"})
			return
		}
		writeJSON(w, http.StatusOK, doc)
	})
	return mux
}

// MatchesPod says whether record x is of pod "NAMESPACE/NAME".
func MatchesPod(x Record, pod string) bool {
	ns, name, ok := strings.Cut(pod, "/")
	return ok && x.Pod != nil && x.Pod.Namespace == ns && x.Pod.Name == name
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
