package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// CommandRunner runs one Slurm client command and returns its standard
// output. ExecRunner is the real one; tests may substitute another.
type CommandRunner interface {
	Run(ctx context.Context, path string, args ...string) ([]byte, error)
}

// Defaults for ExecRunner.
const (
	DefaultTimeout = 10 * time.Second
	// DefaultMaxOutput bounds what one command may print: squeue --json's
	// answer for a cluster of tens of thousands of jobs (its size per job
	// is in bench/RESULTS.md).
	DefaultMaxOutput = 256 << 20
	maxStderr        = 4 << 10
)

// ExecRunner runs commands with exec.CommandContext and an argument list
// (never a shell), in their own process group, so that a timeout kills the
// command and everything it started. Output beyond MaxOutput bytes is an
// error, not a truncated parse.
type ExecRunner struct {
	Timeout   time.Duration // per command; DefaultTimeout when zero
	MaxOutput int64         // bytes of stdout; DefaultMaxOutput when zero
}

// CommandError is a command that ran and failed, or did not finish.
type CommandError struct {
	Command  string // path and arguments
	Err      error
	Stderr   string // first bytes of standard error, trimmed
	TimedOut bool
	// OutputExceeded: the command printed more than MaxOutput bytes.
	OutputExceeded bool
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Command, e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// Run implements CommandRunner.
func (r ExecRunner) Run(ctx context.Context, path string, args ...string) ([]byte, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	limit := r.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, path, args...)
	ownGroup(cmd)
	// If a grandchild escaped the group and keeps our pipes open, stop
	// waiting for it shortly after the kill.
	cmd.WaitDelay = time.Second
	stdout := &limitedBuffer{limit: limit}
	stderr := &limitedBuffer{limit: maxStderr, dropExcess: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	err := cmd.Run()
	killGroup(cmd)
	name := strings.Join(append([]string{path}, args...), " ")
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return nil, &CommandError{Command: name, Err: fmt.Errorf("timed out after %v", timeout), TimedOut: true, Stderr: stderr.text()}
	case stdout.exceeded:
		return nil, &CommandError{Command: name, Err: fmt.Errorf("output exceeds %d bytes", limit), OutputExceeded: true}
	case err != nil:
		if errors.Is(err, exec.ErrWaitDelay) {
			// The command itself exited; a child kept stdout open.
			return stdout.buf.Bytes(), nil
		}
		return nil, &CommandError{Command: name, Err: err, Stderr: stderr.text()}
	}
	return stdout.buf.Bytes(), nil
}

// limitedBuffer keeps at most limit bytes. Past the limit it either fails
// the write (so the command gets EPIPE-like behaviour and exceeded is set)
// or silently drops the excess.
type limitedBuffer struct {
	buf        bytes.Buffer
	limit      int64
	exceeded   bool
	dropExcess bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.limit - int64(b.buf.Len())
	if int64(len(p)) <= room {
		return b.buf.Write(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	if b.dropExcess {
		return len(p), nil
	}
	b.exceeded = true
	return 0, errors.New("output limit exceeded")
}

func (b *limitedBuffer) text() string {
	s := strings.TrimSpace(b.buf.String())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
