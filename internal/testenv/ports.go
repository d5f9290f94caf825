package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 for a child process to listen
// on, free now and handed to no other test until this one ends.
//
// Asking the kernel for port 0 and closing the listener is not enough on a
// busy machine: the port comes from the ephemeral range, where the very
// next outgoing loopback connection (a scrape, a Prometheus target) may
// take it as its local port before the child binds it, and another
// process's "free port" may be the same one. A test then fails with
// "address already in use", or worse talks to another test's server. So
// ports are drawn from below the kernel's ephemeral range, where nothing
// is assigned automatically, and each is reserved with a lock file that
// every test process on the host honours (the lock goes with the process;
// the files stay, one per port ever used, so that no two processes can
// hold locks on different files of the same name).
func FreePort(t testing.TB) int {
	t.Helper()
	low, high := reservedPortRange()
	dir := filepath.Join(os.TempDir(), "gpuwatch-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 500 {
		port := low + rand.IntN(high-low+1)
		lock, ok := lockPort(dir, port)
		if !ok {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			lock.Close() // someone outside the tests listens there
			continue
		}
		l.Close()
		t.Cleanup(func() { lock.Close() })
		return port
	}
	t.Fatalf("no free port in %d-%d after 500 tries", low, high)
	return 0
}

// lockPort takes the host-wide reservation of port; false when another
// test holds it.
func lockPort(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := lockFile(f, false); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// reservedPortRange is where FreePort draws from: 10000 up to the start of
// the kernel's ephemeral range (net.ipv4.ip_local_port_range), or, when
// that range starts too low, from above its end.
func reservedPortRange() (low, high int) {
	ephemeralLow, ephemeralHigh := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if l, err := strconv.Atoi(f[0]); err == nil {
				if h, err := strconv.Atoi(f[1]); err == nil {
					ephemeralLow, ephemeralHigh = l, h
				}
			}
		}
	}
	if ephemeralLow-1 >= 10000+1000 {
		return 10000, ephemeralLow - 1
	}
	return ephemeralHigh + 1, 65535
}
