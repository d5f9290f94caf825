package attribution

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// ErrUnavailable marks (wrapped) a failure of the source itself (socket absent,
// refused, timed out) as opposed to an answer about one key (no such
// container). After such a failure the source is left alone for the
// negative TTL, so a dead socket costs one timeout per period, not one per
// container.
var ErrUnavailable = errors.New("source unavailable")

// lookupCache remembers the answers of one slow source (a runtime socket,
// the Slurm controller) per key, and runs the lookups.
//
// Lookups run in the background, at most one per key at a time, each under
// its own timeout rather than the caller's context: a scrape with a short
// budget stops waiting, but the lookup still completes and serves the next
// scrape. Answers are kept for positiveTTL, failures for negativeTTL. An
// expired answer is served until the new one arrives.
type lookupCache[V any] struct {
	source      string
	fetch       func(ctx context.Context, key string) (V, error)
	timeout     time.Duration
	positiveTTL time.Duration
	negativeTTL time.Duration
	errs        *errorCounts
	log         *slog.Logger
	now         func() time.Time
	inFlight    chan struct{} // semaphore bounding concurrent lookups

	mu        sync.Mutex
	entries   map[string]*cacheEntry[V]
	downUntil time.Time // source unavailable until then
}

type cacheEntry[V any] struct {
	val     V
	found   bool      // val holds an answer (perhaps expired)
	expires time.Time // zero until the first lookup settles
	pending chan struct{}
}

const maxConcurrentLookups = 16

func newLookupCache[V any](source string, fetch func(context.Context, string) (V, error), timeout, positiveTTL, negativeTTL time.Duration, errs *errorCounts, log *slog.Logger, now func() time.Time) *lookupCache[V] {
	return &lookupCache[V]{
		source: source, fetch: fetch, timeout: timeout,
		positiveTTL: positiveTTL, negativeTTL: negativeTTL,
		errs: errs, log: log, now: now,
		inFlight: make(chan struct{}, maxConcurrentLookups),
		entries:  make(map[string]*cacheEntry[V]),
	}
}

// get returns the cached answer for key, even an expired one, and whether
// there is one.
func (c *lookupCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil && e.found {
		return e.val, true
	}
	var zero V
	return zero, false
}

// refresh starts a lookup of key unless a fresh answer (or fresh failure)
// is cached or one is already running. It returns a channel closed when
// the lookup settles, or nil when there is nothing worth waiting for:
// when an expired answer is cached, it is served while the new one is
// fetched, so that expiry never adds a lookup to a scrape's latency.
func (c *lookupCache[V]) refresh(key string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		e = &cacheEntry[V]{}
		c.entries[key] = e
	}
	if e.pending == nil && (e.expires.IsZero() || !c.now().Before(e.expires)) {
		e.pending = make(chan struct{})
		go c.run(key, e)
	}
	if e.found {
		return nil
	}
	return e.pending
}

func (c *lookupCache[V]) run(key string, e *cacheEntry[V]) {
	c.inFlight <- struct{}{}
	defer func() { <-c.inFlight }()

	c.mu.Lock()
	down := c.now().Before(c.downUntil)
	c.mu.Unlock()

	var val V
	var err error
	if down {
		// Not counted: no lookup was made, and the failure that opened
		// the breaker was.
		err = ErrUnavailable
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		val, err = c.fetch(ctx, key)
		cancel()
		if err != nil {
			c.errs.add(c.source)
			c.log.Debug("attribution lookup failed", "source", c.source, "key", key, "err", err)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err == nil {
		e.val, e.found, e.expires = val, true, now.Add(c.positiveTTL)
	} else {
		// Keep a previous answer: a container that was known does not
		// lose its name because the daemon hiccupped.
		e.expires = now.Add(c.negativeTTL)
		if errors.Is(err, ErrUnavailable) && !down {
			if !now.Before(c.downUntil) {
				c.log.Warn("attribution source unavailable, retrying later", "source", c.source, "retry_in", c.negativeTTL, "err", err)
			}
			c.downUntil = now.Add(c.negativeTTL)
		}
	}
	close(e.pending)
	e.pending = nil
}

// sweep forgets entries that expired more than a positive TTL ago, so
// containers and jobs that ended do not accumulate.
func (c *lookupCache[V]) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := c.now().Add(-c.positiveTTL)
	for k, e := range c.entries {
		if e.pending == nil && !e.expires.IsZero() && e.expires.Before(cutoff) {
			delete(c.entries, k)
		}
	}
}

// errorCounts counts failed lookups per source since start.
type errorCounts struct {
	mu     sync.Mutex
	counts map[string]uint64
	// published is a copy of counts that snapshots share, read-only; made
	// anew after a count changed (failures are rare, Enrich calls are
	// not: the accounting makes one on every tick).
	published map[string]uint64
}

func newErrorCounts(sources ...string) *errorCounts {
	ec := &errorCounts{counts: make(map[string]uint64)}
	for _, s := range sources {
		ec.counts[s] = 0
	}
	return ec
}

func (ec *errorCounts) add(source string) {
	ec.mu.Lock()
	ec.counts[source]++
	ec.published = nil
	ec.mu.Unlock()
}

// copyInto writes the counts into dst, which the snapshot owns.
func (ec *errorCounts) copyInto(dst map[string]uint64) {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	maps.Copy(dst, ec.counts)
}

// shared returns the counts in a map that must not be modified, the same
// from one call to the next while no count changes.
func (ec *errorCounts) shared() map[string]uint64 {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.published == nil {
		ec.published = maps.Clone(ec.counts)
	}
	return ec.published
}
