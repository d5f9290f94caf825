// Package httpclient is the one HTTP client of every outbound call gpuwatch
// makes (report's queries to Prometheus, job's to Prometheus and to other
// nodes' gpuwatch): TLS and authentication from a Prometheus-style
// http-config file, no credentials sent to another host on a redirect,
// a bounded body, retries of transient failures, and URLs shown with
// their password redacted.
package httpclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/config"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// DefaultMaxResponseBytes bounds one answer unless Options say otherwise.
const DefaultMaxResponseBytes = 64 << 20

// Options configure a client.
type Options struct {
	// HTTPConfigFile is a Prometheus-style HTTP client configuration
	// (basic_auth, authorization, tls_config, proxy_url: the keys of a
	// scrape config's HTTP section); empty for none.
	HTTPConfigFile string
	// Name is the client's name in the User-Agent (gpuwatch-report, ...).
	Name string
	// Timeout bounds one request, its answer's body included; 0: none
	// (give the request a context with a deadline then).
	Timeout time.Duration
	// MaxResponseBytes caps the (decompressed) body of one answer; 0:
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// LimitFlag names the flag that raises MaxResponseBytes, for the error.
	LimitFlag string
	// Retries is how many times a transient failure (a 429, 502, 503 or
	// 504, or a connection reset) is retried, with a doubling pause from
	// RetryPause (DefaultRetryPause when 0).
	Retries    int
	RetryPause time.Duration
}

// DefaultRetryPause is the first pause before a retry: long enough for a
// restarting server to come back, short enough not to hold up a report.
const DefaultRetryPause = 500 * time.Millisecond

// New returns a client with o's settings. Its errors say which file is
// wrong.
func New(o Options) (*http.Client, error) {
	rt, err := NewRoundTripper(o.HTTPConfigFile, o.Name)
	if err != nil {
		return nil, err
	}
	pause := o.RetryPause
	if pause <= 0 {
		pause = DefaultRetryPause
	}
	limit := o.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	return &http.Client{
		Transport: &capped{next: &retrying{next: rt, retries: o.Retries, pause: pause}, limit: limit, flag: o.LimitFlag},
		Timeout:   o.Timeout,
		// The HTTP config's round tripper adds the credentials to every
		// request it sends, a redirected one included: a redirect to another
		// host or scheme would hand them over.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			first := via[0].URL
			if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
				return &CrossOriginRedirectError{From: first.Redacted(), To: req.URL.Redacted()}
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}, nil
}

// CrossOriginRedirectError is a redirect to another host or scheme, not
// followed.
type CrossOriginRedirectError struct{ From, To string }

func (e *CrossOriginRedirectError) Error() string {
	return "the server redirected to " + e.To + ", another host or scheme: not followed, so that no credentials go there (give that URL instead if it is the server)"
}

// NewRoundTripper is the HTTP transport of a Prometheus-style HTTP client
// configuration file (basic_auth, authorization, tls_config, proxy_url);
// an empty path is the default configuration. Use New, which adds the
// redirect rule and the body bound, unless you add them yourself.
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

// RedactURL is a URL as every output and error shows it: a password in
// it replaced by "xxxxx". A URL that does not parse loses everything
// between "://" and the last "@" of its authority.
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

// ResponseTooLargeError says that an answer passed the cap.
type ResponseTooLargeError struct {
	Limit int64
	Flag  string
}

func (e *ResponseTooLargeError) Error() string {
	if e.Flag == "" {
		return fmt.Sprintf("the answer is larger than %s", FormatBytes(e.Limit))
	}
	return fmt.Sprintf("the answer is larger than %s (%s)", e.Flag, FormatBytes(e.Limit))
}

// capped bounds the body of every answer, so a huge (or endless) answer
// ends in an error instead of taking the memory of the machine.
type capped struct {
	next  http.RoundTripper
	limit int64
	flag  string
}

func (c *capped) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.ContentLength > c.limit {
		resp.Body.Close()
		return nil, &ResponseTooLargeError{Limit: c.limit, Flag: c.flag}
	}
	resp.Body = &limitedBody{body: resp.Body, left: c.limit, err0: &ResponseTooLargeError{Limit: c.limit, Flag: c.flag}}
	return resp, nil
}

type limitedBody struct {
	body io.ReadCloser
	left int64
	err0 error // the error once past the limit
	err  error
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
			b.err = b.err0
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

// FormatBytes writes a size in the largest binary unit that divides it.
func FormatBytes(n int64) string {
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

// retrying retries requests that failed for a reason that may pass: a
// gateway or overload status, or a connection dropped mid-way. Callers
// send GETs or idempotent POSTs, so a retry cannot do harm.
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
		t := time.NewTimer(pause)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
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
