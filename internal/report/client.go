package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/config"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// DefaultMaxResponseBytes bounds one answer of the server. A report's answer
// is one number per owner: even 100 000 owners fit in a few tens of MB.
const DefaultMaxResponseBytes = 64 << 20

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
	// MaxResponseBytes caps the (decompressed) body of one answer; zero
	// means DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// RedactURL is the server's URL as every output and error shows it: a
// password in it replaced by "xxxxx". A URL that does not parse loses
// everything between "://" and the last "@" of its authority.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = "xxxxx@" + authority[at+1:]
	}
	if path != "" || strings.Contains(rest, "/") {
		return scheme + "://" + authority + "/" + path
	}
	return scheme + "://" + authority
}

// NewClient returns the Prometheus HTTP API client the report queries.
func NewClient(o ClientOptions) (Querier, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus.url=%q: want http://HOST:PORT or https://HOST:PORT", RedactURL(o.URL))
	}
	rt, err := NewRoundTripper(o.HTTPConfigFile, "gpuwatch-report")
	if err != nil {
		return nil, err
	}
	pause := o.RetryPause
	if pause <= 0 {
		pause = 500 * time.Millisecond
	}
	limit := o.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	client := &http.Client{
		Transport: &capped{next: &retrying{next: rt, retries: o.Retries, pause: pause}, limit: limit},
		// The HTTP config's round tripper adds the credentials to every
		// request it sends, a redirected one included: a redirect to another
		// host or scheme would hand them over.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != u.Scheme || req.URL.Host != u.Host {
				return &crossOriginRedirect{to: req.URL.Redacted()}
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
	return newAPIClient(u, client), nil
}

type crossOriginRedirect struct{ to string }

func (e *crossOriginRedirect) Error() string {
	return "the server redirected to " + e.to + ", another host or scheme: not followed, so that no credentials go there (give that URL as --prometheus.url if it is the server)"
}

// capped bounds the body of every answer, so a huge (or endless) answer
// ends in an error instead of taking the memory of the machine.
type capped struct {
	next  http.RoundTripper
	limit int64
}

// ErrResponseTooLarge says that an answer passed the cap.
type ErrResponseTooLarge struct{ Limit int64 }

func (e *ErrResponseTooLarge) Error() string {
	return fmt.Sprintf("the answer is larger than --prometheus.max-response-size (%s)", formatBytes(e.Limit))
}

func (c *capped) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.ContentLength > c.limit {
		resp.Body.Close()
		return nil, &ErrResponseTooLarge{Limit: c.limit}
	}
	resp.Body = &limitedBody{body: resp.Body, left: c.limit, limit: c.limit}
	return resp, nil
}

type limitedBody struct {
	body        io.ReadCloser
	left, limit int64
	err         error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.body.Read(one[:])
		if n > 0 {
			b.err = &ErrResponseTooLarge{Limit: b.limit}
			return 0, b.err
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
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

// explain turns a failed query into an error a user can act on; every one
// names the query.
func explain(err error, query string) error {
	var apiErr *apiError
	var netErr *net.OpError
	var urlErr *url.Error
	var tooLarge *ErrResponseTooLarge
	var redirect *crossOriginRedirect
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the server did not answer within --prometheus.timeout (query: %s)", query)
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%s; raise the flag if the answer is right (query: %s)", tooLarge.Error(), query)
	case errors.As(err, &redirect):
		return fmt.Errorf("%s (query: %s)", redirect.Error(), query)
	case errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden):
		return fmt.Errorf("the server refused the credentials (%s): check --prometheus.http-config (query: %s)", apiErr.Error(), query)
	case errors.As(err, &apiErr) && apiErr.Type == errorTypeBadData:
		return fmt.Errorf("the server rejected the query %s: %s", query, apiErr.Msg)
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach the server: %w (query: %s)", err, query)
	}
	return fmt.Errorf("query %s: %w", query, err)
}
