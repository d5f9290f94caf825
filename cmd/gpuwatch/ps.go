package main

import (
	"fmt"
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
	cmd := app.Command("ps", "List every GPU process with its owner: GPU, PID, user, memory, SM use, container, pod, Slurm job. Answers \"who is on GPU 3?\": gpuwatch ps --gpu=3. A GPU asked for that could not be read (down, or its process list failed) is named on stderr, and the exit status is 1.")
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
	// No wait for a GPM window (textfile's): ps shows no GPM figure, and
	// the wait cost every ps a second on GPUs with GPM.
	c.common.command = "ps"
	// ps prints to whoever runs it on this host, who can read the same
	// command lines with ps(1): the whole command line helps there.
	c.common.attribution.fullCommandLines = true
	st, err := c.common.buildStack(logger)
	if err != nil {
		return err
	}
	defer st.Close()
	snap, err := st.settledSnapshot(c.common)
	if err != nil {
		return err
	}
	filter := ps.Filter{GPUs: c.gpus, SimulatedClock: st.simulated()}
	if err := filter.Check(snap); err != nil {
		return err
	}
	write := ps.WriteTable
	if c.output == "json" {
		write = ps.WriteJSON
	}
	if err := write(os.Stdout, snap, filter); err != nil {
		return err
	}
	// The GPUs asked for that could not be read: on stderr, and a
	// non-zero exit, so that an empty table is not taken for idle GPUs.
	unknown := filter.Unknown(snap)
	for _, line := range unknown {
		fmt.Fprintln(os.Stderr, line)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("the processes of %d GPU(s) asked for are unknown", len(unknown))
	}
	return nil
}
