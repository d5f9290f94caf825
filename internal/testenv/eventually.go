package testenv

import (
	"errors"
	"testing"
	"time"
)

// Tests wait for background work by polling, never by sleeping: a sleep
// long enough for CI's two busy cores wastes time everywhere else, and one
// that is not fails one run in N. Both helpers below fail the test once
// their limit has passed, after one last try: a single slow poll on a
// loaded machine must not be reported as a timeout of a condition that
// holds. The check runs on the test's goroutine, so it may call t.Fatal.

// Eventually polls check, in-process state that is cheap to look at,
// every 10ms until it returns nil. The failure is check's last error, so
// it should say what it saw ("3 successful registrations, want 15").
func Eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	poll(t, within, 10*time.Millisecond, check)
}

// WaitFor polls cond, which may cost a scrape or a request to a process
// the test started, every 100ms until it holds; what names the condition
// in the failure ("gpu_up{gpu=3} = 0").
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	poll(t, within, 100*time.Millisecond, func() error {
		if cond() {
			return nil
		}
		return errors.New("waiting for " + what)
	})
}

func poll(t testing.TB, within, every time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		expired := time.Now().After(deadline)
		err := check()
		if err == nil {
			return
		}
		if expired {
			t.Fatalf("timed out after %v: %v", within, err)
		}
		time.Sleep(every)
	}
}
