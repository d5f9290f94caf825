//go:build linux

package faults

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Container runtime and kubelet sockets served by hostile in-process
// servers. Process 1001 runs in a Docker container, 1010 in a Kubernetes
// pod, so both the Docker and the CRI lookups are asked for.

// hostileSocket listens on a unix socket and hands every connection to
// serve; connections are closed when the test ends.
func hostileSocket(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(testenv.ShortTempDir(t), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return path
}

// silent accepts and never says anything.
func silent(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

// garbage answers every connection with bytes that are no protocol at all.
func garbage(c net.Conn) {
	_, _ = c.Write([]byte("\x00\xff garbage \r\n\r\n\x16\x03\x01 not http, not http2 \xde\xad\xbe\xef"))
	_, _ = c.Read(make([]byte, 4096))
	c.Close()
}

// httpOnce reads one request and writes answer.
func httpOnce(answer func(c net.Conn)) func(net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			c.Close()
			return
		}
		answer(c)
	}
}

// socketCase runs gpuwatch with the owners of 1001 and 1010 and the extra
// flags, scrapes through the fault, then ends it (closing the server's
// connections) and checks for leaks.
func socketCase(t *testing.T, extra ...string) *instance {
	t.Helper()
	h := start(t, attributionArgs(procTree(t, 1001, 1010), ownedSim(t, 1001, 1010), extra...)...)
	h.baseline()
	for range 5 {
		validExposition(t, h.scrape())
	}
	return h
}

func TestDockerHung(t *testing.T) {
	t.Parallel()
	record(t, "docker", "Docker socket accepts and never answers: scrapes bounded by the attribution timeout, owners from /proc")
	h := socketCase(t, "--docker.socket=unix://"+hostileSocket(t, silent))
	if _, ok := testenv.Sample(h.metrics(), "gpu_process_memory_used_bytes", map[string]string{"container": "f4f0b3caffa8"}); !ok {
		t.Error("the container id from the cgroup is missing")
	}
	h.noLeak()
}

func TestDockerGarbage(t *testing.T) {
	t.Parallel()
	record(t, "docker", "Docker socket answers bytes that are not HTTP")
	socketCase(t, "--docker.socket=unix://"+hostileSocket(t, garbage)).noLeak()
}

func TestDockerGarbageJSON(t *testing.T) {
	t.Parallel()
	record(t, "docker", "Docker answers 200 with broken JSON, then 500s")
	n := 0
	var mu sync.Mutex
	sock := hostileSocket(t, httpOnce(func(c net.Conn) {
		mu.Lock()
		n++
		odd := n%2 == 1
		mu.Unlock()
		if odd {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"Name\": [1,")
		} else {
			fmt.Fprintf(c, "HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom")
		}
		c.Close()
	}))
	socketCase(t, "--docker.socket=unix://"+sock).noLeak()
}

func TestDockerHugeAnswer(t *testing.T) {
	t.Parallel()
	record(t, "docker", "Docker answers a 900 KB container name, then a 64 MB body: label bounded to 256 bytes, memory bounded")
	big := strings.Repeat("n", 900<<10)
	var mu sync.Mutex
	n := 0
	sock := hostileSocket(t, httpOnce(func(c net.Conn) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			body := `{"Name":"/` + big + `","Config":{"Image":"` + big + `","Labels":{}}}`
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		} else {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"Name\":\"")
			chunk := []byte(strings.Repeat("x", 1<<20))
			for range 64 {
				if _, err := c.Write(chunk); err != nil {
					break
				}
			}
		}
		c.Close()
	}))
	h := socketCase(t, "--docker.socket=unix://"+sock)
	for line := range strings.SplitSeq(h.scrape(), "\n") {
		if len(line) > 4096 {
			t.Fatalf("a %d-byte series line: %.200s...", len(line), line)
		}
	}
	if rss, ok := testenv.Sample(h.metrics(), "process_resident_memory_bytes", nil); ok && rss > 200<<20 {
		t.Errorf("resident memory %.0f MB after huge answers", rss/(1<<20))
	}
	h.noLeak()
}

func TestDockerTrickle(t *testing.T) {
	t.Parallel()
	record(t, "docker", "Docker answers one byte every 50ms, forever: scrapes bounded")
	sock := hostileSocket(t, httpOnce(func(c net.Conn) {
		msg := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"Name\":\"/slow" + strings.Repeat(" ", 1<<20)
		for i := range len(msg) {
			if _, err := c.Write([]byte{msg[i]}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}))
	socketCase(t, "--docker.socket=unix://"+sock).noLeak()
}

func TestCRIHung(t *testing.T) {
	t.Parallel()
	record(t, "cri", "CRI socket accepts and never answers (no HTTP/2 preface): scrapes bounded")
	socketCase(t, "--cri.socket="+hostileSocket(t, silent)).noLeak()
}

func TestCRIGarbage(t *testing.T) {
	t.Parallel()
	record(t, "cri", "CRI socket answers bytes that are not gRPC")
	socketCase(t, "--cri.socket="+hostileSocket(t, garbage)).noLeak()
}

func TestKubeletHung(t *testing.T) {
	t.Parallel()
	record(t, "kubelet", "kubelet pod-resources socket accepts and never answers: scrapes bounded")
	socketCase(t, "--kubelet.pod-resources-socket="+hostileSocket(t, silent)).noLeak()
}

func TestKubeletGarbage(t *testing.T) {
	t.Parallel()
	record(t, "kubelet", "kubelet pod-resources socket answers bytes that are not gRPC")
	socketCase(t, "--kubelet.pod-resources-socket="+hostileSocket(t, garbage)).noLeak()
}
