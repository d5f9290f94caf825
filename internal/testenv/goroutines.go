package testenv

import (
	"runtime"
	"strings"
)

// GoroutinesWaitingIn counts the goroutines blocked in a select inside the
// function whose qualified name ends with fn ("pipeline.(*Pipeline).Snapshot").
// A test that must act only once other goroutines are waiting (release a
// shared collection, free an event set under a Wait) polls it with
// Eventually: a sleep cannot promise that the scheduler has run them.
func GoroutinesWaitingIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	waiting := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, " [select") && strings.Contains(g, fn+"(") {
			waiting++
		}
	}
	return waiting
}
