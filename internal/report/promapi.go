package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// apiClient makes the one Prometheus HTTP API call a report needs, an
// instant query (/api/v1/query), with encoding/json. (client_golang's API
// client would bring json-iterator into the binary for this; its size:
// bench/RESULTS.md, "Figures moved out of code comments".)
type apiClient struct {
	endpoint string // BASE/api/v1/query
	metrics  string // BASE/metrics, read only to tell a gpuwatch from a Prometheus
	client   *http.Client
}

func newAPIClient(base *url.URL, client *http.Client) *apiClient {
	u := *base
	u.RawPath = ""
	root := strings.TrimRight(u.Path, "/")
	u.Path = root + "/api/v1/query"
	endpoint := u.String()
	u.Path = root + "/metrics"
	return &apiClient{endpoint: endpoint, metrics: u.String(), client: client}
}

// notPrometheusError is a query sent to a gpuwatch exporter instead of the
// Prometheus that scrapes it: the commonest mistake with --prometheus.url,
// whose bare "HTTP 404" would not tell the user what to change.
// The caller's message already starts with the URL.
type notPrometheusError struct{}

func (e *notPrometheusError) Error() string {
	return "this is a gpuwatch exporter, not Prometheus: point --prometheus.url at the Prometheus (or VictoriaMetrics) that scrapes it"
}

// gpuwatchMarker is the metric every gpuwatch page carries; a page that
// names it in its first gpuwatchProbeBytes is a gpuwatch's.
const (
	gpuwatchMarker     = "gpuwatch_build_info"
	gpuwatchProbeBytes = 1 << 20
)

// isGpuwatch says whether the server answers /metrics with a gpuwatch page.
// It is asked only after the API answered 404, so a Prometheus never pays
// for it; any failure of its own means "cannot tell", and the 404 stands.
func (c *apiClient) isGpuwatch(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.metrics, nil)
	if err != nil {
		return false
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, gpuwatchProbeBytes))
	return (err == nil || len(page) > 0) && bytes.Contains(page, []byte(gpuwatchMarker))
}

// apiError is a query the server answered with an error, or with an HTTP
// status that is not one of the API's own.
type apiError struct {
	Status int    // the HTTP status
	Type   string // the API's errorType (bad_data, execution, timeout, ...), empty for a bare HTTP error
	Msg    string
}

func (e *apiError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Msg)
	}
	return e.Type + ": " + e.Msg
}

// errorTypeBadData is the API's errorType for a query it cannot parse.
const errorTypeBadData = "bad_data"

// apiResponse is the API's envelope.
type apiResponse struct {
	Status    string   `json:"status"`
	ErrorType string   `json:"errorType"`
	Error     string   `json:"error"`
	Warnings  []string `json:"warnings"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// Query runs query at ts and returns its value and the server's warnings.
// It POSTs the form, as client_golang does, and falls back to GET where the
// server (or a proxy in front of it) does not allow POST.
func (c *apiClient) Query(ctx context.Context, query string, ts time.Time) (model.Value, []string, error) {
	form := url.Values{"query": {query}, "time": {strconv.FormatFloat(float64(ts.UnixNano())/1e9, 'f', -1, 64)}}
	status, body, err := c.do(ctx, http.MethodPost, form)
	if err == nil && (status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented) {
		status, body, err = c.do(ctx, http.MethodGet, form)
	}
	if err != nil {
		return nil, nil, err
	}
	var resp apiResponse
	jsonErr := json.Unmarshal(body, &resp)
	switch {
	case status == http.StatusNotFound && jsonErr != nil && c.isGpuwatch(ctx):
		return nil, nil, &notPrometheusError{}
	case status/100 != 2 && (jsonErr != nil || resp.Status != "error"):
		// Not an answer of the API (a proxy's, an authentication's): the
		// status says it all.
		return nil, nil, &apiError{Status: status, Msg: http.StatusText(status)}
	case jsonErr != nil:
		return nil, nil, fmt.Errorf("the server's answer is not the Prometheus API's JSON: %w", jsonErr)
	case resp.Status == "error":
		return nil, resp.Warnings, &apiError{Status: status, Type: resp.ErrorType, Msg: resp.Error}
	}
	v, err := decodeValue(resp.Data.ResultType, resp.Data.Result)
	return v, resp.Warnings, err
}

func (c *apiClient) do(ctx context.Context, method string, form url.Values) (int, []byte, error) {
	var req *http.Request
	var err error
	if method == http.MethodPost {
		encoded := form.Encode()
		req, err = http.NewRequestWithContext(ctx, method, c.endpoint, strings.NewReader(encoded))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, method, c.endpoint+"?"+form.Encode(), nil)
	}
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// decodeValue decodes an answer's result by its resultType into the
// prometheus/common/model value, which client_golang would return.
func decodeValue(resultType string, raw json.RawMessage) (model.Value, error) {
	var err error
	var v model.Value
	switch resultType {
	case "vector":
		var vec model.Vector
		err, v = json.Unmarshal(raw, &vec), vec
	case "matrix":
		var m model.Matrix
		err, v = json.Unmarshal(raw, &m), m
	case "scalar":
		s := &model.Scalar{}
		err, v = json.Unmarshal(raw, s), s
	case "string":
		s := &model.String{}
		err, v = json.Unmarshal(raw, s), s
	default:
		return nil, fmt.Errorf("the server answered an unknown result type %q", resultType)
	}
	if err != nil {
		return nil, fmt.Errorf("the server's %s answer: %w", resultType, err)
	}
	return v, nil
}
