package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	"github.com/gpuwatch/gpuwatch/internal/textfile"
)

type textfileCommand struct {
	common   *commonFlags
	output   string
	interval time.Duration
}

func newTextfileCommand(app *kingpin.Application, common *commonFlags) *textfileCommand {
	c := &textfileCommand{common: common}
	cmd := app.Command("textfile", "Write metrics to a .prom file for node_exporter's textfile collector, once or every --interval.")
	cmd.Flag("output", "File to write, e.g. /var/lib/node_exporter/textfile_collector/gpu.prom. Replaced atomically.").
		Required().StringVar(&c.output)
	cmd.Flag("interval", "Rewrite the file this often until stopped; 0 writes once and exits.").
		Default("0s").DurationVar(&c.interval)
	return c
}

func (c *textfileCommand) name() string { return "textfile" }

// minInterval is the shortest --interval: node_exporter reads the file at
// its scrape interval, so rewriting it faster only burns the GPU's time.
const minInterval = time.Second

// setReadMode tells the stack how the command reads: its first file is
// complete (a whole GPM window), and a file written once starts nothing
// that integrates between readings (accounting, the job journal: a second
// reader and its XID watcher, whose stop alone cost the command half a
// second).
func (c *textfileCommand) setReadMode() {
	c.common.waitForGPM = true
	c.common.readsOnce = c.interval == 0
}

func (c *textfileCommand) run() error {
	if c.interval < 0 || (c.interval > 0 && c.interval < minInterval) {
		return fmt.Errorf("--interval=%s: must be 0 (write once) or at least %s", c.interval, minInterval)
	}
	logger := promslog.New(c.common.log)
	if c.interval > 0 {
		// From the start: a SIGHUP while the stack is being built would
		// otherwise still kill the process.
		defer ignoreHangup(logger, "changes need a restart")()
	}
	if removed, err := textfile.RemoveStaleTemps(c.output); err != nil {
		logger.Warn("could not remove temporary files left by an earlier run", "output", c.output, "err", err)
	} else if removed > 0 {
		logger.Info("removed temporary files left by an earlier run", "output", c.output, "count", removed)
	}
	c.setReadMode()
	st, err := c.common.buildStack(logger)
	if err != nil {
		return err
	}
	defer st.Close()
	reg := st.textfileRegistry()
	if c.interval <= 0 {
		// Written once: a slow GPU's late reading, not a GPU shown
		// down. A failed collection is written as such by Write.
		_, _ = st.settledSnapshot(c.common)
		return textfile.Write(reg, c.output)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return textfile.Loop(ctx, reg, c.output, c.interval, logger)
}
