// Package pipeline turns a backend and attribution into one shared source of
// snapshots for every output.
//
// It is the single place where the data flow is assembled:
// backend → snapshot → attribution → outputs. Its other job is to make
// concurrent scrapes share one collection, so N scrapers never cost N times
// the NVML work.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Reader produces a fresh snapshot from a backend.
type Reader interface {
	Read(ctx context.Context) (*snapshot.Snapshot, error)
}

// Enricher adds facts to a snapshot (process owners, allocations). It must
// respect ctx and never fail the snapshot: what it cannot learn stays empty.
type Enricher interface {
	Enrich(ctx context.Context, s *snapshot.Snapshot)
}

// Options tunes a Pipeline.
type Options struct {
	// Timeout bounds the read of one collection. A scrape whose own
	// context ends sooner stops waiting, but the shared collection
	// carries on for the other waiters.
	Timeout time.Duration
	// EnrichTimeout bounds the enrichers (owner lookups) of one
	// collection, after the read and on top of Timeout: a read that used
	// its whole budget (one GPU at its deadline) must not leave the
	// healthy GPUs' processes without owners. A whole collection takes at
	// most Timeout + EnrichTimeout. Zero means 1 second.
	EnrichTimeout time.Duration
	// MaxAge lets a finished snapshot answer callers that arrive within this
	// age. Zero shares only collections that are still in flight.
	MaxAge time.Duration
	// OnCollect, when set, sees every collection's outcome once (the log's
	// warnings about lost GPUs and failing sources). It must not modify
	// the snapshot, and runs on the collection's goroutine.
	OnCollect func(*snapshot.Snapshot, error)
	// RequireGPU makes a collection that finds no GPU at all not ready
	// (the driver backend: a GPU node without GPUs is broken; a
	// simulated host always has some).
	RequireGPU bool
	// OwnCaller is for a pipeline with one caller, that waits for each
	// collection (the accounting's ticker): the collection runs on the
	// caller's goroutine and ends with the caller's context too, rather
	// than on a goroutine of its own shared by concurrent callers. It
	// saves a goroutine and its hand-offs per collection.
	OwnCaller bool
}

// Pipeline is safe for concurrent use. Snapshots it returns are shared
// between callers and must be treated as read-only.
type Pipeline struct {
	reader    Reader
	enrichers []Enricher
	opts      Options
	group     singleflight.Group

	mu       sync.Mutex
	last     *snapshot.Snapshot
	lastAt   time.Time
	lastErr  error
	everGood bool
}

// New assembles a pipeline. A zero Timeout means 10 seconds.
func New(r Reader, opts Options, enrichers ...Enricher) *Pipeline {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.EnrichTimeout <= 0 {
		opts.EnrichTimeout = time.Second
	}
	return &Pipeline{reader: r, enrichers: enrichers, opts: opts}
}

// Snapshot returns a snapshot no older than MaxAge, collecting one if needed.
// Concurrent callers share a single collection.
func (p *Pipeline) Snapshot(ctx context.Context) (*snapshot.Snapshot, error) {
	if s := p.fresh(); s != nil {
		return s, nil
	}
	if p.opts.OwnCaller {
		return p.collect(ctx)
	}
	ch := p.group.DoChan("collect", func() (any, error) {
		return p.collect(context.Background())
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*snapshot.Snapshot), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Ready reports whether at least one collection has succeeded, the most
// recent one did too, and it found a GPU that answers; it backs /readyz.
// The error says why not.
func (p *Pipeline) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.lastErr != nil:
		return p.lastErr
	case !p.everGood:
		return errors.New("no collection has completed yet")
	case len(p.last.Devices) == 0:
		if p.opts.RequireGPU {
			return errors.New("no GPU found: the driver reports 0 devices")
		}
		return nil
	}
	var down []string
	for _, d := range p.last.Devices {
		if d.Up {
			return nil
		}
		down = append(down, fmt.Sprintf("%d (%s)", d.Index, d.DownReason))
	}
	return fmt.Errorf("every GPU is down: %s", strings.Join(down, ", "))
}

// ReadyNow is Ready on a collection made now (or shared with one in
// flight), that also requires every GPU's readings to be fresh: a GPU the
// reader reports not answering (no read of it returned for the reader's
// bound: a hung driver call) makes it not ready, so that an exporter
// serving no current data for a GPU is never reported ready. A lost GPU
// is a fresh fact, not a stale reading. It backs /readyz of serve.
func (p *Pipeline) ReadyNow(ctx context.Context) error {
	snap, err := p.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("no collection within the probe's time: %w", err)
	}
	if err := p.Ready(); err != nil {
		return err
	}
	var stale []string
	for _, d := range snap.Devices {
		if !d.Up && d.DownReason == "not_answering" {
			stale = append(stale, fmt.Sprint(d.Index))
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("no fresh reading of GPU %s: not answering", strings.Join(stale, ", "))
	}
	return nil
}

func (p *Pipeline) fresh() *snapshot.Snapshot {
	if p.opts.MaxAge <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last != nil && time.Since(p.lastAt) < p.opts.MaxAge {
		return p.last
	}
	return nil
}

// collect runs within parent: for shared collections the background,
// detached from any one caller's context, so that a scraper that gives up
// does not cancel the collection others are waiting for.
func (p *Pipeline) collect(parent context.Context) (*snapshot.Snapshot, error) {
	start := time.Now()
	ctx, cancel := p.withTimeout(parent, start, p.opts.Timeout)
	defer cancel()
	s, err := p.reader.Read(ctx)
	if err == nil {
		// Its own budget, from now: the read may have spent all of its own.
		enrichCtx, cancelEnrich := p.withTimeout(parent, time.Now(), p.opts.EnrichTimeout)
		for _, e := range p.enrichers {
			e.Enrich(enrichCtx, s)
		}
		cancelEnrich()
		s.Duration = time.Since(start)
	}
	p.mu.Lock()
	p.lastErr = err
	if err == nil {
		p.last, p.lastAt, p.everGood = s, time.Now(), true
	}
	p.mu.Unlock()
	if p.opts.OnCollect != nil {
		p.opts.OnCollect(s, err)
	}
	return s, err
}

// withTimeout is context.WithTimeout from now; on the caller's goroutine
// (OwnCaller) without a timer until something waits on its Done.
func (p *Pipeline) withTimeout(parent context.Context, now time.Time, timeout time.Duration) (context.Context, context.CancelFunc) {
	if p.opts.OwnCaller {
		return withLazyDeadline(parent, now.Add(timeout))
	}
	return context.WithTimeout(parent, timeout)
}
