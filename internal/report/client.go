package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/httpclient"
)

// DefaultMaxResponseBytes bounds one answer of the server. A report's answer
// is one number per owner: even 100 000 owners fit in a few tens of MB.
const DefaultMaxResponseBytes = httpclient.DefaultMaxResponseBytes

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
	// Name is the client's User-Agent name; "" is gpuwatch-report.
	Name string
	// URLFlag and LimitFlag name the flags of URL and MaxResponseBytes in
	// errors; "" is report's (--prometheus.url, --prometheus.max-response-size).
	URLFlag, LimitFlag string
}

// RedactURL is the server's URL as every output and error shows it: a
// password in it replaced by "xxxxx".
func RedactURL(raw string) string { return httpclient.RedactURL(raw) }

// NewClient returns the Prometheus HTTP API client the report queries,
// on the one outbound client (internal/httpclient).
func NewClient(o ClientOptions) (Querier, error) {
	urlFlag := cmp.Or(o.URLFlag, "--prometheus.url")
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s=%q: want http://HOST:PORT or https://HOST:PORT", urlFlag, RedactURL(o.URL))
	}
	client, err := httpclient.New(httpclient.Options{
		HTTPConfigFile: o.HTTPConfigFile, Name: cmp.Or(o.Name, "gpuwatch-report"),
		MaxResponseBytes: o.MaxResponseBytes, LimitFlag: cmp.Or(o.LimitFlag, "--prometheus.max-response-size"),
		Retries: o.Retries, RetryPause: o.RetryPause,
	})
	if err != nil {
		return nil, err
	}
	return newAPIClient(u, client), nil
}

// explain turns a failed query into an error a user can act on; every one
// names the query.
func explain(err error, query string) error {
	var apiErr *apiError
	var netErr *net.OpError
	var urlErr *url.Error
	var tooLarge *httpclient.ResponseTooLargeError
	var redirect *httpclient.CrossOriginRedirectError
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
	case errors.As(err, new(*notPrometheusError)):
		return err
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach the server: %w (query: %s)", err, query)
	}
	return fmt.Errorf("query %s: %w", query, err)
}
