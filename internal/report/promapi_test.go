package report

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// apiServer answers /prefix/api/v1/query with body and status, and records
// the requests.
func apiServer(t *testing.T, status int, body string, allowPost bool) (*httptest.Server, *[]*http.Request) {
	t.Helper()
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("form: %v", err)
		}
		seen = append(seen, r)
		if r.URL.Path != "/prefix/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodPost && !allowPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestAPIClientDecodesAVectorAndWarnings(t *testing.T) {
	srv, seen := apiServer(t, 200, `{"status":"success","warnings":["partial"],"data":{"resultType":"vector","result":[
		{"metric":{"namespace":"ml"},"value":[1700000000.5,"0.25"]},
		{"metric":{"namespace":"web"},"value":[1700000000.5,"NaN"]}]}}`, true)
	q, err := NewClient(ClientOptions{URL: srv.URL + "/prefix/"})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 500_000_000)
	v, warnings, err := q.Query(context.Background(), `avg(up)`, ts)
	if err != nil {
		t.Fatal(err)
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 2 {
		t.Fatalf("got %#v, want a vector of 2", v)
	}
	if vec[0].Metric["namespace"] != "ml" || vec[0].Value != 0.25 || vec[0].Timestamp != model.TimeFromUnixNano(ts.UnixNano()) {
		t.Errorf("first sample %v", vec[0])
	}
	if len(warnings) != 1 || warnings[0] != "partial" {
		t.Errorf("warnings %q, want [partial]", warnings)
	}
	r := (*seen)[0]
	if r.Method != http.MethodPost || r.PostForm.Get("query") != "avg(up)" || r.PostForm.Get("time") != "1700000000.5" {
		t.Errorf("request %s query=%q time=%q, want POST avg(up) at 1700000000.5", r.Method, r.PostForm.Get("query"), r.PostForm.Get("time"))
	}
}

func TestAPIClientFallsBackToGET(t *testing.T) {
	srv, seen := apiServer(t, 200, `{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}`, false)
	q, err := NewClient(ClientOptions{URL: srv.URL + "/prefix"})
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := q.Query(context.Background(), "1+2", time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := v.(*model.Scalar); !ok || s.Value != 3 {
		t.Errorf("got %#v, want scalar 3", v)
	}
	if len(*seen) != 2 || (*seen)[1].Method != http.MethodGet || (*seen)[1].Form.Get("query") != "1+2" {
		t.Errorf("want a POST then a GET with the query, got %d requests", len(*seen))
	}
}

func TestAPIClientErrorsAreExplained(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"unauthorized", 401, "Unauthorized", "the server refused the credentials"},
		{"forbidden", 403, `{"status":"error","errorType":"forbidden","error":"no"}`, "the server refused the credentials"},
		{"bad data", 400, `{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`, "the server rejected the query sum(: parse error at char 3"},
		{"proxy error", 502, "<html>bad gateway</html>", "HTTP 502: Bad Gateway"},
		{"execution", 422, `{"status":"error","errorType":"execution","error":"too many samples"}`, "execution: too many samples"},
		{"not JSON", 200, "<html>", "not the Prometheus API's JSON"},
		{"unknown type", 200, `{"status":"success","data":{"resultType":"histogram","result":[]}}`, `unknown result type "histogram"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := apiServer(t, tc.status, tc.body, true)
			q, err := NewClient(ClientOptions{URL: srv.URL + "/prefix"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = instant(context.Background(), q, "sum(", time.Unix(1, 0))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sum(") {
				t.Errorf("error %v, want one containing %q and naming the query", err, tc.want)
			}
		})
	}
}

// TestAPIClientTellsAGpuwatchFromA404: a 404 from a server whose /metrics
// is a gpuwatch page says what to change; a 404 from anything else (here
// a /metrics without gpuwatch's marker, and no /metrics at all) stays a
// plain HTTP 404, since the client cannot tell what it reached.
func TestAPIClientTellsAGpuwatchFromA404(t *testing.T) {
	for _, tc := range []struct {
		name, metrics, want string
		notWant             string
	}{
		{"gpuwatch", "# HELP gpuwatch_build_info Build.\ngpuwatch_build_info{version=\"1\"} 1\n", "this is a gpuwatch exporter, not Prometheus", "HTTP 404"},
		{"another exporter", "# HELP node_boot_time_seconds x\nnode_boot_time_seconds 1\n", "HTTP 404: Not Found", "gpuwatch exporter"},
		{"no metrics page", "", "HTTP 404: Not Found", "gpuwatch exporter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/metrics" && tc.metrics != "" {
					_, _ = w.Write([]byte(tc.metrics))
					return
				}
				http.NotFound(w, r)
			}))
			t.Cleanup(srv.Close)
			q, err := NewClient(ClientOptions{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = instant(context.Background(), q, "up", time.Unix(1, 0))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %v, want one containing %q and not %q", err, tc.want, tc.notWant)
			}
		})
	}
}
