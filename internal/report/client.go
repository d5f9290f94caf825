package report

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/config"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// ClientOptions say how to reach the server.
type ClientOptions struct {
	URL string
	// HTTPConfigFile is a Prometheus-style HTTP client configuration
	// (basic_auth, authorization, tls_config, proxy_url: the keys of a
	// scrape config's HTTP section); empty for none.
	HTTPConfigFile string
	// Retries is how many times a transient failure (a 502, 503 or 504, or a
	// connection reset) is retried, with a doubling pause from RetryPause.
	Retries    int
	RetryPause time.Duration
}

// NewClient returns the Prometheus HTTP API client the report queries.
func NewClient(o ClientOptions) (v1.API, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus.url=%q: want http://HOST:PORT or https://HOST:PORT", o.URL)
	}
	rt, err := NewRoundTripper(o.HTTPConfigFile, "gpuwatch-report")
	if err != nil {
		return nil, err
	}
	pause := o.RetryPause
	if pause <= 0 {
		pause = 500 * time.Millisecond
	}
	c, err := api.NewClient(api.Config{Address: o.URL, RoundTripper: &retrying{next: rt, retries: o.Retries, pause: pause}})
	if err != nil {
		return nil, err
	}
	return v1.NewAPI(c), nil
}

// NewRoundTripper is the HTTP transport of a Prometheus-style HTTP client
// configuration file (basic_auth, authorization, tls_config, proxy_url);
// an empty path is the default configuration. `report` and `job` share it.
func NewRoundTripper(httpConfigFile, name string) (http.RoundTripper, error) {
	cfg := config.DefaultHTTPClientConfig
	if httpConfigFile != "" {
		data, err := configfile.Read(httpConfigFile)
		if err != nil {
			return nil, err
		}
		c, err := config.LoadHTTPConfig(string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", httpConfigFile, err)
		}
		c.SetDirectory(filepath.Dir(httpConfigFile))
		cfg = *c
	}
	rt, err := config.NewRoundTripperFromConfig(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", httpConfigFile, err)
	}
	return rt, nil
}

// retrying retries requests that failed for a reason that may pass: a
// gateway or overload status, or a connection dropped mid-way. Queries are
// GETs or idempotent POSTs, so a retry cannot do harm.
type retrying struct {
	next    http.RoundTripper
	retries int
	pause   time.Duration
}

func (r *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	pause := r.pause
	for attempt := 0; ; attempt++ {
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
		resp, err := r.next.RoundTrip(req)
		if attempt >= r.retries || !transient(resp, err) {
			return resp, err
		}
		if resp != nil {
			resp.Body.Close()
		}
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(pause):
		}
		pause *= 2
	}
}

func transient(resp *http.Response, err error) bool {
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// explain turns a failed query into an error a user can act on.
func explain(err error, query string) error {
	var apiErr *v1.Error
	var netErr *net.OpError
	var urlErr *url.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the server did not answer within --prometheus.timeout (query: %s)", query)
	case errors.As(err, &apiErr) && (apiErr.Type == v1.ErrClient) && (containsAny(apiErr.Msg, "401", "403") || containsAny(apiErr.Detail, "401", "403")):
		return fmt.Errorf("the server refused the credentials (%s): check --prometheus.http-config", apiErr.Msg)
	case errors.As(err, &apiErr) && apiErr.Type == v1.ErrBadData:
		return fmt.Errorf("the server rejected the query %s: %s", query, apiErr.Msg)
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach the server: %w", err)
	}
	return fmt.Errorf("query %s: %w", query, err)
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
