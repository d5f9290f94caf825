package smibackend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// maxOutput bounds what one nvidia-smi run may print: a row per GPU is
// under 2 KiB, a line per process under 100 bytes. A run that prints more
// is not nvidia-smi answering a query.
const maxOutput = 1 << 20

// waitDelay is how long, once the command has exited or been killed, its
// output is still read before the pipes are closed: a child it left
// running (a Windows wrapper's nvidia-smi; on Linux the process group dies
// with it) may hold them open. Long enough for a busy machine to read the
// output of a command that has exited: output cut short would be
// half a row.
const waitDelay = 2 * time.Second

// runner runs nvidia-smi, or the command standing in for it.
type runner struct {
	argv []string
}

// run runs the command with args appended, bounded by ctx: past its
// deadline the command (with its process group, where there are groups)
// is killed. It returns standard output; a failure is one line naming the
// command, the exit status and the last line the command wrote to
// standard error.
func (r runner) run(ctx context.Context, args ...string) ([]byte, error) {
	argv := append(append([]string(nil), r.argv...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr boundedBuffer
	stdout.max, stderr.max = maxOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	killGroup(cmd)
	err := cmd.Run()
	what := r.describe(args)
	switch {
	case ctx.Err() != nil && err != nil:
		return nil, fmt.Errorf("%s: no answer before the collection's deadline (--collection.timeout); killed", what)
	case stdout.over:
		return nil, fmt.Errorf("%s: printed more than %d bytes; not an answer to the query", what, maxOutput)
	case err != nil:
		if errors.Is(err, exec.ErrNotFound) {
			return stdout.Bytes(), fmt.Errorf("%s: %w", what, err)
		}
		if last := lastLine(stderr.Bytes()); last != "" {
			return stdout.Bytes(), fmt.Errorf("%s: %v: %s", what, err, last)
		}
		if last := lastLine(stdout.Bytes()); last != "" {
			return stdout.Bytes(), fmt.Errorf("%s: %v: %s", what, err, last)
		}
		return stdout.Bytes(), fmt.Errorf("%s: %w", what, err)
	}
	return stdout.Bytes(), nil
}

// describe names a run by the command and the query, not by every field.
func (r runner) describe(args []string) string {
	what := strings.Join(r.argv, " ")
	if len(args) > 0 {
		query, _, _ := strings.Cut(args[0], "=")
		what += " " + query
	}
	return what
}

// lastLine is the last non-empty line of out, trimmed and cut to a length
// a log line can carry.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(out), "\r", "")), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 200 {
		last = last[:200] + "..."
	}
	return last
}

// boundedBuffer keeps at most max bytes and notes when more came.
type boundedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
