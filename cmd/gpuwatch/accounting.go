package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/internal/accounting"
	"github.com/gpuwatch/gpuwatch/internal/attribution"
	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/pipeline"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// accountingFlags configure the per-owner counters (docs/accounting.md).
type accountingFlags struct {
	enabled       bool
	interval      time.Duration
	idleThreshold float64
	hold          time.Duration
	retention     time.Duration
}

func (a *accountingFlags) register(app *kingpin.Application) {
	app.Flag("accounting", "Keep per-owner counters (gpu_process_sm_seconds_total, gpu_process_energy_joules_total, ...) integrated every --accounting.interval, between scrapes. Runs with serve and textfile --interval; needs the processes collector.").
		Default("true").BoolVar(&a.enabled)
	app.Flag("accounting.interval", "How often the counters integrate: each tick reads the GPUs' per-process utilization samples and energy counters; the process lists (and their owners) are read when the samples show a process start or end, within 16s when a GPU's used memory moved, and at least every 64s. The driver answers each process's mean since the last tick from a buffer of its samples (nvidia-smi pmon reads it every 10s at most): an interval longer than that buffer lets the samples it still holds stand for the rest.").
		Default(accounting.DefaultInterval.String()).DurationVar(&a.interval)
	app.Flag("accounting.idle-threshold", "An allocation whose own processes used less than this share of its GPU's SM time over an interval counts it in gpu_allocation_idle_seconds_total.").
		Default(fmt.Sprint(accounting.DefaultIdleThreshold)).Float64Var(&a.idleThreshold)
	app.Flag("accounting.new-owner-hold", "A new owner's counters read 0 this long before they count, so Prometheus stores the 0 first and increase() counts a short job whole; keep it at least your scrape interval.").
		Default(accounting.DefaultNewOwnerHold.String()).DurationVar(&a.hold)
	app.Flag("accounting.retention", "How long an ended owner's counters stay exported after it was last seen, so their last value is scraped; then the series go.").
		Default(accounting.DefaultRetention.String()).DurationVar(&a.retention)
}

// minAccountingInterval keeps the ticks from costing more than they gain:
// the driver samples processes every 1/6 s.
const minAccountingInterval = 500 * time.Millisecond

// startAccounting builds the accounting stage of a long-running command:
// its own backend reader (which hands every per-process sample once), a
// pipeline over it with the same attribution, and the ticker. It returns
// the Accountant, which the scrape pipeline adds as its last enricher; nil
// when accounting is off or cannot run.
func (f *commonFlags) startAccounting(logger *slog.Logger, st *stack, enrichers []pipeline.Enricher) (*accounting.Accountant, error) {
	a := f.accounting
	if !a.enabled || !f.longRunning() || f.readsOnce || st.nv == nil || !f.enabledCollectors()[snapshot.GroupProcesses] {
		return nil, nil
	}
	if a.interval < minAccountingInterval {
		return nil, fmt.Errorf("--accounting.interval=%s: must be at least %s", a.interval, minAccountingInterval)
	}
	// A tick is left behind (a GPU hung in a call) a second after its
	// collection's deadlines: the read's and the attribution's.
	tickTimeout := f.timeout + f.attribution.timeout + time.Second
	acct, err := accounting.New(accounting.Options{IdleThreshold: a.idleThreshold, NewOwnerHold: a.hold, Retention: a.retention, TickTimeout: tickTimeout})
	if err != nil {
		return nil, fmt.Errorf("--accounting: %w", err)
	}
	groups := accounting.ReaderGroups()
	// What the operator switched off stays off here too.
	records := f.keepsRecords()
	if records {
		maps.Copy(groups, jobs.JournalGroups())
	}
	maps.DeleteFunc(groups, func(g string, _ bool) bool { return !f.enabledCollectors()[g] })
	reader, err := st.nv.accountingReader(logger, f, groups, records)
	if err != nil {
		return nil, fmt.Errorf("starting the accounting's reader: %w", err)
	}
	if records {
		if err := f.startJournal(logger, st, acct); err != nil {
			_ = reader.Close()
			return nil, err
		}
	}
	src := pipeline.New(reader, pipeline.Options{Timeout: f.timeout, EnrichTimeout: f.attribution.timeout, OwnCaller: true}, tickEnrichers(enrichers)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		acct.Run(ctx, src, a.interval, func(err error) {
			logger.Debug("accounting tick skipped", "err", err)
		})
	}()
	// First among the closers: a tick in flight must end before the
	// attribution it uses is closed.
	st.closers = append([]func(){func() {
		cancel()
		<-done
		if err := reader.Close(); err != nil {
			logger.Warn("closing the accounting's reader", "err", err)
		}
	}}, st.closers...)
	return acct, nil
}

// closingReader is a backend reader that holds something to release.
type closingReader interface {
	pipeline.Reader
	Close() error
}

// tickEnrichers are the scrapes' enrichers as the accounting's ticks use
// them: the attribution takes cached allocations up to
// accounting.AllocationMaxAge old (sharing its caches with the scrapes).
func tickEnrichers(enrichers []pipeline.Enricher) []pipeline.Enricher {
	out := make([]pipeline.Enricher, len(enrichers))
	for i, e := range enrichers {
		if at, ok := e.(*attribution.Attributor); ok {
			e = at.WithAllocationMaxAge(accounting.AllocationMaxAge)
		}
		out[i] = e
	}
	return out
}
