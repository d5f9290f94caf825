package jobs

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// nodeServer serves /n/NODE/api/v1/jobs/ID for many nodes, answering with
// answer(node), and counts requests and the most at once.
type nodeServer struct {
	srv               *httptest.Server
	requests          atomic.Int64
	inFlight, maxSeen atomic.Int64
	mu                sync.Mutex
	auth              map[string]string // node -> Authorization received
}

func newNodeServer(t *testing.T, answer func(node string, w http.ResponseWriter, r *http.Request)) *nodeServer {
	t.Helper()
	ns := &nodeServer{auth: map[string]string{}}
	ns.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ns.inFlight.Add(1)
		defer ns.inFlight.Add(-1)
		for m := ns.maxSeen.Load(); n > m && !ns.maxSeen.CompareAndSwap(m, n); m = ns.maxSeen.Load() {
		}
		ns.requests.Add(1)
		node, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/n/"), "/")
		ns.mu.Lock()
		ns.auth[node] = r.Header.Get("Authorization")
		ns.mu.Unlock()
		answer(node, w, r)
	}))
	t.Cleanup(ns.srv.Close)
	return ns
}

func (ns *nodeServer) template() string { return ns.srv.URL + "/n/{node}" }

func answerRecords(w http.ResponseWriter, recs ...Record) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(JobDoc{ID: "7", Records: recs})
}

func httpConfigWithPassword(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "client.yml")
	if err := os.WriteFile(p, []byte("basic_auth: {username: job, password: S3cretPW}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A node that redirects to another host gets no credentials there, and its
// answer is not taken.
func TestFromNodesNoCredentialsAcrossHosts(t *testing.T) {
	other := newNodeServer(t, func(_ string, w http.ResponseWriter, _ *http.Request) { answerRecords(w, testRecord(7)) })
	ns := newNodeServer(t, func(_ string, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.srv.URL+"/n/x/api/v1/jobs/7", http.StatusFound)
	})
	recs, missing, err := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: ns.template(), Nodes: []string{"a"},
		HTTPConfigFile: httpConfigWithPassword(t), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if other.requests.Load() != 0 || len(recs) != 0 {
		t.Errorf("the other host was asked %d times (Authorization %q) and %d records taken", other.requests.Load(), other.auth["x"], len(recs))
	}
	if len(missing) != 1 || !strings.Contains(missing[0], "redirected to "+other.srv.URL) {
		t.Errorf("missing %v, want the redirect named", missing)
	}
	if !strings.HasPrefix(ns.auth["a"], "Basic ") {
		t.Errorf("the node itself got Authorization %q, want the basic auth", ns.auth["a"])
	}
}

// A password in --job.node-url shows in no error: not on a non-2xx
// answer, not on an answer that is not JSON, not on an unreachable node.
func TestFromNodesRedactsThePassword(t *testing.T) {
	ns := newNodeServer(t, func(node string, w http.ResponseWriter, _ *http.Request) {
		switch node {
		case "broken":
			http.Error(w, "oops", http.StatusInternalServerError)
		case "garbled":
			_, _ = w.Write([]byte("{not json"))
		}
	})
	template := strings.Replace(ns.template(), "http://", "http://admin:S3cretPW@", 1)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://admin:S3cretPW@" + l.Addr().String() + "/n/{node}"
	_ = l.Close()
	for _, tmpl := range []string{template, closed} {
		_, missing, err := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: tmpl, Nodes: []string{"broken", "garbled"}, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) != 2 || strings.Contains(strings.Join(missing, "\n"), "S3cretPW") {
			t.Errorf("missing %q: want two, without the password", missing)
		}
	}
}

// A node name that would move the URL's host ("@", ":") is refused, not
// asked: localhost:18081@127.0.0.1 must not send credentials to 127.0.0.1.
func TestFromNodesRefusesNodeNamesThatMoveTheHost(t *testing.T) {
	ns := newNodeServer(t, func(_ string, w http.ResponseWriter, _ *http.Request) { answerRecords(w, testRecord(7)) })
	host := strings.TrimPrefix(ns.srv.URL, "http://")
	for _, node := range []string{"localhost:18081@" + host, "x@" + host, host, "a/b", "-a"} {
		_, missing, err := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: "http://{node}", Nodes: []string{node}, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) != 1 || !strings.Contains(missing[0], "not a host name") {
			t.Errorf("node %q: missing %v, want it refused as no host name", node, missing)
		}
	}
	if n := ns.requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server through hostile node names", n)
	}
}

// An answer over the bound is an error that says so, not a cut answer.
func TestFromNodesBoundsTheAnswer(t *testing.T) {
	ns := newNodeServer(t, func(_ string, w http.ResponseWriter, _ *http.Request) {
		r := testRecord(7)
		r.Slurm.JobName = strings.Repeat("x", 2<<20)
		answerRecords(w, r)
	})
	_, missing, err := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: ns.template(), Nodes: []string{"a"}, Timeout: 10 * time.Second, MaxResponseBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || !strings.Contains(missing[0], "the answer is larger than 1MiB") {
		t.Errorf("missing %v, want the bound named", missing)
	}
}

// Many nodes are asked at most Concurrency at once, every one of them.
func TestFromNodesBoundsTheFanOut(t *testing.T) {
	ns := newNodeServer(t, func(node string, w http.ResponseWriter, _ *http.Request) {
		r := testRecord(7)
		r.Node = node
		answerRecords(w, r)
	})
	nodes := make([]string, 200)
	for i := range nodes {
		nodes[i] = "gpu" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	recs, missing, err := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: ns.template(), Nodes: nodes, Timeout: 10 * time.Second, Concurrency: 3})
	if err != nil || len(missing) != 0 || len(recs) != len(nodes) {
		t.Fatalf("%d records, missing %v, %v; want one from each of %d nodes", len(recs), missing, err, len(nodes))
	}
	if m := ns.maxSeen.Load(); m > 3 {
		t.Errorf("%d requests at once, want at most 3", m)
	}
}

// Waiting: a node still running the job is asked again until its record
// is final; a node with no gpuwatch listening (connection refused) is not
// asked again and does not hold the wait up.
func TestFromNodesWaitsOnlyForWhatCanChange(t *testing.T) {
	var asks atomic.Int64
	ns := newNodeServer(t, func(_ string, w http.ResponseWriter, _ *http.Request) {
		r := testRecord(7)
		r.Running = asks.Add(1) < 3
		answerRecords(w, r)
	})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	refusing := l.Addr().String()
	_ = l.Close()
	recs, missing, _ := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: ns.template(), Nodes: []string{"a"},
		Timeout: 10 * time.Second, Wait: time.Hour, FirstPause: time.Millisecond})
	if asks.Load() != 3 || len(recs) != 1 || recs[0].Running || len(missing) != 0 {
		t.Errorf("asked %d times, records %+v, missing %v: want 3 asks and the final record", asks.Load(), recs, missing)
	}
	// Asked again, it would be asked until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, missing, _ = FromNodes(ctx, Query{ID: "7"}, NodesOptions{URLTemplate: "http://" + refusing + "/n/{node}", Nodes: []string{"a"},
		Timeout: 10 * time.Second, Wait: time.Hour, FirstPause: time.Millisecond})
	if len(missing) != 1 || !strings.Contains(missing[0], "connection refused") || ctx.Err() != nil {
		t.Errorf("refusing node: missing %v, context %v: want it given up on at once", missing, ctx.Err())
	}
}

// A record with impossible figures is refused, naming the field.
func TestFromNodesRefusesImpossibleFigures(t *testing.T) {
	for field, spoil := range map[string]func(*GPU){
		"allocated_seconds":     func(g *GPU) { g.AllocatedSeconds = -16 },
		"sm_utilization_mean":   func(g *GPU) { g.SMUtilizationMean = new(-7.0) },
		"memory_used_bytes_max": func(g *GPU) { g.MemoryUsedBytesMax = new(uint64(1) << 63) },
	} {
		ns := newNodeServer(t, func(_ string, w http.ResponseWriter, _ *http.Request) {
			r := testRecord(7)
			spoil(&r.GPUs[0])
			answerRecords(w, r)
		})
		recs, missing, _ := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: ns.template(), Nodes: []string{"a"}, Timeout: 10 * time.Second})
		if len(recs) != 0 || len(missing) != 1 || !strings.Contains(missing[0], field) {
			t.Errorf("%s spoiled: records %d, missing %v; want it refused naming the field", field, len(recs), missing)
		}
	}
}

// The whole is bounded: the wait plus one timeout, however many nodes
// hang; the nodes not asked by then are missing, with why.
func TestFromNodesBoundsTheWhole(t *testing.T) {
	hang := make(chan struct{})
	ns := newNodeServer(t, func(_ string, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	defer close(hang)
	nodes := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	recs, missing, err := FromNodes(context.Background(), Query{ID: "7"}, NodesOptions{URLTemplate: ns.template(), Nodes: nodes,
		Timeout: 200 * time.Millisecond, Concurrency: 1})
	if err != nil || len(recs) != 0 || len(missing) != len(nodes) {
		t.Fatalf("records %v, missing %v, %v: want every node missing", recs, missing, err)
	}
	if n := ns.requests.Load(); n >= int64(len(nodes)) {
		t.Errorf("%d nodes asked one after another, each hanging for the whole timeout: the whole is not bounded", n)
	}
}
