package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// fakeAPI answers each query with the first answer whose key the query
// starts with ("" matches all); value is a sample value as Prometheus
// writes it ("NaN", "+Inf", "4"), or "" for an empty vector.
func fakeAPI(t *testing.T, answers [][2]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		w.Header().Set("Content-Type", "application/json")
		for _, a := range answers {
			if strings.HasPrefix(q, a[0]) {
				if a[1] == "" {
					w.Write([]byte(emptyVector))
					return
				}
				fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"research"},"value":[%d,%q]}]}}`, time.Now().Unix(), a[1])
				return
			}
		}
		t.Errorf("unexpected query %s", q)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func buildFrom(t *testing.T, srv *httptest.Server) (*Report, error) {
	t.Helper()
	api, err := NewClient(ClientOptions{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Hour)
	return Build(context.Background(), api, Options{From: now.Add(-24 * time.Hour), To: now, By: "namespace", IdleBelow: 0.05, RawOnly: true})
}

// NaN or ±Inf in a measured figure is that figure absent, with a note
// naming the query; the report still renders in every format.
func TestNaNAndInfFromTheServer(t *testing.T) {
	qs := buildQueries(dimensions["namespace"], 24*time.Hour, time.Minute, 0.05)
	srv := fakeAPI(t, [][2]string{
		{"count(group by (instance, uuid) (max_over_time(gpu_up[", "4"},
		{"count(group by (instance, uuid) (count_over_time(gpu_up[", "4"},
		{"count(group by (instance, uuid) (max_over_time(gpu_up[24h])) unless", ""},
		{"sum(count_over_time(", "0"},
		{qs.allocSteps, "288"},
		{qs.measuredSteps, "288"},
		{qs.idleSteps, "0"},
		{"avg_over_time((avg(gpu_utilization_ratio))", "NaN"},
		{"", "+Inf"},
	})
	r, err := buildFrom(t, srv)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fleet.GPUs != 4 || r.Fleet.MeanUtilizationPerGPU != nil || len(r.Rows) != 1 || r.Rows[0].P95UtilizationPerGPU != nil || r.Rows[0].EnergyKWhSummed != nil {
		t.Errorf("fleet %+v rows %+v: want 4 GPUs and the NaN/Inf figures absent", r.Fleet, r.Rows)
	}
	if len(r.Notes) == 0 || !strings.Contains(strings.Join(r.Notes, "\n"), "the server answered NaN: shown as n/a (query: avg_over_time((avg(gpu_utilization_ratio))") {
		t.Errorf("notes %q: want the NaN named with its query", r.Notes)
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := Write(&b, r, format); err != nil {
			t.Errorf("%s: %v", format, err)
		}
		if format == "json" && !json.Valid(b.Bytes()) {
			t.Errorf("json: not valid:\n%s", b.String())
		}
	}
}

// A count the server gives as NaN (or a fraction, or negative) is an error
// naming the query, never a number of GPUs such as -9223372036854775808.
func TestNaNCountIsAnErrorNamingTheQuery(t *testing.T) {
	for _, bad := range []string{"NaN", "+Inf", "-1", "2.5"} {
		srv := fakeAPI(t, [][2]string{{"", bad}})
		_, err := buildFrom(t, srv)
		if err == nil || !strings.Contains(err.Error(), "query count(group by (instance, uuid) (max_over_time(gpu_up[24h])))") {
			t.Errorf("%s: error %v, want one naming the query", bad, err)
		}
	}
	// A step count the server gives as NaN is an error naming that query.
	qs := buildQueries(dimensions["namespace"], 24*time.Hour, time.Minute, 0.05)
	srv := fakeAPI(t, [][2]string{
		{"count(group by (instance, uuid) (max_over_time(gpu_up[24h])) unless", ""},
		{"count(", "4"},
		{qs.allocSteps, "NaN"},
		{"", "1"},
	})
	if _, err := buildFrom(t, srv); err == nil || !strings.Contains(err.Error(), "query "+qs.allocSteps) {
		t.Errorf("a NaN step count: error %v, want one naming the query", err)
	}
}

// warningQuerier adds one warning to every answer, as a server that hit a
// query limit or got partial data from a remote store does.
type warningQuerier struct {
	Querier
	warning string
}

func (w warningQuerier) Query(ctx context.Context, query string, ts time.Time) (model.Value, []string, error) {
	v, _, err := w.Querier.Query(ctx, query, ts)
	return v, []string{w.warning}, err
}

// The server's warnings are the report's notes, naming the query, not
// dropped: the figures built on them may be incomplete.
func TestServerWarningsBecomeNotes(t *testing.T) {
	srv := fakeAPI(t, [][2]string{
		{"count(group by (instance, uuid) (max_over_time(gpu_up[", "4"},
		{"count(group by (instance, uuid) (count_over_time(gpu_up[", "4"},
		{"count(group by (instance, uuid) (max_over_time(gpu_up[24h])) unless", ""},
		{"", "1"},
	})
	api, err := NewClient(ClientOptions{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Hour)
	r, err := Build(context.Background(), warningQuerier{api, "partial data: store eu-1 did not answer"},
		Options{From: now.Add(-24 * time.Hour), To: now, By: "namespace", IdleBelow: 0.05, RawOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "the server warned: partial data: store eu-1 did not answer (query: count(group by (instance, uuid)") {
		t.Errorf("notes %q: want each warning with its query", r.Notes)
	}
}
