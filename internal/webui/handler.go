// Package webui serves gpuwatch's live page at / and its JSON API under
// /api/v1/: the latest snapshot, the processes with their owners, and a
// bounded in-memory history per GPU and per owner. It reads only what the
// pipeline collects, on its own schedule, so it adds no NVML work beyond
// one shared collection per interval.
package webui

import (
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/ps"
)

//go:embed assets
var assets embed.FS

var page = template.Must(template.ParseFS(assets, "assets/index.html"))

// Options configures the page.
type Options struct {
	TelemetryPath string
	Pprof         bool // show the pprof links
	Simulated     bool // the backend is the simulator
	Version       string
}

// Handler serves the page, its assets and the API from rec.
func Handler(rec *Recorder, opts Options) http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	// Every URL on the page is relative to it, so the page also works
	// behind a reverse proxy that serves gpuwatch under a path prefix.
	pageData := struct {
		Options
		RelTelemetryPath string
	}{opts, "./" + strings.TrimLeft(opts.TelemetryPath, "/")}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, pageData)
	})
	mux.HandleFunc("GET /api/v1/snapshot", func(w http.ResponseWriter, r *http.Request) {
		s, err := rec.Latest()
		if s == nil && err == nil {
			s, err = rec.src.Snapshot(r.Context())
		}
		if s == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": errText(err)})
			return
		}
		doc := newSnapshotDoc(s, opts.Simulated, rec.interval)
		doc.Error = errText(err)
		writeJSON(w, http.StatusOK, doc)
	})
	mux.HandleFunc("GET /api/v1/processes", func(w http.ResponseWriter, r *http.Request) {
		s, err := rec.Latest()
		if s == nil && err == nil {
			s, err = rec.src.Snapshot(r.Context())
		}
		if s == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": errText(err)})
			return
		}
		writeJSON(w, http.StatusOK, ps.NewDocument(s, ps.Filter{SimulatedClock: opts.Simulated}))
	})
	mux.HandleFunc("GET /api/v1/history", func(w http.ResponseWriter, r *http.Request) {
		since := int64(-1)
		if v := r.URL.Query().Get("since"); v != "" {
			var err error
			if since, err = strconv.ParseInt(v, 10, 64); err != nil || since < 0 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "since=" + strconv.Quote(v) + ": want a time in milliseconds since the epoch, as newest_ms gives it"})
				return
			}
		}
		b, err := rec.HistoryJSON(since)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(b)
	})
	return mux
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
