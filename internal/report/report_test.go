package report

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestDefaultStep(t *testing.T) {
	for rng, want := range map[time.Duration]time.Duration{
		time.Hour: time.Minute, 24 * time.Hour: time.Minute, 7 * 24 * time.Hour: 5 * time.Minute,
		30 * 24 * time.Hour: 15 * time.Minute, 90 * 24 * time.Hour: time.Hour,
	} {
		if got := DefaultStep(rng); got != want {
			t.Errorf("DefaultStep(%s) = %s, want %s", rng, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	ok := Options{From: now.Add(-time.Hour), To: now, By: "pod", IdleBelow: 0.05}
	if err := ok.Validate(); err != nil || ok.Step != time.Minute {
		t.Fatalf("Validate = %v, step %s", err, ok.Step)
	}
	for _, c := range []struct {
		mutate func(*Options)
		want   string
	}{
		{func(o *Options) { o.From = o.To }, "must be before"},
		{func(o *Options) { o.By = "team" }, "unknown --by"},
		{func(o *Options) { o.IdleBelow = 0 }, "--idle-below"},
		{func(o *Options) { o.IdleBelow = 2 }, "--idle-below"},
		{func(o *Options) { o.Step = 2 * time.Hour }, "--step"},
		{func(o *Options) { o.Step = time.Millisecond }, "--step"},
	} {
		o := Options{From: now.Add(-time.Hour), To: now, By: "pod", IdleBelow: 0.05}
		c.mutate(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", o, err, c.want)
		}
	}
}

// Every figure of every dimension aggregates by exactly the owner labels,
// inside one subquery over the whole range: the client never receives raw
// samples, whatever the fleet's size.
func TestQueriesAggregateInTheServer(t *testing.T) {
	for _, name := range Dimensions() {
		d := dimensions[name]
		q := buildQueries(d, 30*24*time.Hour, 15*time.Minute, 0.05)
		for _, text := range []string{q.allocSteps, q.measuredSteps, q.usedSteps, q.idleSteps, q.p95Util, q.memPeak, q.memMean, q.wattSteps} {
			if !strings.Contains(text, "[2591999999ms:15m]") {
				t.Errorf("--by=%s: %s is not one subquery over the range", name, text)
			}
			if !strings.Contains(text, by(d.labels)) {
				t.Errorf("--by=%s: %s does not aggregate by the owner labels %v", name, text, d.labels)
			}
		}
	}
}

func TestCSVDefusesFormulas(t *testing.T) {
	for in, want := range map[string]string{"=cmd|' /C calc'!A0": "'=cmd|' /C calc'!A0", "+1": "'+1", "@x": "'@x", "-2": "'-2", "trainer-0": "trainer-0", "": ""} {
		if got := csvSafe(in); got != want {
			t.Errorf("csvSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// A 503 is retried; a 400 is not; the retries end.
func TestRetriesTransientFailures(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.FormValue("query") {
		case "flaky":
			if calls.Add(1) < 3 {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"4"]}]}}`))
		case "always503":
			calls.Add(1)
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		default:
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
		}
	}))
	defer srv.Close()
	api, err := NewClient(ClientOptions{URL: srv.URL, Retries: 3, RetryPause: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := instant(ctx, api, "flaky", time.Now())
	if err != nil || len(v) != 1 || v[0].Value != 4 || calls.Load() != 3 {
		t.Errorf("flaky: %v %v after %d calls", v, err, calls.Load())
	}
	calls.Store(0)
	if _, err := instant(ctx, api, "always503", time.Now()); err == nil || calls.Load() != 4 {
		t.Errorf("always503: %v after %d calls, want an error after 1 + 3 retries", err, calls.Load())
	}
	calls.Store(0)
	if _, err := instant(ctx, api, "bad", time.Now()); err == nil || !strings.Contains(err.Error(), "rejected the query") || calls.Load() != 1 {
		t.Errorf("bad: %v after %d calls", err, calls.Load())
	}
}
