package testenv

import (
	"fmt"
	"testing"
	"time"
)

type waiter struct{}

func (waiter) waitOn(a, b chan struct{}) {
	select {
	case <-a:
	case <-b:
	}
}

func TestGoroutinesWaitingInCountsOnlyThoseInASelectThere(t *testing.T) {
	const fn = "testenv.waiter.waitOn"
	if n := GoroutinesWaitingIn(fn); n != 0 {
		t.Fatalf("%d goroutines waiting before any started", n)
	}
	release := make(chan struct{})
	started := make(chan struct{})
	for range 3 {
		go waiter{}.waitOn(release, nil)
	}
	// One more goroutine in the same package, blocked but not in waitOn.
	go func() { close(started); <-release }()
	<-started
	Eventually(t, 10*time.Second, func() error {
		if n := GoroutinesWaitingIn(fn); n != 3 {
			return fmt.Errorf("%d goroutines waiting in %s, want 3", n, fn)
		}
		return nil
	})
	close(release)
	Eventually(t, 10*time.Second, func() error {
		if n := GoroutinesWaitingIn(fn); n != 0 {
			return fmt.Errorf("%d goroutines still waiting after the release", n)
		}
		return nil
	})
}
