//go:build cgo

package main

import (
	"log/slog"

	"github.com/gpuwatch/gpuwatch/internal/accounting"
	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
)

// accountingReader opens the accounting's own reader of the NVML library:
// it hands every per-process sample once, reading the groups given.
func (n *nvmlStack) accountingReader(logger *slog.Logger, f *commonFlags, groups map[string]bool, records bool) (closingReader, error) {
	interval := f.accounting.interval
	opts := nvmlbackend.AccountingOptions{Options: nvmlbackend.Options{Groups: groups, Logger: logger, StartTimeout: f.timeout}, GPMOnlyMIG: !records,
		ListProcessesEvery: accounting.ListProcessesEvery(interval), ListProcessesSteadyEvery: accounting.ListProcessesSteadyEvery(interval),
		// The records' XIDs are the scrapes' reader's: one watcher per GPU, not two.
		XIDFrom: n.reader}
	if n.sim != nil {
		opts.Now, opts.Library = n.sim.Now, "simulator"
	}
	reader, err := nvmlbackend.NewAccountingReader(n.lib, opts)
	if err != nil {
		return nil, err
	}
	return reader, nil
}
