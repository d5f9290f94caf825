// Package healthlog says in the log what an operator must know about the
// collections: a GPU lost or back, an XID, a collection that timed out, an
// attribution source that fails. It reads each snapshot after it is
// collected (the pipeline's OnCollect hook) and warns on changes, each kind
// of warning at most once per interval per GPU or source, so a flapping
// GPU or a dead socket cannot flood the log.
package healthlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// DefaultInterval is how often one warning may repeat.
const DefaultInterval = time.Minute

// Watcher turns snapshots into warnings. Safe for concurrent use.
type Watcher struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
	// hints say, per attribution source, what to check ("--cri.socket=/run/...").
	hints map[string]string

	mu      sync.Mutex
	down    map[int]string // GPU index → down reason, of GPUs down at the last look
	xids    map[int]uint64 // GPU index → XID events seen so far
	errs    map[string]uint64
	limiter map[string]*limit
}

type limit struct {
	last       time.Time
	suppressed int
}

// Options configure a Watcher. Zero values mean defaults.
type Options struct {
	Logger *slog.Logger
	// Interval is the least time between two warnings of one kind about
	// one GPU or source. Default DefaultInterval.
	Interval time.Duration
	// Hints name, per attribution source, the flag and value to check
	// when it fails.
	Hints map[string]string
	Now   func() time.Time
}

// New returns a Watcher.
func New(opts Options) *Watcher {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Watcher{
		log: opts.Logger, interval: opts.Interval, now: opts.Now, hints: opts.Hints,
		down: map[int]string{}, xids: map[int]uint64{}, errs: map[string]uint64{}, limiter: map[string]*limit{},
	}
}

// Observe looks at one collection's outcome.
func (w *Watcher) Observe(s *snapshot.Snapshot, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		msg := "GPU collection failed"
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "GPU collection timed out; raise --collection.timeout if the GPUs are merely slow"
		}
		w.warn("collection", msg, "err", err)
		return
	}
	if s == nil {
		return
	}
	for _, d := range s.Devices {
		reason, wasDown := w.down[d.Index]
		switch {
		case !d.Up && d.DownReason == "not_answering":
			w.warn(fmt.Sprint("timeout/", d.Index), "GPU did not answer for three --collection.timeout; reported down (gpu_up 0) until it does",
				"gpu", d.Index, "uuid", d.UUID)
			w.down[d.Index] = d.DownReason
		case !d.Up && (!wasDown || reason != d.DownReason):
			w.warn(fmt.Sprint("down/", d.Index), "GPU is down", "gpu", d.Index, "uuid", d.UUID, "reason", d.DownReason)
			w.down[d.Index] = d.DownReason
		case d.Up && wasDown:
			w.warn(fmt.Sprint("up/", d.Index), "GPU is back", "gpu", d.Index, "uuid", d.UUID, "was", reason)
			delete(w.down, d.Index)
		}
		var total uint64
		var codes []string
		for _, x := range d.XIDErrors {
			total += x.Count
			codes = append(codes, fmt.Sprintf("%d×%d", x.Count, x.XID))
		}
		if prev := w.xids[d.Index]; total > prev {
			w.warn(fmt.Sprint("xid/", d.Index), "XID error on GPU (see NVIDIA's XID catalog for the code)",
				"gpu", d.Index, "uuid", d.UUID, "new", total-prev, "since_start", strings.Join(codes, ","))
		}
		if total > 0 || d.Up {
			w.xids[d.Index] = total
		}
	}
	sources := make([]string, 0, len(s.AttributionErrors))
	for src := range s.AttributionErrors {
		sources = append(sources, src)
	}
	slices.Sort(sources)
	for _, src := range sources {
		n := s.AttributionErrors[src]
		if prev := w.errs[src]; n > prev {
			args := []any{"owner_source", src, "failures", n - prev, "since_start", n}
			if hint := w.hints[src]; hint != "" {
				args = append(args, "check", hint)
			}
			w.warn("source/"+src, "attribution source failing; its owner labels stay empty (each failure at --log.level=debug)", args...)
		}
		w.errs[src] = n
	}
}

// warn logs unless the same key was logged within the interval; what was
// held back is counted in the next message.
func (w *Watcher) warn(key, msg string, args ...any) {
	now := w.now()
	l := w.limiter[key]
	if l == nil {
		l = &limit{}
		w.limiter[key] = l
	} else if now.Sub(l.last) < w.interval {
		l.suppressed++
		return
	}
	if l.suppressed > 0 {
		args = append(args, "repeats_held_back", l.suppressed)
	}
	l.last, l.suppressed = now, 0
	w.log.Warn(msg, args...)
}
