package report

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const emptyVector = `{"status":"success","data":{"resultType":"vector","result":[]}}`

// A redirect to another host never carries the credentials of
// --prometheus.http-config there; a redirect on the same server still works,
// with them.
func TestRedirectToAnotherHostGetsNoCredentials(t *testing.T) {
	var stolen atomic.Value
	stolen.Store("")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(emptyVector))
	}))
	defer other.Close()
	var sameHostAuth atomic.Value
	sameHostAuth.Store("")
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/elsewhere/api/v1/query":
			http.Redirect(w, r, other.URL+"/api/v1/query", http.StatusTemporaryRedirect)
		case "/moved/api/v1/query":
			http.Redirect(w, r, "/here/api/v1/query", http.StatusTemporaryRedirect)
		case "/here/api/v1/query":
			sameHostAuth.Store(r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(emptyVector))
		default:
			http.NotFound(w, r)
		}
	}))
	defer server.Close()
	cfg := filepath.Join(t.TempDir(), "client.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth: {username: report, password: S3cretPW}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	api, err := NewClient(ClientOptions{URL: server.URL + "/elsewhere", HTTPConfigFile: cfg})
	if err != nil {
		t.Fatal(err)
	}
	_, err = instant(context.Background(), api, "up", time.Now())
	if got := stolen.Load().(string); got != "" {
		t.Errorf("the other host received Authorization %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), "redirected to "+other.URL) || !strings.Contains(err.Error(), "query: up") {
		t.Errorf("error %v, want one naming the redirect target and the query", err)
	}

	api, err = NewClient(ClientOptions{URL: server.URL + "/moved", HTTPConfigFile: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := instant(context.Background(), api, "up", time.Now()); err != nil {
		t.Errorf("a redirect on the same server: %v", err)
	}
	if got := sameHostAuth.Load().(string); !strings.HasPrefix(got, "Basic ") {
		t.Errorf("the same server after a redirect received Authorization %q, want the basic auth", got)
	}
}

// A password in --prometheus.url appears in no error.
func TestURLPasswordInNoError(t *testing.T) {
	unwilling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer unwilling.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	opts := Options{From: time.Now().Add(-time.Hour), To: time.Now(), By: "pod", IdleBelow: 0.05}
	for _, base := range []string{unwilling.URL, closedURL} {
		withPassword := strings.Replace(base, "http://", "http://admin:S3cretPW@", 1)
		api, err := NewClient(ClientOptions{URL: withPassword, Retries: 0})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Build(context.Background(), api, opts)
		if err == nil || strings.Contains(err.Error(), "S3cretPW") {
			t.Errorf("%s: error %v, want one without the password", base, err)
		}
	}
	if _, err := NewClient(ClientOptions{URL: "http://admin:S3cret%zz@host:9090"}); err == nil || strings.Contains(err.Error(), "S3cret") {
		t.Errorf("a URL that does not parse: %v, want an error without the password", err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://admin:S3cretPW@host:9090":       "http://admin:xxxxx@host:9090",
		"https://host:9090/prom":                "https://host:9090/prom",
		"http://admin:S3cret%zz@host:9090/x":    "http://xxxxx@host:9090/x",
		"http://a:b@c@host:9090":                "http://a:xxxxx@host:9090",
		"http://admin:p%zz@host":                "http://xxxxx@host",
		"prometheus:9090":                       "prometheus:9090",
		"http://user@host:9090":                 "http://user@host:9090",
		"http://admin:S3cretPW@host:9090?q=1#f": "http://admin:xxxxx@host:9090?q=1#f",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// An answer larger than the cap ends the query with an error naming the
// cap and the query, whether the server announces its length, streams it,
// or compresses it.
func TestResponseSizeIsCapped(t *testing.T) {
	const limit = 1 << 20
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(`{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(" ", 64<<10))
		switch r.FormValue("query") {
		case "announced":
			w.Header().Set("Content-Length", "536870912")
		case "exact":
			// Exactly the limit is still an answer.
			body := []byte(emptyVector)
			body = append(body, []byte(strings.Repeat(" ", limit-len(body)))...)
			w.Write(body)
			return
		}
		for range 512 { // 32 MiB unless the client stops reading
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	api, err := NewClient(ClientOptions{URL: srv.URL, MaxResponseBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{"streamed", "announced"} {
		_, err := instant(context.Background(), api, query, time.Now())
		if err == nil || !strings.Contains(err.Error(), "--prometheus.max-response-size (1MiB)") || !strings.Contains(err.Error(), "query: "+query) {
			t.Errorf("%s: error %v, want the cap and the query named", query, err)
		}
	}
	if _, err := instant(context.Background(), api, "exact", time.Now()); err != nil {
		t.Errorf("an answer of exactly the cap: %v", err)
	}
}
