//go:build linux

package faults

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hostile HTTP clients: crowds of idle keep-alive connections, slowloris,
// clients that never read their answer, stampedes.

// dialMany opens n connections to the instance; closed at the end.
func (h *instance) dialMany(n int) []net.Conn {
	h.t.Helper()
	addr := strings.TrimPrefix(h.base, "http://")
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			h.t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	h.t.Cleanup(func() { closeAll(conns) })
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// Idle keep-alive connections are capped: uncapped and never closed, enough
// of them exhaust the process's file descriptors and lock scrapes out.
func TestClientsIdleKeepAliveCrowd(t *testing.T) {
	t.Parallel()
	record(t, "clients", "400 idle keep-alive connections (over the 256 cap): /metrics still answers, gpuwatch holds at most 256 of them")
	h := start(t, "--backend=sim", "--sim.profile=dgx-h100")
	h.baseline()
	conns := h.dialMany(400)
	for _, c := range conns {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	time.Sleep(500 * time.Millisecond)
	h.scrape()
	if f := h.fds(); f > h.baseFDs+256+slack {
		t.Errorf("%d fds open with 400 idle clients (baseline %d, cap 256)", f, h.baseFDs)
	}
	closeAll(conns)
	h.noLeak()
}

func TestClientsSlowloris(t *testing.T) {
	t.Parallel()
	record(t, "clients", "300 connections each sending half a request header: /metrics still answers")
	h := start(t, "--backend=sim", "--sim.profile=dgx-h100")
	h.baseline()
	conns := h.dialMany(300)
	for _, c := range conns {
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	}
	time.Sleep(1500 * time.Millisecond) // past the cap's grace for stalled requests
	h.scrape()
	closeAll(conns)
	h.noLeak()
}

func TestClientsNeverRead(t *testing.T) {
	t.Parallel()
	record(t, "clients", "50 clients ask for /metrics of large (64 GPUs) and never read the answer: others are served; freed when they go")
	h := start(t, "--backend=sim", "--sim.profile=large")
	h.baseline()
	conns := h.dialMany(50)
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	time.Sleep(time.Second)
	h.scrape()
	closeAll(conns)
	h.noLeak()
}

func TestClientsStampede(t *testing.T) {
	t.Parallel()
	record(t, "clients", "200 concurrent scrapes: each answered 200 or 503 (--web.max-requests), in time")
	h := start(t, "--backend=sim", "--sim.profile=dgx-h100")
	h.baseline()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	client := &http.Client{Timeout: h.budget + 5*time.Second, Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}}
	for range 200 {
		wg.Go(func() {
			start := time.Now()
			resp, err := client.Get(h.base + "/metrics")
			code := 0
			if err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			if time.Since(start) > h.budget {
				t.Errorf("a scrape took %v", time.Since(start))
			}
		})
	}
	wg.Wait()
	if codes[200] == 0 || codes[200]+codes[503] != 200 {
		t.Errorf("answers by status: %v", codes)
	}
	h.noLeak()
}
