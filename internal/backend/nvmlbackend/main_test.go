//go:build cgo

package nvmlbackend

import (
	"os"
	"testing"
	"time"
)

// TestMain shortens the XID watcher's event wait and retry: every Close
// waits for each GPU's waiter to come back from its wait (0.5 s in
// production), and a GPU that missed registration is retried every 5 s.
// Close's own bound (xidStopTimeout) stays as in production, so a busy
// machine does not make a waiter look stuck.
func TestMain(m *testing.M) {
	xidWaitTimeout = 50 * time.Millisecond
	xidRetryInterval = time.Second
	os.Exit(m.Run())
}
