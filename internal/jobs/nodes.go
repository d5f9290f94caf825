package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/internal/httpclient"
)

// DefaultNodeConcurrency is how many nodes `gpuwatch job` asks at once:
// enough for a job on hundreds of nodes to be read in a few round trips,
// few enough that a job on thousands does not open thousands of
// connections at once (and time out on its own queue).
const DefaultNodeConcurrency = 32

// maxListPages bounds the pages of one node's list followed for a pod.
const maxListPages = 1000

// NodesOptions say how to ask the nodes' gpuwatch for a job's records.
type NodesOptions struct {
	// URLTemplate is each node's gpuwatch, {node} the node's name.
	URLTemplate string
	Nodes       []string
	// HTTPConfigFile: the client's TLS and credentials (httpclient).
	HTTPConfigFile string
	// Timeout bounds each request.
	Timeout time.Duration
	// Wait: keep asking, with a growing pause, until every node that can
	// answer has the job's final record, or this long has passed. 0: once.
	Wait time.Duration
	// Concurrency: nodes asked at once; 0 is DefaultNodeConcurrency.
	Concurrency int
	// MaxResponseBytes bounds one answer; 0 is httpclient's default.
	MaxResponseBytes int64
	// FirstPause is the first pause between rounds (DefaultFirstPause
	// when 0); each next one doubles, up to maxPauseGrowth times it.
	FirstPause time.Duration
}

// DefaultFirstPause is the first pause before nodes whose answer can still
// change are asked again; maxPauseGrowth bounds how far the doubling goes,
// so a node that answers late is not left unasked for long.
const (
	DefaultFirstPause = time.Second
	maxPauseGrowth    = 16
)

// nodeName is what a node name may be: a host name. Anything else (an
// "@" or ":" that would move the URL's host, a "/") is refused.
var nodeName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// nodeURL is the template with the node's name in it.
func nodeURL(template, node string) (string, error) {
	if !nodeName.MatchString(node) {
		return "", fmt.Errorf("node name %q is not a host name: not asked", node)
	}
	raw := strings.ReplaceAll(template, "{node}", node)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--job.node-url=%q: want http://{node}:PORT or https://{node}:PORT", httpclient.RedactURL(template))
	}
	return strings.TrimRight(raw, "/"), nil
}

// errNoRecord: a node answered that it has no record of the job. That
// is final: a node that saw the job on its GPUs lists it as running until
// its record is written.
var errNoRecord = errors.New("no record")

// nodeResult is one node's answer so far.
type nodeResult struct {
	recs []Record
	err  error
}

// final says whether asking again could change the answer: records none
// of which is running, no record, no gpuwatch listening, or a refused
// answer are final; a timeout or a running job is not.
func (r nodeResult) final() bool {
	switch {
	case r.err == nil:
		return !slices.ContainsFunc(r.recs, func(x Record) bool { return x.Running })
	case errors.Is(r.err, errNoRecord), errors.Is(r.err, syscall.ECONNREFUSED), errors.Is(r.err, errRefused):
		return true
	}
	return false
}

// errRefused marks answers that asking again will not change (a wrong
// URL, credentials refused, a broken answer).
var errRefused = errors.New("refused")

type refusedError struct{ msg string }

func (e *refusedError) Error() string        { return e.msg }
func (e *refusedError) Is(target error) bool { return target == errRefused }

// FromNodes asks every node of the job, at most o.Concurrency at once,
// for its records, and asks again (with a growing pause, within o.Wait)
// the nodes whose answer could still change. missing says, per node
// without records, why.
func FromNodes(ctx context.Context, q Query, o NodesOptions) (recs []Record, missing []string, err error) {
	if !strings.Contains(o.URLTemplate, "{node}") {
		return nil, nil, fmt.Errorf("--job.node-url=%q: needs {node} where the node name goes", httpclient.RedactURL(o.URLTemplate))
	}
	if _, err := nodeURL(o.URLTemplate, "node"); err != nil {
		return nil, nil, err
	}
	client, err := httpclient.New(httpclient.Options{HTTPConfigFile: o.HTTPConfigFile, Name: "gpuwatch-job", Timeout: o.Timeout, MaxResponseBytes: o.MaxResponseBytes})
	if err != nil {
		return nil, nil, fmt.Errorf("--job.http-config: %w", err)
	}
	results := make(map[string]nodeResult, len(o.Nodes))
	deadline := time.Now().Add(o.Wait)
	if o.Timeout > 0 {
		// The whole: the wait, and one last round's answers. A node not
		// asked by then is missing, with why.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(o.Timeout))
		defer cancel()
	}
	pause := cmp.Or(o.FirstPause, DefaultFirstPause)
	for {
		var todo []string
		for _, n := range o.Nodes {
			if r, ok := results[n]; !ok || !r.final() {
				todo = append(todo, n)
			}
		}
		if len(todo) == 0 {
			break
		}
		askNodes(ctx, client, q, o, todo, results)
		if time.Now().Add(pause).After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, maxPauseGrowth*cmp.Or(o.FirstPause, DefaultFirstPause))
	}
	for _, n := range o.Nodes {
		r := results[n]
		if r.err != nil {
			missing = append(missing, fmt.Sprintf("%s: %v", n, r.err))
			continue
		}
		recs = append(recs, r.recs...)
	}
	slices.Sort(missing)
	return recs, missing, nil
}

// askNodes asks nodes, o.Concurrency at once, and stores their answers.
func askNodes(ctx context.Context, client *http.Client, q Query, o NodesOptions, nodes []string, results map[string]nodeResult) {
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(cmp.Or(o.Concurrency, DefaultNodeConcurrency))
	for _, node := range nodes {
		g.Go(func() error {
			recs, err := askNode(ctx, client, q, o.URLTemplate, node)
			mu.Lock()
			defer mu.Unlock()
			results[node] = nodeResult{recs: recs, err: err}
			return nil
		})
	}
	_ = g.Wait()
}

// askNode fetches the job's records from one node's /api/v1/jobs,
// following the pages of a pod's list.
func askNode(ctx context.Context, client *http.Client, q Query, template, node string) ([]Record, error) {
	base, err := nodeURL(template, node)
	if err != nil {
		return nil, &refusedError{msg: err.Error()}
	}
	u := base + "/api/v1/jobs/" + url.PathEscape(q.ID)
	if q.Pod != "" {
		u = base + "/api/v1/jobs?kind=pod&pod=" + url.QueryEscape(q.Pod)
	}
	var out []Record
	for page := 0; ; page++ {
		var doc ListDoc // JobDoc has the same records field
		if err := getJSON(ctx, client, u, &doc); err != nil {
			return nil, err
		}
		for _, r := range doc.Records {
			if !q.Matches(r) {
				continue
			}
			if err := r.Check(); err != nil {
				return nil, &refusedError{msg: fmt.Sprintf("%s: %v", httpclient.RedactURL(u), err)}
			}
			r.Node = node // the name the job's node list uses
			out = append(out, r)
		}
		if doc.NextCursor == "" || q.Pod == "" {
			break
		}
		if page >= maxListPages {
			return nil, &refusedError{msg: fmt.Sprintf("%s: more than %d pages of records", httpclient.RedactURL(u), maxListPages)}
		}
		u = base + "/api/v1/jobs?kind=pod&pod=" + url.QueryEscape(q.Pod) + "&cursor=" + url.QueryEscape(doc.NextCursor)
	}
	if len(out) == 0 {
		return nil, errNoRecord
	}
	return out, nil
}

// getJSON GETs u and decodes its answer into v. Its errors show u with
// the password redacted.
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	shown := httpclient.RedactURL(u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return &refusedError{msg: fmt.Sprintf("%s: %v", shown, err)}
	}
	resp, err := client.Do(req)
	if err != nil {
		// net/http's errors show the URL without its password.
		return finalIfBroken(err, shown)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return finalIfBroken(fmt.Errorf("%s: %w", shown, err), shown)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return errNoRecord
	case http.StatusUnauthorized, http.StatusForbidden:
		return &refusedError{msg: fmt.Sprintf("%s: %s (check --job.http-config's credentials)", shown, resp.Status)}
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
		return fmt.Errorf("%s: %s", shown, resp.Status)
	default:
		return &refusedError{msg: fmt.Sprintf("%s: %s", shown, resp.Status)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &refusedError{msg: fmt.Sprintf("%s: the answer is not gpuwatch's job records: %v", shown, err)}
	}
	return nil
}

// finalIfBroken marks the errors that asking again would not change: a
// redirect to another host, an answer over the size bound.
func finalIfBroken(err error, shown string) error {
	if _, ok := errors.AsType[*httpclient.CrossOriginRedirectError](err); ok {
		return &refusedError{msg: shown + ": " + err.Error()}
	}
	if e, ok := errors.AsType[*httpclient.ResponseTooLargeError](err); ok {
		return &refusedError{msg: shown + ": " + e.Error()}
	}
	return err
}
