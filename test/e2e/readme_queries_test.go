//go:build linux

package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// queryDocs are the pages whose ```promql examples must work on the demo.
var queryDocs = []string{"README.md", filepath.Join("docs", "attribution.md")}

// readmeQueries returns every PromQL expression in the ```promql blocks of
// queryDocs: each line that is not a comment.
func readmeQueries(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, doc := range queryDocs {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), doc))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, promqlLines(string(data))...)
	}
	return out
}

// promqlLines returns the expressions of a markdown page's ```promql blocks.
func promqlLines(page string) []string {
	var out []string
	in := false
	for line := range strings.SplitSeq(page, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "```promql":
			in = true
		case strings.HasPrefix(trimmed, "```"):
			in = false
		case in && trimmed != "" && !strings.HasPrefix(trimmed, "#"):
			out = append(out, trimmed)
		}
	}
	return out
}

// promSeries runs an instant query and returns how many series it gave.
func promSeries(promURL, query string) (int, error) {
	resp, err := httpGetNoFail(promURL + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(resp), &r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, &queryError{r.Error}
	}
	return len(r.Data.Result), nil
}

type queryError struct{ msg string }

func (e *queryError) Error() string { return e.msg }

// TestREADMEQueriesAgainstTheDemo runs every README example query against
// a real Prometheus scraping the README's demo (no attribution flag: the
// owners come from internal/demo): each must return data, as a new user
// trying them would expect. The demo and its Prometheus are the ones
// TestReportInvariants reads later (sharedDemoPrometheus), whose history
// grows meanwhile; their faster accounting tick and the recording rules
// they evaluate only bring the accounting series sooner.
func TestREADMEQueriesAgainstTheDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	queries := readmeQueries(t)
	if len(queries) < 8 {
		t.Fatalf("found %d README queries, want at least the 8 of 'Who uses each GPU': %q", len(queries), queries)
	}
	promURL, _ := sharedDemoPrometheus(t)
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape gpuwatch", func() bool {
		v, ok := promQuery(t, promURL, `up{job="gpuwatch"}`)
		return ok && v == 1
	})
	for _, q := range queries {
		var n int
		var err error
		ok := true
		deadline := time.Now().Add(15 * time.Second)
		for {
			n, err = promSeries(promURL, q)
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				ok = false
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !ok {
			t.Errorf("README query returned no data against the demo: %s (err %v)", q, err)
		}
	}
}
