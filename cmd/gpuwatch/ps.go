package main

import (
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	"github.com/gpuwatch/gpuwatch/internal/ps"
)

type psCommand struct {
	common *commonFlags
	output string
	gpus   []int
}

func newPsCommand(app *kingpin.Application, common *commonFlags) *psCommand {
	c := &psCommand{common: common}
	cmd := app.Command("ps", "List every GPU process with its owner: GPU, PID, user, memory, SM use, container, pod, Slurm job. Answers \"who is on GPU 3?\": gpuwatch ps --gpu=3")
	cmd.Flag("output", "Output format: table or json.").Short('o').Default("table").EnumVar(&c.output, "table", "json")
	cmd.Flag("gpu", "Only processes on this GPU index; repeatable.").IntsVar(&c.gpus)
	return c
}

func (c *psCommand) name() string { return "ps" }

func (c *psCommand) run() error {
	// ps is read by a person at a terminal: start-up notes would bury the
	// table, so the default level is warn here (--log.level=debug still works).
	if c.common.log.Level != nil && c.common.log.Level.String() == "info" {
		_ = c.common.log.Level.Set("warn")
	}
	logger := promslog.New(c.common.log)
	c.common.waitForGPM = true
	c.common.command = "ps"
	st, err := c.common.buildStack(logger)
	if err != nil {
		return err
	}
	defer st.Close()
	snap, err := st.settledSnapshot(c.common)
	if err != nil {
		return err
	}
	filter := ps.Filter{GPUs: c.gpus, SimulatedClock: st.sim != nil}
	if err := filter.Check(snap); err != nil {
		return err
	}
	if c.output == "json" {
		return ps.WriteJSON(os.Stdout, snap, filter)
	}
	return ps.WriteTable(os.Stdout, snap, filter)
}
