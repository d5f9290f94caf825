package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveOn starts newHTTPServer on a free port; it is closed at the end of
// the test.
func serveOn(t *testing.T, h http.Handler, limits Limits) (*http.Server, string) {
	t.Helper()
	return serve(t, newHTTPServer(h, limits))
}

// serve serves srv on a free port; it is closed at the end of the test.
func serve(t *testing.T, srv *http.Server) (*http.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, l.Addr().String()
}

// idleClient opens a connection, makes one keep-alive request, reads the
// answer and then keeps the connection open and silent.
func idleClient(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

// TestIdleConnectionsCannotCrowdOutAScrape: past the cap, a new
// connection replaces the one idle the longest, so a crowd of idle
// keep-alive clients neither holds more than the cap nor locks out
// Prometheus.
func TestIdleConnectionsCannotCrowdOutAScrape(t *testing.T) {
	const max = 8
	srv, addr := serveOn(t, newTestHandler(t, nil), Limits{IdleTimeout: time.Hour, WriteTimeout: time.Minute, MaxConnections: max})
	limiter := srv.ConnState
	if limiter == nil {
		t.Fatal("no connection cap installed")
	}
	for range 3 * max {
		idleClient(t, addr)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape behind %d idle connections: %v", 3*max, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s", resp.Status)
	}
	client.CloseIdleConnections()
}

// TestConnectionCapHoldsAtTheCap counts the connections the server keeps.
func TestConnectionCapHoldsAtTheCap(t *testing.T) {
	const max = 5
	l := newConnLimiter(max)
	srv := newHTTPServer(newTestHandler(t, nil), Limits{IdleTimeout: time.Hour, WriteTimeout: time.Minute})
	srv.ConnState = l.track
	_, addr := serve(t, srv)
	for range 4 * max {
		idleClient(t, addr)
	}
	if n := l.open(); n > max {
		t.Fatalf("%d connections open, cap %d", n, max)
	}
}

// TestBusyConnectionsAreNotEvicted: when every connection is in the middle
// of a request, the newcomer is the one closed.
func TestBusyConnectionsAreNotEvicted(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		started <- struct{}{}
		<-release
		_, _ = w.Write([]byte("done"))
	})
	_, addr := serveOn(t, slow, Limits{IdleTimeout: time.Hour, WriteTimeout: time.Minute, MaxConnections: 2})
	results := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := http.Get("http://" + addr + "/")
			if err == nil {
				resp.Body.Close()
			}
			results <- err
		}()
	}
	<-started
	<-started
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a third connection was served while two requests held the cap")
	}
	close(release)
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("a busy request was cut off: %v", err)
		}
	}
}

// TestClientThatNeverReadsIsCutOff: the write timeout frees a connection
// whose client stopped reading its answer.
func TestClientThatNeverReadsIsCutOff(t *testing.T) {
	done := make(chan error, 1)
	big := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				done <- err
				return
			}
		}
	})
	_, addr := serveOn(t, big, Limits{IdleTimeout: time.Hour, WriteTimeout: 300 * time.Millisecond, MaxConnections: 8})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler is still writing to a client that never reads")
	}
}
